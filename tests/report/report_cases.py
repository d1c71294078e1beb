"""A small collection where the evidence passages hold the query's words (imported by report tests).

Query q is ``"topic<q> word<q> ..."`` with 1 to 4 non-stopword words. Each document has four
passages; in a relevant document one passage repeats a query word and scores high. The
first-stage score is weakly informative. Dropping passages with query terms (the pruned
analysis) therefore removes the evidence.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from evirank.frames import make_qrels, make_run
from evirank.io import write_qrels, write_run

WORDS = ["topic", "word", "thing", "matter"]


def collection(
    n_queries: int = 24, depth: int = 10, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """Scored passages [qid, query, docno, pid, text, score], qrels, and qid -> query."""
    rng = np.random.default_rng(seed)
    rows, judged, queries = [], [], {}
    for q in range(1, n_queries + 1):
        qid = str(q)
        length = 1 + (q % 4)
        query = "the " + " ".join(f"{w}{q}" for w in WORDS[:length])
        queries[qid] = query
        relevant = set(rng.choice(depth, size=2, replace=False).tolist())
        for d in range(depth):
            docno = f"q{q}d{d}"
            is_rel = d in relevant
            if is_rel:
                judged.append((qid, docno, 1))
            for pid in range(4):
                evidence = is_rel and pid == 1
                text = (
                    f"this passage mentions {WORDS[0]}{q} plainly"
                    if evidence
                    else f"filler text number {pid}"
                )
                score = (3.0 if evidence else 0.0) + rng.normal(0, 0.5)
                rows.append((qid, query, docno, pid, text, score))
    passages = pd.DataFrame(rows, columns=["qid", "query", "docno", "pid", "text", "score"])
    return passages, make_qrels(judged), queries


def write_inputs(folder: Path, seed: int = 0) -> dict[str, Path]:
    """Passages (Parquet), a first-stage run, qrels and topics (TSV) under ``folder``."""
    passages, qrels, queries = collection(seed=seed)
    rng = np.random.default_rng(seed + 1)
    docs = passages.drop_duplicates(["qid", "docno"])[["qid", "docno"]].copy()
    judged = set(zip(qrels["qid"], qrels["docno"], strict=True))
    docs["score"] = [10.0 + (1.0 if (q, d) in judged else 0.0) + rng.normal(0, 1.5) for q, d in docs.values]
    paths = {
        name: folder / file
        for name, file in (
            ("passages", "passages.parquet"),
            ("run", "bm25.txt"),
            ("qrels", "qrels.txt"),
            ("topics", "topics.tsv"),
        )
    }
    passages.to_parquet(paths["passages"])
    write_run(make_run(docs), paths["run"])
    write_qrels(qrels, paths["qrels"])
    paths["topics"].write_text("".join(f"{q}\t{text}\n" for q, text in queries.items()))
    return paths
