"""``evirank search``: BM25 or BM25+RM3 runs from a Lucene index, written as a TREC run.

Example:
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --output runs/scifact.bm25.txt
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --rm3 --output runs/scifact.bm25+rm3.txt
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from evirank.cli.index import positive_int

logger = logging.getLogger(__name__)

EPILOG = """\
Defaults are Anserini's: BM25 k1=0.9 b=0.4; RM3 with 10 feedback documents, 10 expansion terms
and original query weight 0.5 (--rm3 alone), or --rm3 FB_DOCS FB_TERMS ORIG_WEIGHT.

Topics: a TREC <top> file, TREC Web XML, TSV (qid TAB query), BEIR queries.jsonl, or a BEIR
folder (with --split to keep the queries judged in qrels/<split>.tsv). --field picks the TREC
query text: title, description, narrative, or several joined by + (title+description).

The run is ordered by qid (natural order), score descending, then docno descending: evirank's
one tie rule, trec_eval's own, so the rank column is the order trec_eval evaluates. Anserini
picks the top k itself (its ties go to the smaller docid, then it nudges tied scores apart by
1e-6, so the scores it returns seldom tie). The run is written atomically; RUN.json next to it
records the configuration, the index and the versions.

examples:
  evirank search --index indexes/robust04 --topics topics.robust04.txt --field description \\
      --output runs/robust04.desc.bm25.txt
  evirank search --index indexes/scifact --topics queries.jsonl --output run.txt --bm25 1.2 0.75 --k 100
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``search`` and its flags."""
    parser = subparsers.add_parser(
        "search",
        help="retrieve with BM25 or BM25+RM3 from a Lucene index into a TREC run",
        description="Search a Lucene index with BM25 (or BM25+RM3) for every topic; write a TREC run.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--index", required=True, metavar="DIR", help="a Lucene index folder (evirank index)")
    parser.add_argument(
        "--topics", required=True, metavar="PATH", help="topics file, BEIR folder, or irds:<id>"
    )
    parser.add_argument(
        "--output", required=True, metavar="RUN", help="the TREC run file to write (.gz allowed)"
    )
    parser.add_argument("--k", type=positive_int, default=1000, help="documents per query (default: 1000)")
    parser.add_argument(
        "--bm25",
        nargs=2,
        type=float,
        default=(0.9, 0.4),
        metavar=("K1", "B"),
        help="BM25 parameters (default: 0.9 0.4)",
    )
    parser.add_argument(
        "--rm3",
        nargs="*",
        default=None,
        action=_Rm3Action,
        metavar="FB_DOCS FB_TERMS ORIG_WEIGHT",
        help="expand queries with RM3: no value for Anserini's defaults (10 10 0.5), or all three",
    )
    parser.add_argument(
        "--field", default="title", help="TREC topic field: title (default), description, narrative, or a+b"
    )
    parser.add_argument(
        "--split", default=None, help="for a BEIR folder: keep the queries of qrels/SPLIT.tsv"
    )
    parser.add_argument(
        "--threads", type=positive_int, default=1, metavar="N", help="search threads (default: 1)"
    )
    parser.add_argument("--tag", default=None, help="the run tag (default: bm25 or bm25+rm3)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing RUN (and RUN.json)")
    return parser


def parse_rm3(values: list[str] | None) -> Any:
    """``--rm3`` values to an :class:`~evirank.lucene.Rm3` (or ``None`` when the flag is absent).

    Raises:
        ValueError: not zero or three values, or values of the wrong type or range.

    Example:
        >>> parse_rm3([]), parse_rm3(None)
        (Rm3(fb_docs=10, fb_terms=10, original_weight=0.5), None)
        >>> parse_rm3(["20", "5", "0.3"])
        Rm3(fb_docs=20, fb_terms=5, original_weight=0.3)
    """
    from evirank.lucene.search import Rm3

    if values is None:
        return None
    if not values:
        return Rm3()
    if len(values) != 3:
        raise ValueError(f"takes no value or three (FB_DOCS FB_TERMS ORIG_WEIGHT), found {len(values)}")
    try:
        fb_docs, fb_terms, weight = int(values[0]), int(values[1]), float(values[2])
    except ValueError:
        raise ValueError(
            f"expected FB_DOCS FB_TERMS ORIG_WEIGHT as integer integer number, found {values}"
        ) from None
    return Rm3(fb_docs=fb_docs, fb_terms=fb_terms, original_weight=weight)


class _Rm3Action(argparse.Action):
    """Turn ``--rm3 [FB_DOCS FB_TERMS ORIG_WEIGHT]`` into an Rm3 at parse time (usage errors exit 2)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        try:
            setattr(namespace, self.dest, parse_rm3(list(values)))
        except ValueError as exc:
            parser.error(f"argument --rm3: {exc}")


def run(args: argparse.Namespace) -> int:
    """Read the topics, search, write the run and its configuration."""
    from pathlib import Path

    from evirank.errors import UsageError
    from evirank.io import read_topics, write_run
    from evirank.lucene.index import read_index_info
    from evirank.lucene.search import Bm25
    from evirank.outputs import atomic_outputs, check_output
    from evirank.record import compact_json, make_record, sidecar

    try:
        stage = Bm25(
            args.index, k1=args.bm25[0], b=args.bm25[1], rm3=args.rm3, k=args.k, threads=args.threads
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    # Fail before the (possibly long) search if an output is in the way.
    check_output(args.output, args.overwrite)
    check_output(sidecar(args.output), args.overwrite)
    topics = read_topics(args.topics, field=args.field, split=args.split)
    tag = args.tag or stage.config.name
    started = time.perf_counter()
    result = stage(topics)
    seconds = time.perf_counter() - started
    logger.info(
        "%s: %d queries, %d results in %.1f s (%.1f ms/query)",
        tag,
        len(topics),
        len(result),
        seconds,
        1000 * seconds / max(len(topics), 1),
    )
    written = Path(args.output)
    record = make_record(
        "search",
        stage.config.to_dict(),
        run=written,
        tag=tag,
        index=args.index,
        topics=args.topics,
        field=args.field,
        split=args.split,
        queries=len(topics),
        seconds=round(seconds, 3),
        index_info=read_index_info(args.index),
    )
    # the run and its record succeed or fail together
    with atomic_outputs((written, None), (sidecar(written), None), overwrite=args.overwrite) as temps:
        write_run(result, temps[0], tag=tag)
        temps[1].write_text(compact_json(record) + "\n", encoding="utf-8")
    logger.info("wrote %s and %s", written, sidecar(args.output))
    return 0
