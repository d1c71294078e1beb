"""``evirank rank``: rank the documents of a JSONL file (or stdin) for one query, with their evidence.

No index and no topics: the documents come as JSON lines (``{"id": ..., "title": ..., "text": ...}``
and any other keys, kept as metadata), and each result shows its score, the terms of that score and
its best passages with their character offsets (:mod:`evirank.ranker`).

Example:
    $ evirank rank --query "why do cats purr" --docs docs.jsonl --top 3
    1  a  1.4013 = 1 x 1.0000 (passage 1) + 0.5 x 0.8027 (passage 2)
         0.7923  [24:81]  Cats purr when they are content or nursing their kittens.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evirank.config import values
from evirank.pipeline import flags


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``rank`` and its flags (the pipeline's shared ones, as in ``rerank`` and ``serve``)."""
    from evirank.cli import DefaultsHelpFormatter

    parser = subparsers.add_parser(
        "rank",
        help="rank the documents of a JSONL file for a query, with their evidence (no index needed)",
        description="Rank documents given as JSON lines (id, title, text, any metadata) for one query: each "
        "document is split into passages, every passage is scored, the scores are aggregated, and the "
        "best passages are shown with their character offsets and the terms of the document's score.",
        formatter_class=DefaultsHelpFormatter,
    )
    flags.add_flags(
        parser,
        ["query", "docs", "first_stage_key", *IN_MEMORY, *flags.DISPLAY, "json"],
        required={"query", "docs"},
        helps={"top": "results shown (0: all)"},
    )
    return parser


#: The pipeline's settings that apply to documents given in memory (no index, no first stage to run).
IN_MEMORY = [
    *(name for name in flags.SCORING if name != "vectors"),
    *flags.CASCADE,
    *(name for name in flags.PASSAGES if name != "depth"),
]


def read_documents(path: str) -> list[dict[str, Any]]:
    """Documents from a JSONL file or ``-`` (stdin), checked line by line (file:line), metadata kept."""
    from evirank.io.corpus import parse_document
    from evirank.io.files import iter_lines

    source = Path("<stdin>") if path == "-" else Path(path)
    lines = enumerate(sys.stdin, start=1) if path == "-" else iter_lines(source)
    docs = []
    seen: set[str] = set()
    for line_no, line in lines:
        if not line.strip():
            continue
        parsed = parse_document(line, source, line_no)
        if parsed.docno in seen:
            from evirank.errors import InputFormatError

            raise InputFormatError(
                source, line_no, "a document id not seen before", f"id {parsed.docno} again"
            )
        seen.add(parsed.docno)
        record = json.loads(line)
        values.check_unicode_record(record, source, line_no)
        extra = {
            k: v for k, v in record.items() if k not in ("_id", "id", "docid", "title", "text", "contents")
        }
        docs.append({"id": parsed.docno, "title": parsed.title, "text": parsed.text, **extra})
    if not docs:
        from evirank.errors import InputFormatError

        raise InputFormatError(source, None, "at least one document", "no documents")
    return docs


def first_stage_scores(docs: list[dict[str, Any]], key: str | None, path: str) -> list[float] | None:
    """Each document's first-stage score, read from its ``key`` (None without a key).

    Raises:
        InputFormatError: a document without the key, or with a value that is no finite number.
    """
    if key is None:
        return None
    import math

    from evirank.errors import InputFormatError

    scores = []
    for position, doc in enumerate(docs):  # counted as the Python API counts them
        value = doc.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InputFormatError(
                path,
                None,
                f"a finite number under {key!r} in every document (--first-stage-key)",
                f"{value!r} in document {doc['id']!r} (position {position})",
            )
        scores.append(float(value))
    return scores


def run(args: argparse.Namespace) -> int:
    """Rank and print the results (a readable list, or JSON lines with ``--json``)."""
    from evirank.ranker import Ranker

    docs = read_documents(args.docs)
    first_stage = first_stage_scores(docs, args.first_stage_key, args.docs)
    settings = {name: getattr(args, name) for name in IN_MEMORY if name not in ("model", "scores")}
    if first_stage is None:  # no first stage: the evidence alone, as --alpha's help says (and the API)
        settings["alpha"] = None
    ranker = Ranker(args.model, store=args.scores, show_passages=args.show_passages, **settings)
    ranked = ranker.rank(args.query, docs, first_stage_scores=first_stage, top=args.top or None)
    out = sys.stdout
    for doc in ranked:
        if args.json:
            out.write(json.dumps(doc.to_dict(), ensure_ascii=False) + "\n")
            continue
        out.write(f"{doc.rank:>3}  {doc.id}  {doc.explain()}\n")
        for item in doc.evidence:
            where = f"[{item.start}:{item.end}]" if item.start is not None else "[?]"
            if item.field == "title":
                where = "title" + where
            out.write(f"       {item.score:8.4f}  {where:>12}  {' '.join(item.text.split())}\n")
    return 0
