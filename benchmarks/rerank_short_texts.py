"""Re-rank a short-text candidate run (e.g. a Microblog year) with trained cross-encoders.

Scores every candidate of the run with each model (``evirank.score.CrossEncoder``, scores
kept in a score store so that a rerun is instant) and ranks by (a) the model's score alone and
(b) Birch's interpolation with the first-stage score, ``alpha * model + (1 - alpha) * first
stage`` (each min-max normalised per query), with alpha chosen by k-fold cross-validation over
the queries (grid 0.0..1.0 by 0.1, best mean AP on the other folds; never on the test fold).
Compares AP, nDCG@10 and P@30 with the candidate run (paired t-tests against it, Bonferroni
over all comparisons). Prints a Markdown table, the chosen alphas and the scoring speed.

Usage:
    MB=../shared/datasets/microblog/2013
    PYTHONPATH=src python benchmarks/rerank_short_texts.py \\
        --topics $MB/topics.microblog2013.txt --qrels $MB/qrels.microblog2013.txt \\
        --run $MB/run.microblog2013.ql.txt --corpus $MB/corpus.jsonl \\
        --model mb=/work/models/minilm-mb [--model l3=/work/models/minilm-mb-l3] \\
        [--store /tmp/mb2013-scores.sqlite] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evirank.evaluate import Evaluator, compare, markdown_report, to_record
from evirank.frames import DOCNO, PID, QID, QUERY, RANK, SCORE, TEXT, VALUE, make_run
from evirank.io import read_qrels, read_run, read_topics
from evirank.score import CrossEncoder
from evirank.train.sources import load_texts


def _minmax(frame: pd.DataFrame) -> pd.Series:
    grouped = frame.groupby(QID)[SCORE]
    low, high = grouped.transform("min"), grouped.transform("max")
    return (frame[SCORE] - low) / (high - low).where(high > low, 1.0)


def interpolate_cv(
    model_run: pd.DataFrame, first_stage: pd.DataFrame, qrels: pd.DataFrame, folds: int, seed: int = 0
) -> tuple[pd.DataFrame, list[float]]:
    """Birch's interpolation with alpha chosen by k-fold cross-validation over the queries."""
    both = model_run[[QID, DOCNO, SCORE]].merge(first_stage, on=[QID, DOCNO], suffixes=("", "_fs"))
    model_norm = _minmax(both)
    first_norm = _minmax(both[[QID, SCORE + "_fs"]].rename(columns={SCORE + "_fs": SCORE}))
    grid = [round(a * 0.1, 1) for a in range(11)]
    evaluator = Evaluator(qrels, ["AP"])
    per_alpha = {}
    for alpha in grid:
        run = make_run(both[[QID, DOCNO]].assign(**{SCORE: alpha * model_norm + (1 - alpha) * first_norm}))
        table = evaluator.per_query(run)
        per_alpha[alpha] = table.set_index(QID)[VALUE]
    qids = sorted(both[QID].unique(), key=lambda q: (len(q), q))
    order = np.random.default_rng(seed).permutation(len(qids))
    fold_of = {qids[i]: k % folds for k, i in enumerate(order)}
    chosen, parts = [], []
    for fold in range(folds):
        train = [q for q in qids if fold_of[q] != fold]
        best = max(grid, key=lambda a: (per_alpha[a].reindex(train).fillna(0).mean(), -abs(a - 0.5)))
        chosen.append(best)
        test = both[both[QID].map(fold_of) == fold]
        parts.append(
            test[[QID, DOCNO]].assign(
                **{SCORE: best * model_norm[test.index] + (1 - best) * first_norm[test.index]}
            )
        )
    return make_run(pd.concat(parts, ignore_index=True)), chosen


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", required=True)
    parser.add_argument("--qrels", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--model", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--measures", default="AP,nDCG@10,P@30")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--depth", type=int, default=None, help="re-rank only the top this many candidates")
    parser.add_argument("--store", default=None, help="a score store (SQLite) to reuse scores")
    parser.add_argument("--json", default=None, help="also write the comparison as JSON")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--folds", type=int, default=5, help="cross-validation folds for alpha (0: no interpolation)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("evirank").setLevel(logging.INFO)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    topics = read_topics(args.topics)
    qrels = read_qrels(args.qrels)
    candidates = read_run(args.run)
    if args.depth:
        candidates = candidates[candidates[RANK] <= args.depth]
    texts = load_texts(args.corpus, candidates[DOCNO].unique())
    # Candidates without text (an empty tweet) stay in every run, ranked last by the models.
    textless = candidates[~candidates[DOCNO].isin(texts.keys())][[QID, DOCNO]].assign(**{SCORE: -1e9})
    passages = candidates[candidates[DOCNO].isin(texts.keys())][[QID, DOCNO]]
    passages = passages.merge(topics, on=QID).assign(**{PID: 0})
    passages[TEXT] = [texts[d].contents for d in passages[DOCNO]]
    passages = passages[[QID, QUERY, DOCNO, PID, TEXT]]
    runs = {"candidates": candidates}
    first_stage = candidates[[QID, DOCNO, SCORE]]
    alphas: dict[str, list[float]] = {}
    speed = {}
    for spec in args.model:
        name, _, path = spec.partition("=")
        scorer = CrossEncoder(path, max_length=args.max_length, device="cpu", store=args.store)
        start = time.perf_counter()
        scored = scorer(passages)
        elapsed = time.perf_counter() - start
        stats = scorer.stats_
        speed[name] = {
            "pairs": len(passages),
            "from_store": stats.cached,
            "scored": stats.computed,
            "model_s": round(stats.model_s, 1),
            "total_s": round(elapsed, 1),
            "pairs_per_s": round(stats.per_second, 1) if stats.computed else None,
        }
        runs[name] = make_run(pd.concat([scored[[QID, DOCNO, SCORE]], textless], ignore_index=True))
        if args.folds:
            runs[f"{name} + first stage (CV)"], alphas[name] = interpolate_cv(
                runs[name], first_stage, qrels, args.folds
            )
    measures = [m.strip() for m in args.measures.split(",")]
    comparison = compare(runs, qrels, measures, baseline="candidates")
    queries = passages[QID].nunique()
    print(f"## Re-ranking {Path(args.run).name}: {queries} queries, {len(passages)} candidates\n")
    print(markdown_report(comparison))
    for name, chosen in alphas.items():
        print(f"\n{name}: alpha per fold (model weight) {chosen}")
    print("\n| model | pairs | from store | scored | model s | pairs/s in the model |")
    print("|---|---|---|---|---|---|")
    for name, row in speed.items():
        cells = [row[k] for k in ("pairs", "from_store", "scored", "model_s", "pairs_per_s")]
        print(f"| {name} | " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    print(f"\n{platform.processor() or platform.machine()}, python {platform.python_version()}")
    if args.json:
        record = {
            "comparison": to_record(comparison, per_query=True),
            "speed": speed,
            "alphas": alphas,
            "args": vars(args),
        }
        Path(args.json).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main()
