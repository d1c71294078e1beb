"""``evirank rerank``: re-rank a first-stage run by passage evidence and write the new run.

Example:
    $ evirank rerank --run runs/scifact.bm25.txt --index indexes/scifact \\
        --topics ../shared/datasets/scifact --split test --scorer bi --segment sentences:prepend \\
        --aggregate birch:3 --depth 100 --output runs/scifact.bi.birch3.txt
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import sys
import time
from pathlib import Path
from typing import Any

from evirank.cli.index import non_negative_int, positive_int

DEFAULT_MAX_PASSAGES = 1000
"""Kept in step with evirank.segment.base.DEFAULT_MAX_PASSAGES (not imported: the parser stays light)."""

logger = logging.getLogger(__name__)

EPILOG = """\
inputs: --run (a TREC run; without it, --index is searched with BM25 for the top --k) with
document text from --index (a Lucene index with stored documents, `evirank index`) or --corpus
(a BEIR folder or JSONL corpus: {_id, title, text} or {id, contents}, e.g. TREC DL passages);
--topics in any format `evirank search` reads (--field, --split).

--segment: sentences (title as its own first segment), sentences:prepend (title before every
sentence), sentences:skip (no title, as Birch), windows[:LENGTH[:STRIDE]][:prepend|skip]
(default 150:75, title prepended), whole[:prepend|skip] (each document as one passage: tweets,
passage collections). Sentences longer than the scorer's passage room are cut into chunks that
keep every word. The same grammar as serve --segment and the record of every output.

--aggregate: birch[:N] (alpha * first-stage + (1 - alpha) * sum_i w_i * s_i over the N best
passages; default alpha 0.5, weights 1, 1/2, 1/4, ...), maxp, firstp, sump, meanp (passage
evidence only, unless --alpha > 0). --normalise minmax (the default, as in serve and tune: per
query, first-stage and passage scores mapped to [0, 1]); none keeps raw scores as Birch did.

Documents below --depth keep their first-stage order under the re-ranked ones. Scores go to
the score store (--scores, default OUT.scores.sqlite) as they are computed: an interrupted
rerank resumes and scores only what is missing, `evirank explain --scores STORE` shows a
document's passages, and `evirank tune --scores STORE --run RUN` re-aggregates without a model.
OUTPUT.json records the configuration, the versions, the counts and the time of each stage.

--scorer bi with stored passage vectors (an index built with `evirank index --embed`, or
--vectors VDIR from `evirank embed`) embeds only the queries: passages are scored by lookup
(vectors of another model or segmenter are refused; --vectors none embeds every passage).
--prune N is a cascade: a cheap scorer (--prune-by bm25, or bi by lookup) keeps each
document's N best passages, and only those are scored and aggregated.

examples:
  evirank rerank --run run.dl19.bm25.txt --corpus corpus.jsonl --topics topics.dl19.tsv \\
      --scorer bi --aggregate maxp --output runs/dl19.bi.maxp.txt
  evirank rerank --run runs/robust04.bm25.txt --index indexes/robust04 --topics topics.robust04.txt \\
      --model models/minilm-mb --segment sentences:skip --aggregate birch:3 --alpha 0.6 \\
      --weights 1,0.4,0.2 --normalise none --depth 1000 --output runs/robust04.birch.txt
