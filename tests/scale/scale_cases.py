"""Random texts and Passages frames for the scale-out tests (imported by tests and conftest.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "dog",
    "is",
    "not",
    "a",
    "bm25",
    "ranks",
    "documents",
    "passage",
    "evidence",
    "query",
    "relevant",
    "vaccine",
    "trains",
    "cells",
    "virus",
    "cell",
    "search",
    "and",
    "retrieval",
    "rank",
    "by",
    "score",
    "this",
    "model",
    "of",
    "ranking",
    "sentence",
]


def random_text(rng: np.random.Generator, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS, int(rng.integers(low, high))))


def random_passages(n_queries: int, n_docs: int, per_doc: int, seed: int = 0) -> pd.DataFrame:
    """A Passages frame [qid, query, docno, pid, text] of random texts of varied lengths."""
    rng = np.random.default_rng(seed)
    texts = {f"d{d}": [random_text(rng, 3, 40) for _ in range(per_doc)] for d in range(n_docs)}
    rows = [
        (str(q), f"query {q} " + random_text(rng, 1, 5), docno, pid, text)
        for q in range(n_queries)
        for docno, passages in texts.items()
        for pid, text in enumerate(passages)
    ]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "pid", "text"])
