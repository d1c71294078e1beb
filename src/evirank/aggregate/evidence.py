"""Evidence from several scorers in one ranking (for example a bi-encoder and a cross-encoder).

Each scorer ``k`` (named by a label: ``cross``, ``bi``) scores the passages of the same candidate
documents. Its scores are normalised per query as one scorer's are (:mod:`evirank.aggregate.core`)
and reduced to a document evidence ``E_k`` by the aggregator (Birch's ``sum_i w_i s_{k,i}`` with
the same weights for every scorer, or MaxP's best passage, ...). The document's score is then

    ``alpha * s_doc + (1 - alpha) * sum_k lambda_k * E_k``

with ``lambda`` on the simplex (``lambda_k >= 0``, ``sum_k lambda_k = 1``). The first scorer's
weight is implied, ``lambda_1 = 1 - sum_{k>1} lambda_k``; the others are parameters named by their
labels. Why a simplex: the overall scale of the evidence is already set by ``alpha``, so free
weights would make many grid points rank identically (``lambda`` and ``2 * lambda`` with another
``alpha``); on the simplex each ranking has one setting, and each ``lambda_k`` reads as the share
of scorer ``k`` in the evidence. With one scorer ``lambda_1 = 1`` and everything is the single
aggregator's arithmetic.

Documents are the union of the scorers' documents; a document that one scorer has no passage
for gets ``E_k = 0`` from it (with min-max normalisation, the query's lowest passage score), as
Birch's missing top-n passages do. In a scored Passages frame, scorer ``k``'s scores are the
column :func:`evidence_column` (``score_<label>``).

Example:
    >>> import pandas as pd
    >>> from evirank.aggregate import MaxP
    >>> p = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "a", "b"], "pid": [0, 1, 0],
    ...                   "score_cross": [0.2, 0.9, 0.5], "score_bi": [0.1, 0.3, 0.8],
    ...                   "first_stage_score": [10.0, 10.0, 12.0]})
    >>> stage = MultiEvidence(MaxP(), ("cross", "bi"), {"bi": 0.5})
    >>> stage(p)[["docno", "score"]].values.tolist()
    [['b', 0.7142857142857143], ['a', 0.6428571428571428]]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from evirank.aggregate.aggregators import RUN_ORDER, Aggregator
from evirank.aggregate.core import ArrayLike, Normalise, PassageTable, minmax_by_group, top_passage_matrix
from evirank.frames import DOCNO, FIRST_STAGE_RANK, FIRST_STAGE_SCORE, QID, QUERY, SCORE, sort_run
from evirank.grammar import SpecError
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: A scorer's label: lower-case letters, digits and ``_``, starting with a letter.
_LABEL = re.compile(r"^[a-z][a-z0-9_]*$")
#: Names a label may not take (the aggregators' own parameters).
_RESERVED = re.compile(r"^(alpha|w\d+)$")
#: How far the weights of the extra scorers may sum beyond 1 (rounding of grid values).
SIMPLEX_TOLERANCE = 1e-9


class EvidenceSpecError(SpecError):
    """Scorer labels or evidence weights that cannot be used."""


def evidence_column(label: str) -> str:
    """The column of a Passages frame with scorer ``label``'s scores.

    Example:
        >>> evidence_column("bi")
        'score_bi'
    """
    return f"{SCORE}_{label}"


def check_labels(labels: Sequence[str]) -> tuple[str, ...]:
    """The labels as a tuple, or :class:`EvidenceSpecError` for a bad, reserved or repeated one.

    Example:
        >>> check_labels(["cross", "bi"])
        ('cross', 'bi')
        >>> check_labels(["alpha"])  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        EvidenceSpecError: scorer label 'alpha' is the name of an aggregator parameter; choose another
    """
    out = tuple(str(label) for label in labels)
    if not out:
        raise EvidenceSpecError("expected at least one scorer label")
    for label in out:
        if not _LABEL.match(label):
            raise EvidenceSpecError(
                f"scorer label {label!r}: expected lower-case letters, digits and _, starting with a "
                "letter (e.g. cross, bi, ce2)"
            )
        if _RESERVED.match(label):
            raise EvidenceSpecError(
                f"scorer label {label!r} is the name of an aggregator parameter; choose another"
            )
    repeated = sorted({label for label in out if out.count(label) > 1})
    if repeated:
        raise EvidenceSpecError(
            f"scorer label {', '.join(map(repr, repeated))} is given twice; give each scorer its own "
            "label (LABEL=...)"
        )
    return out


def simplex_weights(labels: Sequence[str], weights: Mapping[str, ArrayLike]) -> list[np.ndarray]:
    """Every scorer's ``lambda`` from the extra scorers' weights: ``lambda_1 = 1 - sum(rest)``.

    Args:
        labels: the scorers, the first one's weight implied.
        weights: ``{label: weight}`` for ``labels[1:]`` (numbers, or arrays of settings); a weight
            for the first label, when given, must equal the implied one.

    Raises:
        EvidenceSpecError: a weight outside [0, 1], weights summing above 1, or unknown labels.

    Example:
        >>> [float(w) for w in simplex_weights(("cross", "bi"), {"bi": 0.25})]
        [0.75, 0.25]
    """
    unknown = [name for name in weights if name not in labels]
    if unknown:
        raise EvidenceSpecError(
            f"no scorer labelled {', '.join(map(repr, unknown))}; the scorers are {', '.join(labels)}"
        )
    rest = []
    for label in labels[1:]:
        if label not in weights:
            raise EvidenceSpecError(f"missing the weight of scorer {label!r}")
        value = np.asarray(weights[label], dtype=np.float64)
        if not np.isfinite(value).all() or np.any((value < 0) | (value > 1)):
            raise EvidenceSpecError(f"the weight of scorer {label!r} must be in [0, 1]")
        rest.append(value)
    total = sum(rest, np.zeros(())) if rest else np.zeros(())
    if np.any(total > 1 + SIMPLEX_TOLERANCE):
        raise EvidenceSpecError(
            f"the weights of {', '.join(labels[1:])} sum above 1; the first scorer ({labels[0]}) gets "
            "1 minus their sum"
        )
    first = np.round(np.clip(1.0 - total, 0.0, 1.0), 12)  # 1 - 0.9 is 0.1, not 0.09999999999999998
    if labels[0] in weights:
        given = np.asarray(weights[labels[0]], dtype=np.float64)
        if np.any(np.abs(given - first) > SIMPLEX_TOLERANCE):
            raise EvidenceSpecError(
                f"the weights must sum to 1: {labels[0]} is 1 minus the others' "
                f"({float(np.max(first)):g}), found {float(np.max(given)):g}"
            )
    return [first, *rest]


class EvidenceTable(NamedTuple):
    """Several scorers' passages grouped by document, aligned on the same rows.

    Attributes:
        keys: one row per document (the union of the scorers'), ordered by qid then docno, with
            query / first_stage_score / first_stage_rank when the passages had them.
        s_doc: ``[D]`` first-stage scores, normalised per query over these documents as asked.
        tables: one :class:`~evirank.aggregate.PassageTable` per scorer, rows aligned with
            ``keys`` (a document without passages of that scorer has zeros and one passage).
        labels: the scorers' labels, in order.
    """

    keys: pd.DataFrame
    s_doc: np.ndarray
    tables: tuple[PassageTable, ...]
    labels: tuple[str, ...]


def split_evidence(
    passages: pd.DataFrame, labels: Sequence[str], where: str = "aggregate"
) -> dict[str, pd.DataFrame]:
    """One frame per scorer from a Passages frame with a ``score_<label>`` column per scorer.

    Raises:
        EvidenceSpecError: a scorer's column is missing (the columns found are listed).
    """
    missing = [evidence_column(label) for label in labels if evidence_column(label) not in passages.columns]
    if missing:
        raise EvidenceSpecError(
            f"{where}: expected a column of passage scores per scorer ({', '.join(missing)} missing); "
            f"found columns {list(passages.columns)}"
        )
    columns = [evidence_column(label) for label in labels]
    base = passages.drop(columns=[c for c in (SCORE, *columns) if c in passages.columns])
    return {label: base.assign(**{SCORE: passages[evidence_column(label)]}) for label in labels}


def evidence_tables(
    passages: Mapping[str, pd.DataFrame],
    n: int,
    normalise: Normalise = "none",
    *,
    require_first_stage: bool = False,
) -> EvidenceTable:
    """Group each scorer's scored passages by document and align the documents.

    Args:
        passages: ``{label: Passages frame}`` in the scorers' order (each with qid, docno, score,
            and first_stage_score; pid for FirstP).
        n: Birch's N (columns of each table's ``top``).
        normalise: ``"none"`` or ``"minmax"``, per scorer (and for the first-stage scores).
        require_first_stage: raise when first_stage_score is missing.

    Example:
        >>> a = pd.DataFrame({"qid": ["1", "1"], "docno": ["x", "y"], "score": [1.0, 2.0]})
        >>> b = pd.DataFrame({"qid": ["1"], "docno": ["y"], "score": [5.0]})
        >>> t = evidence_tables({"cross": a, "bi": b}, n=1)
        >>> t.keys["docno"].tolist(), [x.best.tolist() for x in t.tables]
        (['x', 'y'], [[1.0, 2.0], [0.0, 5.0]])
    """
    labels = check_labels(list(passages))
    tables = [
        top_passage_matrix(frame, n, normalise, require_first_stage=require_first_stage)
        for frame in passages.values()
    ]
    keys = pd.concat([t.keys for t in tables], ignore_index=True)
    keys = keys.drop_duplicates([QID, DOCNO], keep="first")
    keys = keys.sort_values([QID, DOCNO], kind="mergesort").reset_index(drop=True)
    index = pd.MultiIndex.from_frame(keys[[QID, DOCNO]])
    aligned = []
    for label, table in zip(labels, tables, strict=True):
        rows = index.get_indexer(pd.MultiIndex.from_frame(table.keys[[QID, DOCNO]]))
        missing = len(keys) - len(rows)
        if missing:
            logger.warning(
                "%d of %d documents have no passage scored by %s; its evidence for them is 0",
                missing,
                len(keys),
                label,
            )
        aligned.append(_align(table, rows, len(keys)))
    if FIRST_STAGE_SCORE in keys.columns:
        s_doc = keys[FIRST_STAGE_SCORE].to_numpy(dtype=np.float64)
        if not np.isfinite(s_doc).all():
            raise ValueError(f"aggregate: column {FIRST_STAGE_SCORE!r}: expected finite numbers")
        if normalise == "minmax" and len(s_doc):
            s_doc = minmax_by_group(s_doc, pd.factorize(keys[QID], sort=True)[0])
    else:
        s_doc = np.zeros(len(keys))
    keys = keys[[c for c in (QID, DOCNO, QUERY, FIRST_STAGE_SCORE, FIRST_STAGE_RANK) if c in keys.columns]]
    return EvidenceTable(keys, s_doc, tuple(aligned), labels)


def _align(table: PassageTable, rows: np.ndarray, size: int) -> PassageTable:
    def put(values: np.ndarray, fill: float = 0.0) -> np.ndarray:
        out = np.full((size, *values.shape[1:]), fill, dtype=values.dtype)
        out[rows] = values
        return out

    return PassageTable(
        table.keys,
        put(table.s_doc),
        put(table.top),
        put(table.n_passages, 1),
        put(table.best),
        put(table.total),
        put(table.first),
    )


def evidence_scores(
    stage_class: type[Aggregator], table: EvidenceTable, params: Mapping[str, ArrayLike]
) -> np.ndarray:
    """Document scores for many settings: ``[G, D]`` for parameters given as arrays ``[G]``.

    Args:
        stage_class: the aggregator whose evidence each scorer gets.
        table: the aligned scorers (:func:`evidence_tables`).
        params: the aggregator's parameters (alpha, Birch's w1..wN) and each extra scorer's weight
            by label (the first scorer's is implied), numbers or arrays of G settings.

    Example:
        >>> from evirank.aggregate import MaxP
        >>> a = pd.DataFrame({"qid": ["1"], "docno": ["x"], "score": [1.0], "first_stage_score": [3.0]})
        >>> t = evidence_tables({"cross": a, "bi": a.assign(score=2.0)}, n=1)
        >>> evidence_scores(MaxP, t, {"alpha": [0.0, 0.5], "bi": [0.5, 1.0]}).tolist()
        [[1.5], [2.5]]
    """
    labels = table.labels
    lambdas = simplex_weights(labels, {label: params[label] for label in labels[1:]})
    own = {name: value for name, value in params.items() if name not in labels}
    alpha = np.asarray(own["alpha"], dtype=np.float64)
    shape = np.broadcast_shapes(
        alpha.shape, *(np.shape(w) for w in lambdas), *(np.shape(v) for v in own.values())
    )
    zero = {**own, "alpha": np.zeros(shape)}
    combined: np.ndarray | None = None
    for lam, sub in zip(lambdas, table.tables, strict=True):
        evidence = stage_class.settings_scores(sub, zero)  # alpha = 0: the evidence alone
        term = np.broadcast_to(lam, shape)[..., np.newaxis] * evidence
        combined = term if combined is None else combined + term
    assert combined is not None
    out = np.multiply(np.broadcast_to(alpha, shape)[..., np.newaxis], table.s_doc - combined)
    out += combined
    return out


class MultiEvidence(Stage):
    """An aggregator over several scorers' passage scores (see the module docstring).

    Args:
        aggregator: the aggregator applied to every scorer's passages (its alpha, Birch's
            weights and the normalisation are used).
        labels: the scorers, in order; the Passages frame has a ``score_<label>`` column for each.
        weights: ``{label: lambda}`` for the scorers after the first (the first gets 1 minus their
            sum), or a sequence of ``len(labels) - 1`` values; None weighs all scorers equally.

    Example:
        >>> from evirank.aggregate import Birch
        >>> MultiEvidence(Birch(top_n=2), ("cross", "bi"), [0.3])
        MultiEvidence(Birch(alpha=0.5, normalise='minmax', top_n=2, weights=(1.0, 0.5)), cross=0.7, bi=0.3)
    """

    def __init__(
        self,
        aggregator: Aggregator,
        labels: Sequence[str],
        weights: Mapping[str, float] | Sequence[float] | None = None,
    ) -> None:
        self.aggregator = aggregator
        self.labels = check_labels(labels)
        if len(self.labels) < 2:
            raise EvidenceSpecError("MultiEvidence needs two scorers or more; use the aggregator itself")
        if weights is None:
            given = {label: 1.0 / len(self.labels) for label in self.labels[1:]}
        elif isinstance(weights, Mapping):
            given = {str(k): float(v) for k, v in weights.items()}
            given = {**{label: 1.0 / len(self.labels) for label in self.labels[1:]}, **given}
        else:
            values = [float(w) for w in weights]
            if len(values) != len(self.labels) - 1:
                raise EvidenceSpecError(
                    f"expected {len(self.labels) - 1} weight(s), for {', '.join(self.labels[1:])}; "
                    f"found {len(values)}"
                )
            given = dict(zip(self.labels[1:], values, strict=True))
        lambdas = simplex_weights(self.labels, given)
        self.weights = tuple(float(w) for w in lambdas)

    def __repr__(self) -> str:
        shares = ", ".join(f"{label}={w:g}" for label, w in zip(self.labels, self.weights, strict=True))
        return f"MultiEvidence({self.aggregator!r}, {shares})"

    # The aggregator's face, for the pipeline, the cascade check and records.
    @property
    def alpha(self) -> float:
        """The first-stage weight."""
        return float(self.aggregator.alpha)

    @property
    def normalise(self) -> Normalise:
        """The normalisation of every scorer's scores."""
        return self.aggregator.normalise

    @property
    def top_n(self) -> int:
        """Birch's N (1 for the others)."""
        return int(self.aggregator.top_n)

    @property
    def spec(self) -> str:
        """The aggregator's spec (``birch:3``); the scorers are in :attr:`labels`."""
        return self.aggregator.spec

    def params(self) -> dict[str, float]:
        """The aggregator's parameters and each extra scorer's weight by label."""
        extra = dict(zip(self.labels[1:], self.weights[1:], strict=True))
        return {**self.aggregator.params(), **extra}

    def evidence_weights(self) -> dict[str, float]:
        """Every scorer's ``lambda`` by label (they sum to 1)."""
        return dict(zip(self.labels, self.weights, strict=True))

    def table(self, passages: pd.DataFrame | Mapping[str, pd.DataFrame]) -> EvidenceTable:
        """The aligned tables of a Passages frame with ``score_<label>`` columns (or frames by label)."""
        frames = passages if isinstance(passages, Mapping) else split_evidence(passages, self.labels)
        if list(frames) != list(self.labels):
            raise EvidenceSpecError(f"expected the scorers {list(self.labels)}, found {list(frames)}")
        return evidence_tables(
            frames, self.top_n, self.normalise, require_first_stage=self.aggregator.alpha > 0
        )

    def scores(self, table: EvidenceTable) -> np.ndarray:
        """Document scores ``[D]`` for the rows of ``table.keys``."""
        return evidence_scores(type(self.aggregator), table, self.params())

    def terms(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Each document's score as a sum of terms (see :meth:`evirank.aggregate.Aggregator.terms`),
        each scorer's passage terms named ``LABEL: TERM`` and weighted by its share."""
        from evirank.aggregate.aggregators import terms_frame

        table = self.table(frame)
        alpha = self.alpha
        parts = [
            (f"{label}: {name}", (1.0 - alpha) * lam * weight, value)
            for label, lam, sub in zip(self.labels, self.weights, table.tables, strict=True)
            for name, weight, value in self.aggregator.evidence_terms(sub)
        ]
        return terms_frame(table, alpha, parts)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Aggregate a Passages frame with a ``score_<label>`` column per scorer into a Run."""
        table = self.table(frame)
        run = sort_run(table.keys.assign(**{SCORE: self.scores(table)}))
        return run[[c for c in RUN_ORDER if c in run.columns]]


def describe_evidence(stage: Any) -> dict[str, float] | None:
    """``{label: lambda}`` of a :class:`MultiEvidence` stage, None for a one-scorer aggregator."""
    weights = getattr(stage, "evidence_weights", None)
    return dict(weights()) if callable(weights) else None
