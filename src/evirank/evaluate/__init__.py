"""Evaluation: measures with trec_eval semantics, per-query tables, significance tests, reports.

Example:
    >>> from evirank.evaluate import evaluate
    >>> from evirank.frames import make_qrels, make_run
    >>> evaluate(make_run([("1", "a", 1.0)]), make_qrels([("1", "a", 1)]), ["AP", "P@20"])
    {'AP': 1.0, 'P@20': 0.05}
"""

from __future__ import annotations

from evirank.evaluate.measures import (
    DEFAULT_MEASURES,
    EvaluationError,
    Evaluator,
    MeasureError,
    evaluate,
    measure_name,
    parse_measure,
    parse_measures,
    per_query,
    rank_for_evaluation,
)

__all__ = [
    "DEFAULT_MEASURES",
    "EvaluationError",
    "Evaluator",
    "MeasureError",
    "evaluate",
    "measure_name",
    "parse_measure",
    "parse_measures",
    "per_query",
    "rank_for_evaluation",
]
