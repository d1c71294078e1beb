"""``evirank rerank``: re-rank a first-stage run by passage evidence and write the new run.

Example:
    $ evirank rerank --run runs/scifact.bm25.txt --index indexes/scifact \\
        --topics ../shared/datasets/scifact --split test --scorer bi --segment sentences:prepend \\
        --aggregate birch:3 --depth 100 --output runs/scifact.bi.birch3.txt
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from evirank.cli.index import non_negative_int, positive_int
from evirank.rerank.runner import DEFAULT_MAX_PASSAGES, RerankConfig

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

--evidence (repeated) combines several scorers: each scores the same passages (kept in the store
under its own fingerprint), its scores are normalised and aggregated alone into E_k, and the
document's score is alpha * first-stage + (1 - alpha) * sum_k lambda_k * E_k, the lambdas summing
to 1 (--evidence-weights LABEL=W for all scorers but the first, which gets the rest). `evirank tune
--evidence LABEL=STORE#FINGERPRINT ...` searches the weights; --save-passages keeps a score_LABEL
column per scorer.

--scorer bi with stored passage vectors (an index built with `evirank index --embed`, or
--vectors VDIR from `evirank embed`) embeds only the queries: passages are scored by lookup
(vectors of another model or segmenter are refused; --vectors none embeds every passage).
--prune N is a cascade: a cheap scorer (--prune-by bm25, or bi by lookup) keeps each
document's N best passages, and only those are scored and aggregated.

examples:
  evirank rerank --run run.dl19.bm25.txt --corpus corpus.jsonl --topics topics.dl19.tsv \\
      --scorer bi --aggregate maxp --output runs/dl19.bi.maxp.txt
  evirank rerank --run runs/scifact.bm25.txt --index indexes/scifact --topics scifact --split test \\
      --evidence cross:models/minilm-scifact --evidence bi --evidence-weights bi=0.3 \\
      --segment sentences:prepend --depth 20 --output runs/scifact.cross+bi.txt
  evirank rerank --run runs/robust04.bm25.txt --index indexes/robust04 --topics topics.robust04.txt \\
      --model models/minilm-mb --segment sentences:skip --aggregate birch:3 --alpha 0.6 \\
      --weights 1 0.4 0.2 --normalise none --depth 1000 --output runs/robust04.birch.txt
"""


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
    _add_inputs(parser.add_argument_group("inputs"))
    _add_scoring(parser.add_argument_group("scoring"))
    _add_segments_and_aggregation(parser.add_argument_group("segments and aggregation"))
    _add_outputs(parser.add_argument_group("outputs"))
    from evirank.scale.flags import add_ray_arguments

    add_ray_arguments(parser)
    return parser


def _add_inputs(inputs: Any) -> None:
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
    inputs.add_argument(
        "--first-stage",
        default="bm25",
        metavar="SPEC",
        help="without --run: bm25 (default), dense (the index's passage vectors), or both fused: "
        "rrf[:K] or interp[:WEIGHT] (as evirank search --fuse)",
    )


def _add_scoring(model: Any) -> None:
    from evirank.score.family import AUTO, family_names

    model.add_argument(
        "--scorer",
        choices=(AUTO, *family_names()),
        default=None,
        metavar="FAMILY",
        help=f"the model family: {AUTO} (default: told from --model's files; without --model the "
        f"offline all-MiniLM-L6-v2 bi-encoder) or one of {', '.join(family_names())}",
    )
    model.add_argument(
        "--evidence",
        action="append",
        metavar="SCORER",
        help="several scorers' evidence in one ranking, repeated: [LABEL=]FAMILY[:MODEL], e.g. cross:MODEL "
        "or bi (instead of --scorer/--model; label default: the family)",
    )
    model.add_argument(
        "--evidence-weights",
        nargs="+",
        metavar="LABEL=W",
        help="weights of the scorers after the first (the first gets 1 minus their sum; default: "
        "equal shares), e.g. bi=0.3",
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
        choices=("torch", "onnx", "onnx-int8", "openvino", "openvino-int8"),
        default="torch",
        help="engine: torch (default; CPU or GPU), onnx (ONNX Runtime on CPU, fp32), "
        "onnx-int8 (ONNX Runtime, int8 weights), openvino (OpenVINO on CPU, fp32), "
        "openvino-int8 (OpenVINO, static int8; needs the openvino extra)",
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
        default="bm25",
        metavar="SCORER",
        help="the cheap scorer of --prune: bm25 over each document's passages (default), or a scorer "
        "FAMILY[:MODEL] such as bi (the bi-encoder, by lookup in the stored vectors when there are some)",
    )
    model.add_argument(
        "--scores",
        metavar="STORE",
        help="score store: a .sqlite file (default OUT.scores.sqlite), or a folder or URL (s3://, gs://) "
        "of Parquet shards that several machines can share",
    )
    model.add_argument("--no-scores", action="store_true", help="keep no score store (nothing resumes)")
    model.add_argument(
        "--duo",
        type=positive_int,
        metavar="K",
        help="after aggregation, re-rank each query's top K documents (their best passages) with a "
        "pairwise model (--duo-model): K(K-1) model calls per query, pair scores kept in the store",
    )
    model.add_argument(
        "--duo-model",
        metavar="[FAMILY:]MODEL",
        help="the pairwise model of --duo (e.g. a duoT5 folder; the family is told from the model)",
    )


def _add_segments_and_aggregation(agg: Any) -> None:
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
        "--weights", nargs="+", type=float, metavar="W", help="Birch's top-n weights (default: 1 0.5 0.25)"
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


def _add_outputs(out: Any) -> None:
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


def config_from_args(args: argparse.Namespace) -> RerankConfig:
    """The :class:`~evirank.rerank.runner.RerankConfig` of the parsed flags."""
    return RerankConfig(
        topics=args.topics,
        output=args.output,
        run=args.run,
        index=args.index,
        corpus=args.corpus,
        field=args.field,
        split=args.split,
        missing_docs=args.missing_docs,
        k=args.k,
        rm3=args.rm3,
        scorer=args.scorer or "auto",
        model=args.model,
        max_length=args.max_length,
        batch_tokens=args.batch_tokens,
        device=args.device,
        backend=args.backend,
        vectors=args.vectors,
        prune=args.prune,
        prune_by=args.prune_by,
        scores=args.scores,
        no_scores=args.no_scores,
        segment=args.segment,
        max_passages=args.max_passages,
        aggregate=args.aggregate,
        alpha=args.alpha,
        weights=None if args.weights is None else tuple(args.weights),
        normalise=args.normalise,
        depth=args.depth,
        tag=args.tag,
        save_passages=args.save_passages,
        overwrite=args.overwrite,
        ray=args.ray,
        ray_workers=args.ray_workers,
        ray_cpus=args.ray_cpus,
        ray_gpus=args.ray_gpus,
        query_block=args.query_block,
        first_stage=args.first_stage,
        evidence=tuple(args.evidence or ()),
        evidence_weights=tuple(args.evidence_weights) if args.evidence_weights else None,
        duo=args.duo,
        duo_model=args.duo_model,
    )


def run(args: argparse.Namespace) -> int:
    """Turn the flags into a config and run it (:func:`evirank.rerank.runner.run_rerank`)."""
    from evirank.rerank.runner import RerankConfigError, run_rerank

    if args.evidence and args.scorer:
        raise RerankConfigError(
            "give the scorers either as --evidence (repeated) or as --scorer/--model, not both"
        )

    run_rerank(config_from_args(args))  # a RerankConfigError is a UsageError: `evirank rerank: error: ...`
    return 0
