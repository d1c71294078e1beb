"""``evirank explain``: a document's passages with their scores, best first.

With ``--attention [LAYER ...]`` it also looks inside the model for the best passage (or
``--pid``): the attention from each query token to the passage's tokens, drawn as a PNG heat map
and an HTML page (``--attention-output PREFIX``; see docs/attention.md).

Example:
    $ evirank explain --scores runs/scores.sqlite --qid 1 --docno 4983
    query 1: 0-dimensional biomaterials show inductive properties.
    document 4983, 9 passages, cross-encoder 3f9a01c2e4b7 (models/minilm-scifact)
    rank  pid     score  text
       1    4    6.2104  ...
    $ evirank explain --scores runs/scores.sqlite --qid 1 --docno 4983 --attention 0 -1 \
        --attention-output out/attention-1-4983
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from evirank.errors import UsageError
from evirank.frames import PID, QUERY, RANK, SCORE, TEXT

logger = logging.getLogger(__name__)

#: How many passage words the terminal summary names per query word.
TOP_WORDS = 3


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
    from evirank.pipeline.flags import Deprecated, positive_int

    parser.add_argument(
        "--show-passages",
        type=positive_int,
        metavar="N",
        help="show only the N best passages (default: all)",
    )
    parser.add_argument(
        "--top", dest="show_passages", type=positive_int, action=Deprecated, instead="--show-passages N"
    )
    parser.add_argument(
        "--format", choices=("table", "tsv", "jsonl"), default="table", help="output format (default: table)"
    )
    look = parser.add_argument_group(
        "attention", "look inside the model: what each query token attends to in one passage"
    )
    look.add_argument(
        "--attention",
        nargs="*",
        type=int,
        metavar="LAYER",
        help="draw the attention from each query token to the passage's tokens at these layers (0-based; "
        "-1 is the last; none given: the last), mean over heads; needs --attention-output. A "
        "bi-encoder or ColBERT has no cross attention: their view is of the score itself (docs/attention.md)",
    )
    look.add_argument(
        "--attention-output",
        metavar="PREFIX",
        help="write PREFIX.png (the heat map) and PREFIX.html (the heat map and the passage shaded per "
        "query word, words and tokens)",
    )
    look.add_argument("--pid", type=int, help="the passage to look inside (default: the best)")
    look.add_argument(
        "--attention-model",
        metavar="[FAMILY:]MODEL",
        help="look inside this model instead of the one that made the scores (a scorer spec: cross:DIR, "
        "seq2seq:DIR, bi, ...), for the same passage",
    )
    look.add_argument(
        "--heads", action="store_true", help="also draw every attention head, not only their mean"
    )
    look.add_argument(
        "--attention-level",
        choices=("word", "token"),
        default="word",
        help="the PNG's units: words (word pieces merged; default) or tokens; the HTML has both",
    )
    look.add_argument(
        "--device",
        default="cpu",
        help="where the model runs for the attention: cpu (default; a stored scorer's precision is part of "
        "its fingerprint, so it is rebuilt where it ran), cuda, mps",
    )
    look.add_argument("--overwrite", action="store_true", help="replace existing PREFIX.png and PREFIX.html")
    return parser


def _check_attention_flags(args: argparse.Namespace) -> list[str]:
    """The output paths of the attention view (checked writable now), or [] when it is not asked for."""
    from pathlib import Path

    from evirank.outputs import check_output

    asked = args.attention is not None
    if not asked:
        extra = [
            flag
            for flag, value in (
                ("--attention-output", args.attention_output),
                ("--attention-model", args.attention_model),
                ("--pid", args.pid),
                ("--heads", args.heads),
            )
            if value not in (None, False)
        ]
        if extra:
            raise UsageError(f"{', '.join(extra)} go with --attention [LAYER ...]")
        return []
    if not args.attention_output:
        raise UsageError("--attention needs --attention-output PREFIX (it writes PREFIX.png and PREFIX.html)")
    base = Path(args.attention_output)
    paths = [str(base.with_name(base.name + suffix)) for suffix in (".png", ".html")]
    for path in paths:
        check_output(path, args.overwrite)
    return paths


def run(args: argparse.Namespace) -> int:
    """Print the explanation to stdout."""
    from evirank.score.explain import explain, passage_attention, passage_matches, store_descriptions
    from evirank.score.store import FINGERPRINT, open_store

    attention_paths = _check_attention_flags(args)
    view = None
    with open_store(args.scores, readonly=True) as store:
        rows = explain(store, args.qid, args.docno, fingerprint=args.fingerprint)
        label = store_descriptions(store, [rows[FINGERPRINT].iloc[0]])[0]
        total, query = len(rows), str(rows[QUERY].iloc[0])
        if attention_paths:
            chosen = rows if args.pid is None else rows[rows[PID] == args.pid]
            if chosen.empty:
                raise UsageError(
                    f"document {args.docno} has no passage {args.pid} for query {args.qid}; its passages: "
                    f"{', '.join(str(p) for p in sorted(rows[PID].tolist()))}"
                )
            target = chosen.iloc[0]
            if args.attention_model:
                view = _other_model_attention(args, str(target[QUERY]), str(target[TEXT]))
            else:
                view = passage_attention(
                    store,
                    str(target[FINGERPRINT]),
                    str(target[QUERY]),
                    str(target[TEXT]),
                    layers=args.attention,
                    device=args.device,
                )
        if args.show_passages is not None:
            rows = rows.head(args.show_passages)
        matches = None
        if not args.no_matches and len(rows):
            matches = passage_matches(
                store, rows[FINGERPRINT].iloc[0], str(rows[QUERY].iloc[0]), rows[TEXT].astype(str).tolist()
            )
    if matches is not None:
        rows = rows.assign(matches=matches)
    out = sys.stdout
    if view is not None:
        from evirank.report.attention import write_attention

        write_attention(
            view,
            args.attention_output,
            level=args.attention_level,
            heads=args.heads,
            overwrite=args.overwrite,
        )
        logger.info("wrote %s", " and ".join(attention_paths))
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
    out.write(f"query {args.qid}: {query}\n")
    out.write(f"document {args.docno}, {total} passages, {label}\n")
    out.write(f"{'rank':>4}  {'pid':>4}  {'score':>10}  text\n")
    for i, (rank, pid, score, text) in enumerate(rows[[RANK, PID, SCORE, TEXT]].itertuples(index=False)):
        out.write(f"{rank:>4}  {pid:>4}  {_cell(score):>10}  {_cell(text)}\n")
        if matches is not None:
            out.write(f"{'':>22}matched: {', '.join(matches[i])}\n")
    if view is not None:
        _write_attention_summary(out, view, int(target[PID]), attention_paths)
    return 0


def _other_model_attention(args: argparse.Namespace, query: str, text: str) -> Any:
    """The attention view of ``--attention-model`` (a scorer spec) for the chosen passage."""
    from evirank.score.attention import attention_hook
    from evirank.score.multi import ScorerSpec

    spec = ScorerSpec.parse(args.attention_model)
    hook = attention_hook(spec.build(device=args.device))
    logger.info("the attention of %s, for the passage the stored scores chose", spec)
    return hook(query, text, args.attention)


def _write_attention_summary(out: Any, view: Any, pid: int, paths: list[str]) -> None:
    """Each query word's strongest passage words, per layer (word level, mean over heads)."""
    words = view.by_word()
    means = words.head_mean()
    score = f", score {view.score:.4f}" if view.score is not None else ""
    for i, layer in enumerate(words.layers):
        out.write(f"\n{view.family} view of passage {pid}, layer {layer} of 0-{view.n_layers - 1}{score}\n")
        out.write(f"  cell: {words.describe()}\n")
        for r, q_word in enumerate(words.query.labels):
            order = sorted(range(len(words.passage)), key=lambda j: -means[i, r, j])[:TOP_WORDS]
            best = ", ".join(f"{words.passage.labels[j]} {means[i, r, j]:.3f}" for j in order)
            out.write(f"  {q_word} -> {best}\n")
    if view.note:
        out.write(f"  note: {view.note}\n")
    out.write(f"wrote {paths[0]} and {paths[1]}\n")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "nan" if value != value else f"{value:.4f}"
    return " ".join(str(value).split())
