"""How long cross-validated tuning takes: Birch's full 3S grid (1,331 settings) x 5 folds.

Also with two scorers' evidence (docs/evidence.md): Birch 3S x the second scorer's weight,
14,641 settings, on the synthetic scores and a noisy copy of them as the second scorer.

On SciFact-sized synthetic scores (300 queries x 100 documents x about 9 sentences) and, when
they exist, on real cached SciFact scores (a score store filled by ``evirank rerank --scores``
with its BM25 run, or a scored-passages file). For comparison, the same search done the plain
way (the aggregator stage and :class:`evirank.evaluate.Evaluator` per setting) is timed on a few
settings and extrapolated to the grid.

Usage:
    python benchmarks/tune_speed.py
    python benchmarks/tune_speed.py --store runs/conditions/scifact/scores.sqlite \\
        --run runs/conditions/scifact/bm25.txt --qrels ../shared/datasets/scifact/qrels/test.tsv
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import REPO, datasets, footer, header

from evirank import markdown
from evirank.aggregate import AggregateSpec
from evirank.evaluate import Evaluator
from evirank.frames import QID
from evirank.tune import cross_validate, k_folds, parse_grid
from evirank.tune.synthetic import synthetic_passages

BIRCH_GRID = "alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1"
DEFAULT_STORE = REPO / "runs" / "conditions" / "scifact" / "scores.sqlite"
DEFAULT_RUN = REPO / "runs" / "conditions" / "scifact" / "bm25.txt"


def time_search(
    name: str,
    passages: pd.DataFrame | dict[str, pd.DataFrame],
    qrels: pd.DataFrame,
    aggregate: str,
    grid: str,
    metric: str = "AP",
    plain_settings: int = 10,
) -> dict[str, object]:
    """Time one cross-validated search, and the plain way on a few settings.

    ``passages`` as ``{label: frame}`` tunes several scorers' evidence (their labels in order).
    """
    frames = passages if isinstance(passages, dict) else {"one": passages}
    scorers = tuple(frames) if len(frames) > 1 else ()
    aggregator = AggregateSpec.parse(aggregate, scorers=scorers)
    parsed = parse_grid(grid)
    first = next(iter(frames.values()))
    qids = sorted(set(first[QID]) & set(qrels[QID]))
    folds = k_folds(qids, k=5, seed=1)
    start = time.perf_counter()
    result = cross_validate(passages, qrels, aggregator, parsed, folds, metric=metric)
    total = time.perf_counter() - start

    evaluator = Evaluator(qrels, [metric])
    settings = result.grid.settings[:plain_settings]
    clock = time.perf_counter()
    for row in settings:
        run = aggregator.stage(dict(zip(result.grid.names, row, strict=True)))(passages)
        evaluator.per_query(run)
    plain = (time.perf_counter() - clock) / len(settings) * len(result.grid)
    return {
        "data": name,
        "aggregate": aggregate,
        "settings": len(result.grid),
        "folds": len(result.folds),
        "queries": len(result.qids),
        "scorers": len(frames),
        "documents": len(result.run),
        "passages": sum(len(f) for f in frames.values()),
        "table s": result.timings["table"],
        "grid s": result.timings["grid"],
        "total s": total,
        "plain way s (extrapolated)": plain,
        "metric": result.metric,
        "CV mean": result.cv_mean,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=DEFAULT_STORE, help="a score store of SciFact scores")
    parser.add_argument("--fingerprint", help="the scorer's fingerprint in the store")
    parser.add_argument("--passages", type=Path, help="a scored-passages file instead of a store")
    parser.add_argument("--run", type=Path, default=DEFAULT_RUN, help="the BM25 run that was re-ranked")
    parser.add_argument(
        "--qrels", type=Path, default=None, help="SciFact test qrels (default: in the datasets folder)"
    )
    parser.add_argument("--depth", type=int, default=100)
    args = parser.parse_args()
    if args.qrels is None:
        folder = datasets(required=False)
        args.qrels = (folder or Path("no-datasets-folder")) / "scifact" / "qrels" / "test.tsv"

    print(header("Cross-validated tuning: grid x 5 folds", packages=("numpy", "pandas")))
    rows = []
    passages, qrels = synthetic_passages(n_queries=300, depth=100, sentences=9.0, seed=0)
    rows.append(time_search("synthetic 300x100x9", passages, qrels, "birch:3", BIRCH_GRID))
    rows.append(time_search("synthetic 300x100x9", passages, qrels, "birch:2", "alpha=0:1:0.1 w2=0:1:0.1"))
    rows.append(time_search("synthetic 300x100x9", passages, qrels, "maxp", "alpha=0:1:0.1"))
    noisy = passages.assign(score=passages["score"] + np.random.default_rng(1).normal(0, 0.5, len(passages)))
    two = {"cross": passages, "bi": noisy}
    rows.append(time_search("synthetic 300x100x9", two, qrels, "birch:3", f"{BIRCH_GRID} bi=0:1:0.1"))
    rows.append(time_search("synthetic 300x100x9", two, qrels, "maxp", "alpha=0:1:0.1 bi=0:1:0.1"))

    real = _real_passages(args)
    if real is not None:
        real_passages, real_qrels, label = real
        rows.append(time_search(label, real_passages, real_qrels, "birch:3", BIRCH_GRID))
        rows.append(time_search(label, real_passages, real_qrels, "maxp", "alpha=0:1:0.1", metric="nDCG@10"))
    else:
        print(f"(no cached SciFact scores at {args.store} with {args.run}; synthetic data only)\n")

    columns = list(rows[0])
    print(markdown.table(columns, [[_cell(c, row[c]) for c in columns] for row in rows]))
    print(footer())


def _cell(column: str, value: object) -> str:
    """Floats to 2 decimals (4 for the CV mean), integers with thousands separators."""
    if isinstance(value, float):
        return f"{value:.4f}" if column == "CV mean" else f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _real_passages(args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame, str] | None:
    from evirank.io import read_qrels, read_run
    from evirank.tune.inputs import attach_first_stage, passages_from_store, read_passages

    if not args.qrels.is_file() or not args.run.is_file():
        return None
    qrels = read_qrels(args.qrels)
    run = read_run(args.run)
    if args.passages is not None:
        return attach_first_stage(read_passages(args.passages), run, args.depth), qrels, "SciFact (file)"
    if not args.store.is_file():
        return None
    clock = time.perf_counter()
    passages, fingerprint = passages_from_store(
        args.store, run, fingerprint=args.fingerprint, depth=args.depth
    )
    print(f"read {len(passages):,} scored passages from {args.store} in {time.perf_counter() - clock:.1f} s")
    return passages, qrels, f"SciFact store {fingerprint[:8]}"


if __name__ == "__main__":
    main()
