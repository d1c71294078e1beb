"""Aggregators as functions of their parameters, for many settings at once.

A :class:`Tunable` names an aggregator of :mod:`evirank.aggregate` and its parameters:

- ``birch:N`` (Birch over the top N passages; ``birch`` is ``birch:3``): ``alpha``, ``w1`` ..
  ``wN``. Unset parameters keep :class:`~evirank.aggregate.Birch`'s defaults (alpha 0.5, weights
  1, 1/2, 1/4, ...); Birch's own grid fixes ``w1 = 1`` and tunes ``alpha, w2, w3`` in [0, 1].
- ``maxp``, ``firstp``, ``sump``, ``meanp``: ``alpha``, the weight of the first-stage score
  interpolated with the passage evidence (default 0: the evidence alone).

The arithmetic is :func:`evirank.aggregate.birch_scores` over the arrays of
:func:`evirank.aggregate.top_passage_matrix`, so a tuned setting scores documents exactly as the
aggregator stage with those parameters does (:meth:`Tunable.stage` builds it).

Example:
    >>> agg = parse_aggregate("birch:2")
    >>> agg.parameters, agg.defaults()
    (('alpha', 'w1', 'w2'), {'alpha': 0.5, 'w1': 1.0, 'w2': 0.5})
    >>> parse_aggregate("maxp").parameters
    ('alpha',)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evirank.aggregate import (
    NORMALISATIONS,
    Aggregator,
    Birch,
    FirstP,
    MaxP,
    MeanP,
    PassageTable,
    SumP,
    birch_scores,
    top_passage_matrix,
)
from evirank.aggregate.core import Normalise
from evirank.tune.errors import AggregateSpecError

logger = logging.getLogger(__name__)

KINDS = ("birch", "maxp", "firstp", "sump", "meanp")
_STAGES: dict[str, type[Aggregator]] = {"maxp": MaxP, "firstp": FirstP, "sump": SumP, "meanp": MeanP}
_SPEC = re.compile(r"^(?P<kind>[a-z]+)(?::(?P<n>\d+))?$")


@dataclass(frozen=True)
class Tunable:
    """An aggregator whose parameters are set per setting.

    Attributes:
        kind: one of :data:`KINDS`.
        top_n: how many of the best passages count (Birch's n; 1 for the others).
        normalise: ``"none"`` or ``"minmax"`` (see :mod:`evirank.aggregate.core`).
    """

    kind: str
    top_n: int = 3
    normalise: Normalise = "minmax"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AggregateSpecError(f"unknown aggregator {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.normalise not in NORMALISATIONS:
            raise AggregateSpecError(f"normalise must be one of {NORMALISATIONS}, found {self.normalise!r}")
        if self.top_n < 1:
            raise AggregateSpecError(f"top_n must be >= 1, found {self.top_n}")

    @property
    def name(self) -> str:
        """The spec this parses from (``birch:3``, ``maxp``)."""
        return f"birch:{self.top_n}" if self.kind == "birch" else self.kind

    @property
    def parameters(self) -> tuple[str, ...]:
        """The tunable parameter names, in order."""
        if self.kind == "birch":
            return ("alpha", *(f"w{i}" for i in range(1, self.top_n + 1)))
        return ("alpha",)

    def defaults(self) -> dict[str, float]:
        """Values of the parameters a grid leaves unset (the aggregator classes' defaults)."""
        if self.kind == "birch":
            return {"alpha": 0.5, **{f"w{i}": 0.5 ** (i - 1) for i in range(1, self.top_n + 1)}}
        return {"alpha": 0.0}

    def check(self, names: Sequence[str]) -> None:
        """Raise :class:`AggregateSpecError` for names that are not parameters of this aggregator."""
        unknown = [n for n in names if n not in self.parameters]
        if unknown:
            raise AggregateSpecError(
                f"{self.name} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters are {', '.join(self.parameters)}"
            )

    def table(self, passages: pd.DataFrame, *, require_first_stage: bool = True) -> PassageTable:
        """Group scored passages by document (:func:`~evirank.aggregate.top_passage_matrix`)."""
        return top_passage_matrix(
            passages, self.top_n, self.normalise, require_first_stage=require_first_stage
        )

    def scores(self, table: PassageTable, settings: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """Document scores ``[G, D]`` for settings ``[G, P]`` whose columns are ``names``.

        Parameters missing from ``names`` take their :meth:`defaults`.
        """
        self.check(names)
        values = np.atleast_2d(np.asarray(settings, dtype=np.float64))
        column = {n: i for i, n in enumerate(names)}
        defaults = self.defaults()

        def param(name: str) -> np.ndarray:
            if name in column:
                return values[:, column[name]]
            return np.full(len(values), defaults[name])

        alpha = param("alpha")
        if np.any((alpha < 0) | (alpha > 1)):
            raise AggregateSpecError("alpha must be in [0, 1]")
        if self.kind == "birch":
            weights = np.stack([param(f"w{i}") for i in range(1, self.top_n + 1)], axis=1)
            return birch_scores(table.s_doc, table.top, alpha, weights)
        evidence = _evidence(self.kind, table)
        return birch_scores(table.s_doc, evidence[:, np.newaxis], alpha, np.ones((len(values), 1)))

    def stage(self, params: Mapping[str, float]) -> Aggregator:
        """The :mod:`evirank.aggregate` stage with these parameters (defaults for the rest)."""
        self.check(list(params))
        full = {**self.defaults(), **{k: float(v) for k, v in params.items()}}
        if self.kind == "birch":
            weights = tuple(full[f"w{i}"] for i in range(1, self.top_n + 1))
            return Birch(top_n=self.top_n, alpha=full["alpha"], weights=weights, normalise=self.normalise)
        return _STAGES[self.kind](alpha=full["alpha"], normalise=self.normalise)


def parse_aggregate(spec: str, normalise: Normalise = "minmax") -> Tunable:
    """Parse ``birch:3``, ``birch``, ``maxp``, ``firstp``, ``sump`` or ``meanp``.

    Example:
        >>> parse_aggregate("birch:1", normalise="none")
        Tunable(kind='birch', top_n=1, normalise='none')
    """
    match = _SPEC.match(spec.strip().lower())
    if match is None or match["kind"] not in KINDS:
        raise AggregateSpecError(
            f"unknown aggregator {spec!r}; expected birch:N (e.g. birch:3), maxp, firstp, sump or meanp"
        )
    kind = match["kind"]
    if match["n"] is not None and kind != "birch":
        raise AggregateSpecError(f"{kind} takes no number (only birch:N does), found {spec!r}")
    top_n = int(match["n"]) if match["n"] is not None else (3 if kind == "birch" else 1)
    return Tunable(kind, top_n, normalise)


def _evidence(kind: str, table: PassageTable) -> np.ndarray:
    if kind == "maxp":
        return table.best
    if kind == "firstp":
        return table.first
    if kind == "sump":
        return table.total
    return table.total / table.n_passages
