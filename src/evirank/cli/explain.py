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
    from evirank.cli import DefaultsHelpFormatter

    parser = subparsers.add_parser(
        "explain",
        help="show a document's passages with their scores, best first",
        description="Show the passages of one document for one query, with the scores a re-ranking "
        "run stored (evirank rerank --scores STORE), best first.",
        formatter_class=DefaultsHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        [
            "scores",
            "qid",
            "docno",
            "fingerprint",
            "no_matches",
            "show_passages",
            "format",
            "attention",
            "attention_output",
            "pid",
            "attention_model",
            "heads",
            "attention_level",
            "device",
            "overwrite",
        ],
        required={"scores", "qid", "docno"},
        defaults={"show_passages": None, "format": "table", "device": "cpu"},
        helps={
            "scores": "the score store of the run",
            "show_passages": "show only the N best passages (default: all)",
            "device": "where the model runs for the attention: cpu (a stored scorer's precision is part "
            "of its fingerprint, so it is rebuilt where it ran), cuda, mps",
            "overwrite": "replace existing PREFIX.png and PREFIX.html",
        },
        changes={"format": {"choices": ("table", "tsv", "jsonl")}},
    )
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
    from evirank.score.store import FINGERPRINT
    from evirank.score.stores import open_store

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
    from evirank.config import Runtime
    from evirank.score.attention import attention_hook
    from evirank.score.multi import ScorerSpec

    spec = ScorerSpec.parse(args.attention_model)
    hook = attention_hook(spec.build(Runtime(device=args.device)))
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
