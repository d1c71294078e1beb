"""The vectorised arithmetic of aggregation, shared by the aggregators and the tuner.

A scored Passages frame becomes one row per (qid, docno) with arrays: the first-stage score
``s_doc [D]``, the top-n passage scores sorted descending ``top [D, n]`` (padded with 0 where
a document has fewer than n passages), and reductions over all passages. Birch's formula is
then plain array arithmetic that evaluates many parameter settings at once, so a grid search
never goes back to the frame (score once, tune many). Written with numpy rather than a
pandas groupby because the tuner calls it for thousands of settings: one sort, then
``reduceat`` and broadcasting.

Normalisation (``normalise``):
    ``"none"``: raw scores, as Birch did (raw BM25 mixed with raw model scores; their scales
    differ, so alpha absorbs the difference).
    ``"minmax"``: per query, the first-stage scores of that query's documents are mapped to
    [0, 1] by (s - min) / (max - min), and so are the passage scores of all that query's
    passages (over every passage of every candidate document of the query, before the
    top-n is taken). A query whose scores are all equal maps them to 0.

Example:
    >>> import pandas as pd
    >>> passages = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "a", "b"], "pid": [0, 1, 0],
    ...                          "score": [0.2, 0.9, 0.5], "first_stage_score": [10.0, 10.0, 12.0]})
    >>> table = top_passage_matrix(passages, n=2)
    >>> table.keys["docno"].tolist(), table.top.tolist()
    (['a', 'b'], [[0.9, 0.2], [0.5, 0.0]])
    >>> birch_scores(table.s_doc, table.top, alpha=0.5, weights=[1.0, 0.5]).tolist()
    [5.5, 6.25]
"""

from __future__ import annotations

import logging
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import pandas as pd

from evirank.frames import (
    DOCNO,
    DOCUMENT_SCORE,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    SCORE,
    require_columns,
)

logger = logging.getLogger(__name__)

Normalise = Literal["none", "minmax"]
NORMALISATIONS = ("none", "minmax")
ArrayLike = npt.ArrayLike


class PassageTable(NamedTuple):
    """Passages grouped by document, in arrays (rows ordered by qid, then docno, as strings).

    Attributes:
        keys: one row per document: qid, docno, and query / first_stage_score /
            first_stage_rank when the passages had them (first_stage_score as given, not
            normalised).
        s_doc: ``[D]`` first-stage scores (normalised as asked; zeros without first-stage scores).
        top: ``[D, n]`` each document's n best passage scores, descending, 0 where missing.
        n_passages: ``[D]`` passages per document.
        best: ``[D]`` the best passage score (MaxP).
        total: ``[D]`` the sum of passage scores (SumP).
        first: ``[D]`` the score of the passage with the smallest pid (FirstP).
        document: ``[D]`` the document score a document-level scorer wrote (``document_score``,
            normalised as asked), or None when the passages carry none.
    """

    keys: pd.DataFrame
    s_doc: np.ndarray
    top: np.ndarray
    n_passages: np.ndarray
    best: np.ndarray
    total: np.ndarray
    first: np.ndarray
    document: np.ndarray | None = None


def _check_normalise(normalise: str) -> None:
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {NORMALISATIONS}, found {normalise!r}")


