"""Fast per-query measures for many score settings at once (the grid search's evaluator).

:class:`~evirank.evaluate.measures.Evaluator` evaluates one run at a time through ir_measures
(about 20 ms for 300 queries x 100 documents); a grid of 1,331 settings would take half a
minute in it alone. Here a fixed set of candidate documents is laid out once as a
``[queries, width]`` table, and the scores of ``G`` settings ``[G, D]`` are evaluated together
with numpy. We write this ourselves, rather than calling ir_measures per setting, because it is
the inner loop of tuning; tests check it against :class:`Evaluator` on random cases.

Semantics are :class:`Evaluator`'s defaults (trec_eval's): scores compared in single precision,
ties broken by docno descending; queries evaluated are those with candidates and qrels
(``missing="skip"``); binary measures count labels >= ``relevance_level`` (default 1) as
relevant; nDCG uses labels (negative ones as 0) as gains, as trec_eval's ``ndcg_cut``. Every
measure depends only on the ranks of the positively judged candidates, so only those ranks are
computed: by counting the documents that beat each one, or by a stable sort when queries hold
many relevant candidates.

Supported measures: ``AP``, ``AP@k``, ``P@k``, ``R@k``, ``RR``, ``RR@k``, ``Success@k``,
``nDCG``, ``nDCG@k``, ``Rprec`` (with ``rel=``).

Example:
    >>> import numpy as np
    >>> from evirank.frames import make_qrels
    >>> keys = pd.DataFrame({"qid": ["1", "1", "1"], "docno": ["a", "b", "c"]})
    >>> fast = FastEvaluator(make_qrels([("1", "a", 1), ("1", "c", 1)]), ["AP", "P@2"])
    >>> layout = fast.layout(keys)
    >>> scores = np.array([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0]])  # two settings, three documents
    >>> fast.per_query(layout, scores)["AP"].round(4).tolist()
    [[0.8333], [0.8333]]
    >>> fast.per_query(layout, scores)["P@2"].tolist()
    [[0.5], [0.5]]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np
import pandas as pd
from ir_measures import Measure

from evirank.evaluate.measures import MeasureError, MeasureLike, measure_name, parse_measures
from evirank.frames import DOCNO, LABEL, QID, QRELS_COLUMNS, natural_order, require_columns

logger = logging.getLogger(__name__)

RankMethod: TypeAlias = Literal["auto", "count", "sort"]

SUPPORTED = ("AP", "P", "R", "RR", "Success", "nDCG", "Rprec")

#: Upper bound on the elements of one working array (settings x queries x relevant x width).
_WORK_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Layout:
    """Candidate documents laid out by query, built once per candidate set.

    Attributes:
        qids: the evaluated queries (candidates and qrels), in the order of the output columns.
        row: ``[D]`` each candidate's query position in ``qids`` (-1: the query has no qrels).
        col: ``[D]`` each candidate's column within its query; columns are in docno-descending
            order, so a stable order by score keeps trec_eval's tie rule.
        width: the most candidates of one query.
        rel_col: ``[Q, R]`` columns of the candidates with a positive label (-1 pads).
        rel_label: ``[Q, R]`` their labels (0 pads).
        n_candidates: ``[Q]`` candidates per query.
    """

    qids: tuple[str, ...]
    row: np.ndarray
    col: np.ndarray
    width: int
    rel_col: np.ndarray
    rel_label: np.ndarray
    n_candidates: np.ndarray

    @property
    def n_docs(self) -> int:
        """How many candidate rows the scores must have."""
        return len(self.row)


class FastEvaluator:
    """Per-query measures of many score settings over one candidate set; build once, call often.

    Args:
        qrels: a Qrels frame [qid, docno, label].
        measures: measure names or ir_measures measures (see :data:`SUPPORTED`).
        relevance_level: minimum label counted relevant by binary measures that set no ``rel``.
        method: how ranks are found: ``"count"`` (compare each relevant candidate with its
            query's candidates; fast when queries have few relevant candidates), ``"sort"``
            (a stable sort per query), or ``"auto"`` (counting when a query has at most
            ``max(4, log2(width))`` relevant candidates, else sorting). All give the same values.

    Raises:
        MeasureError: a measure this evaluator does not implement.
    """

    def __init__(
        self,
        qrels: pd.DataFrame,
        measures: Iterable[MeasureLike],
        relevance_level: int | None = None,
        method: RankMethod = "auto",
    ) -> None:
        require_columns(qrels, QRELS_COLUMNS, "FastEvaluator (qrels)")
        if method not in ("auto", "count", "sort"):
            raise ValueError(f"method must be 'auto', 'count' or 'sort', found {method!r}")
        self.method: RankMethod = method
        self.measures: tuple[Measure, ...] = tuple(parse_measures(measures, relevance_level))
        self.names: tuple[str, ...] = tuple(measure_name(m) for m in self.measures)
        for measure in self.measures:
            _check_supported(measure)
        frame = qrels[[QID, DOCNO, LABEL]].copy()
        frame[QID] = frame[QID].astype(str)
        frame[DOCNO] = frame[DOCNO].astype(str)
        frame[LABEL] = frame[LABEL].astype(np.int64)
        self._qrels = frame
        self._labels = {q: dict(zip(g[DOCNO], g[LABEL], strict=True)) for q, g in frame.groupby(QID)}
        self._cache: dict[tuple[object, ...], np.ndarray] = {}

    def layout(self, keys: pd.DataFrame) -> Layout:
        """Lay out the candidates ``keys`` [qid, docno] (one row per document, any order).

        The scores later passed to :meth:`per_query` follow the rows of ``keys``.
        """
        require_columns(keys, (QID, DOCNO), "FastEvaluator.layout")
        qids = keys[QID].astype(str).to_numpy()
        docnos = keys[DOCNO].astype(str).to_numpy()
        if pd.DataFrame({QID: qids, DOCNO: docnos}).duplicated().any():
            raise ValueError("FastEvaluator.layout: a (qid, docno) pair appears more than once")
        judged = [q for q in dict.fromkeys(qids) if q in self._labels]
        judged = natural_order(judged)
        position = {q: i for i, q in enumerate(judged)}
        row = np.array([position.get(q, -1) for q in qids], dtype=np.int64)
        # Columns: within each query, docno descending (trec_eval's tie order).
        order = np.lexsort((_descending_codes(docnos), row))
        col = np.zeros(len(qids), dtype=np.int64)
        col[order] = _position_in_group(row[order])
        n_candidates = np.bincount(row[row >= 0], minlength=len(judged)).astype(np.int64)
        width = int(n_candidates.max()) if len(judged) else 0
        labels = np.array(
            [
                self._labels[q].get(d, 0) if q in self._labels else 0
                for q, d in zip(qids, docnos, strict=True)
            ],
            dtype=np.int64,
        )
        positive = (row >= 0) & (labels > 0)
        per_query = np.bincount(row[positive], minlength=len(judged))
        depth = int(per_query.max()) if len(per_query) else 0
        rel_col = np.full((len(judged), max(depth, 1)), -1, dtype=np.int64)
        rel_label = np.zeros((len(judged), max(depth, 1)), dtype=np.int64)
        idx = np.flatnonzero(positive)
        idx = idx[np.lexsort((col[idx], row[idx]))]
        slot = _position_in_group(row[idx])
        rel_col[row[idx], slot] = col[idx]
        rel_label[row[idx], slot] = labels[idx]
        return Layout(tuple(judged), row, col, width, rel_col, rel_label, n_candidates)

    def per_query(self, layout: Layout, scores: np.ndarray) -> dict[str, np.ndarray]:
        """Each measure's values ``[G, Q]`` for scores ``[G, D]`` (or ``[D]``, giving ``[1, Q]``).

        Columns follow ``layout.qids``.
        """
        values = np.asarray(scores, dtype=np.float64)
        if values.ndim == 1:
            values = values[np.newaxis, :]
        if values.ndim != 2 or values.shape[1] != layout.n_docs:
            raise ValueError(f"expected scores [G, {layout.n_docs}], found shape {values.shape}")
        if not np.isfinite(values).all():
            raise ValueError("FastEvaluator: scores must be finite numbers")
        n_settings, n_queries = values.shape[0], len(layout.qids)
        out = {name: np.zeros((n_settings, n_queries)) for name in self.names}
        if n_queries == 0 or n_settings == 0:
            return out
        per_setting = n_queries * max(layout.width, 1) * max(layout.rel_col.shape[1], 1)
        chunk = max(1, _WORK_ELEMENTS // per_setting)
        for start in range(0, n_settings, chunk):
            block = values[start : start + chunk]
            ranks = self._ranks(layout, block)
            for name, measure in zip(self.names, self.measures, strict=True):
                out[name][start : start + len(block)] = self._measure(measure, layout, ranks)
        return out

    # -- ranks of the positively labelled candidates ------------------------------------
    def _ranks(self, layout: Layout, block: np.ndarray) -> np.ndarray:
        """``[g, Q, R]`` 1-based ranks of each query's positively labelled candidates (inf pads)."""
        g = block.shape[0]
        keep = layout.row >= 0
        table = np.full((g, len(layout.qids), max(layout.width, 1)), -np.inf, dtype=np.float32)
        # trec_eval reads scores as C floats: compare in single precision.
        with np.errstate(over="ignore"):
            table[:, layout.row[keep], layout.col[keep]] = block[:, keep].astype(np.float32)
        valid = layout.rel_col >= 0
        safe_col = np.where(valid, layout.rel_col, 0)
        width, depth = table.shape[2], layout.rel_col.shape[1]
        counting = (
            depth <= max(4, int(np.log2(max(width, 2)))) if self.method == "auto" else self.method == "count"
        )
        ranks = _ranks_by_counting(table, safe_col) if counting else _ranks_by_sorting(table, safe_col)
        return np.where(valid[np.newaxis], ranks, np.inf)

    def _measure(self, measure: Measure, layout: Layout, ranks: np.ndarray) -> np.ndarray:
        params = measure.params
        cutoff = params.get("cutoff")
        limit = np.inf if cutoff is None else float(cutoff)
        name = measure.NAME
        if name == "nDCG":
            return _ndcg(self, measure, layout, ranks, limit)
        rel = int(params.get("rel", 1))
        binary = layout.rel_label >= rel  # [Q, R]
        n_rel = self._n_relevant(layout.qids, rel)  # [Q]
        hit = binary[np.newaxis] & (ranks <= limit)  # [g, Q, R]
        if name == "P":
            return np.asarray(hit.sum(axis=2) / float(cutoff), dtype=np.float64)
        if name == "R":
            return _divide(hit.sum(axis=2), n_rel)
        if name == "Success":
            return np.asarray(hit.any(axis=2), dtype=np.float64)
        if name == "RR":
            first = np.where(hit, ranks, np.inf).min(axis=2)
            return np.where(np.isfinite(first), 1.0 / first, 0.0)
        if name == "Rprec":
            return _divide(
                (binary[np.newaxis] & (ranks <= n_rel[np.newaxis, :, np.newaxis])).sum(axis=2), n_rel
            )
        if name == "AP":
            ordered = np.sort(np.where(hit, ranks, np.inf), axis=2)
            found = np.arange(1, ordered.shape[2] + 1, dtype=np.float64)
            with np.errstate(divide="ignore"):
                precision = np.where(np.isfinite(ordered), found / ordered, 0.0)
            return _divide(precision.sum(axis=2), n_rel)
        raise MeasureError(f"measure {measure} is not supported by the fast evaluator")  # pragma: no cover

    def _n_relevant(self, qids: Sequence[str], rel: int) -> np.ndarray:
        key = ("n_relevant", tuple(qids), rel)
        if key not in self._cache:
            counts = self._qrels[self._qrels[LABEL] >= rel].groupby(QID).size()
            self._cache[key] = counts.reindex(list(qids), fill_value=0).to_numpy(dtype=np.float64)
        return self._cache[key]

    def ideal_dcg(self, qids: Sequence[str], limit: float) -> np.ndarray:
        """Each query's ideal DCG at ``limit`` from all its judgements."""
        key = ("ideal_dcg", tuple(qids), limit)
        if key not in self._cache:
            self._cache[key] = self._ideal_dcg(qids, limit)
        return self._cache[key]

    def _ideal_dcg(self, qids: Sequence[str], limit: float) -> np.ndarray:
        out = np.zeros(len(qids))
        for i, qid in enumerate(qids):
            labels = np.array(sorted(self._labels.get(qid, {}).values(), reverse=True), dtype=np.float64)
            gains = np.maximum(labels, 0.0)[: int(min(limit, len(labels)))]
            out[i] = float((gains / np.log2(np.arange(2, len(gains) + 2))).sum())
        return out


def _ndcg(
    fast: FastEvaluator, measure: Measure, layout: Layout, ranks: np.ndarray, limit: float
) -> np.ndarray:
    gains = np.maximum(layout.rel_label.astype(np.float64), 0.0)[np.newaxis]
    with np.errstate(divide="ignore"):
        discount = np.where(ranks <= limit, 1.0 / np.log2(ranks + 1.0), 0.0)
    dcg = (gains * discount).sum(axis=2)
    return _divide(dcg, fast.ideal_dcg(layout.qids, limit))


def _ranks_by_counting(table: np.ndarray, rel_col: np.ndarray) -> np.ndarray:
    """Rank = 1 + documents with a higher score + documents tied on score with a higher docno."""
    g = table.shape[0]
    target = np.take_along_axis(table, np.broadcast_to(rel_col, (g, *rel_col.shape)), axis=2)
    scores = table[:, :, np.newaxis, :]
    wanted = target[..., np.newaxis]
    columns = np.arange(table.shape[2])
    before = columns[np.newaxis, np.newaxis, :] < rel_col[..., np.newaxis]  # [Q, R, W]
    beats = (scores > wanted) | ((scores == wanted) & before[np.newaxis])
    return 1.0 + beats.sum(axis=3, dtype=np.int64)


def _ranks_by_sorting(table: np.ndarray, rel_col: np.ndarray) -> np.ndarray:
    """Stable sort by score descending (columns already in docno-descending order)."""
    order = np.argsort(-table, axis=2, kind="stable")
    positions = np.empty_like(order)
    np.put_along_axis(positions, order, np.arange(table.shape[2])[np.newaxis, np.newaxis, :], axis=2)
    g = table.shape[0]
    return 1.0 + np.take_along_axis(positions, np.broadcast_to(rel_col, (g, *rel_col.shape)), axis=2)


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    den = np.broadcast_to(denominator, numerator.shape)
    return np.divide(numerator, den, out=np.zeros(numerator.shape, dtype=np.float64), where=den > 0)


def _check_supported(measure: Measure) -> None:
    params = dict(measure.params)
    if measure.NAME not in SUPPORTED:
        raise MeasureError(
            f"the grid search evaluates {', '.join(SUPPORTED)} in-process; {measure} is not one of them"
        )
    if params.get("judged_only"):
        raise MeasureError(f"{measure}: judged_only is not supported by the fast evaluator")
    if measure.NAME == "nDCG" and (params.get("gains") or params.get("dcg", "log2") != "log2"):
        raise MeasureError(f"{measure}: only trec_eval's nDCG (dcg='log2', labels as gains) is supported")
    if measure.NAME in ("P", "Success") and params.get("cutoff") is None:
        raise MeasureError(f"{measure}: needs a cutoff, e.g. {measure.NAME}@10")


def _position_in_group(groups: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of a sorted array."""
    if not len(groups):
        return np.zeros(0, dtype=np.int64)
    first = np.r_[0, np.flatnonzero(groups[1:] != groups[:-1]) + 1]
    counts = np.diff(np.r_[first, len(groups)])
    return np.arange(len(groups)) - np.repeat(first, counts)


def _descending_codes(values: np.ndarray) -> np.ndarray:
    """Integer codes whose ascending order is the strings' descending (code-point) order."""
    codes, _ = pd.factorize(values, sort=True)
    return -codes.astype(np.int64)
