"""Measures and per-query evaluation with trec_eval's semantics, through ir_measures.

Measures are ir_measures values (``AP``, ``P@20``, ``nDCG@20``, ``RR@10``, ``R@1000``), parsed
from the names users type; ``MAP`` is an alias of ``AP``, trec_eval names (``map``,
``ndcg_cut.10``, ``P.20``, ``recall.1000``, ``recip_rank``) are accepted too, and so is any
ir_measures syntax such as ``AP(rel=2)`` or ``R(rel=2)@1000``. Per-query values come first;
means (and, in :mod:`evirank.evaluate.significance`, t-tests) are computed from them.

Which ranking is evaluated (``ties``):
    trec_eval never reads the rank column of a run file. It reads each score as a C ``float``
    (single precision) and sorts by score descending, ties by docno *descending* (byte order;
    ``comp_sim_docno`` in trec_eval's ``form_res_rels.c``). pytrec_eval, which ir_measures uses
    for AP, P, nDCG and R, is trec_eval's own C code and sorts the same way; other providers
    (the MS MARCO one behind ``RR@10``) keep the input order on ties. So that every measure sees
    one ranking, we put each query's rows in the chosen order ourselves and hand ir_measures
    strictly decreasing integer scores (exact in single precision). Measures therefore depend on
    the order only, never on score values.

    - ``"trec_eval"`` (default): single-precision score descending, then docno descending:
      exactly what trec_eval computes on the run file written from this frame
      (:func:`evirank.io.write_run` writes scores exactly; a writer that rounds scores to fewer
      than 9 significant digits can create ties that the frame does not have).
    - ``"rank"``: the frame's ``rank`` column as given; a frame without ``rank`` is ranked
      with :func:`evirank.frames.sort_run` first. Use it to score the order a pipeline presents.

    evirank's own order (:func:`evirank.frames.sort_run`: score descending, then docno
    descending) is trec_eval's rule, so for frames that evirank ranked the two agree except where
    scores tie in single precision only. On the Microblog 2011 candidate run, whose
    query-likelihood scores tie a lot, AP is 0.3576 either way (breaking ties by docno ascending
    instead gives the 0.3498 quoted in the dataset README).

Queries in the qrels but missing from the run (``missing``):
    - ``"skip"`` (default, trec_eval's default): left out of the per-query table and the mean.
    - ``"zero"`` (trec_eval ``-c``, Anserini's setting for DL and BEIR): each counts with the
      measure's empty-ranking value, 0.

    Queries in the run without any qrels are always ignored, as trec_eval does. A qrels query
    whose labels are all non-relevant is evaluated (AP 0, nDCG 0), as trec_eval does.

Relevance level (``relevance_level``, trec_eval's ``-l``): the minimum label that counts as
relevant for binary measures (AP, P, R, RR, ...), applied to each measure that takes a ``rel``
parameter and does not set one itself. Default 1, as trec_eval's. nDCG uses the labels as gains
whatever the level (as trec_eval's ``ndcg_cut``). For TREC DL, Anserini evaluates AP and recall
with ``-l 2`` and nDCG@10 with the default: ``--relevance-level 2`` or ``AP(rel=2)``.

Example:
    >>> from evirank.frames import make_qrels, make_run
    >>> qrels = make_qrels([("1", "a", 1), ("1", "c", 1)])
    >>> run = make_run([("1", "a", 3.0), ("1", "b", 2.0), ("1", "c", 1.0)])
    >>> evaluate(run, qrels, ["AP", "P@2"])
    {'AP': 0.8333333333333333, 'P@2': 0.5}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Literal, TypeAlias

import ir_measures
import numpy as np
import pandas as pd
from ir_measures import Measure

from evirank.config import SETTINGS
from evirank.errors import EvirankError
from evirank.frames import (
    DOCNO,
    LABEL,
    MEASURE,
    QID,
    QRELS_COLUMNS,
    RANK,
    SCORE,
    VALUE,
    natural_order,
    require_columns,
)

logger = logging.getLogger(__name__)

Ties = Literal["trec_eval", "rank"]
Missing = Literal["skip", "zero"]
MeasureLike: TypeAlias = "str | Measure"

TIES: tuple[str, ...] = ("trec_eval", "rank")
MISSING: tuple[str, ...] = ("skip", "zero")

#: The measures of the CLI's default table: the papers' AP, P@20, nDCG@20, plus nDCG@10, RR@10, R@1000.
DEFAULT_MEASURES: tuple[str, ...] = tuple(SETTINGS.default("measures"))


class MeasureError(EvirankError, ValueError):
    """A measure name that neither ir_measures nor trec_eval's naming knows."""


