"""Errors of the tuner: bad grids, folds and inputs (bad aggregator specs raise
:class:`evirank.aggregate.AggregateSpecError`).

Each subclasses ``ValueError`` (and :class:`evirank.errors.EvirankError`, so the CLI reports it
as one clear line).

Example:
    >>> issubclass(GridError, ValueError)
    True
"""

from __future__ import annotations

from evirank.errors import EvirankError


class TuneError(EvirankError, ValueError):
    """Tuning cannot proceed with the inputs given (no queries with qrels, a bad combination)."""


class GridError(TuneError):
    """A grid specification that cannot be parsed."""


class FoldsError(TuneError):
    """Folds that are inconsistent (overlapping test sets, a fold tuned on its own test queries)."""
