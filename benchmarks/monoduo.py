"""mono -> duo: quality against cost of pairwise re-ranking over a mono ranking, as a table and a plot.

Reads runs written by ``evirank rerank`` (each with its ``OUT.json``): a mono run, and runs of the
same command with ``--duo K1`` for several K1. The mono run may be a first-stage run without a
record (BM25 itself): it counts no model calls. For each it prints the duo aggregation, the model calls
per query (the mono stage's passages k0, plus K1(K1-1) pair inferences; the exact counts from the
record, since the store can serve some), the seconds the duo stage took as recorded (and per query),
nDCG@10 and AP, and a paired two-sided t-test of each duo run against its mono run. Several
``--series`` (mono rankings) go in one table and one plot: nDCG@10 against model calls per query.

Nogueira et al. (2019) count the cost of mono -> duo as k0 + k1(k1 - 1) inferences; the seconds
depend on the machine's load (the header and footer give it), the calls do not.

Example:
    $ python benchmarks/monoduo.py --qrels ../shared/datasets/scifact/qrels/test.tsv \\
        --series "cross MaxP" runs/cross-maxp.txt runs/duo5.txt runs/duo10.txt \\
        --series BM25 runs/bm25-mono.txt runs/bm25-duo5.txt --plot docs/img/monoduo.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from _common import footer, header

from evirank import markdown

MEASURES = ("nDCG@10", "AP")


def record(run: Path, required: bool = True) -> dict[str, Any]:
    """The ``OUT.json`` beside a run (``{}`` for a mono run without one, e.g. a first-stage run
    written elsewhere: no model calls counted)."""
    path = run.with_name(run.name + ".json")
    if not path.is_file():
        if not required:
            return {}
        raise SystemExit(f"{run}: no record {path} (runs of evirank rerank have one)")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def rows_of(name: str, runs: list[Path], qrels: pd.DataFrame) -> list[dict[str, Any]]:
    """The table rows of one series: its mono run first, then its duo runs by K1."""
    from evirank.evaluate import compare
    from evirank.io import read_run

    mono = runs[0]
    loaded = {str(path): read_run(path) for path in runs}
    result = compare(loaded, qrels, list(MEASURES), baseline=str(mono), correction="none")
    means, significance = result.means, result.significance
    assert significance is not None
    rows = []
    for path in runs:
        rec = record(path, required=path != mono)
        counts = rec.get("counts", {})
        queries = max(1, int(counts.get("queries", 1)))
        # passages scored from stored vectors are lookups, not model calls
        mono_calls = 0.0 if rec.get("vectors") else int(counts.get("passages", 0)) / queries
        duo = rec.get("duo") or {}
        k1 = duo.get("k")
        row: dict[str, Any] = {
            "series": name,
            "K1": k1 if k1 is not None else "mono",
            "aggregate": duo.get("aggregate", ""),
            "calls/query": mono_calls + (k1 * (k1 - 1) if k1 else 0),
            "duo computed/query": int(counts.get("duo_computed", 0)) / queries if k1 else 0.0,
            "duo s": float(rec.get("timings_s", {}).get("duo", 0.0)) if k1 else 0.0,
        }
        row["duo ms/query"] = 1000 * row["duo s"] / queries
        for measure in MEASURES:
            row[measure] = float(means.loc[str(path), measure])
            if path != mono:
                hit = significance[(significance["run"] == str(path)) & (significance["measure"] == measure)]
                row[f"p {measure}"] = float(hit["p"].iloc[0]) if len(hit) else float("nan")
        rows.append(row)
    return rows


def plot(table: pd.DataFrame, path: Path) -> None:
    """nDCG@10 against model calls per query, one line per series."""
    from evirank.report.plots import _png, _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for name, group in table.groupby("series", sort=False):
        ax.plot(group["calls/query"], group["nDCG@10"], marker="o", label=name)
        for k1, x, y in zip(group["K1"], group["calls/query"], group["nDCG@10"], strict=True):
            ax.annotate(f"k1={k1}" if k1 != "mono" else "mono", (x, y), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)  # fmt: skip
    ax.set_xlabel("model calls per query (k0 + k1(k1 - 1))")
    ax.set_ylabel("nDCG@10")
    ax.grid(alpha=0.3)
    ax.legend()
    path.write_bytes(_png(fig, plt))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--qrels", required=True)
    parser.add_argument(
        "--series", nargs="+", action="append", required=True, metavar="NAME_MONO_DUO",
        help="a name, the mono run, then its duo runs",
    )  # fmt: skip
    parser.add_argument("--plot", type=Path, default=None, help="write the plot here (PNG)")
    parser.add_argument("--title", default="mono -> duo: quality against model calls")
    args = parser.parse_args(argv)
    from evirank.io import read_qrels

    qrels = read_qrels(args.qrels)
    rows = []
    for name, *runs in args.series:
        if len(runs) < 2:
            raise SystemExit(f"--series {name}: give the mono run and at least one duo run")
        rows += rows_of(name, [Path(r) for r in runs], qrels)
    table = pd.DataFrame(rows)
    print(
        header(args.title, f"qrels: {args.qrels}", "p: paired two-sided t-test against the series' mono run")
    )
    shown = table.astype(object).where(table.notna(), "")
    cells = [
        [f"{v:.4f}" if isinstance(v, float) and c.startswith(("nDCG", "AP", "p ")) else
         f"{v:.1f}" if isinstance(v, float) else v for c, v in zip(shown.columns, row_, strict=True)]
        for row_ in shown.itertuples(index=False)
    ]  # fmt: skip
    print(markdown.table(list(shown.columns), cells))
    print(footer())
    if args.plot is not None:
        plot(table, args.plot)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