"""


def _weights(text: str) -> list[float]:
    from evirank.aggregate import parse_weights

    try:
        return parse_weights(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], found {text!r}")
    return value


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``rerank`` and its flags."""
    parser = subparsers.add_parser(
        "rerank",
        help="re-rank a run by sentence or passage evidence (cross-encoder or bi-encoder)",
        description="Re-rank each query's top documents of a first-stage run: fetch their text, split "
        "them into sentences or windows, score every (query, passage) pair with a cross-encoder or a "
        "bi-encoder (cached in a score store), and aggregate the passage scores (Birch, MaxP, FirstP, "
        "SumP, MeanP).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = parser.add_argument_group("inputs")
    inputs.add_argument("--run", metavar="RUN", help="the first-stage TREC run (default: BM25 from --index)")
    text = inputs.add_mutually_exclusive_group(required=True)
    text.add_argument("--index", metavar="DIR", help="Lucene index with stored documents (evirank index)")
    text.add_argument(
        "--corpus",
        metavar="PATH",
        help="corpus: BEIR folder or JSONL file ({_id,title,text} or {id,contents})",
    )
    inputs.add_argument("--topics", required=True, metavar="T", help="topics file, BEIR folder, or irds:<id>")
    inputs.add_argument(
        "--field", default="title", help="TREC topic field: title (default), description, narrative, a+b"
    )
    inputs.add_argument(
        "--split", default=None, help="for a BEIR folder: keep the queries of qrels/SPLIT.tsv"
    )
    inputs.add_argument(
        "--missing-docs",
        choices=("error", "keep"),
        default="error",
        help="run documents absent from the index/corpus: stop (default), or keep them with empty text",
    )
    inputs.add_argument(
        "--k", type=positive_int, default=1000, help="without --run: BM25 depth (default 1000)"
    )
    inputs.add_argument("--rm3", action="store_true", help="without --run: BM25+RM3 (Anserini's defaults)")

    model = parser.add_argument_group("scoring")
    model.add_argument(
        "--scorer", choices=("cross", "bi"), default="cross", help="cross-encoder (default) or bi-encoder"
    )
    model.add_argument(
        "--model",
        metavar="M",
        help="Hugging Face model id or local folder "
        "(required for cross; bi defaults to the offline all-MiniLM-L6-v2)",
    )
    model.add_argument(
        "--max-length", type=positive_int, metavar="N", help="input token cap (default: the scorer's)"
    )
    model.add_argument(
        "--batch-tokens", type=positive_int, metavar="N", help="token budget per batch (default by device)"
    )
    model.add_argument(
        "--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps"
    )
    model.add_argument(
        "--backend",
        choices=("torch", "onnx", "onnx-int8"),
        default="torch",
        help="engine: torch (default; CPU or GPU), onnx (ONNX Runtime on CPU, fp32), "
        "onnx-int8 (ONNX Runtime, int8 weights: fastest on CPU)",
    )
    model.add_argument(
        "--vectors",
        metavar="VDIR",
        help="stored passage vectors for the bi-encoder (evirank embed): passages are scored by lookup, "
        "only queries are embedded; default: the index's own (index --embed) when it has some; "
        "none: embed every passage now",
    )
    model.add_argument(
        "--prune",
        type=positive_int,
        metavar="N",
        help="cascade: a cheap scorer keeps each document's N best passages; only those are scored "
        "and aggregated (birch:n needs n <= N)",
    )
    model.add_argument(
        "--prune-by",
        choices=("bm25", "bi"),
        default="bm25",
        help="the cheap scorer of --prune: BM25 over each document's passages (default), or the "
        "bi-encoder (by lookup in the stored vectors when there are some)",
    )
    model.add_argument("--scores", metavar="STORE", help="score store (SQLite; default OUT.scores.sqlite)")
    model.add_argument("--no-scores", action="store_true", help="keep no score store (nothing resumes)")

    agg = parser.add_argument_group("segments and aggregation")
    agg.add_argument(
        "--segment",
        default="sentences",
        help="sentences[:segment|prepend|skip], windows[:LEN[:STRIDE]][:prepend|skip] "
        "or whole[:prepend|skip] (default: sentences)",
    )
    agg.add_argument(
        "--max-passages",
        type=non_negative_int,
        default=DEFAULT_MAX_PASSAGES,
        metavar="N",
        help=f"segments kept per document, its first ones, with a warning naming a longer document "
        f"(default {DEFAULT_MAX_PASSAGES}; 0: no limit)",
    )
    agg.add_argument(
        "--aggregate", default="birch:3", help="birch[:N] (default birch:3), maxp, firstp, sump, meanp"
    )
    agg.add_argument(
        "--alpha",
        type=_alpha,
        metavar="A",
        help="first-stage weight in [0, 1] (default: birch 0.5, others 0)",
    )
    agg.add_argument(
        "--weights", type=_weights, metavar="W1,W2,W3", help="Birch's top-n weights (default 1,0.5,0.25)"
    )
    agg.add_argument(
        "--normalise",
        "--normalize",
        choices=("none", "minmax"),
        help="minmax: per-query min-max of first-stage and passage scores (default), or none (raw)",
    )
    agg.add_argument(
        "--depth", type=positive_int, default=100, help="documents re-ranked per query (default 100)"
    )

    out = parser.add_argument_group("outputs")
    out.add_argument(
        "--output", required=True, metavar="OUT", help="the re-ranked TREC run (OUT.json beside it)"
    )
    out.add_argument("--tag", help="run tag (default: evirank-SCORER-AGGREGATE)")
    out.add_argument(
        "--save-passages", metavar="FILE", help="Parquet of the scored passages (for evirank tune --passages)"
    )
    out.add_argument(
        "--overwrite", action="store_true", help="replace existing outputs (the score store is kept)"
    )
    return parser


def sidecar(output: str | Path) -> Path:
    """Where the record of a re-ranked run goes: ``OUT.json`` next to ``OUT``."""
    path = Path(output)
    return path.with_name(path.name + ".json")


def default_store(output: str | Path) -> Path:
    """The default score store of a run: ``OUT.scores.sqlite`` next to ``OUT``."""
    path = Path(output)
    return path.with_name(path.name + ".scores.sqlite")


def _versions() -> dict[str, str]:
    from evirank import __version__

    versions = {"evirank": __version__, "python": platform.python_version()}
    for name in ("numpy", "pandas", "torch", "transformers", "tokenizers"):
        module = sys.modules.get(name)
        if module is not None:
            versions[name] = str(getattr(module, "__version__", "?"))
    return versions


def _usage(message: str) -> SystemExit:
    return SystemExit(f"evirank rerank: error: {message}")


def build_scorer(args: argparse.Namespace, store: Path | None, vectors: Any = None) -> Any:
    """The scorer the flags ask for (nothing heavy is loaded yet); a bi-encoder reads ``vectors``."""
    from evirank.score import BiEncoder, CrossEncoder

    kwargs: dict[str, Any] = {
        "batch_tokens": args.batch_tokens,
        "device": args.device,
        "store": store,
        "backend": getattr(args, "backend", "torch"),
    }
    if args.scorer == "bi":
        return BiEncoder(args.model, max_length=args.max_length, vectors=vectors, **kwargs)
    if not args.model:
        raise _usage("--scorer cross needs --model (a Hugging Face model id or a local folder)")
    if args.max_length is not None:
        kwargs["max_length"] = args.max_length
    return CrossEncoder(args.model, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Read the inputs, re-rank, write the run, its record, and optionally the scored passages."""
    from evirank.io import read_run, read_topics, write_run
    from evirank.outputs import atomic_outputs, check_output
    from evirank.rerank import FetchText, StageTimings, parse_aggregate, parse_segment, passage_budget, rerank
    from evirank.rerank.pipeline import describe_stage, save_passages

    if args.run is None and args.index is None:
        raise _usage("give --run RUN, or --index DIR to retrieve the first stage with BM25")
    try:
        aggregator = parse_aggregate(
            args.aggregate, alpha=args.alpha, weights=args.weights, normalise=args.normalise
        )
        parse_segment(args.segment)  # fail on a bad spec before anything is loaded
    except ValueError as exc:
        raise _usage(str(exc)) from exc
    outputs = [Path(args.output), sidecar(args.output)] + (
        [Path(args.save_passages)] if args.save_passages else []
    )
    for path in outputs:
        check_output(path, args.overwrite)  # before any (long) work
    store = None if args.no_scores else Path(args.scores) if args.scores else default_store(args.output)
    if store is not None:
        from evirank.score.store import check_store_path

        check_store_path(store)

    timings = StageTimings()
    started = time.perf_counter()
    first_stage: dict[str, Any]
    with timings.measure("first_stage"):
        topics = read_topics(args.topics, field=args.field, split=args.split)
        if args.run is not None:
            first = read_run(args.run)
            first_stage = {"run": str(args.run)}
        else:
            from evirank.lucene import Bm25, Rm3

            with Bm25(args.index, rm3=Rm3() if args.rm3 else None, k=args.k) as bm25:
                first = bm25(topics)
            first_stage = {"bm25": bm25.config.to_dict(), "index": str(args.index)}
    if first.empty:
        raise _usage(f"the first stage has no documents ({args.run or args.index})")
    fetch = (
        FetchText(index=args.index, missing=args.missing_docs)
        if args.index
        else FetchText(corpus=args.corpus, missing=args.missing_docs)
    )
    from evirank.rerank.prune import cascade_from_flags

    cascade = cascade_from_flags(args, aggregator, _usage)
    if cascade.vectors is not None and args.scorer == "bi":
        store = None  # scores by lookup are computed in microseconds; they are not stored
    scorer = build_scorer(args, store, cascade.vectors if args.scorer == "bi" else None)
    budget = passage_budget(scorer)
    segmenter = parse_segment(
        args.segment, tokenizer=budget[0] if budget else None, max_tokens=budget[1] if budget else None
    ).with_max_passages(args.max_passages or None)
    prune = cascade.stage(segmenter, scorer if args.scorer == "bi" else None)
    logger.info(
        "pipeline: %s (depth %d)",
        " >> ".join(describe_stage(s) for s in (fetch, segmenter, prune, scorer, aggregator) if s),
        args.depth,
    )

    with fetch:
        result = rerank(
            first,
            topics=topics,
            fetch=fetch,
            segmenter=segmenter,
            scorer=scorer,
            aggregator=aggregator,
            depth=args.depth,
            timings=timings,
            prune=prune,
        )
    tag = args.tag or f"evirank-{args.scorer}-{args.aggregate.replace(':', '')}"
    # The run, its record and the passages succeed or fail together: all are written under
    # temporary names first and renamed into place only when every one of them is complete.
    written = Path(args.output)
    with atomic_outputs(*((path, None) for path in outputs), overwrite=args.overwrite) as temps:
        with timings.measure("write"):
            write_run(result.run, temps[0], tag=tag)
            if args.save_passages:
                save_passages(result.passages, temps[2])
        record = {
            "command": "rerank",
            "arguments": {k: v for k, v in vars(args).items() if not k.startswith("_")},
            "run": str(written),
            "tag": tag,
            "first_stage": first_stage,
            "text": {"index": args.index} if args.index else {"corpus": args.corpus},
            "topics": {
                "path": str(args.topics),
                "field": args.field,
                "split": args.split,
                "count": len(topics),
            },
            "depth": args.depth,
            "segmenter": describe_stage(segmenter),
            "prune": describe_stage(prune) if prune is not None else None,
            "vectors": cascade.describe(),
            "scorer": {**_describe(scorer), "fingerprint": _fingerprint(scorer)},
            "aggregator": describe_stage(aggregator),
            "scores": str(store) if store else None,
            "passages_file": args.save_passages,
            "counts": result.counts,
            "timings_s": timings.as_dict(),
            "wall_s": round(time.perf_counter() - started, 3),
            "versions": _versions(),
        }
        temps[1].write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    counts = result.counts
    logger.info(
        "re-ranked %d documents of %d queries (%d passages; model ran on %s items, %s pairs from the store)"
        " into %s",
        counts["documents_reranked"],
        counts["queries"],
        counts["passages"],
        counts.get("scorer_computed", "?"),
        counts.get("scorer_cached", "?"),
        written,
    )
    logger.info("time per stage:\n%s", timings.table())
    return 0


def _describe(scorer: Any) -> dict[str, Any]:
    describe = getattr(scorer, "describe", None)
    return dict(describe()) if describe is not None else {"stage": repr(scorer)}


def _fingerprint(scorer: Any) -> str | None:
    value = getattr(scorer, "fingerprint", None)
    return None if value is None else str(value)