def minmax_by_group(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Map ``values`` to [0, 1] within each group (integer codes); constant groups map to 0.

    Example:
        >>> minmax_by_group(np.array([1.0, 3.0, 5.0, 5.0]), np.array([0, 0, 1, 1])).tolist()
        [0.0, 1.0, 0.0, 0.0]
        >>> minmax_by_group(np.array([1e308, -1e308, 0.0]), np.array([0, 0, 0])).tolist()
        [1.0, 0.0, 0.5]
    """
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    low = np.full(n_groups, np.inf)
    high = np.full(n_groups, -np.inf)
    np.minimum.at(low, groups, values)
    np.maximum.at(high, groups, values)
    with np.errstate(over="ignore", invalid="ignore"):
        span = (high - low)[groups]
        shifted = values - low[groups]
        wide = ~np.isfinite(span) & np.isfinite(values)
        if wide.any():  # finite scores further apart than the largest float: their halves are not
            span = np.where(wide, (high / 2 - low / 2)[groups], span)
            shifted = np.where(wide, values / 2 - low[groups] / 2, shifted)
    return np.divide(shifted, span, out=np.zeros_like(shifted), where=span > 0)


def _finite(values: np.ndarray, what: str) -> np.ndarray:
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        raise ValueError(f"{what}: expected finite numbers, found {bad} NaN or infinite value(s)")
    return values


def top_passage_matrix(
    passages: pd.DataFrame,
    n: int,
    normalise: Normalise = "none",
    *,
    require_first_stage: bool = False,
) -> PassageTable:
    """Group a scored Passages frame by document into arrays for aggregation and tuning.

    Args:
        passages: columns qid, docno, score (the passage score), and first_stage_score
            (constant within a document); pid is used for FirstP when present (else the
            first row of the document counts as its first passage); document_score, when a
            document-level scorer wrote it (constant within a document), becomes ``document``.
        n: how many of the best passage scores to keep per document (columns of ``top``).
        normalise: ``"none"`` or ``"minmax"`` (per query; see the module docstring).
        require_first_stage: raise when first_stage_score is missing (else ``s_doc`` is 0).

    Returns:
        A :class:`PassageTable`; documents with fewer than n passages have 0 in the
        missing columns of ``top``.

    Example:
        >>> p = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "score": [1.0, 3.0],
        ...                   "first_stage_score": [5.0, 5.0]})
        >>> top_passage_matrix(p, n=3).top.tolist()
        [[3.0, 1.0, 0.0]]
    """
    where = "aggregate"
    _check_normalise(normalise)
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, found {n!r}")
    needed = (QID, DOCNO, SCORE, FIRST_STAGE_SCORE) if require_first_stage else (QID, DOCNO, SCORE)
    require_columns(passages, needed, where)

    qids = passages[QID].astype(str).to_numpy()
    docnos = passages[DOCNO].astype(str).to_numpy()
    scores = _finite(passages[SCORE].to_numpy(dtype=np.float64), f"{where}: passage column {SCORE!r}")
    has_first_stage = FIRST_STAGE_SCORE in passages.columns
    if has_first_stage:
        first_stage = _finite(
            passages[FIRST_STAGE_SCORE].to_numpy(dtype=np.float64), f"{where}: column {FIRST_STAGE_SCORE!r}"
        )
    else:
        first_stage = np.zeros(len(passages))
    pids = passages[PID].to_numpy(dtype=np.int64) if PID in passages.columns else np.arange(len(passages))

    q_codes, _ = pd.factorize(qids, sort=True)
    d_codes, _ = pd.factorize(docnos, sort=True)
    if normalise == "minmax" and len(scores):
        scores = minmax_by_group(scores, q_codes)

    # One sort: by query, document, score descending (pid breaks ties, for determinism).
    order = np.lexsort((pids, -scores, d_codes, q_codes))
    q_sorted, d_sorted, s_sorted = q_codes[order], d_codes[order], scores[order]
    new_doc = np.ones(len(order), dtype=bool)
    new_doc[1:] = (q_sorted[1:] != q_sorted[:-1]) | (d_sorted[1:] != d_sorted[:-1])
    starts = np.flatnonzero(new_doc)
    doc_of_row = np.cumsum(new_doc) - 1
    n_passages = np.diff(np.append(starts, len(order)))
    position = np.arange(len(order)) - starts[doc_of_row]

    top = np.zeros((len(starts), n))
    keep = position < n
    top[doc_of_row[keep], position[keep]] = s_sorted[keep]

    if len(order):
        best = s_sorted[starts]
        total = np.add.reduceat(s_sorted, starts)
        by_pid = np.lexsort((pids[order], doc_of_row))
        first_rows = by_pid[np.flatnonzero(np.diff(np.append(-1, doc_of_row[by_pid])))]
        first = s_sorted[first_rows]
    else:
        best = total = first = np.zeros(0)

    lead = order[starts]  # one passage row per document
    keys = pd.DataFrame({QID: qids[lead], DOCNO: docnos[lead]})
    for column in (QUERY, FIRST_STAGE_SCORE, FIRST_STAGE_RANK):
        if column in passages.columns:
            keys[column] = passages[column].to_numpy()[lead]
    s_doc = first_stage[lead]
    if normalise == "minmax" and len(s_doc):
        s_doc = minmax_by_group(s_doc, q_codes[lead])
    document = None
    if DOCUMENT_SCORE in passages.columns:
        values = passages[DOCUMENT_SCORE].to_numpy(dtype=np.float64)
        document = _finite(values, f"{where}: column {DOCUMENT_SCORE!r}")[lead]
        if normalise == "minmax" and len(document):
            document = minmax_by_group(document, q_codes[lead])
    logger.debug(
        "%d passages grouped into %d documents (n=%d, normalise=%s)", len(order), len(starts), n, normalise
    )
    return PassageTable(keys, s_doc, top, n_passages, best, total, first, document)


def birch_scores(s_doc: ArrayLike, top: ArrayLike, alpha: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """Birch's document score ``alpha * s_doc + (1 - alpha) * sum_i w_i * s_i``, for many settings.

    Args:
        s_doc: ``[D]`` first-stage scores.
        top: ``[D, n]`` the n best passage scores per document, descending.
        alpha: a number, or an array of settings (shape ``A``).
        weights: ``[n]``, or settings ``W + (n,)``; ``A`` and ``W`` broadcast together.

    Returns:
        ``broadcast(A, W) + (D,)`` scores: ``[D]`` for one setting, ``[G, D]`` for G
        settings given as ``alpha [G]`` and ``weights [G, n]``, ``[A, W, D]`` for a full
        grid given as ``alpha [A, 1]`` and ``weights [W, n]``. Memory is 8 bytes per
        setting and document; chunk very large grids.

    Example:
        >>> s_doc, top = np.array([1.0, 0.0]), np.array([[0.5, 0.2], [0.9, 0.1]])
        >>> birch_scores(s_doc, top, alpha=[0.0, 1.0], weights=[[1.0, 1.0], [1.0, 0.0]]).tolist()
        [[0.7, 1.0], [1.0, 0.0]]
    """
    s = np.asarray(s_doc, dtype=np.float64)
    t = np.asarray(top, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if t.ndim != 2 or s.shape != (t.shape[0],):
        raise ValueError(f"expected s_doc [D] and top [D, n], found {s.shape} and {t.shape}")
    if w.ndim == 0 or w.shape[-1] != t.shape[1]:
        raise ValueError(
            f"weights must end in n={t.shape[1]} values (one per top passage), found shape {w.shape}"
        )
    evidence = w @ t.T  # (..., D): the weighted top-n sums, one matrix product for all weight settings
    # alpha * s + (1 - alpha) * e, written as e + alpha * (s - e): one full-size temporary, not three.
    out = np.multiply(a[..., np.newaxis], s - evidence)
    out += evidence
    return out
