"""Benchmark of evirank.evaluate: milliseconds per evaluated run, the cost a grid search pays per setting.

Builds synthetic qrels and runs (default: 300 queries x 100 documents, SciFact's test set at
Birch's re-ranking depth), then times :class:`evirank.evaluate.Evaluator` (qrels converted once)
on many runs, with real-valued scores (few ties) and with coarse scores (many ties), and the
paired t-tests of a comparison. Prints a Markdown table.

Usage:
    PYTHONPATH=src python benchmarks/evaluate_speed.py [--queries 300] [--depth 100] [--runs 50]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _common import footer, header

from evirank import markdown
from evirank.evaluate import Evaluator, paired_ttest
from evirank.frames import DOCNO, LABEL, QID, RUN, SCORE, make_qrels


def make_data(queries: int, depth: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, np.random.Generator]:
    rng = np.random.default_rng(seed)
    qids = np.repeat([str(q) for q in range(1, queries + 1)], depth)
    docnos = np.array([f"d{q}_{i}" for q in range(1, queries + 1) for i in range(depth)])
    judged = rng.random(len(docnos)) < 0.2
    qrels = make_qrels(
        pd.DataFrame({QID: qids[judged], DOCNO: docnos[judged], LABEL: rng.integers(0, 3, judged.sum())})
    )
    base = pd.DataFrame({QID: qids, DOCNO: docnos, SCORE: rng.random(len(qids))})
    return qrels, base, rng


def time_runs(evaluator: Evaluator, runs: list[pd.DataFrame]) -> tuple[float, list[pd.DataFrame]]:
    evaluator.per_query(runs[0])  # warm up
    start = time.perf_counter()
    tables = [evaluator.per_query(run) for run in runs]
    return (time.perf_counter() - start) / len(runs) * 1000, tables


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    measures = ["AP", "P@20", "nDCG@20"]
    print(
        header(
            "Evaluation speed (evirank.evaluate)",
            f"{args.queries} queries x {args.depth} documents per run, measures {', '.join(measures)}; "
            f"{args.runs} runs",
            packages=("ir_measures", "numpy", "pandas"),
        )
    )
    qrels, base, rng = make_data(args.queries, args.depth, args.seed)
    evaluator = Evaluator(qrels, measures)
    rows = []
    real = [base.assign(**{SCORE: rng.random(len(base))}) for _ in range(args.runs)]
    ms, tables = time_runs(evaluator, real)
    rows.append(("per_query, real-valued scores (few ties)", ms))
    coarse = [base.assign(**{SCORE: rng.integers(0, 5, len(base)).astype(float)}) for _ in range(args.runs)]
    ms_coarse, _ = time_runs(evaluator, coarse)
    rows.append(("per_query, scores in 5 levels (many ties)", ms_coarse))
    with_names = [t.assign(**{RUN: f"r{i}"}) for i, t in enumerate(tables[:10])]
    start = time.perf_counter()
    paired_ttest(pd.concat(with_names, ignore_index=True), "r0")
    rows.append(("paired_ttest, 9 runs x 3 measures", (time.perf_counter() - start) * 1000))

    print(markdown.table(["step", "ms"], [(name, f"{value:.1f}") for name, value in rows]))
    print(f"\nA grid of 1,000 settings evaluated on all queries: about {rows[0][1]:.0f} s of evaluation.")
    print(footer())


if __name__ == "__main__":
    main()
