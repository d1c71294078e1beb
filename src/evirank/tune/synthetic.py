"""Synthetic scored passages and qrels, for benchmarks and tests of the tuner.

Each query has ``depth`` candidate documents with ``sentences`` passages on average (at least
one). A few documents per query are relevant; relevant documents have a higher first-stage
score and a few passages with higher scores than the rest, both with noise, so that
interpolating the two signals helps, as it does on real data.

Example:
    >>> passages, qrels = synthetic_passages(n_queries=3, depth=4, sentences=2, seed=0)
    >>> sorted(passages.columns)
    ['docno', 'first_stage_rank', 'first_stage_score', 'pid', 'qid', 'query', 'score', 'text']
    >>> passages.groupby("qid")["docno"].nunique().tolist()
    [4, 4, 4]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    LABEL,
    PID,
    QID,
    QUERY,
    SCORE,
    TEXT,
    make_qrels,
)


def synthetic_passages(
    n_queries: int = 300,
    depth: int = 100,
    sentences: float = 9.0,
    *,
    relevant: float = 1.5,
    seed: int = 0,
    text: bool = True,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scored Passages [qid, query, docno, pid, text, score, first_stage_score, first_stage_rank] and Qrels.

    Args:
        n_queries: number of queries (qids ``1`` .. ``n``).
        depth: candidate documents per query.
        sentences: mean passages per document (Poisson, at least 1).
        relevant: mean relevant documents per query among the candidates (at least 1).
        seed: random seed.
        text: fill the text column with placeholder sentences, unique per passage (else empty strings).
    """
    rng = np.random.default_rng(seed)
    qids = np.repeat(np.arange(1, n_queries + 1), depth)
    docs = rng.integers(0, max(n_queries * depth // 2, 1), size=n_queries * depth)
    docnos = np.array([f"D{d:07d}.{i % depth:03d}" for i, d in enumerate(docs)])
    rel_count = np.maximum(1, rng.poisson(relevant, size=n_queries))
    is_rel = np.zeros(n_queries * depth, dtype=bool)
    for q in range(n_queries):
        picks = rng.choice(depth, size=min(int(rel_count[q]), depth), replace=False)
        is_rel[q * depth + picks] = True
    first_stage = 10.0 + 3.0 * is_rel + rng.normal(0, 2.5, size=len(is_rel))
    n_pass = np.maximum(1, rng.poisson(sentences, size=len(is_rel)))
    doc_of = np.repeat(np.arange(len(is_rel)), n_pass)
    pid = np.arange(len(doc_of)) - np.repeat(np.cumsum(n_pass) - n_pass, n_pass)
    evidence = np.zeros(len(doc_of))
    # In a relevant document, about a third of the passages carry the evidence.
    carries = is_rel[doc_of] & (rng.random(len(doc_of)) < 0.35)
    evidence[carries] = 2.0
    score = evidence + rng.normal(0, 1.0, size=len(doc_of))
    order = np.lexsort((-first_stage, qids))
    fs_rank = np.empty(len(order), dtype=np.int64)
    fs_rank[order] = np.tile(np.arange(1, depth + 1), n_queries)
    qid_str = qids.astype(str)
    passages = pd.DataFrame(
        {
            QID: qid_str[doc_of],
            QUERY: np.char.add("synthetic query ", qid_str[doc_of]),
            DOCNO: docnos[doc_of],
            PID: pid.astype(np.int64),
            TEXT: _texts(docnos[doc_of], pid) if text else np.full(len(doc_of), ""),
            SCORE: score,
            FIRST_STAGE_SCORE: first_stage[doc_of],
            FIRST_STAGE_RANK: fs_rank[doc_of],
        }
    )
    qrels = make_qrels(
        pd.DataFrame(
            {QID: qid_str[is_rel], DOCNO: docnos[is_rel], LABEL: np.ones(int(is_rel.sum()), dtype=np.int64)}
        )
    )
    return passages, qrels


def _texts(docnos: np.ndarray, pids: np.ndarray) -> np.ndarray:
    return np.char.add(np.char.add("sentence ", pids.astype(str)), np.char.add(" of ", docnos.astype(str)))
