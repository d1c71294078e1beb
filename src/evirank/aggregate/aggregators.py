"""Aggregators: a scored Passages frame -> a Run, one score per (qid, docno).

- :class:`MaxP`, :class:`FirstP`, :class:`SumP` (Dai & Callan 2019) and :class:`MeanP`
  (Steensland 2021): the best, the first (smallest pid), the sum and the mean of a
  document's passage scores.
- :class:`DocumentScore` (``document``): the score a document-level scorer (PARADE) computed
  from all the document's passages at once.
- :class:`Birch` (Akkalyoncu Yilmaz et al. 2019): ``alpha * s_doc + (1 - alpha) *
  sum_i w_i * s_i`` over the document's top-n passage scores s_1 >= s_2 >= ..., with
  ``s_doc`` the first-stage score. A document with fewer than n passages gets 0 for the
  missing terms; with ``normalise="minmax"`` that is the query's lowest passage score,
  while with raw scores that can be negative (logits) 0 is not neutral.

Every aggregator also takes ``alpha`` and ``normalise``, so any of them can interpolate the
first-stage score in the same way (``alpha=0``, the default except for Birch, ignores it).
Normalisation is described in :mod:`evirank.aggregate.core`; every aggregator defaults to
:data:`DEFAULT_NORMALISE` (``"minmax"``): alpha then mixes comparable scales, Birch's missing
passages count as the query's lowest score, and SumP adds non-negative evidence. For MaxP,
FirstP and MeanP with ``alpha=0`` the ranking is the same either way (a per-query increasing
map), only the scores differ. The input needs qid, docno,
score (the passage score), and first_stage_score when ``alpha > 0``; the output Run is
[qid, (query), docno, score, rank, first_stage_score, (first_stage_rank)], ordered by
:func:`evirank.frames.sort_run` (score descending, then the project's tie rule on docno).

Example:
    >>> import pandas as pd
    >>> passages = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "a", "b"], "pid": [0, 1, 0],
    ...                          "score": [0.2, 0.9, 0.5], "first_stage_score": [10.0, 10.0, 12.0]})
    >>> MaxP(normalise="none")(passages)[["docno", "score"]].values.tolist()
    [['a', 0.9], ['b', 0.5]]
    >>> MaxP()(passages)[["docno", "score"]].values.tolist()  # minmax: the same order
    [['a', 1.0], ['b', 0.4285714285714286]]
    >>> FirstP()(passages)["docno"].tolist()
    ['b', 'a']
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evirank.aggregate.core import (
    NORMALISATIONS,
    ArrayLike,
    Normalise,
    PassageTable,
    birch_scores,
    top_passage_matrix,
)
from evirank.frames import (
    DOCNO,
    DOCUMENT_SCORE,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    QID,
    QUERY,
    RANK,
    SCORE,
    sort_run,
)
from evirank.stage import Stage

logger = logging.getLogger(__name__)

RUN_ORDER = (QID, QUERY, DOCNO, SCORE, RANK, FIRST_STAGE_SCORE, FIRST_STAGE_RANK)


def _check_alpha(alpha: float) -> float:
    if not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], found {alpha!r}")
    return float(alpha)


#: The default normalisation of every aggregator, in rerank, serve, tune and the Python API alike.
DEFAULT_NORMALISE: Normalise = "minmax"


class Aggregator(Stage):
    """Base class: ``score = alpha * s_doc + (1 - alpha) * evidence(document's passages)``.

    Each subclass declares what the registry (:mod:`evirank.aggregate.registry`) needs: its spec
    ``name``, whether it takes a number (``birch:N``), its parameters with their defaults, and
    :meth:`settings_scores`, which scores many parameter settings at once. The stage and the tuner
    both score through :meth:`settings_scores`, so a tuned setting ranks exactly as the stage does.

    Args:
        alpha: weight of the first-stage score (0 ignores it).
        normalise: ``"minmax"`` (default: per query, first-stage and passage scores mapped to
            [0, 1]) or ``"none"``; see :data:`DEFAULT_NORMALISE`.
    """

    #: The spec name (``maxp``, ``birch``).
    name: ClassVar[str] = ""
    #: Whether the spec takes a number of passages (``birch:3``).
    numbered: ClassVar[bool] = False
    #: alpha when none is given.
    default_alpha: ClassVar[float] = 0.0
    top_n: int = 1

    def __init__(self, alpha: float = 0.0, normalise: Normalise = DEFAULT_NORMALISE) -> None:
        if normalise not in NORMALISATIONS:
            raise ValueError(f"normalise must be one of {NORMALISATIONS}, found {normalise!r}")
        self.alpha = _check_alpha(alpha)
        self.normalise = normalise

    @classmethod
    def parameters(cls, top_n: int = 1) -> tuple[str, ...]:
        """The names of the tunable parameters, in order (``alpha``, then Birch's ``w1..wN``)."""
        return ("alpha",)

    @classmethod
    def defaults(cls, top_n: int = 1) -> dict[str, float]:
        """Each parameter's value when none is given."""
        return {"alpha": cls.default_alpha}

    @classmethod
    def evidence(cls, table: PassageTable) -> np.ndarray:
        """The passage evidence per document, ``[D]``."""
        raise NotImplementedError

    @classmethod
    def settings_scores(cls, table: PassageTable, params: Mapping[str, ArrayLike]) -> np.ndarray:
        """Document scores for many settings: ``[G, D]`` for parameters given as arrays ``[G]``.

        Args:
            table: the documents' arrays (:func:`~evirank.aggregate.top_passage_matrix` with this
                aggregator's ``top_n`` and normalisation).
            params: every name of :meth:`parameters`, each a number or an array of G settings.

        Example:
            >>> table = PassageTable(None, np.array([1.0]), np.array([[0.5]]), np.array([1]),
            ...                      np.array([0.5]), np.array([0.5]), np.array([0.5]))
            >>> MaxP.settings_scores(table, {"alpha": [0.0, 1.0]}).tolist()
            [[0.5], [1.0]]
        """
        alpha = np.asarray(params["alpha"], dtype=np.float64)
        evidence = cls.evidence(table)[:, np.newaxis]
        if alpha.ndim == 0:
            return birch_scores(table.s_doc, evidence, alpha, [1.0])
        return birch_scores(table.s_doc, evidence, alpha, np.ones((*alpha.shape, 1)))

    def params(self) -> dict[str, float]:
        """This stage's parameter values, by name (those of :meth:`parameters`)."""
        return {"alpha": self.alpha}

    @property
    def spec(self) -> str:
        """The canonical ``--aggregate`` spec of this stage (``birch:3``, ``maxp``).

        Example:
            >>> Birch(top_n=2).spec, MaxP(alpha=0.5).spec
            ('birch:2', 'maxp')
        """
        return f"{self.name}:{self.top_n}" if self.numbered else self.name

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Aggregate a scored Passages frame into a Run."""
        table = top_passage_matrix(frame, self.top_n, self.normalise, require_first_stage=self.alpha > 0)
        run = sort_run(table.keys.assign(**{SCORE: self.scores(table)}))
        return run[[c for c in RUN_ORDER if c in run.columns]]

    def scores(self, table: PassageTable) -> np.ndarray:
        """Document scores ``[D]`` for the rows of ``table.keys``."""
        return self.settings_scores(table, self.params())

    def evidence_terms(self, table: PassageTable) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """The passage evidence as ``(name, weight [D], value [D])`` terms whose weighted sum is it."""
        return [(f"{self.name} of the passages", np.ones(len(table.s_doc)), self.evidence(table))]

    def terms(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Each document's score as a sum of terms: what a user reads to see why it ranks where it does.

        Returns:
            One row per (qid, docno, term) with ``weight``, ``value`` (the normalised first-stage
            score or passage score the term reads) and ``contribution`` = weight x value; the
            contributions of a document add up to its ``score`` in :meth:`transform`. The
            first-stage term is left out when its weight, ``alpha``, is 0.

        Example:
            >>> p = pd.DataFrame({"qid": ["1"] * 2, "docno": ["a"] * 2, "score": [0.2, 0.9],
            ...                   "first_stage_score": [10.0, 10.0]})
            >>> t = Birch(top_n=2, alpha=0.5, weights=(1.0, 0.5), normalise="none").terms(p)
            >>> t[["term", "weight", "value", "contribution"]].values.tolist()
            [['first stage', 0.5, 10.0, 5.0], ['passage 1', 0.5, 0.9, 0.45], ['passage 2', 0.25, 0.2, 0.05]]
        """
        table = top_passage_matrix(frame, self.top_n, self.normalise, require_first_stage=self.alpha > 0)
        parts = [
            (name, (1.0 - self.alpha) * weight, value) for name, weight, value in self.evidence_terms(table)
        ]
        return terms_frame(table, self.alpha, parts)


def terms_frame(
    table: Any, alpha: float, parts: Sequence[tuple[str, np.ndarray, np.ndarray]]
) -> pd.DataFrame:
    """The long frame of score terms of :meth:`Aggregator.terms` from arrays over ``table.keys``."""
    n_docs = len(table.keys)
    if alpha > 0:
        parts = [("first stage", np.full(n_docs, alpha), table.s_doc), *parts]
    rows = [
        pd.DataFrame(
            {
                QID: table.keys[QID].to_numpy(),
                DOCNO: table.keys[DOCNO].to_numpy(),
                "term": name,
                "order": order,
                "weight": np.broadcast_to(np.asarray(weight, dtype=np.float64), (n_docs,)),
                "value": np.asarray(value, dtype=np.float64),
            }
        )
        for order, (name, weight, value) in enumerate(parts)
    ]
    out = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=[QID, DOCNO, "term"])
    out["contribution"] = out["weight"] * out["value"]
    out = out.sort_values([QID, DOCNO, "order"], kind="mergesort").drop(columns="order")
    return out.reset_index(drop=True)


class MaxP(Aggregator):
    """The best passage score (Dai & Callan's BERT-MaxP).

    Example:
        >>> p = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "score": [1.0, 3.0]})
        >>> MaxP(normalise="none")(p)["score"].tolist()
        [3.0]
    """

    name = "maxp"

    @classmethod
    def evidence(cls, table: PassageTable) -> np.ndarray:
        return table.best


class FirstP(Aggregator):
    """The score of the document's first passage, the one with the smallest pid (BERT-FirstP).

    Example:
        >>> p = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "pid": [1, 0], "score": [1.0, 3.0]})
        >>> FirstP(normalise="none")(p)["score"].tolist()
        [3.0]
    """

    name = "firstp"

    @classmethod
    def evidence(cls, table: PassageTable) -> np.ndarray:
        return table.first


class SumP(Aggregator):
    """The sum of the document's passage scores (BERT-SumP).

    Example:
        >>> p = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "score": [1.0, 3.0]})
        >>> SumP(normalise="none")(p)["score"].tolist()
        [4.0]
    """

    name = "sump"

    @classmethod
    def evidence(cls, table: PassageTable) -> np.ndarray:
        return table.total


class MeanP(Aggregator):
    """The mean of the document's passage scores (Steensland's BERT-Mean).

    Example:
        >>> p = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "score": [1.0, 3.0]})
        >>> MeanP(normalise="none")(p)["score"].tolist()
        [2.0]
    """

    name = "meanp"

    @classmethod
    def evidence(cls, table: PassageTable) -> np.ndarray:
        return table.total / table.n_passages


class Birch(Aggregator):
    """Birch: the first-stage score interpolated with the weighted top-n passage scores.

    ``score = alpha * s_doc + (1 - alpha) * sum_{i=1..top_n} w_i * s_i``, s_i the i-th best
    passage score of the document (0 when it has fewer than top_n passages).

    Args:
        top_n: how many of the best passages count (Birch's 1S, 2S, 3S).
        alpha: weight of the first-stage score.
        weights: ``w_1 .. w_top_n``; None gives 1, 1/2, 1/4, ... (an untuned starting point;
            Birch fixed w_1 = 1 and tuned alpha, w_2, w_3 in [0, 1] by cross-validation).
        normalise: ``"minmax"`` (default: per-query min-max of the first-stage scores and,
            separately, of all the query's passage scores, so alpha mixes comparable
            scales) or ``"none"`` (raw scores, as Birch did).

    Example:
        >>> p = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "a", "b"], "score": [0.2, 0.9, 0.5],
        ...                   "first_stage_score": [10.0, 10.0, 12.0]})
        >>> birch = Birch(top_n=2, alpha=0.5, weights=(1.0, 0.5), normalise="none")
        >>> birch(p)[["docno", "score"]].values.tolist()
        [['b', 6.25], ['a', 5.5]]
    """

    name = "birch"
    numbered = True
    default_alpha = 0.5

    def __init__(
        self,
        top_n: int = 3,
        alpha: float = 0.5,
        weights: Sequence[float] | None = None,
        normalise: Normalise = DEFAULT_NORMALISE,
    ) -> None:
        super().__init__(alpha=alpha, normalise=normalise)
        if not isinstance(top_n, int) or top_n < 1:
            raise ValueError(f"top_n must be a positive integer, found {top_n!r}")
        chosen = default_weights(top_n) if weights is None else tuple(float(w) for w in weights)
        if len(chosen) != top_n:
            raise ValueError(f"weights must have top_n={top_n} values, found {len(chosen)}: {chosen}")
        if not all(np.isfinite(chosen)):
            raise ValueError(f"weights must be finite numbers, found {chosen}")
        self.top_n = top_n
        self.weights = chosen

    @classmethod
    def parameters(cls, top_n: int = 3) -> tuple[str, ...]:
        return ("alpha", *(f"w{i}" for i in range(1, top_n + 1)))

    @classmethod
    def defaults(cls, top_n: int = 3) -> dict[str, float]:
        weights = default_weights(top_n)
        return {"alpha": cls.default_alpha, **{f"w{i}": w for i, w in enumerate(weights, start=1)}}

    @classmethod
    def settings_scores(cls, table: PassageTable, params: Mapping[str, ArrayLike]) -> np.ndarray:
        top_n = table.top.shape[1]
        weights = [np.asarray(params[f"w{i}"], dtype=np.float64) for i in range(1, top_n + 1)]
        return birch_scores(table.s_doc, table.top, params["alpha"], np.stack(weights, axis=-1))

    def params(self) -> dict[str, float]:
        return {"alpha": self.alpha, **{f"w{i}": w for i, w in enumerate(self.weights, start=1)}}

    def evidence_terms(self, table: PassageTable) -> list[tuple[str, np.ndarray, np.ndarray]]:
        n_docs = len(table.s_doc)
        return [
            (f"passage {i}", np.full(n_docs, w), table.top[:, i - 1])
            for i, w in enumerate(self.weights, start=1)
        ]


class DocumentScore(Aggregator):
    """The document score a document-level scorer computed from all the document's passages.

    A family that scores a document as a whole from its passages (PARADE: their [CLS] vectors
    aggregated by a trained network) writes that score on every passage of the document, in the
    ``document_score`` column; this aggregator reads it (and, as every aggregator, interpolates the
    first-stage score with ``alpha``). Passage scores (``score``) are not used.

    Example:
        >>> p = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "a", "b"], "score": [0.2, 0.9, 0.5],
        ...                   "document_score": [0.1, 0.1, 0.7]})
        >>> DocumentScore(normalise="none")(p)[["docno", "score"]].values.tolist()
        [['b', 0.7], ['a', 0.1]]
    """

    name = "document"

    @classmethod
    def evidence(cls, table: PassageTable) -> np.ndarray:
        if table.document is None:
            raise ValueError(
                f"the document aggregator reads a {DOCUMENT_SCORE!r} column, which a document-level "
                "scorer writes (--scorer parade); this scorer wrote passage scores only: aggregate "
                "them with maxp, firstp, birch, sump or meanp"
            )
        return table.document


def default_weights(top_n: int) -> tuple[float, ...]:
    """Birch's untuned weights of the top-n passages: 1, 1/2, 1/4, ...

    Example:
        >>> default_weights(3)
        (1.0, 0.5, 0.25)
    """
    return tuple(0.5**i for i in range(top_n))
