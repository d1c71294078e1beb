"""Evidence accuracy on SciFact: is a relevant document's best-scored sentence a gold evidence sentence?

For every relevant (query, document) pair of ``scifact/evidence/<split>.jsonl`` whose document
was re-ranked (its scored sentences are in the score store or the passages file that
``evirank rerank`` wrote), the benchmark takes the document's sentence with the highest model
score and checks it against the pair's gold evidence sentences, from the cached scores only
(no model runs). Baselines on the same pairs and the same segments: the first sentence, the
last sentence, and a random sentence (its exact expectation: the share of gold sentences).
"top-3" counts a pair when any of the three best-scored sentences is gold (what Birch's
top-3 aggregation reads), against a random choice of three (exact expectation).

Matching: texts are whitespace-normalised; with ``sentences:prepend`` segments the document's
title is removed from the front first. A segment is gold when it is a substring of a gold
sentence of at least 3 words (a chunk of a long one) or contains one (the splitter merged it with
a neighbour). A title-only segment (``sentences`` mode, pid 0) is never a candidate.

Usage:
    PYTHONPATH=src python benchmarks/evidence_accuracy.py --scores runs/scifact.scores.sqlite \\
        [--passages runs/scifact.test.bi.maxp.passages.parquet] [--data DATASETS] [--split test]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from _common import datasets, header

from evirank import markdown
from evirank.frames import DOCNO, PID, QID, SCORE, TEXT
from evirank.io import load_texts


def norm(text: str) -> str:
    return " ".join(str(text).split())


def load_evidence(path: Path) -> dict[tuple[str, str], list[str]]:
    pairs: dict[tuple[str, str], list[str]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                key = (str(row["query-id"]), str(row["corpus-id"]))
                pairs.setdefault(key, []).extend(norm(s) for s in row["evidence"])
    return pairs


def load_passages(args: argparse.Namespace, qids: list[str]) -> pd.DataFrame:
    if args.passages:
        frame = pd.read_parquet(args.passages)
        frame[QID] = frame[QID].astype(str)
        frame[DOCNO] = frame[DOCNO].astype(str)
        return frame[frame[QID].isin(qids)]
    from evirank.score import ScoreStore

    with ScoreStore(args.scores, readonly=True) as store:
        frame = store.passages_scores(args.fingerprint, qids=qids)
    found = frame["fingerprint"].unique()
    if len(found) > 1:
        raise SystemExit(f"{args.scores} holds {len(found)} scorers for these queries; give --fingerprint")
    return frame


def is_gold(body: str, gold: list[str]) -> bool:
    """Part of a gold sentence (3 words at least: a chunk of a long one) or containing one."""
    part = len(body.split()) >= 3
    return bool(body) and any((part and body in g) or g in body for g in gold)


def evaluate(
    passages: pd.DataFrame, evidence: dict[tuple[str, str], list[str]], titles: dict[str, str]
) -> dict[str, float]:
    rows: dict[str, list[float]] = {
        "model": [],
        "model_top3": [],
        "first": [],
        "last": [],
        "random": [],
        "random_top3": [],
    }
    covered = 0
    groups = passages.sort_values([QID, DOCNO, PID]).groupby([QID, DOCNO], sort=False)
    for (qid, docno), doc in groups:
        gold = evidence.get((str(qid), str(docno)))
        if not gold:
            continue
        title = norm(titles.get(str(docno), ""))
        bodies, scores = [], []
        for text, score in zip(doc[TEXT], doc[SCORE], strict=True):
            body = norm(text)
            if title and body == title:
                continue  # the title as its own segment is no sentence
            if title and body.startswith(title + " "):
                body = body[len(title) + 1 :]
            bodies.append(body)
            scores.append(float(score))
        if not bodies or any(math.isnan(s) for s in scores):
            continue
        covered += 1
        hits = np.array([is_gold(b, gold) for b in bodies])
        order = np.argsort(-np.asarray(scores), kind="stable")  # ties: document order
        rows["model"].append(float(hits[order[0]]))
        rows["model_top3"].append(float(hits[order[:3]].any()))
        rows["first"].append(float(hits[0]))
        rows["last"].append(float(hits[-1]))
        rows["random"].append(float(hits.mean()))
        n, g = len(hits), int(hits.sum())
        k = min(3, n)
        rows["random_top3"].append(1.0 - math.comb(n - g, k) / math.comb(n, k))
    means = {name: float(np.mean(v)) if v else float("nan") for name, v in rows.items()}
    return {"covered": covered, **means}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the datasets folder (default: $EVIRANK_DATASETS, $DATA, ../shared/datasets)",
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--scores", help="the score store evirank rerank wrote")
    parser.add_argument("--passages", help="or the passages file (--save-passages)")
    parser.add_argument("--fingerprint", help="the scorer, when the store holds several")
    args = parser.parse_args()
    if bool(args.scores) == bool(args.passages):
        parser.error("give one of --scores or --passages")
    args.data = args.data or datasets()
    evidence = load_evidence(args.data / "scifact" / "evidence" / f"{args.split}.jsonl")
    qids = sorted({q for q, _ in evidence})
    passages = load_passages(args, qids)
    docs = load_texts(args.data / "scifact", {d for _, d in evidence})
    titles = {docno: doc.title for docno, doc in docs.items()}
    result = evaluate(passages, evidence, titles)
    print(
        header(
            f"Evidence accuracy, SciFact {args.split}",
            f"{len(evidence)} relevant (query, document) pairs with gold evidence sentences; "
            f"{result['covered']} of them re-ranked (their document among the scored candidates), "
            "and the table is over those",
            f"scores: {args.scores or args.passages}",
        )
    )
    rows = [
        ["model's best-scored", f"{result['model']:.3f}", f"{result['model_top3']:.3f}"],
        ["first sentence", f"{result['first']:.3f}", None],
        ["last sentence", f"{result['last']:.3f}", None],
        ["random (expected)", f"{result['random']:.3f}", f"{result['random_top3']:.3f}"],
    ]
    print(markdown.table(["choice of sentence", "gold evidence (best 1)", "gold among 3"], rows))


if __name__ == "__main__":
    main()
