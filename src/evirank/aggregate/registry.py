"""The aggregator registry and the one parser of ``--aggregate`` specs.

Every aggregator of :mod:`evirank.aggregate.aggregators` is registered here under its spec name
(as ir_measures registers measures): ``birch:N`` (``birch`` is ``birch:3``), ``maxp``, ``firstp``,
``sump``, ``meanp``, and ``document`` (the score a document-level scorer such as PARADE
computed). Each declares its parameters with their defaults and a scorer for many
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

With several scorers (:mod:`evirank.aggregate.evidence`), each extra scorer's weight is one more
parameter, named by its label (the first scorer's weight is 1 minus theirs):

    >>> AggregateSpec.parse("maxp", scorers=("cross", "bi")).parameters
    ('alpha', 'bi')
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from evirank.aggregate.aggregators import (
    DEFAULT_NORMALISE,
    Aggregator,
    Birch,
    DocumentScore,
    FirstP,
    MaxP,
    MeanP,
    SumP,
)
from evirank.aggregate.core import NORMALISATIONS, Normalise, PassageTable, top_passage_matrix
from evirank.aggregate.evidence import (
    EvidenceSpecError,
    EvidenceTable,
    MultiEvidence,
    check_labels,
    evidence_scores,
    evidence_tables,
    split_evidence,
)
from evirank.grammar import SpecError, parse_spec

logger = logging.getLogger(__name__)

#: Spec name -> aggregator class, in the order help texts list them.
AGGREGATORS: dict[str, type[Aggregator]] = {
    cls.name: cls for cls in (Birch, MaxP, FirstP, SumP, MeanP, DocumentScore)
}
#: The registered spec names.
KINDS = tuple(AGGREGATORS)
#: How help texts and errors describe the grammar.
MAX_TOP_N = 10_000
"""The largest Birch N: beyond a document's passages (--max-passages, 1000 by default) it changes
nothing, and a huge N would allocate its weights (birch:99999999999999 exhausted memory)."""

GRAMMAR = "birch[:N] (birch is birch:3), " + ", ".join(n for n in KINDS if not AGGREGATORS[n].numbered)


class AggregateSpecError(SpecError):
    """An aggregator spec that cannot be parsed, or parameters the aggregator does not have."""


@dataclass(frozen=True)
class AggregateSpec:
    """A registered aggregator, how many passages it counts, and the normalisation.

    Attributes:
        kind: a name of :data:`AGGREGATORS`.
        top_n: how many of the best passages count (Birch's N; 1 for the others).
        normalise: ``"minmax"`` (default) or ``"none"`` (see :mod:`evirank.aggregate.core`).
        scorers: the labels of the scorers whose evidence is combined (:mod:`evirank.aggregate.evidence`);
            empty or one label: one scorer, today's aggregator exactly.

    Example:
        >>> AggregateSpec("birch", 1).spec
        'birch:1'
    """

    kind: str
    top_n: int = 3
    normalise: Normalise = DEFAULT_NORMALISE
    scorers: tuple[str, ...] = ()

    def __repr__(self) -> str:
        extra = f", scorers={self.scorers!r}" if self.scorers else ""
        return f"AggregateSpec(kind={self.kind!r}, top_n={self.top_n!r}, normalise={self.normalise!r}{extra})"

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATORS:
            raise AggregateSpecError(f"unknown aggregator {self.kind!r}; expected {GRAMMAR}")
        if self.normalise not in NORMALISATIONS:
            raise AggregateSpecError(f"normalise must be one of {NORMALISATIONS}, found {self.normalise!r}")
        if not isinstance(self.top_n, int) or not 1 <= self.top_n <= MAX_TOP_N:
            raise AggregateSpecError(
                f"top_n must be a positive integer up to {MAX_TOP_N}, found {self.top_n!r}"
            )
        if not self.stage_class.numbered and self.top_n != 1:
            object.__setattr__(self, "top_n", 1)
        if self.scorers:
            try:
                object.__setattr__(self, "scorers", check_labels(self.scorers))
            except EvidenceSpecError as exc:
                raise AggregateSpecError(str(exc)) from None

    @classmethod
    def parse(
        cls,
        spec: str,
        normalise: Normalise | None = None,
        *,
        top_n: int | None = None,
        scorers: Sequence[str] = (),
    ) -> AggregateSpec:
        """Parse ``birch[:N]``, ``maxp``, ``firstp``, ``sump``, ``meanp`` or ``document`` (any case).

        Args:
            spec: the spec string.
            normalise: ``"minmax"`` or ``"none"``; None is the default (``"minmax"``).
            top_n: Birch's N when the spec has none (e.g. the number of weights given);
                default 3.
            scorers: the labels of several scorers whose evidence is combined (empty: one).

        Raises:
            AggregateSpecError: an unknown or malformed spec.

        Example:
            >>> AggregateSpec.parse("birch:1", "none")
            AggregateSpec(kind='birch', top_n=1, normalise='none')
        """
        try:
            parsed = parse_spec(spec, what="aggregator", error=AggregateSpecError)
        except AggregateSpecError:
            parsed = None
        if parsed is None or parsed.name not in AGGREGATORS or len(parsed.args) > 1:
            raise AggregateSpecError(f"unknown aggregator {spec!r}; expected {GRAMMAR}")
        kind, number = parsed.name, parsed.arg(0)
        stage = AGGREGATORS[kind]
        if number is not None and not stage.numbered:
            raise AggregateSpecError(f"{kind} takes no parameter (only birch:N does), found {spec!r}")
        if number is not None:
            if not number.isdigit() or not 1 <= int(number) <= MAX_TOP_N:
                raise AggregateSpecError(
                    f"expected {kind}:N with a positive integer N up to {MAX_TOP_N}, found {spec!r}"
                )
            n = int(number)
        else:
            n = (top_n if top_n is not None else 3) if stage.numbered else 1
        return cls(kind, n, DEFAULT_NORMALISE if normalise is None else normalise, tuple(scorers))

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
    def multi(self) -> bool:
        """Whether several scorers' evidence is combined."""
        return len(self.scorers) > 1

    @property
    def evidence_parameters(self) -> tuple[str, ...]:
        """The extra scorers' weights (their labels): every scorer after the first."""
        return self.scorers[1:] if self.multi else ()

    @property
    def parameters(self) -> tuple[str, ...]:
        """The tunable parameter names, in order (the extra scorers' weights last)."""
        return (*self.stage_class.parameters(self.top_n), *self.evidence_parameters)

    def defaults(self) -> dict[str, float]:
        """Each parameter's value when a grid or a flag leaves it unset (equal scorer weights)."""
        share = {label: 1.0 / len(self.scorers) for label in self.evidence_parameters}
        return {**self.stage_class.defaults(self.top_n), **share}

    def check(self, names: Sequence[str]) -> None:
        """Raise :class:`AggregateSpecError` for names that are not parameters of this aggregator."""
        unknown = [n for n in names if n not in self.parameters]
        if self.multi and self.scorers[0] in unknown:
            raise AggregateSpecError(
                f"the first scorer's weight ({self.scorers[0]}) is 1 minus the others' "
                f"({', '.join(self.evidence_parameters)}); set those instead"
            )
        if unknown:
            raise AggregateSpecError(
                f"{self.spec} has no parameter {', '.join(map(repr, unknown))}; "
                f"its parameters are {', '.join(self.parameters)}"
            )

    # ------------------------------------------------------------------------------------------
    def build(
        self,
        alpha: float | None = None,
        weights: Sequence[float] | None = None,
        evidence_weights: Mapping[str, float] | None = None,
    ) -> Aggregator | MultiEvidence:
        """The stage with this alpha (None: the default) and, for Birch, these weights.

        Args:
            alpha: the first-stage weight.
            weights: Birch's top-n weights.
            evidence_weights: with several scorers, ``{label: lambda}`` of the scorers after the
                first (equal shares when None or for those left out).

        Raises:
            AggregateSpecError: weights for an aggregator that has none, or bad values.

        Example:
            >>> AggregateSpec.parse("maxp").build()
            MaxP(alpha=0.0, normalise='minmax')
            >>> AggregateSpec.parse("maxp", scorers=("cross", "bi")).build(evidence_weights={"bi": 0.2})
            MultiEvidence(MaxP(alpha=0.0, normalise='minmax'), cross=0.8, bi=0.2)
        """
        params: dict[str, float] = {}
        if evidence_weights:
            if not self.multi:
                raise AggregateSpecError("evidence weights are for several scorers; one scorer needs none")
            unknown = [k for k in evidence_weights if k not in self.scorers]
            if unknown:
                raise AggregateSpecError(
                    f"no scorer labelled {', '.join(map(repr, unknown))}; the scorers are "
                    f"{', '.join(self.scorers)}"
                )
            params.update({str(k): float(v) for k, v in evidence_weights.items()})
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

    def stage(self, params: Mapping[str, float]) -> Aggregator | MultiEvidence:
        """The stage with these parameter values (by name; defaults for the rest).

        Raises:
            AggregateSpecError: a value that is not a finite number (NaN or infinite weights would
                make every document's score NaN or infinite, and the ranking arbitrary).
        """
        for name, value in params.items():
            if not math.isfinite(float(value)):
                raise AggregateSpecError(f"{self.spec}: {name} must be a finite number, found {value!r}")
        if self.multi:
            first = self.scorers[0]
            if first in params:
                raise AggregateSpecError(
                    f"the first scorer's weight ({first}) is 1 minus the others'; give "
                    f"{', '.join(self.evidence_parameters)}"
                )
            own = {k: v for k, v in params.items() if k not in self.scorers}
            extra = {k: float(v) for k, v in params.items() if k in self.scorers}
            base = replace(self, scorers=())
            self.check(list(params))
            try:
                return MultiEvidence(base.stage(own), self.scorers, {**self._shares(), **extra})  # type: ignore[arg-type]
            except EvidenceSpecError as exc:
                raise AggregateSpecError(str(exc)) from None
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

    def with_first_weight(self, params: Mapping[str, float]) -> dict[str, float]:
        """``params`` with the first scorer's implied weight added (1 minus the others'), for reports.

        Example:
            >>> spec = AggregateSpec.parse("maxp", scorers=("cross", "bi"))
            >>> spec.with_first_weight({"alpha": 0.2, "bi": 0.3})
            {'alpha': 0.2, 'cross': 0.7, 'bi': 0.3}
        """
        if not self.multi:
            return dict(params)
        rest = sum(float(params.get(label, self.defaults()[label])) for label in self.evidence_parameters)
        first = round(max(0.0, 1.0 - rest), 12)
        own = {k: v for k, v in params.items() if k not in self.scorers}
        return {**own, self.scorers[0]: first, **{k: v for k, v in params.items() if k in self.scorers}}

    def _shares(self) -> dict[str, float]:
        return {label: self.defaults()[label] for label in self.evidence_parameters}

    def table(
        self, passages: pd.DataFrame | Mapping[str, pd.DataFrame], *, require_first_stage: bool = True
    ) -> PassageTable | EvidenceTable:
        """Group scored passages by document (:func:`~evirank.aggregate.top_passage_matrix`).

        With several scorers, ``passages`` is ``{label: frame}`` in the scorers' order, or one frame
        with a ``score_<label>`` column per scorer, and the result an
        :class:`~evirank.aggregate.evidence.EvidenceTable`.
        """
        if self.multi:
            frames = passages if isinstance(passages, Mapping) else split_evidence(passages, self.scorers)
            if list(frames) != list(self.scorers):
                raise AggregateSpecError(
                    f"expected passages of the scorers {list(self.scorers)}, found {list(frames)}"
                )
            try:
                return evidence_tables(
                    frames, self.top_n, self.normalise, require_first_stage=require_first_stage
                )
            except EvidenceSpecError as exc:
                raise AggregateSpecError(str(exc)) from None
        if isinstance(passages, Mapping):
            if len(passages) != 1:
                raise AggregateSpecError(
                    f"passages of {len(passages)} scorers, but the aggregator was made for one; "
                    "give it their labels (scorers=...)"
                )
            passages = next(iter(passages.values()))
        return top_passage_matrix(
            passages, self.top_n, self.normalise, require_first_stage=require_first_stage
        )

    def scores(
        self, table: PassageTable | EvidenceTable, settings: np.ndarray, names: Sequence[str]
    ) -> np.ndarray:
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
        if isinstance(table, EvidenceTable):
            if table.labels != self.scorers:
                raise AggregateSpecError(
                    f"expected the scorers {list(self.scorers)}, found {list(table.labels)}"
                )
            try:
                return evidence_scores(self.stage_class, table, params)
            except EvidenceSpecError as exc:
                raise AggregateSpecError(str(exc)) from None
        return self.stage_class.settings_scores(table, params)


def parse_aggregate(
    spec: str,
    *,
    alpha: float | None = None,
    weights: Sequence[float] | str | None = None,
    normalise: Normalise | None = None,
) -> Aggregator:
    """The aggregator stage of a spec and its flags: ``birch[:N]``, ``maxp``, ``firstp``, ``sump``,
    ``meanp``, ``document``.

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
    stage = parsed.build(alpha=alpha, weights=values)
    assert isinstance(stage, Aggregator)  # one scorer
    return stage


def parse_evidence_aggregate(
    spec: str,
    scorers: Sequence[str],
    *,
    alpha: float | None = None,
    weights: Sequence[float] | str | None = None,
    evidence_weights: Mapping[str, float] | None = None,
    normalise: Normalise | None = None,
) -> Aggregator | MultiEvidence:
    """:func:`parse_aggregate` for the evidence of several scorers (one label: the plain aggregator).

    Args:
        spec: the aggregator spec.
        scorers: the scorers' labels, in order (the first one's weight is 1 minus the others').
        alpha: the first-stage weight.
        weights: Birch's top-n weights.
        evidence_weights: ``{label: lambda}`` of the scorers after the first (default: equal shares).
        normalise: ``"minmax"`` or ``"none"``.

    Example:
        >>> parse_evidence_aggregate("birch:2", ["cross", "bi"], alpha=0.4, evidence_weights={"bi": 0.3})
        MultiEvidence(Birch(alpha=0.4, normalise='minmax', top_n=2, weights=(1.0, 0.5)), cross=0.7, bi=0.3)
        >>> parse_evidence_aggregate("maxp", ["bi"])
        MaxP(alpha=0.0, normalise='minmax')
    """
    values = parse_weights(weights) if isinstance(weights, str) else weights
    labels = tuple(scorers)
    parsed = AggregateSpec.parse(
        spec,
        normalise,
        top_n=len(values) if values is not None else None,
        scorers=labels if len(labels) > 1 else (),
    )
    if evidence_weights and len(labels) < 2:
        raise AggregateSpecError("evidence weights are for several scorers; one scorer needs none")
    return parsed.build(alpha=alpha, weights=values, evidence_weights=evidence_weights)


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
    if not all(math.isfinite(v) for v in values):
        raise AggregateSpecError(f"expected finite numbers (1,0.5,0.25), found {text!r}")
    if not values:
        raise AggregateSpecError(f"expected at least one weight, found {text!r}")
    return values