class EvaluationError(EvirankError, ValueError):
    """A run or qrels frame that cannot be evaluated (duplicate documents, missing scores)."""


def parse_measure(measure: MeasureLike, relevance_level: int | None = None) -> Measure:
    """Turn a name (``"AP"``, ``"MAP"``, ``"nDCG@10"``, ``"ndcg_cut.10"``) into an ir_measures measure.

    Args:
        measure: an ir_measures name, a trec_eval name that stands for one measure, or a measure.
        relevance_level: minimum relevant label for measures that take ``rel`` and set none.

    Example:
        >>> [str(parse_measure(m)) for m in ("MAP", "P@20", "ndcg_cut.10", "R@1000")]
        ['AP', 'P@20', 'nDCG@10', 'R@1000']
        >>> str(parse_measure("AP", relevance_level=2))
        'AP(rel=2)'
    """
    if isinstance(measure, Measure):
        parsed = measure
    elif isinstance(measure, str):
        parsed = _parse_name(measure.strip())
    else:
        raise MeasureError(f"expected a measure name or an ir_measures measure, found {measure!r}")
    if relevance_level is not None and "rel" in parsed.SUPPORTED_PARAMS and "rel" not in parsed.params:
        parsed = parsed(rel=int(relevance_level))
    try:
        parsed.validate_params()
    except AssertionError as exc:  # ir_measures validates with assert
        raise MeasureError(f"invalid parameters for measure {measure!r}: {exc}") from exc
    _check_numbers(measure, parsed)
    return parsed


def _check_numbers(given: MeasureLike, parsed: Measure) -> None:
    """Refuse a cutoff or relevance level the evaluators cannot take.

    ``P@0`` aborts trec_eval (an assertion in C kills the process), ``RR@0`` is 0 whatever the run,
    and a ``rel`` beyond a C int is passed on as garbage: each is refused with the measure named.
    """
    from evirank.io.qrels import LABEL_BOUNDS

    cutoff = parsed.params.get("cutoff")
    if cutoff is not None and (
        isinstance(cutoff, bool) or not isinstance(cutoff, int) or not 1 <= cutoff < 2**31
    ):
        raise MeasureError(f"measure {given!r}: the cutoff (@k) must be an integer from 1 to {2**31 - 1}")
    rel = parsed.params.get("rel")
    if rel is not None and (
        isinstance(rel, bool) or not isinstance(rel, int) or not LABEL_BOUNDS[0] <= rel <= LABEL_BOUNDS[1]
    ):
        raise MeasureError(
            f"measure {given!r}: rel must be an integer grade from {LABEL_BOUNDS[0]} to {LABEL_BOUNDS[1]}"
        )


def parse_measures(measures: Iterable[MeasureLike], relevance_level: int | None = None) -> list[Measure]:
    """Parse several measures, keeping their order and dropping repeats (``MAP`` and ``AP`` are one).

    Example:
        >>> [str(m) for m in parse_measures(["MAP", "AP", "P@20"])]
        ['AP', 'P@20']
    """
    if isinstance(measures, (str, Measure)):
        measures = [measures]
    out: list[Measure] = []
    for item in measures:
        parsed = parse_measure(item, relevance_level)
        if parsed not in out:
            out.append(parsed)
    if not out:
        raise MeasureError("expected at least one measure, found none")
    return out


def measure_name(measure: Measure) -> str:
    """The canonical display name of a measure (ir_measures' notation, e.g. ``nDCG@10``)."""
    return str(measure)


def _parse_name(name: str) -> Measure:
    try:
        return ir_measures.parse_measure(name)
    except (NameError, ValueError, SyntaxError, TypeError) as first_error:
        # Not ir_measures notation: try trec_eval's (map, ndcg_cut.10, P.20, recall.1000, recip_rank).
        parsed = []
        if name not in _trec_nicknames():  # nicknames (all_trec, official) stand for many measures
            try:
                parsed = ir_measures.parse_trec_measure(name)
            except (ValueError, KeyError, TypeError):
                parsed = []
        if len(parsed) == 1:
            return parsed[0]
        known = ", ".join(DEFAULT_MEASURES)
        raise MeasureError(
            f"unknown measure {name!r} ({first_error}); expected an ir_measures name such as {known}, "
            "MAP, AP(rel=2), R(rel=2)@1000, or one trec_eval name such as map, ndcg_cut.10, P.20"
        ) from None


