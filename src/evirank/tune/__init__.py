"""Cross-validated tuning of aggregator parameters from cached passage scores.

Score once, tune many: the passages' scores come from the score store (or a file), and the
grid search evaluates every setting in-process, vectorised, in seconds.

- :mod:`~evirank.tune.folds`: folds from the Robust04 JSON format, a ``qid<TAB>fold`` TSV, or
  ``k`` seeded folds.
- :mod:`~evirank.tune.grid`: grids such as ``alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1``.
- :func:`parse_aggregate` (:meth:`evirank.aggregate.AggregateSpec.parse`): ``birch:N``, ``maxp``, ...
  as functions of their parameters, from the one aggregator registry.
- :class:`~evirank.evaluate.FastEvaluator`: per-query AP, P@k, nDCG@k, ... of many settings at once.
- :mod:`~evirank.tune.search`: the cross-validated grid search and the cross-validated run.
- :mod:`~evirank.tune.inputs`: scored passages from a score store or a file.

Example:
    >>> from evirank.tune import cross_validate, k_folds, parse_aggregate, parse_grid
    >>> grid = parse_grid("alpha=0:1:0.1 w2=0:1:0.1")
    >>> len(grid), parse_aggregate("birch:2").parameters
    (121, ('alpha', 'w1', 'w2'))
"""

from __future__ import annotations

from evirank.aggregate.registry import KINDS, AggregateSpec, AggregateSpecError
from evirank.evaluate.fast import FastEvaluator, Layout
from evirank.tune.errors import FoldsError, GridError, TuneError
from evirank.tune.folds import DEFAULT_TUNE_ON, Fold, Folds, k_folds, read_folds, write_folds
from evirank.tune.grid import Grid, parse_grid
from evirank.tune.search import (
    TIE_TOLERANCE,
    CrossValidatedTuner,
    FoldChoice,
    TuneResult,
    choose,
    cross_validate,
    grid_values,
)

#: What the tuner tunes: a registered aggregator, its number of passages and the normalisation.
Tunable = AggregateSpec
#: Parse ``birch:3``, ``maxp``... with an optional normalisation (:meth:`AggregateSpec.parse`).
parse_aggregate = AggregateSpec.parse

__all__ = [
    "DEFAULT_TUNE_ON",
    "KINDS",
    "TIE_TOLERANCE",
    "AggregateSpec",
    "AggregateSpecError",
    "CrossValidatedTuner",
    "FastEvaluator",
    "Fold",
    "FoldChoice",
    "Folds",
    "FoldsError",
    "Grid",
    "GridError",
    "Layout",
    "Tunable",
    "TuneError",
    "TuneResult",
    "choose",
    "cross_validate",
    "grid_values",
    "k_folds",
    "parse_aggregate",
    "parse_grid",
    "read_folds",
    "write_folds",
]
