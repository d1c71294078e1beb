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

from evirank.pipeline.runner import RerankConfig

logger = logging.getLogger(__name__)

EPILOG = """\
inputs: --run (a TREC run; without it, --index is searched with BM25 for the top --k) with
document text from --index (a Lucene index with stored documents, `evirank index`) or --corpus
(a BEIR folder or JSONL corpus: {_id, title, text} or {id, contents}, e.g. TREC DL passages; or
a collection as distributed, read as `evirank index --corpus-format` reads it: TREC disks, NYT, WaPo,
WARC, MS MARCO documents; --corpus-format);
--topics in any format `evirank search` reads (--field, --split).

--segment: sentences (title as its own first segment), sentences:prepend (title before every
sentence), sentences:skip (no title, as Birch), windows[:LENGTH[:STRIDE]][:prepend|skip]
(default 150:75, title prepended), whole[:prepend|skip] (each document as one passage: tweets,
passage collections). Sentences longer than the scorer's passage room are cut into chunks that
keep every word. The same grammar as serve --segment and the record of every output.

--aggregate: birch[:N] (alpha * first-stage + (1 - alpha) * sum_i w_i * s_i over the N best
passages; weights 1, 1/2, 1/4, ... unless --weights), maxp, firstp, sump, meanp (alpha *
first-stage + (1 - alpha) * the best, first, summed or mean passage score). --normalise minmax
(the default, as in serve and tune: per query, first-stage and passage scores mapped to [0, 1]);
none keeps raw scores as Birch did. The defaults (sentences:prepend, maxp, --alpha 0.2, --depth
100) are every command's: the best zero-shot setting measured on SciFact and TREC DL19.

Documents below --depth keep their first-stage order under the re-ranked ones. Scores go to
the score store (--scores, default OUT.scores.sqlite) as they are computed: an interrupted
rerank resumes and scores only what is missing, `evirank explain --scores STORE` shows a
document's passages, and `evirank tune --scores STORE --run RUN` re-aggregates without a model.
OUTPUT.json records the configuration, the versions, the counts and the time of each stage.

--scorer, repeated, combines several scorers (each [LABEL=]FAMILY[:MODEL]): each scores the same
passages (kept in the store under its own fingerprint), its scores are normalised and aggregated
alone into E_k, and the document's score is alpha * first-stage + (1 - alpha) * sum_k lambda_k *
E_k, the lambdas summing to 1 (--scorer-weights LABEL=W for all scorers but the first, which gets
the rest). `evirank tune --evidence LABEL=STORE#FINGERPRINT ...` searches the weights;
--save-passages keeps a score_LABEL column per scorer.

A family that stores passages (the bi-encoder) reads stored passage vectors (an index built with
`evirank index --embed`, or --vectors VDIR from `evirank embed`) and embeds only the queries:
passages are scored by lookup (vectors of another model or segmenter are refused; --vectors none
embeds every passage). --prune N is a cascade: a cheap scorer (--prune-by bm25, or bi by lookup)
keeps each document's N best passages, and only those are scored and aggregated. The family of
--model is told from its files (config.json, modules.json) before any work; --scorer FAMILY says it.

examples:
  evirank rerank --run run.dl19.bm25.txt --corpus corpus.jsonl --topics topics.dl19.tsv \\
      --scorer bi --aggregate maxp --output runs/dl19.bi.maxp.txt
  evirank rerank --run runs/scifact.bm25.txt --index indexes/scifact --topics scifact --split test \\
      --scorer cross:models/minilm-scifact --scorer bi --scorer-weights bi=0.3 \\
      --segment sentences:prepend --depth 20 --output runs/scifact.cross+bi.txt
  evirank rerank --run runs/robust04.bm25.txt --index indexes/robust04 --topics topics.robust04.txt \\
      --model models/minilm-mb --segment sentences:skip --aggregate birch:3 --alpha 0.6 \\
      --weights 1 0.4 0.2 --normalise none --depth 1000 --output runs/robust04.birch.txt
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``rerank`` and its flags (the pipeline's, declared once in :mod:`evirank.pipeline.flags`)."""
    from evirank.cli import CommandHelpFormatter
    from evirank.config import SETTINGS
    from evirank.pipeline import flags

    parser = subparsers.add_parser(
        "rerank",
        help="re-rank a run by sentence or passage evidence (any model family)",
        description="Re-rank each query's top documents of a first-stage run: fetch their text, split "
        "them into sentences or windows, score every (query, passage) pair with a model (cached in a "
        "score store), and aggregate the passage scores (Birch, MaxP, FirstP, SumP, MeanP).",
        epilog=EPILOG,
        formatter_class=CommandHelpFormatter,
    )
    flags.add_flags(
        parser,
        flags.TOPICS
        + flags.TEXT_SOURCE
        + flags.FIRST_STAGE
        + flags.SCORING
        + flags.CASCADE
        + flags.PASSAGES
        + flags.DUO
        + ["output", "no_scores", "tag", "save_passages", "overwrite"]
        + flags.RAY
        + ["query_block"],
        required={"topics", "source", "output"},
        helps={
            "scores": SETTINGS["scores"].help + " (default: OUT.scores.sqlite beside the run)",
            "output": "the TREC run to write (.gz allowed); RUN.json beside it records how it was made",
            "tag": "run tag (default: evirank-SCORER-AGGREGATE)",
            "overwrite": "replace existing outputs (the score store is kept)",
        },
        changes={"output": {"metavar": "RUN"}},
    )
    return parser


def config_from_args(args: argparse.Namespace) -> RerankConfig:
    """The :class:`~evirank.pipeline.runner.RerankConfig` of the parsed flags."""
    from evirank.pipeline.flags import spec_from_args

    return RerankConfig(
        spec_from_args(args),
        topics=args.topics,
        output=args.output,
        field=args.field,
        split=args.split,
        scores=args.scores,
        no_scores=args.no_scores,
        tag=args.tag,
        save_passages=args.save_passages,
        overwrite=args.overwrite,
        query_block=args.query_block,
    )


def run(args: argparse.Namespace) -> int:
    """Turn the flags into a config and run it (:func:`evirank.pipeline.runner.run_rerank`)."""
    from evirank.pipeline.runner import run_rerank

    run_rerank(config_from_args(args))  # a RerankConfigError is a UsageError: `evirank rerank: error: ...`
    return 0