def _trec_nicknames() -> set[str]:
    try:
        import pytrec_eval
    except ImportError:  # pragma: no cover - pytrec_eval comes with ir_measures
        return set()
    return set(getattr(pytrec_eval, "supported_nicknames", {}))


def _check_choice(value: str, choices: Sequence[str], what: str) -> None:
    if value not in choices:
        raise ValueError(f"{what} must be one of {list(choices)}, found {value!r}")


class Evaluator:
    """Evaluates runs against one set of qrels and measures; build once, evaluate many runs.

    The qrels are converted and ir_measures' evaluator is built once, so evaluating many runs
    (a grid search, several systems) pays only for the runs.

    Args:
        qrels: a Qrels frame [qid, docno, label].
        measures: names or ir_measures measures (see :func:`parse_measure`).
        ties: ``"trec_eval"`` or ``"rank"`` (see the module docstring).
        missing: ``"skip"`` or ``"zero"`` for qrels queries absent from a run.
        relevance_level: trec_eval's ``-l`` (default: each measure's, 1).

    Example:
        >>> from evirank.frames import make_qrels, make_run
        >>> ev = Evaluator(make_qrels([("1", "a", 1)]), ["P@1", "RR@10"])
        >>> ev.mean(make_run([("1", "b", 2.0), ("1", "a", 1.0)]))
        {'P@1': 0.0, 'RR@10': 0.5}
    """

    def __init__(
        self,
        qrels: pd.DataFrame,
        measures: Iterable[MeasureLike],
        *,
        ties: Ties = "trec_eval",
        missing: Missing = "skip",
        relevance_level: int | None = None,
    ) -> None:
        _check_choice(ties, TIES, "ties")
        _check_choice(missing, MISSING, "missing")
        self.measures: tuple[Measure, ...] = tuple(parse_measures(measures, relevance_level))
        self.names: tuple[str, ...] = tuple(measure_name(m) for m in self.measures)
        self.ties: Ties = ties
        self.missing: Missing = missing
        self.relevance_level = relevance_level
        self._qrels = _qrels_dict(qrels)
        self._qids = natural_order(self._qrels)
        self._evaluator = ir_measures.evaluator(list(self.measures), self._qrels)
        self._aggregators = {measure_name(m): m.aggregator for m in self.measures}

    @property
    def qids(self) -> list[str]:
        """The qrels' query ids, in natural order."""
        return list(self._qids)

    def per_query(self, run: pd.DataFrame) -> pd.DataFrame:
        """Per-query values: a frame [qid, measure, value], qids in natural order, measures in given order.

        Example:
            >>> from evirank.frames import make_qrels, make_run
            >>> ev = Evaluator(make_qrels([("1", "a", 1), ("2", "x", 1)]), ["P@1"], missing="zero")
            >>> ev.per_query(make_run([("1", "a", 1.0)]))[["qid", "value"]].values.tolist()
            [['1', 1.0], ['2', 0.0]]
        """
        ranked = rank_for_evaluation(run, self.ties)
        unjudged = set(ranked) - set(self._qrels)
        if unjudged:
            logger.info("%d run queries have no qrels and are ignored (as trec_eval does)", len(unjudged))
        missing = [q for q in self._qrels if q not in ranked]
        if missing:
            logger.info(
                "%d of %d qrels queries are missing from the run: %s",
                len(missing),
                len(self._qrels),
                "counted as 0 (trec_eval -c)" if self.missing == "zero" else "skipped (trec_eval's default)",
            )
        run_for_eval = {q: docs for q, docs in ranked.items() if q in self._qrels}
        values: dict[tuple[str, str], float] = {}
        names_by_id = {id(m): n for m, n in zip(self.measures, self.names, strict=True)}
        for metric in self._evaluator.iter_calc(run_for_eval):
            name = names_by_id.get(id(metric.measure)) or measure_name(metric.measure)
            values[(str(metric.query_id), name)] = float(metric.value)
        keep = self._qids if self.missing == "zero" else [q for q in self._qids if q in run_for_eval]
        # ir_measures fills qrels queries absent from the run with each measure's default (0).
        rows = [(qid, name, values.get((qid, name), 0.0)) for qid in keep for name in self.names]
        frame = pd.DataFrame(rows, columns=[QID, MEASURE, VALUE])
        frame[VALUE] = frame[VALUE].astype(np.float64)
        return frame

    def mean(self, run: pd.DataFrame) -> dict[str, float]:
        """Each measure aggregated over the evaluated queries (the mean; a sum for count measures)."""
        return self.aggregate(self.per_query(run))

    def aggregate(self, per_query: pd.DataFrame) -> dict[str, float]:
        """Aggregate a per-query frame [qid, measure, value] as each measure does (mean, or sum)."""
        require_columns(per_query, (MEASURE, VALUE), "aggregate")
        out: dict[str, float] = {}
        for name in self.names:
            agg = self._aggregators[name]()
            for value in per_query.loc[per_query[MEASURE] == name, VALUE]:
                agg.add(float(value))
            out[name] = float(agg.result())
        return out


