"""Constructed tuning cases whose best parameters are known (imported by the tune tests)."""

from __future__ import annotations

import pandas as pd

from evirank.frames import make_qrels
from evirank.tune.folds import Fold, Folds

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
