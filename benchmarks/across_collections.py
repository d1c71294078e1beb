"""Does a model lose on collections it was not trained on? Paired t-tests per collection and pooled.

Each ``--pair NAME QRELS BASELINE_RUN RUN`` is one collection: the baseline's run (say, the
zero-shot bi-encoder's) and the run to check (the same pipeline with a fine-tuned model), both
evaluated on the collection's qrels. The table gives each collection's means and the p of a paired
two-sided t-test over its queries (and Bonferroni over the collections), then one row pooling every
query of every collection (a paired t-test over all of them): a few dozen queries per collection
cannot show a small loss, the pool can.

Usage:
    PYTHONPATH=src python benchmarks/across_collections.py --measure nDCG@10 \\
        --pair dl19 QRELS zero-shot.txt trained.txt --pair mb2011 QRELS zero-shot.txt trained.txt
"""

from __future__ import annotations

import argparse

import pandas as pd
from _common import footer, header

from evirank import markdown
from evirank.evaluate.measures import per_query
from evirank.evaluate.significance import adjust, paired_ttest
from evirank.frames import QID
from evirank.io import read_qrels, read_run


def per_query_pair(name: str, qrels: str, baseline: str, run: str, measure: str) -> pd.DataFrame:
    """Per-query values of both runs, [run, qid, measure, value], query ids prefixed by the collection."""
    judged = read_qrels(qrels)
    tables = []
    for label, path in (("baseline", baseline), ("run", run)):
        table = per_query(read_run(path), judged, [measure])
        tables.append(table.assign(run=label, **{QID: name + ":" + table[QID].astype(str)}))
    return pd.concat(tables, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pair", nargs=4, action="append", required=True, metavar=("NAME", "QRELS", "BASELINE", "RUN")
    )
    parser.add_argument("--measure", default="nDCG@10")
    parser.add_argument("--label", default="run", help="the checked run's name in the table")
    args = parser.parse_args()

    frames = {name: per_query_pair(name, *rest, args.measure) for name, *rest in args.pair}
    tests = {
        name: paired_ttest(frame, "baseline", correction="none").iloc[0] for name, frame in frames.items()
    }
    pooled = paired_ttest(pd.concat(frames.values(), ignore_index=True), "baseline", correction="none").iloc[
        0
    ]
    corrected = dict(zip(tests, adjust([t["p"] for t in tests.values()], "bonferroni"), strict=True))
    print(header(f"{args.measure}: {args.label} against the baseline, per collection and pooled"))
    columns = [
        "collection",
        "queries",
        "baseline",
        args.label,
        "difference",
        "p (paired t-test)",
        "p, Bonferroni",
    ]
    rows = [
        [
            name,
            t["n"],
            f"{t['baseline_mean']:.4f}",
            f"{t['mean']:.4f}",
            f"{t['delta']:+.4f}",
            f"{t['p']:.3f}",
            f"{corrected[name]:.3f}",
        ]
        for name, t in tests.items()
    ]
    rows.append(
        ["all queries, pooled", pooled["n"], "", "", f"{pooled['delta']:+.4f}", f"{pooled['p']:.3f}", ""]
    )
    print(markdown.table(columns, rows))
    print(footer())


if __name__ == "__main__":
    main()