def per_query(
    run: pd.DataFrame,
    qrels: pd.DataFrame,
    measures: Iterable[MeasureLike],
    *,
    ties: Ties = "trec_eval",
    missing: Missing = "skip",
    relevance_level: int | None = None,
) -> pd.DataFrame:
    """Per-query values of ``run``: a frame [qid, measure, value] (see :class:`Evaluator`).

    Example:
        >>> from evirank.frames import make_qrels, make_run
        >>> table = per_query(make_run([("1", "a", 1.0)]), make_qrels([("1", "a", 1)]), ["AP"])
        >>> table.values.tolist()
        [['1', 'AP', 1.0]]
    """
    evaluator = Evaluator(qrels, measures, ties=ties, missing=missing, relevance_level=relevance_level)
    return evaluator.per_query(run)


def evaluate(
    run: pd.DataFrame,
    qrels: pd.DataFrame,
    measures: Iterable[MeasureLike],
    *,
    ties: Ties = "trec_eval",
    missing: Missing = "skip",
    relevance_level: int | None = None,
) -> dict[str, float]:
    """Mean of each measure over the evaluated queries, keyed by measure name, in the given order.

    Equals trec_eval on the run file written from ``run`` (``missing="zero"`` equals ``trec_eval -c``).

    Example:
        >>> from evirank.frames import make_qrels, make_run
        >>> evaluate(make_run([("1", "a", 1.0)]), make_qrels([("1", "a", 1)]), ["MAP", "nDCG@10"])
        {'AP': 1.0, 'nDCG@10': 1.0}
    """
    evaluator = Evaluator(qrels, measures, ties=ties, missing=missing, relevance_level=relevance_level)
    return evaluator.mean(run)


def rank_for_evaluation(run: pd.DataFrame, ties: Ties = "trec_eval") -> dict[str, dict[str, float]]:
    """Each query's documents in evaluation order, as {qid: {docno: score}} with scores n, n-1, ..., 1.

    The integer scores are exact in single precision (up to 2**24 documents per query), so
    every ir_measures provider, pytrec_eval included, sees exactly this order.

    Example:
        >>> from evirank.frames import make_run
        >>> run = make_run([("1", "a", 1.0), ("1", "b", 1.0), ("1", "c", 2.0)])
        >>> rank_for_evaluation(run, "trec_eval")
        {'1': {'c': 3.0, 'b': 2.0, 'a': 1.0}}
        >>> rank_for_evaluation(run.assign(rank=[1, 3, 2]), "rank")
        {'1': {'c': 3.0, 'a': 2.0, 'b': 1.0}}
    """
    _check_choice(ties, TIES, "ties")
    require_columns(run, (QID, DOCNO, SCORE), "evaluate (run)")
    if run.empty:
        return {}
    qids = run[QID].astype(str).to_numpy()
    docnos = run[DOCNO].astype(str).to_numpy()
    scores = pd.to_numeric(run[SCORE], errors="coerce").to_numpy(dtype=np.float64)
    if np.isnan(scores).any():
        bad = int(np.flatnonzero(np.isnan(scores))[0])
        raise EvaluationError(
            f"evaluate: run row {bad} (qid {qids[bad]}, docno {docnos[bad]}) has no numeric score; "
            "every row needs a number"
        )
    qcodes = pd.factorize(qids)[0]
    if ties == "trec_eval":
        # trec_eval stores scores as C floats: scores equal in single precision tie.
        with np.errstate(over="ignore"):
            keys = [qcodes, -scores.astype(np.float32)]
        docno_descending = True
    else:
        keys = [qcodes]
        if RANK in run.columns:
            ranks = pd.to_numeric(run[RANK], errors="coerce").to_numpy(dtype=np.float64)
            if np.isnan(ranks).any():
                raise EvaluationError("evaluate: ties='rank' needs a numeric rank on every run row")
            keys.append(ranks)
        keys.append(-scores)
        docno_descending = False
    order = _lexsort_with_docno_ties(keys, docnos, docno_descending)
    qids, docnos = qids[order], docnos[order]
    bounds = np.flatnonzero(qids[1:] != qids[:-1]) + 1
    out: dict[str, dict[str, float]] = {}
    for start, end in zip(np.r_[0, bounds].tolist(), np.r_[bounds, len(qids)].tolist(), strict=True):
        count = end - start
        docs = dict(
            zip(docnos[start:end].tolist(), np.arange(count, 0, -1, dtype=np.float64).tolist(), strict=True)
        )
        if len(docs) < count:
            raise EvaluationError(
                f"evaluate: the run lists a document more than once for query {qids[start]} "
                f"({count - len(docs)} duplicate rows); trec_eval refuses such runs too. "
                "Keep one row per (qid, docno)"
            )
        out[str(qids[start])] = docs
    return out


