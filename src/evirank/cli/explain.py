"""``evirank explain``: a document's passages with their scores, best first.

Example:
    $ evirank explain --scores runs/scores.sqlite --qid 1 --docno 4983
    query 1: 0-dimensional biomaterials show inductive properties.
    document 4983, 9 passages, cross-encoder 3f9a01c2e4b7 (models/minilm-scifact)
    rank  pid     score  text
       1    4    6.2104  ...
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from evirank.frames import PID, QUERY, RANK, SCORE, TEXT


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``explain`` and its flags."""
    parser = subparsers.add_parser(
        "explain",
        help="show a document's passages with their scores, best first",
        description="Show the passages of one document for one query, with the scores a re-ranking "
        "run stored (evirank rerank --scores STORE), best first.",
    )
    parser.add_argument("--scores", required=True, metavar="STORE", help="the score store of the run")
    parser.add_argument("--qid", required=True, help="the query id")
    parser.add_argument("--docno", required=True, help="the document id")
    parser.add_argument(
        "--fingerprint",
        metavar="PREFIX",
        help="which scorer's results, when the store holds several for this document (a prefix is enough)",
    )
    parser.add_argument(
        "--no-matches",
        action="store_true",
        help="do not show each passage's matched words (shown for scorers that tell them, such as "
        "late interaction; they load the model)",
    )
    from evirank.cli.index import positive_int

    parser.add_argument("--top", type=positive_int, metavar="N", help="show only the N best passages")
    parser.add_argument(
        "--format", choices=("table", "tsv", "jsonl"), default="table", help="output format (default: table)"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the explanation to stdout."""
    from evirank.score.explain import explain, passage_matches, store_descriptions
    from evirank.score.store import FINGERPRINT, open_store

    with open_store(args.scores, readonly=True) as store:
        rows = explain(store, args.qid, args.docno, fingerprint=args.fingerprint)
        label = store_descriptions(store, [rows[FINGERPRINT].iloc[0]])[0]
        total = len(rows)
        if args.top is not None:
            rows = rows.head(max(args.top, 0))
        matches = None
        if not args.no_matches and len(rows):
            matches = passage_matches(
                store, rows[FINGERPRINT].iloc[0], str(rows[QUERY].iloc[0]), rows[TEXT].astype(str).tolist()
            )
    if matches is not None:
        rows = rows.assign(matches=matches)
    out = sys.stdout
    if args.format == "jsonl":
        for record in rows.to_dict(orient="records"):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return 0
    if args.format == "tsv":
        columns = [RANK, PID, SCORE, TEXT] + (["matches"] if matches is not None else [])
        out.write("\t".join(columns) + "\n")
        for record in rows[columns].itertuples(index=False):
            out.write("\t".join(_cell("; ".join(v) if isinstance(v, list) else v) for v in record) + "\n")
        return 0
    out.write(f"query {args.qid}: {rows[QUERY].iloc[0]}\n")
    out.write(f"document {args.docno}, {total} passages, {label}\n")
    out.write(f"{'rank':>4}  {'pid':>4}  {'score':>10}  text\n")
    for i, (rank, pid, score, text) in enumerate(rows[[RANK, PID, SCORE, TEXT]].itertuples(index=False)):
        out.write(f"{rank:>4}  {pid:>4}  {_cell(score):>10}  {_cell(text)}\n")
        if matches is not None:
            out.write(f"{'':>22}matched: {', '.join(matches[i])}\n")
    return 0


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "nan" if value != value else f"{value:.4f}"
    return " ".join(str(value).split())
