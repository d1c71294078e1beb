"""Evaluation: measures with trec_eval semantics, per-query tables, significance tests, reports.

Measures are ir_measures values (re-exported here: ``AP``, ``P``, ``nDCG``, ``RR``, ``R``, ...)
or their names. :class:`Evaluator` evaluates one run at a time; :class:`FastEvaluator`
(:mod:`evirank.evaluate.fast`) evaluates many score settings of fixed candidates at once, with the
same semantics (the tuner's inner loop).

Example:
    >>> from evirank.evaluate import AP, P, evaluate, nDCG
    >>> from evirank.frames import make_qrels, make_run
    >>> evaluate(make_run([("1", "a", 1.0)]), make_qrels([("1", "a", 1)]), [AP, P@20, nDCG@20])
    {'AP': 1.0, 'P@20': 0.05, 'nDCG@20': 1.0}
"""

from __future__ import annotations

from ir_measures import AP, RR, P, R, Rprec, Success, nDCG

from evirank.evaluate.compare import Comparison, compare, summarize
from evirank.evaluate.fast import FastEvaluator, Layout
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
from evirank.evaluate.significance import adjust, bonferroni, holm, paired_ttest
from evirank.evaluate.tables import markdown_report, markdown_table, per_query_markdown, to_json, to_record

__all__ = [
    "AP",
    "DEFAULT_MEASURES",
    "RR",
    "Comparison",
    "EvaluationError",
    "Evaluator",
    "FastEvaluator",
    "Layout",
    "MeasureError",
    "P",
    "R",
    "Rprec",
    "Success",
    "adjust",
    "bonferroni",
    "compare",
    "evaluate",
    "holm",
    "markdown_report",
    "markdown_table",
    "measure_name",
    "nDCG",
    "paired_ttest",
    "parse_measure",
    "parse_measures",
    "per_query",
    "per_query_markdown",
    "rank_for_evaluation",
    "summarize",
    "to_json",
    "to_record",
]