def _lexsort_with_docno_ties(keys: list[np.ndarray], docnos: np.ndarray, descending: bool) -> np.ndarray:
    """Sort rows by ``keys`` (most significant first), then by docno within groups of equal keys.

    Sorting strings is the slow part, so only the docnos of rows that tie on every key are
    ranked (runs from real-valued scorers have few ties). Python's string order is code-point
    order, which is UTF-8 byte order, i.e. C's ``strcmp`` that trec_eval uses.
    """
    order = np.lexsort(keys[::-1])
    same = np.ones(len(order) - 1, dtype=bool)
    for key in keys:
        ordered = key[order]
        same &= ordered[1:] == ordered[:-1]
    if not same.any():
        return order
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    rows = order[tied]
    doc_codes = np.zeros(len(order), dtype=np.int64)
    codes = pd.factorize(docnos[rows], sort=True)[0].astype(np.int64)
    doc_codes[rows] = -codes if descending else codes
    return np.lexsort([doc_codes, *keys[::-1]])


def _qrels_dict(qrels: pd.DataFrame) -> dict[str, dict[str, int]]:
    require_columns(qrels, QRELS_COLUMNS, "evaluate (qrels)")
    qids = qrels[QID].astype(str).to_numpy()
    docnos = qrels[DOCNO].astype(str).to_numpy()
    labels = pd.to_numeric(qrels[LABEL], errors="coerce").to_numpy(dtype=np.float64)
    if len(labels) and (np.isnan(labels).any() or (labels != np.round(labels)).any()):
        raise EvaluationError("evaluate: every qrels label must be an integer grade")
    from evirank.io.qrels import LABEL_BOUNDS

    out_of_range = (labels < LABEL_BOUNDS[0]) | (labels > LABEL_BOUNDS[1])
    if out_of_range.any():
        bad = int(np.flatnonzero(out_of_range)[0])
        raise EvaluationError(
            f"evaluate: the qrels label {labels[bad]:.0f} (query {qids[bad]}, document {docnos[bad]}) is "
            f"outside {LABEL_BOUNDS[0]}..{LABEL_BOUNDS[1]}, the relevance grades trec_eval can hold"
        )
    keys = pd.DataFrame({QID: qids, DOCNO: docnos})
    duplicated = keys.duplicated()
    if duplicated.any():
        first = keys[duplicated].iloc[0]
        raise EvaluationError(
            f"evaluate: the qrels judge document {first[DOCNO]} more than once for query {first[QID]}; "
            "trec_eval refuses such qrels too. Keep one label per (qid, docno)"
        )
    out: dict[str, dict[str, int]] = {}
    for qid, docno, label in zip(
        qids.tolist(), docnos.tolist(), labels.astype(np.int64).tolist(), strict=True
    ):
        out.setdefault(qid, {})[docno] = label
    if not out:
        raise EvaluationError("evaluate: the qrels are empty; nothing to evaluate against")
    return out
