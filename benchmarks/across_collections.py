"""Does a model lose on collections it was not trained on? Paired t-tests per collection and pooled.

Each ``--pair NAME QRELS BASELINE_RUN RUN`` is one collection: the baseline's run (say, the
zero-shot bi-encoder's) and the run to check (the same pipeline with a fine-tuned model), both
evaluated on the collection's qrels. The table gives each collection's means and the p of a paired
two-sided t-test over its queries, then one row pooling every query of every collection (a paired
t-test over all of them): a few dozen queries per collection cannot show a small loss, the pool can.

Usage:
    PYTHONPATH=src python benchmarks/across_collections.py --measure nDCG@10 \\
        --pair dl19 QRELS zero-shot.txt trained.txt --pair mb2011 QRELS zero-shot.txt trained.txt
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
from _common import footer, header

from evirank import markdown
from evirank.evaluate.measures import per_query
from evirank.io import read_qrels, read_run


def paired(qrels: str, baseline: str, run: str, measure: str) -> pd.DataFrame:
    """Per-query values of both runs over the queries both were evaluated on: [qid, baseline, run]."""
    judged = read_qrels(qrels)
    values = []
    for path in (baseline, run):
        table = per_query(read_run(path), judged, [measure])
        values.append(table.set_index("qid")["value"])
    both = pd.concat(values, axis=1, join="inner", keys=["baseline", "run"])
    return both.reset_index()


def ttest_p(deltas: np.ndarray) -> float:
    """Two-sided p of a paired t-test from the per-query differences (1.0 when they are all equal)."""
    from scipy import stats

    if len(deltas) < 2 or np.allclose(deltas, deltas[0]):
        return 1.0
    return float(stats.ttest_1samp(deltas, 0.0).pvalue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pair", nargs=4, action="append", required=True, metavar=("NAME", "QRELS", "BASELINE", "RUN")
    )
    parser.add_argument("--measure", default="nDCG@10")
    parser.add_argument("--label", default="run", help="the checked run's name in the table")
    args = parser.parse_args()

    rows, pooled = [], []
    for name, qrels, baseline, run in args.pair:
        both = paired(qrels, baseline, run, args.measure)
        deltas = (both["run"] - both["baseline"]).to_numpy()
        pooled.append(deltas)
        rows.append(
            [name, len(both), both["baseline"].mean(), both["run"].mean(), deltas.mean(), ttest_p(deltas)]
        )
    deltas = np.concatenate(pooled)
    rows.append(["all queries, pooled", len(deltas), None, None, deltas.mean(), ttest_p(deltas)])
    print(header(f"{args.measure}: {args.label} against the baseline, per collection and pooled"))
    columns = ["collection", "queries", "baseline", args.label, "difference", "p (paired t-test)"]
    table = [
        [
            name,
            str(n),
            "" if b is None else f"{b:.4f}",
            "" if r is None else f"{r:.4f}",
            f"{d:+.4f}",
            f"{p:.3f}",
        ]
        for name, n, b, r, d, p in rows
    ]
    print(markdown.table(columns, table))
    print(footer())


if __name__ == "__main__":
    main()
