"""Short texts (a Microblog year): trained cross-encoders and their distilled students, quality and speed.

For each model (``--model NAME=PATH``, the teacher first) this does what the README's commands do,
through the same library calls: every candidate of the run is scored whole (``Whole`` segments,
``CrossEncoder`` with a score store, so a rerun is instant) and ranked (a) by the model alone and
(b) by Birch's interpolation with the first-stage score, the weight chosen by k-fold
cross-validation on AP (``evirank.tune.cross_validate``, as ``evirank tune --aggregate maxp``).
Both are compared with the candidate run (paired t-tests, Bonferroni over all comparisons).

Then the speed of every model is measured on the same sample of (query, tweet) pairs, without a
store, with the torch and ONNX int8 backends, in alternating rounds (median pairs/s): the
quality-for-speed trade of distillation in one table.

Usage:
    MB=../shared/datasets/microblog/2013
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/rerank_short_texts.py \\
        --topics $MB/topics.microblog2013.txt --qrels $MB/qrels.microblog2013.txt \\
        --run $MB/run.microblog2013.ql.txt --corpus $MB/corpus.jsonl \\
        --model minilm-mb=models/minilm-mb --model l3=models/minilm-mb-l3 --model l2=models/minilm-mb-l2 \\
        --store runs/mb2013.scores.sqlite
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

import pandas as pd
from _common import footer, header

from evirank import markdown
from evirank.aggregate import MaxP
from evirank.config import Runtime
from evirank.evaluate import compare, markdown_report
from evirank.frames import QID, RANK
from evirank.io import read_qrels, read_run, read_topics
from evirank.rerank import FetchText, rerank
from evirank.score import CrossEncoder
from evirank.segment import Whole
from evirank.tune import cross_validate, parse_aggregate, parse_grid


def quality(args: argparse.Namespace, models: dict[str, str]) -> tuple[str, pd.DataFrame]:
    """The comparison table, and the scored passages of the first model (the speed sample's pool)."""
    topics = read_topics(args.topics)
    qrels = read_qrels(args.qrels)
    candidates = read_run(args.run)
    depth = args.depth or int(candidates[RANK].max())
    runs = {"candidates": candidates}
    lines, pool = [], None
    for name, path in models.items():
        scorer = CrossEncoder(path, Runtime(max_length=args.max_length, device="cpu", store=args.store))
        result = rerank(
            candidates,
            topics=topics,
            fetch=FetchText(corpus=args.corpus),
            segmenter=Whole(),
            scorer=scorer,
            aggregator=MaxP(),
            depth=depth,
        )
        runs[name] = result.run
        tuned = cross_validate(
            result.passages,
            qrels,
            parse_aggregate("maxp"),
            parse_grid("alpha=0:1:0.1"),
            metric="AP",
            k=args.folds,
            seed=args.seed,
        )
        runs[f"{name} + first stage (CV)"] = tuned.run
        chosen = [choice.params["alpha"] for choice in tuned.choices]
        lines.append(f"- {name}: first-stage weight per fold {chosen}")
        pool = result.passages if pool is None else pool
    table = markdown_report(compare(runs, qrels, args.measures, baseline="candidates"))
    queries = candidates[QID].nunique()
    head = f"### {os.path.basename(args.run)}: {queries} queries, {len(candidates):,} candidates\n"
    return "\n".join([head, table, "", *lines]), pool


def speed(args: argparse.Namespace, models: dict[str, str], pool: pd.DataFrame) -> str:
    """pairs/s of every model and backend on one sample, alternating rounds."""
    sample = pool.drop_duplicates(["query", "text"]).sample(
        n=min(args.pairs, len(pool)), random_state=args.seed
    )
    backends = list(args.backends)
    scorers = {}
    for name, path in models.items():
        for backend in backends:
            scorer = CrossEncoder(path, Runtime(max_length=args.max_length, device="cpu", backend=backend))
            scorer(sample.head(8))  # load (and export) before timing
            scorers[(name, backend)] = scorer
    print(
        header(
            "Speed of the trained models and their students",
            f"{len(sample):,} (query, tweet) pairs, {args.rounds} alternating rounds, median pairs/s",
            f"max length {args.max_length}, CPU",
            packages=("torch", "transformers", "onnxruntime"),
        ),
        flush=True,
    )
    rates: dict[tuple[str, str], list[float]] = {key: [] for key in scorers}
    for _ in range(args.rounds):
        for key, scorer in scorers.items():
            started = time.perf_counter()
            scorer(sample)
            rates[key].append(len(sample) / (time.perf_counter() - started))
    teacher = next(iter(models))
    rows = []
    for name in models:
        layers = scorers[(name, backends[0])].config_.num_hidden_layers
        cells: list[object] = [name, layers]
        for backend in backends:
            rate = statistics.median(rates[(name, backend)])
            base = statistics.median(rates[(teacher, backend)])
            cells += [f"{rate:,.0f}", f"{rate / base:.2f}"]
        rows.append(cells)
    columns = ["model", "layers", *[c for b in backends for c in (f"{b} pairs/s", f"x {teacher}")]]
    return markdown.table(columns, rows) + "\n" + footer()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", required=True)
    parser.add_argument("--qrels", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--model", action="append", required=True, metavar="NAME=PATH", help="teacher first")
    parser.add_argument("--measures", nargs="+", default=["AP", "P@30", "nDCG@10"], help="measures")
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--depth", type=int, default=None, help="re-rank the top this many (default: all)")
    parser.add_argument("--store", default=None, help="a score store (SQLite) to reuse scores")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds for the weight")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=2000, help="speed: sampled pairs (0: no speed table)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["torch", "onnx-int8"], help="scoring backends")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    models = dict(spec.split("=", 1) for spec in args.model)
    table, pool = quality(args, models)
    print(table, flush=True)
    if args.pairs:
        print(speed(args, models, pool), flush=True)


if __name__ == "__main__":
    main()
