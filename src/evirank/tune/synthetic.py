"""Synthetic scored passages and qrels, for benchmarks, tests and reproducible conditions.

- :func:`synthetic_passages`: SciFact-sized random data where both signals carry relevance.
- :func:`planted_case`: a tiny case whose best Birch parameters are known by construction.
- ``python -m evirank.tune.synthetic {random,planted} --output DIR`` writes either as files
  (passages.parquet, run.txt, qrels.txt, and folds.tsv for the planted case).

In :func:`synthetic_passages` each query has ``depth`` candidate documents with ``sentences``
passages on average (at least one). A few documents per query are relevant; relevant documents
have a higher first-stage score and a few passages with higher scores than the rest, both with
noise, so that interpolating the two signals helps, as it does on real data.

Example:
    >>> passages, qrels = synthetic_passages(n_queries=3, depth=4, sentences=2, seed=0)
    >>> sorted(passages.columns)
    ['docno', 'first_stage_rank', 'first_stage_score', 'pid', 'qid', 'query', 'score', 'text']
    >>> passages.groupby("qid")["docno"].nunique().tolist()
    [4, 4, 4]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    make_run,
)
from evirank.tune.folds import Fold, Folds


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


#: Birch's parameters planted in :func:`planted_case` (w1 = 1).
PLANTED = {"alpha": 0.3, "w2": 0.6, "w3": 0.2}


def _doc(
    qid: str, docno: str, s_doc: float, top: tuple[float, ...]
) -> list[tuple[str, str, int, float, float]]:
    return [(qid, docno, pid, score, s_doc) for pid, score in enumerate(top)]


def planted_case(copies: int = 5) -> tuple[pd.DataFrame, pd.DataFrame, Folds]:
    """Two-document queries whose relevant document wins only near the planted parameters.

    Raw scores (``normalise="none"``); a document's passages are its top scores. Each query
    type brackets one parameter between two grid points, from below or from above:

    - alpha: (s=1, t=0) beats (s=0, t1=x) iff alpha > x / (1 + x); with thresholds 0.25 and
      0.35 only alpha = 0.3 ranks both types right;
    - w2: (t = 1, 1, 0) beats (t = 1 + c, 0, 0) iff w2 > c; c = 0.55 and 0.65 leave w2 = 0.6;
    - w3: (t = 1, 1, 1) beats (t = 1 + e, 1, 0) iff w3 > e; e = 0.15 and 0.25 leave w3 = 0.2.

    On a tie the non-relevant document ("b") ranks first (docno descending), so ties never help.
    Copy i of each type is in fold i.
    """
    types = [
        # (relevant: s_doc, top), (non-relevant: s_doc, top)
        ((1.0, (0.0,)), (0.0, (1 / 3,))),  # alpha > 0.25
        ((0.0, (0.35 / 0.65,)), (1.0, (0.0,))),  # alpha < 0.35
        ((0.0, (1.0, 1.0, 0.0)), (0.0, (1.55, 0.0, 0.0))),  # w2 > 0.55
        ((0.0, (1.65, 0.0, 0.0)), (0.0, (1.0, 1.0, 0.0))),  # w2 < 0.65
        ((0.0, (1.0, 1.0, 1.0)), (0.0, (1.15, 1.0, 0.0))),  # w3 > 0.15
        ((0.0, (1.25, 1.0, 0.0)), (0.0, (1.0, 1.0, 1.0))),  # w3 < 0.25
    ]
    rows, qrels, fold_of = [], [], {}
    qid = 0
    for copy in range(copies):
        for rel, non in types:
            qid += 1
            q = str(qid)
            rows += _doc(q, "a", *rel) + _doc(q, "b", *non)
            qrels.append((q, "a", 1))
            fold_of[q] = str(copy + 1)
    passages = pd.DataFrame(rows, columns=["qid", "docno", "pid", "score", "first_stage_score"])
    qids = list(fold_of)
    folds = Folds(
        Fold(name, tuple(q for q in qids if fold_of[q] != name), tuple(q for q in qids if fold_of[q] == name))
        for name in sorted(set(fold_of.values()))
    )
    return passages, make_qrels(qrels), folds


def write_case(case: str, output: str | Path, *, seed: int = 0, overwrite: bool = False) -> Path:
    """Write a case as files under ``output``: passages.parquet, run.txt, qrels.txt (+ folds.tsv).

    Args:
        case: ``"random"`` (:func:`synthetic_passages`, SciFact-sized) or ``"planted"``.
        output: the folder (created; refused if it exists unless ``overwrite``).
        seed: the random case's seed.
        overwrite: replace an existing folder.
    """
    from evirank.io import write_qrels, write_run
    from evirank.outputs import atomic_output

    if case == "planted":
        passages, qrels, folds = planted_case()
    elif case == "random":
        passages, qrels = synthetic_passages(seed=seed)
        folds = None
    else:
        raise ValueError(f"case must be 'random' or 'planted', found {case!r}")
    docs = passages.drop_duplicates([QID, DOCNO])[[QID, DOCNO, FIRST_STAGE_SCORE]]
    run = make_run(docs.rename(columns={FIRST_STAGE_SCORE: SCORE}))
    out = Path(output)
    with atomic_output(out, overwrite=overwrite, marker="passages.parquet") as tmp:
        tmp.mkdir(parents=True)
        passages.to_parquet(tmp / "passages.parquet", index=False)
        write_run(run, tmp / "run.txt", tag=f"synthetic-{case}")
        write_qrels(qrels, tmp / "qrels.txt")
        if folds is not None:
            lines = [f"{qid}\t{fold.name}\n" for fold in folds for qid in fold.test]
            (tmp / "folds.tsv").write_text("qid\tfold\n" + "".join(lines), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m evirank.tune.synthetic {random,planted} --output DIR [--seed S] [--overwrite]``."""
    parser = argparse.ArgumentParser(
        prog="python -m evirank.tune.synthetic", description=__doc__.splitlines()[0]
    )
    parser.add_argument("kind", choices=("random", "planted"))
    parser.add_argument("--output", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    write_case(args.kind, args.output, seed=args.seed, overwrite=args.overwrite)
    return 0


if __name__ == "__main__":
    sys.exit(main())
