"""``evirank tune``: cross-validated grid search of an aggregator's parameters from cached scores.

Never runs a model: the passage scores come from the score store that ``evirank rerank
--scores`` filled (with the first-stage run it re-ranked), or from a file of scored passages.

Example:
    $ evirank tune --scores runs/scores.sqlite --run runs/bm25.txt --depth 100 \\
        --qrels qrels/test.tsv --aggregate birch:3 --k-folds 5 --seed 1 --metric AP \\
        --grid alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1 --output runs/birch3-cv
    $ evirank tune --scorer-scores cross=runs/scores.sqlite#3fa2 \\
        --scorer-scores bi=runs/bi.passages.parquet \\
        --run runs/bm25.txt --depth 20 --qrels qrels/test.tsv --aggregate birch:3 --output runs/two-cv
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


EPILOG = """\
inputs: --scores STORE with --run (the first-stage run that was re-ranked; --fingerprint picks
the scorer when the store holds several), or --passages FILE (Parquet, TSV with a header, or JSON
lines: qid, docno, pid, score, first_stage_score; --run supplies first-stage scores and the tail).

several scorers: --scorer-scores LABEL=STORE[#FINGERPRINT] or LABEL=FILE, once per scorer (each a
score store with --run, or a passages file; a file with a score_LABEL column gives that column).
Each scorer's passage scores are normalised and aggregated alone; the document's score is
alpha * first-stage + (1 - alpha) * sum_k lambda_k * E_k, the lambdas summing to 1: the first
scorer's is 1 minus the others', and each other's is a grid axis named by its label (default
LABEL=0:1:0.1; settings whose weights sum above 1 are left out).

folds: --folds FILE (the Robust04 JSON {fold: {train_qids, predict: {dev, test}}}, tuned on
train_qids + dev by default as Birch's four folds, see --tune-on; or qid<TAB>fold lines), or
--k-folds K --seed S (deterministic: sorted qids shuffled by the seed, dealt round-robin).

grid: NAME=START:STOP:STEP (ends included), NAME=V1,V2 or NAME=V. Default: Birch's, alpha and
w2..wN in 0:1:0.1 with w1 = 1 (1,331 settings for birch:3); alpha=0:1:0.1 for maxp/firstp/sump/meanp;
plus LABEL=0:1:0.1 for each scorer after the first (14,641 settings for birch:3 with two scorers).
Parameters left out keep the aggregator's defaults. Ties between settings: the first in grid order.

output folder: run.txt (the cross-validated run: each fold's test queries ranked with the setting
chosen on its tuning queries; documents of --run without passages follow in first-stage order),
params.tsv (each fold's setting, with every scorer's weight), grid.tsv (every setting's mean per
fold), folds.json, tune.json (config, versions, timings, choices, evaluation of run.txt).
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``tune`` and its flags."""
    from evirank.cli import CommandHelpFormatter

    parser = subparsers.add_parser(
        "tune",
        help="cross-validated grid search of aggregation parameters from cached passage scores",
        description="Tune an aggregator's parameters (Birch's alpha and weights, or the first-stage "
        "interpolation of MaxP/FirstP/SumP/MeanP) by k-fold cross-validation over cached passage "
        "scores, and write the cross-validated run. No model is run.",
        epilog=EPILOG,
        formatter_class=CommandHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags
    from evirank.tune.runner import TuneConfig

    add_flags(
        parser,
        [
            "scores",
            "fingerprint",
            "passages",
            "scorer_scores",
            "run",
            "depth",
            "qrels",
            "aggregate",
            "normalise",
            "folds",
            "tune_on",
            "k_folds",
            "seed",
            "metric",
            "relevance_level",
            "grid",
            "measures",
            "tag",
            "output",
            "overwrite",
        ],
        required={"qrels", "output"},
        defaults={"depth": None, "measures": TuneConfig.measures},
        helps={
            "scores": "the score store of evirank rerank --scores",
            "fingerprint": "the scorer's fingerprint in the store (a prefix is enough)",
            "run": "the first-stage run that was re-ranked (TREC run)",
            "depth": "use the run's top N documents per query (default: every document the store scored)",
            "normalise": "per-query min-max of first-stage and passage scores (default, as rerank and "
            "serve), or raw scores as Birch",
            "seed": "seed of the random folds",
            "measures": "measures reported for the cross-validated run",
            "tag": "run tag of run.txt (default: the folder name)",
            "output": "output folder",
            "overwrite": "replace an existing output folder",
        },
        changes={"output": {"metavar": "DIR"}},
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Load the scored passages, tune, write the output folder, print a summary."""
    from evirank.errors import UsageError
    from evirank.outputs import check_output
    from evirank.tune.runner import RECORD_FILE, TuneConfig, run_tune

    check_output(args.output, args.overwrite, marker=RECORD_FILE)
    if args.scorer_scores:
        if args.scores or args.passages or args.fingerprint:
            raise UsageError(
                "give the scorers either as --scorer-scores LABEL=SOURCE (with LABEL=STORE#FINGERPRINT) "
                "or as --scores/--passages/--fingerprint, not both"
            )
    elif bool(args.scores) == bool(args.passages):
        raise UsageError(
            "give exactly one of --scores STORE or --passages FILE (or --scorer-scores LABEL=SOURCE)"
        )
    if args.scores and not args.run:
        raise UsageError("--scores needs --run (the first-stage run that was re-ranked)")
    config = TuneConfig(
        qrels=args.qrels,
        aggregate=args.aggregate,
        normalise=args.normalise,
        scores=args.scores,
        fingerprint=args.fingerprint,
        passages=args.passages,
        run=args.run,
        depth=args.depth,
        folds=args.folds,
        tune_on=tuple(args.tune_on),
        k_folds=args.k_folds,
        seed=args.seed,
        metric=args.metric,
        relevance_level=args.relevance_level,
        grid=tuple(args.grid) if args.grid else None,
        measures=tuple(args.measures),
        tag=args.tag,
        evidence=tuple(args.scorer_scores) if args.scorer_scores else None,
    )
    outcome = run_tune(config, Path(args.output), overwrite=args.overwrite)
    sys.stdout.write(outcome.summary_markdown())
    return 0
