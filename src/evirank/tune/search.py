"""Cross-validated grid search over cached passage scores (score once, tune many).

For every setting of the grid, every query's metric is computed at once: the aggregator's
arithmetic gives scores ``[settings, documents]`` and :class:`~evirank.evaluate.FastEvaluator`
turns them into per-query values ``[settings, queries]``. Then, for each fold, the setting with
the highest mean over the fold's *tuning* queries is chosen and applied to its *test* queries;
the cross-validated run is the union of the folds' test queries, each ranked with its own
fold's setting. A fold's test queries never enter its choice: a query's values depend only on
its own passages and qrels (normalisation is per query), and a fold's mean reads only its
tuning queries.

Tie rule: among settings whose tuning means are equal (within ``1e-12``), the first in grid
order wins (:mod:`evirank.tune.grid`: the smallest value of the first axis, then the second...).

Example:
    >>> import pandas as pd
    >>> from evirank.frames import make_qrels
    >>> from evirank.tune import k_folds, parse_aggregate, parse_grid
    >>> rows = [(str(q), d, 0, s, f) for q in range(1, 5)
    ...         for d, s, f in (("rel", 0.9, 1.0), ("non", 0.1, 2.0))]
    >>> passages = pd.DataFrame(rows, columns=["qid", "docno", "pid", "score", "first_stage_score"])
    >>> qrels = make_qrels([(str(q), "rel", 1) for q in range(1, 5)])
    >>> result = cross_validate(passages, qrels, parse_aggregate("maxp"), parse_grid("alpha=0,1"),
    ...                         k_folds([str(q) for q in range(1, 5)], k=2, seed=0))
    >>> [c.params for c in result.choices]
    [{'alpha': 0.0}, {'alpha': 0.0}]
    >>> result.run.groupby("qid")["docno"].first().tolist()
    ['rel', 'rel', 'rel', 'rel']
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evirank.aggregate import EvidenceTable, PassageTable
from evirank.aggregate.registry import AggregateSpec
from evirank.evaluate.fast import FastEvaluator, Layout
from evirank.evaluate.measures import MeasureLike, measure_name, parse_measure
from evirank.frames import FIRST_STAGE_SCORE, QID, SCORE, sort_run
from evirank.progress import progress_bar
from evirank.stage import Estimator
from evirank.tune.errors import TuneError
from evirank.tune.folds import Fold, Folds, k_folds
from evirank.tune.grid import Grid

logger = logging.getLogger(__name__)

#: Means within this distance of the best count as ties (broken by grid order).
TIE_TOLERANCE = 1e-12
#: Settings x documents per block of scores (bounds memory: 8 bytes each).
_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class FoldChoice:
    """The setting chosen for one fold.

    Attributes:
        fold: the fold's name.
        index: the setting's position in the grid.
        params: the setting as ``{name: value}`` (every parameter of the aggregator, and with
            several scorers the first one's implied weight too).
        tune_mean: the metric's mean over the fold's tuning queries with this setting.
        test_mean: the metric's mean over the fold's test queries with this setting.
        tied: how many settings reached the same tuning mean (1: no tie).
        n_tune: how many tuning queries were evaluated.
        n_test: how many test queries were evaluated.
    """

    fold: str
    index: int
    params: dict[str, float]
    tune_mean: float
    test_mean: float
    tied: int
    n_tune: int
    n_test: int


@dataclass
class TuneResult:
    """What :func:`cross_validate` found.

    Attributes:
        aggregator: the tuned aggregator.
        grid: the grid searched (every parameter, unset ones fixed at their defaults).
        metric: the metric's name.
        folds: the folds used (restricted to the evaluated queries).
        choices: one :class:`FoldChoice` per fold.
        run: the cross-validated Run [qid, (query), docno, score, rank, first_stage_score, ...].
        qids: the evaluated queries (columns of ``values``).
        values: ``[settings, queries]`` the metric per setting and query.
        best: the setting with the best mean over *all* evaluated queries (not cross-validated:
            an upper bound, and the setting to use on new queries).
        timings: seconds per phase.
    """

    aggregator: AggregateSpec
    grid: Grid
    metric: str
    folds: Folds
    choices: list[FoldChoice]
    run: pd.DataFrame
    qids: tuple[str, ...]
    values: np.ndarray
    best: FoldChoice
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def cv_mean(self) -> float:
        """The metric's mean over all test queries, each with its fold's setting."""
        per_query = self.cv_per_query()
        return float(per_query.mean()) if len(per_query) else float("nan")

    def cv_per_query(self) -> pd.Series:
        """qid -> the metric of the cross-validated run (fast evaluator), test queries only."""
        position = {q: i for i, q in enumerate(self.qids)}
        out = {}
        for choice, fold in zip(self.choices, self.folds, strict=True):
            for qid in fold.test:
                out[qid] = float(self.values[choice.index, position[qid]])
        return pd.Series(out, name=self.metric, dtype=np.float64)

    def fold_means(self) -> pd.DataFrame:
        """``[settings, folds]``: each setting's mean metric over each fold's tuning queries."""
        position = {q: i for i, q in enumerate(self.qids)}
        columns = {}
        for fold in self.folds:
            idx = [position[q] for q in fold.tune]
            columns[fold.name] = self.values[:, idx].mean(axis=1)
        frame = pd.DataFrame(self.grid.settings, columns=list(self.grid.names))
        if self.aggregator.multi:  # the first scorer's weight, implied, beside the others'
            rest = frame[list(self.aggregator.evidence_parameters)].sum(axis=1)
            where = list(frame.columns).index(self.aggregator.evidence_parameters[0])
            frame.insert(where, self.aggregator.scorers[0], (1.0 - rest).clip(lower=0.0).round(12))
        for name, means in columns.items():
            frame[f"tune_mean[{name}]"] = means
        frame["mean[all]"] = self.values.mean(axis=1)
        return frame


def grid_values(
    aggregator: AggregateSpec,
    table: PassageTable | EvidenceTable,
    grid: Grid,
    evaluator: FastEvaluator,
    layout: Layout,
    *,
    measure: str | None = None,
) -> np.ndarray:
    """The metric of every setting on every query: ``[settings, queries]`` (columns: ``layout.qids``).

    Args:
        aggregator: the aggregator whose parameters the grid sets.
        table: the documents' arrays (:meth:`AggregateSpec.table`), rows matching ``layout``.
        grid: the settings.
        evaluator: the fast evaluator (its first measure is used unless ``measure`` is given).
        layout: ``evaluator.layout(table.keys)``.
        measure: which of the evaluator's measures.
    """
    name = measure or evaluator.names[0]
    settings = grid.settings
    out = np.empty((len(settings), len(layout.qids)))
    # Several scorers keep one [settings, documents] array per scorer besides the scores.
    arrays = 1 + len(aggregator.scorers) if aggregator.multi else 1
    block = max(1, _BLOCK_ELEMENTS // max(layout.n_docs * arrays, 1))
    bar = progress_bar(desc="grid search", total=len(settings), unit="setting")
    try:
        for start in range(0, len(settings), block):
            chunk = settings[start : start + block]
            scores = aggregator.scores(table, chunk, grid.names)
            out[start : start + len(chunk)] = evaluator.per_query(layout, scores)[name]
            bar.update(len(chunk))
    finally:
        bar.close()
    return out


def choose(values: np.ndarray, qids: Sequence[str], tune: Sequence[str]) -> tuple[int, float, int]:
    """The first setting (grid order) with the best mean over ``tune``: (index, mean, ties).

    Example:
        >>> choose(np.array([[0.5, 0.0], [1.0, 0.0], [1.0, 0.0]]), ["a", "b"], ["a"])
        (1, 1.0, 2)
    """
    position = {q: i for i, q in enumerate(qids)}
    idx = [position[q] for q in tune]
    if not idx:
        raise TuneError("cannot choose a setting without tuning queries")
    means = values[:, idx].mean(axis=1)
    best = float(means.max())
    tied = np.flatnonzero(means >= best - TIE_TOLERANCE)
    return int(tied[0]), float(means[tied[0]]), len(tied)


def cross_validate(
    passages: pd.DataFrame | Mapping[str, pd.DataFrame],
    qrels: pd.DataFrame,
    aggregator: AggregateSpec,
    grid: Grid,
    folds: Folds | None = None,
    *,
    metric: MeasureLike = "AP",
    relevance_level: int | None = None,
    k: int = 5,
    seed: int = 0,
) -> TuneResult:
    """Tune ``aggregator``'s parameters by cross-validation over ``grid`` (see the module docstring).

    Args:
        passages: scored Passages [qid, docno, score, first_stage_score] (+ pid, query); with
            several scorers (``aggregator.scorers``), ``{label: Passages}`` in their order.
        qrels: Qrels [qid, docno, label].
        aggregator: what to tune (:func:`evirank.aggregate.AggregateSpec.parse`); with several
            scorers the grid's settings whose extra scorer weights sum above 1 are left out.
        grid: settings of some of its parameters; the others keep their defaults.
        folds: the folds; ``None`` draws ``k`` folds with ``seed`` over the evaluated queries.
        metric: the measure maximised (AP, P@k, nDCG@k, RR@k, R@k, ...).
        relevance_level: trec_eval's ``-l`` for binary measures.
        k: number of folds when ``folds`` is None.
        seed: seed of those folds.

    Returns:
        A :class:`TuneResult` with each fold's choice and the cross-validated run.
    """
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    aggregator.check(grid.names)
    full_grid = grid.with_defaults(aggregator.defaults())
    if aggregator.multi:
        full_grid = full_grid.on_simplex(aggregator.evidence_parameters)
    needs_first_stage = _needs_first_stage(aggregator, full_grid)
    table = aggregator.table(passages, require_first_stage=needs_first_stage)
    timings["table"] = time.perf_counter() - clock

    clock = time.perf_counter()
    measure = parse_measure(metric, relevance_level)
    evaluator = FastEvaluator(qrels, [measure])
    layout = evaluator.layout(table.keys)
    qids = layout.qids
    if not qids:
        raise TuneError("no query has both scored passages and qrels; nothing to tune")
    unjudged = table.keys[QID].nunique() - len(qids)
    if unjudged:
        logger.warning("%d queries have passages but no qrels; they are not tuned or predicted", unjudged)
    folds = k_folds(qids, k=k, seed=seed) if folds is None else folds
    used = folds.restrict(qids)
    unpredicted = sorted(set(qids) - set(used.qids))
    if unpredicted:
        logger.warning(
            "%d evaluated queries are in no fold's test set and are left out of the run: %s",
            len(unpredicted),
            ", ".join(unpredicted[:10]),
        )
    timings["layout"] = time.perf_counter() - clock

    clock = time.perf_counter()
    values = grid_values(aggregator, table, full_grid, evaluator, layout)
    timings["grid"] = time.perf_counter() - clock

    clock = time.perf_counter()
    name = measure_name(measure)
    position = {q: i for i, q in enumerate(qids)}
    choices = [_choice(values, qids, fold, full_grid, position, aggregator) for fold in used]
    for choice in choices:
        logger.info(
            "fold %s: %s (tuning %s %.4f over %d queries, test %.4f over %d)",
            choice.fold,
            _format_params(choice.params, aggregator.parameters),
            name,
            choice.tune_mean,
            choice.n_tune,
            choice.test_mean,
            choice.n_test,
        )
    everything = Fold("all", tuple(qids), ())
    best = _choice(values, qids, everything, full_grid, position, aggregator)
    run = _cv_run(aggregator, table, full_grid, used, choices)
    timings["choose_and_run"] = time.perf_counter() - clock
    result = TuneResult(aggregator, full_grid, name, used, choices, run, qids, values, best, timings)
    logger.info(
        "cross-validated %s: %.4f over %d queries (%d settings x %d folds in %.2f s)",
        name,
        result.cv_mean,
        len(used.qids),
        len(full_grid),
        len(used),
        timings["grid"],
    )
    return result


class CrossValidatedTuner(Estimator):
    """The grid search as an Estimator: ``fit(passages, qrels)`` then ``transform(passages)``.

    ``transform`` ranks each fold's test queries with that fold's setting and every other
    query (new queries, another collection) with :attr:`TuneResult.best`.

    Args:
        aggregator: what to tune.
        grid: the settings.
        metric: the measure maximised.
        folds: the folds (None: ``k`` seeded folds over the evaluated queries).
        k: number of folds when ``folds`` is None.
        random_state: seed of those folds.

    Example:
        >>> from evirank.tune import parse_aggregate, parse_grid
        >>> tuner = CrossValidatedTuner(parse_aggregate("birch:2"), parse_grid("alpha=0:1:0.1"))
        >>> tuner.metric
        'AP'
    """

    def __init__(
        self,
        aggregator: AggregateSpec,
        grid: Grid,
        metric: MeasureLike = "AP",
        folds: Folds | None = None,
        k: int = 5,
        random_state: int = 0,
    ) -> None:
        self.aggregator = aggregator
        self.grid = grid
        self.metric = metric
        self.folds = folds
        self.k = k
        self.random_state = random_state

    def fit(self, passages: pd.DataFrame, qrels: pd.DataFrame, **_: Any) -> CrossValidatedTuner:
        """Run the cross-validated grid search; the result is ``self.result_``."""
        self.result_ = cross_validate(
            passages,
            qrels,
            self.aggregator,
            self.grid,
            self.folds,
            metric=self.metric,
            k=self.k,
            seed=self.random_state,
        )
        return self

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Aggregate scored passages with each query's fold setting (``best`` for other queries)."""
        result: TuneResult = self.result_
        table = self.aggregator.table(
            frame, require_first_stage=_needs_first_stage(self.aggregator, result.grid)
        )
        fold_of = result.folds.fold_of()
        by_fold = {c.fold: c.index for c in result.choices}
        index = np.array([by_fold.get(fold_of.get(q, ""), result.best.index) for q in table.keys[QID]])
        scores = np.empty(len(index))
        for setting in np.unique(index):
            rows = index == setting
            values = self.aggregator.scores(table, result.grid.settings[[setting]], result.grid.names)[0]
            scores[rows] = values[rows]
        return sort_run(table.keys.assign(**{SCORE: scores}))


def _choice(
    values: np.ndarray,
    qids: Sequence[str],
    fold: Fold,
    grid: Grid,
    position: dict[str, int],
    aggregator: AggregateSpec,
) -> FoldChoice:
    index, tune_mean, tied = choose(values, qids, fold.tune)
    test_idx = [position[q] for q in fold.test]
    test_mean = float(values[index, test_idx].mean()) if test_idx else float("nan")
    params = aggregator.with_first_weight(grid.setting(index))
    return FoldChoice(fold.name, index, params, tune_mean, test_mean, tied, len(fold.tune), len(test_idx))


def _cv_run(
    aggregator: AggregateSpec,
    table: PassageTable | EvidenceTable,
    grid: Grid,
    folds: Folds,
    choices: list[FoldChoice],
) -> pd.DataFrame:
    keys_qid = table.keys[QID].to_numpy()
    parts = []
    for fold, choice in zip(folds, choices, strict=True):
        rows = np.isin(keys_qid, list(fold.test))
        scores = aggregator.scores(table, grid.settings[[choice.index]], grid.names)[0]
        part = table.keys[rows].assign(**{SCORE: scores[rows]})
        parts.append(part)
    run = pd.concat(parts, ignore_index=True)
    columns = [c for c in run.columns if c != FIRST_STAGE_SCORE] + (
        [FIRST_STAGE_SCORE] if FIRST_STAGE_SCORE in run else []
    )
    return sort_run(run[columns])


def _needs_first_stage(aggregator: AggregateSpec, grid: Grid) -> bool:
    alphas = (
        grid.axes[grid.names.index("alpha")] if "alpha" in grid.names else (aggregator.defaults()["alpha"],)
    )
    return any(a > 0 for a in alphas)


def _format_params(params: dict[str, float], order: Sequence[str]) -> str:
    return " ".join(f"{k}={params[k]:g}" for k in order if k in params)
