"""Several runs, one qrels: per-query values, means, and tests against a baseline, as one object.

:func:`compare` evaluates each run (one :class:`~evirank.evaluate.measures.Evaluator`, so the
qrels are read once) and hands the per-query table to :func:`summarize`, which computes the
means and the significance tests. Code that already has per-query values (cross-validated
tuning, cached scores) calls :func:`summarize` directly. :mod:`evirank.evaluate.tables` turns a
:class:`Comparison` into Markdown or JSON.

Example:
    >>> from evirank.frames import make_qrels, make_run
    >>> qrels = make_qrels([("1", "a", 1), ("2", "b", 1)])
    >>> runs = {"bm25": make_run([("1", "x", 2.0), ("1", "a", 1.0), ("2", "b", 1.0)]),
    ...         "new": make_run([("1", "a", 2.0), ("2", "b", 1.0)])}
    >>> result = compare(runs, qrels, ["AP"], baseline="bm25")
    >>> result.means.round(2).to_dict()
    {'AP': {'bm25': 0.75, 'new': 1.0}}
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from evirank.evaluate.measures import (
    DEFAULT_MEASURES,
    Evaluator,
    MeasureLike,
    Missing,
    Ties,
    parse_measure,
)
from evirank.evaluate.significance import Correction, Family, paired_ttest
from evirank.frames import MEASURE, QID, RUN, VALUE, require_columns

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Comparison:
    """The result of comparing runs: per-query values, means, and (with a baseline) t-tests.

    Attributes:
        per_query: [run, qid, measure, value], runs and measures in the order given.
        means: one row per run (index), one column per measure: each measure's aggregate.
        queries: the number of queries each run was evaluated on.
        significance: the frame of :func:`evirank.evaluate.significance.paired_ttest`, or None.
        baseline: the baseline's name, or None.
        settings: how the numbers were computed (ties, missing, correction, alpha, ...).
    """

    per_query: pd.DataFrame
    means: pd.DataFrame
    queries: dict[str, int]
    significance: pd.DataFrame | None = None
    baseline: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> list[str]:
        """Run names, in table order."""
        return [str(r) for r in self.means.index]

    @property
    def measures(self) -> list[str]:
        """Measure names, in table order."""
        return [str(m) for m in self.means.columns]


def compare(
    runs: Mapping[str, pd.DataFrame],
    qrels: pd.DataFrame,
    measures: Iterable[MeasureLike] = DEFAULT_MEASURES,
    *,
    baseline: str | None = None,
    correction: Correction = "bonferroni",
    alpha: float = 0.05,
    family: Family = "all",
    ties: Ties = "trec_eval",
    missing: Missing = "skip",
    relevance_level: int | None = None,
) -> Comparison:
    """Evaluate ``runs`` (name -> Run frame) on ``qrels``; test each against ``baseline`` if given.

    See :class:`~evirank.evaluate.measures.Evaluator` for ``ties``, ``missing`` and
    ``relevance_level``, and :func:`~evirank.evaluate.significance.paired_ttest` for the rest.
    """
    if not runs:
        raise ValueError("compare: expected at least one run, found none")
    if baseline is not None and baseline not in runs:
        raise ValueError(f"compare: baseline {baseline!r} is not among the runs {list(runs)}")
    evaluator = Evaluator(qrels, measures, ties=ties, missing=missing, relevance_level=relevance_level)
    tables = []
    for name, run in runs.items():
        logger.info("evaluating %s", name)
        table = evaluator.per_query(run)
        table.insert(0, RUN, name)
        tables.append(table)
    per_query = pd.concat(tables, ignore_index=True)
    settings = {"ties": ties, "missing": missing, "relevance_level": relevance_level}
    return summarize(
        per_query,
        evaluator.names,
        baseline=baseline,
        correction=correction,
        alpha=alpha,
        family=family,
        runs=list(runs),
        settings=settings,
    )


def summarize(
    per_query: pd.DataFrame,
    measures: Sequence[str] | None = None,
    *,
    baseline: str | None = None,
    correction: Correction = "bonferroni",
    alpha: float = 0.05,
    family: Family = "all",
    runs: Sequence[str] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Comparison:
    """Means and significance tests from a per-query table [run, qid, measure, value].

    Means use each measure's own aggregation (ir_measures: a mean, or a sum for counts such as
    ``NumRet``), over the queries each run was evaluated on.

    Example:
        >>> table = pd.DataFrame({"run": ["a", "a"], "qid": ["1", "2"], "measure": ["AP", "AP"],
        ...                       "value": [1.0, 0.5]})
        >>> summarize(table).means.to_dict()
        {'AP': {'a': 0.75}}
    """
    require_columns(per_query, (RUN, QID, MEASURE, VALUE), "summarize")
    run_names = list(runs) if runs is not None else list(dict.fromkeys(per_query[RUN].astype(str)))
    measure_names = list(measures) if measures is not None else list(dict.fromkeys(per_query[MEASURE]))
    means = pd.DataFrame(index=pd.Index(run_names, name=RUN), columns=measure_names, dtype="float64")
    queries: dict[str, int] = {}
    for run in run_names:
        rows = per_query[per_query[RUN] == run]
        queries[run] = int(rows[QID].nunique())
        for name in measure_names:
            agg = _aggregator(name)
            for value in rows.loc[rows[MEASURE] == name, VALUE]:
                agg.add(float(value))
            means.loc[run, name] = float(agg.result())
    significance = None
    if baseline is not None:
        significance = paired_ttest(
            per_query,
            baseline,
            correction=correction,
            alpha=alpha,
            family=family,
            runs=run_names,
            measures=measure_names,
        )
    all_settings = dict(settings or {})
    all_settings.update(
        {"correction": correction, "alpha": alpha, "family": family, "test": "paired two-sided t-test"}
        if baseline is not None
        else {}
    )
    return Comparison(
        per_query=per_query.reset_index(drop=True),
        means=means,
        queries=queries,
        significance=significance,
        baseline=baseline,
        settings=all_settings,
    )


def _aggregator(name: str) -> Any:
    try:
        return parse_measure(name).aggregator()
    except ValueError:  # a custom column name: plain mean
        from ir_measures.measures.base import MeanAgg

        return MeanAgg()
