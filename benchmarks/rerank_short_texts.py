"""Re-rank a short-text candidate run (e.g. a Microblog year) with trained cross-encoders.

Scores every candidate of the run with each model (``evirank.score.CrossEncoder``, scores
kept in a score store so that a rerun is instant), ranks by the model's score alone, and
compares AP, nDCG@10 and P@30 with the candidate run (paired t-tests against it, Bonferroni
over the models). Prints a Markdown table and the scoring speed.

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

import pandas as pd

from evirank.evaluate import compare, markdown_report, to_record
from evirank.frames import DOCNO, PID, QID, QUERY, RANK, SCORE, TEXT, make_run
from evirank.io import read_qrels, read_run, read_topics
from evirank.score import CrossEncoder
from evirank.train.sources import load_texts


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
    speed = {}
    for spec in args.model:
        name, _, path = spec.partition("=")
        scorer = CrossEncoder(path, max_length=args.max_length, device="cpu", store=args.store)
        start = time.perf_counter()
        scored = scorer(passages)
        elapsed = time.perf_counter() - start
        speed[name] = {
            "pairs": len(passages),
            "seconds": round(elapsed, 1),
            "pairs_per_s": round(len(passages) / elapsed, 1),
        }
        runs[name] = make_run(pd.concat([scored[[QID, DOCNO, SCORE]], textless], ignore_index=True))
    measures = [m.strip() for m in args.measures.split(",")]
    comparison = compare(runs, qrels, measures, baseline="candidates")
    queries = passages[QID].nunique()
    print(f"## Re-ranking {Path(args.run).name}: {queries} queries, {len(passages)} candidates\n")
    print(markdown_report(comparison))
    print("\n| model | pairs | seconds | pairs/s |\n|---|---|---|---|")
    for name, row in speed.items():
        print(f"| {name} | {row['pairs']} | {row['seconds']} | {row['pairs_per_s']} |")
    print(f"\n{platform.processor() or platform.machine()}, python {platform.python_version()}")
    if args.json:
        record = {"comparison": to_record(comparison, per_query=True), "speed": speed, "args": vars(args)}
        Path(args.json).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main()
