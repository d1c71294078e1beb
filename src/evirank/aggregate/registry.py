"""The aggregator registry and the one parser of ``--aggregate`` specs.

Every aggregator of :mod:`evirank.aggregate.aggregators` is registered here under its spec name
(as ir_measures registers measures): ``birch:N`` (``birch`` is ``birch:3``), ``maxp``, ``firstp``,
``sump``, ``meanp``. Each declares its parameters with their defaults and a scorer for many
settings at once (:meth:`~evirank.aggregate.Aggregator.settings_scores`). An
:class:`AggregateSpec` is a parsed spec plus the normalisation; it builds the stage that
``rerank``, ``serve`` and the Python API run (:meth:`AggregateSpec.build`) and scores the grid the
tuner searches (:meth:`AggregateSpec.scores`), through the same arithmetic.

One default normalisation everywhere: :data:`~evirank.aggregate.aggregators.DEFAULT_NORMALISE`
(``"minmax"``; why: :mod:`evirank.aggregate.aggregators`).

Example:
    >>> spec = AggregateSpec.parse("birch:2")
    >>> str(spec), spec.parameters, spec.defaults()
    ('birch:2', ('alpha', 'w1', 'w2'), {'alpha': 0.5, 'w1': 1.0, 'w2': 0.5})
    >>> spec.build(alpha=0.3)
    Birch(alpha=0.3, normalise='minmax', top_n=2, weights=(1.0, 0.5))
    >>> AggregateSpec.parse("MaxP").parameters
    ('alpha',)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evirank.aggregate.aggregators import (
    DEFAULT_NORMALISE,
    Aggregator,
    Birch,
    FirstP,
    MaxP,
    MeanP,
    SumP,
)
from evirank.aggregate.core import NORMALISATIONS, Normalise, PassageTable, top_passage_matrix
from evirank.errors import EvirankError

logger = logging.getLogger(__name__)

#: Spec name -> aggregator class, in the order help texts list them.
AGGREGATORS: dict[str, type[Aggregator]] = {cls.name: cls for cls in (Birch, MaxP, FirstP, SumP, MeanP)}
#: The registered spec names.
KINDS = tuple(AGGREGATORS)
#: How help texts and errors describe the grammar.
GRAMMAR = "birch[:N] (birch is birch:3), " + ", ".join(n for n in KINDS if not AGGREGATORS[n].numbered)

_SPEC = re.compile(r"^(?P<kind>[a-z]+)(?::(?P<n>[^:]*))?$")


class AggregateSpecError(EvirankError, ValueError):
    """An aggregator spec that cannot be parsed, or parameters the aggregator does not have."""


@dataclass(frozen=True)
class AggregateSpec:
    """A registered aggregator, how many passages it counts, and the normalisation.

    Attributes:
        kind: a name of :data:`AGGREGATORS`.
        top_n: how many of the best passages count (Birch's N; 1 for the others).
        normalise: ``"minmax"`` (default) or ``"none"`` (see :mod:`evirank.aggregate.core`).

    Example:
        >>> AggregateSpec("birch", 1).spec
        'birch:1'
    """

    kind: str
    top_n: int = 3
    normalise: Normalise = DEFAULT_NORMALISE

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATORS:
            raise AggregateSpecError(f"unknown aggregator {self.kind!r}; expected {GRAMMAR}")
        if self.normalise not in NORMALISATIONS:
            raise AggregateSpecError(f"normalise must be one of {NORMALISATIONS}, found {self.normalise!r}")
        if not isinstance(self.top_n, int) or self.top_n < 1:
            raise AggregateSpecError(f"top_n must be a positive integer, found {self.top_n!r}")
        if not self.stage_class.numbered and self.top_n != 1:
            object.__setattr__(self, "top_n", 1)

    @classmethod
    def parse(
        cls, spec: str, normalise: Normalise | None = None, *, top_n: int | None = None
    ) -> AggregateSpec:
        """Parse ``birch[:N]``, ``maxp``, ``firstp``, ``sump`` or ``meanp`` (any case).

        Args:
            spec: the spec string.
            normalise: ``"minmax"`` or ``"none"``; None is the default (``"minmax"``).
            top_n: Birch's N when the spec has none (e.g. the number of weights given);
                default 3.

        Raises:
            AggregateSpecError: an unknown or malformed spec.

        Example:
            >>> AggregateSpec.parse("birch:1", "none")
            AggregateSpec(kind='birch', top_n=1, normalise='none')
        """
        match = _SPEC.match(str(spec).strip().lower())
        if match is None or match["kind"] not in AGGREGATORS:
            raise AggregateSpecError(f"unknown aggregator {spec!r}; expected {GRAMMAR}")
        kind, number = match["kind"], match["n"]
        stage = AGGREGATORS[kind]
        if number is not None and not stage.numbered:
            raise AggregateSpecError(f"{kind} takes no parameter (only birch:N does), found {spec!r}")
        if number is not None:
            if not number.isdigit() or int(number) < 1:
                raise AggregateSpecError(f"expected {kind}:N with a positive integer N, found {spec!r}")
            n = int(number)
        else:
            n = (top_n if top_n is not None else 3) if stage.numbered else 1
        return cls(kind, n, DEFAULT_NORMALISE if normalise is None else normalise)

    # ------------------------------------------------------------------------------------------
    @property
    def stage_class(self) -> type[Aggregator]:
        """The registered :class:`~evirank.aggregate.Aggregator` subclass."""
        return AGGREGATORS[self.kind]

    @property
    def spec(self) -> str:
        """The canonical spec: ``birch:3``, ``maxp`` (the normalisation is not part of it)."""
        return f"{self.kind}:{self.top_n}" if self.stage_class.numbered else self.kind

    name = spec

    def __str__(self) -> str:
        return self.spec

    @property
    def parameters(self) -> tuple[str, ...]:
        """The tunable parameter names, in order."""
        return self.stage_class.parameters(self.top_n)

    def defaults(self) -> dict[str, float]:
        """Each parameter's value when a grid or a flag leaves it unset."""
        return self.stage_class.defaults(self.top_n)

    def check(self, names: Sequence[str]) -> None:
        """Raise :class:`AggregateSpecError` for names that are not parameters of this aggregator."""
        unknown = [n for n in names if n not in self.parameters]
        if unknown:
            raise AggregateSpecError(
                f"{self.spec} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters are {', '.join(self.parameters)}"
            )

    # ------------------------------------------------------------------------------------------
    def build(self, alpha: float | None = None, weights: Sequence[float] | None = None) -> Aggregator:
        """The stage with this alpha (None: the default) and, for Birch, these weights.

        Raises:
            AggregateSpecError: weights for an aggregator that has none, or bad values.

        Example:
            >>> AggregateSpec.parse("maxp").build()
            MaxP(alpha=0.0, normalise='minmax')
        """
        params: dict[str, float] = {}
        if alpha is not None:
            params["alpha"] = float(alpha)
        if weights is not None:
            if not self.stage_class.numbered:
                raise AggregateSpecError(f"weights are Birch's (birch:N); {self.kind} takes none")
            if len(weights) != self.top_n:
                raise AggregateSpecError(
                    f"weights must have top_n={self.top_n} values, found {len(weights)}: {tuple(weights)}"
                )
            params.update({f"w{i}": float(w) for i, w in enumerate(weights, start=1)})
        return self.stage(params)

    def stage(self, params: Mapping[str, float]) -> Aggregator:
        """The stage with these parameter values (by name; defaults for the rest)."""
        self.check(list(params))
        full = {**self.defaults(), **{k: float(v) for k, v in params.items()}}
        try:
            if self.stage_class.numbered:
                weights = tuple(full[f"w{i}"] for i in range(1, self.top_n + 1))
                return self.stage_class(  # type: ignore[call-arg]
                    top_n=self.top_n, alpha=full["alpha"], weights=weights, normalise=self.normalise
                )
            return self.stage_class(alpha=full["alpha"], normalise=self.normalise)
        except ValueError as exc:
            raise AggregateSpecError(f"{self.spec}: {exc}") from None

    def table(self, passages: pd.DataFrame, *, require_first_stage: bool = True) -> PassageTable:
        """Group scored passages by document (:func:`~evirank.aggregate.top_passage_matrix`)."""
        return top_passage_matrix(
            passages, self.top_n, self.normalise, require_first_stage=require_first_stage
        )

    def scores(self, table: PassageTable, settings: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """Document scores ``[G, D]`` for settings ``[G, P]`` whose columns are ``names``.

        Parameters missing from ``names`` take their :meth:`defaults`; the arithmetic is the
        stage's own (:meth:`~evirank.aggregate.Aggregator.settings_scores`).

        Example:
            >>> p = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "a", "b"], "score": [0.2, 0.9, 0.5],
            ...                   "first_stage_score": [10.0, 10.0, 12.0]})
            >>> spec = AggregateSpec.parse("maxp")
            >>> spec.scores(spec.table(p), np.array([[0.0], [1.0]]), ["alpha"]).tolist()
            [[1.0, 0.4285714285714286], [0.0, 1.0]]
        """
        self.check(names)
        values = np.atleast_2d(np.asarray(settings, dtype=np.float64))
        column = {n: i for i, n in enumerate(names)}
        params = {
            name: values[:, column[name]] if name in column else np.full(len(values), default)
            for name, default in self.defaults().items()
        }
        alpha = params["alpha"]
        if np.any((alpha < 0) | (alpha > 1)):
            raise AggregateSpecError("alpha must be in [0, 1]")
        return self.stage_class.settings_scores(table, params)


def parse_aggregate(
    spec: str,
    *,
    alpha: float | None = None,
    weights: Sequence[float] | str | None = None,
    normalise: Normalise | None = None,
) -> Aggregator:
    """The aggregator stage of a spec and its flags: ``birch[:N]``, ``maxp``, ``firstp``, ``sump``, ``meanp``.

    Args:
        spec: the spec string (``birch`` alone is ``birch:3``, or as many passages as weights).
        alpha: the first-stage weight; None keeps the aggregator's default (Birch 0.5, the
            others 0: the passage evidence alone).
        weights: Birch's top-n weights, numbers or a comma-separated string (None: 1, 1/2, 1/4, ...).
        normalise: ``"minmax"`` or ``"none"``; None is the default, ``"minmax"``.

    Raises:
        AggregateSpecError: an unknown spec, weights for another aggregator, or bad values.

    Example:
        >>> parse_aggregate("birch:2", alpha=0.3, weights="1,0.5")
        Birch(alpha=0.3, normalise='minmax', top_n=2, weights=(1.0, 0.5))
        >>> parse_aggregate("maxp").alpha
        0.0
    """
    values = parse_weights(weights) if isinstance(weights, str) else weights
    parsed = AggregateSpec.parse(spec, normalise, top_n=len(values) if values is not None else None)
    return parsed.build(alpha=alpha, weights=values)


def parse_weights(text: str) -> list[float]:
    """Birch's weights from the command line's comma-separated form.

    Raises:
        AggregateSpecError: anything but at least one number.

    Example:
        >>> parse_weights("1,0.5, 0.25")
        [1.0, 0.5, 0.25]
    """
    try:
        values = [float(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise AggregateSpecError(f"expected comma-separated numbers (1,0.5,0.25), found {text!r}") from None
    if not values:
        raise AggregateSpecError(f"expected at least one weight, found {text!r}")
    return values
