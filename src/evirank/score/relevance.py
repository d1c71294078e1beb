"""A document's score as a relevance in [0, 1], the way rerank APIs report it, per model family.

Each family scores on its own scale (:attr:`evirank.score.family.Family.scale`), and evirank ranks by
that score. Services whose clients expect a ``relevance_score`` in [0, 1] (Cohere's and Jina's
``/rerank`` shapes) get it through a strictly increasing map of the score, so the order never
changes:

========================  ===================================================  ==========================
scale                     families                                             relevance
========================  ===================================================  ==========================
``log-odds``              cross, parade, duo                                   ``sigmoid(s)``: P(relevant)
``log-probability``       seq2seq (monoT5), llm (yes/no)                        ``exp(s)``: P(true), P(yes)
``cosine``                bi                                                   ``(s + 1) / 2``
``maxsim``                colbert                                              ``(s / n + 1) / 2``, n the
                                                                               query's positions
========================  ===================================================  ==========================

A document's score aggregates passage scores with weights (MaxP: the best passage, weight 1;
Birch: the top three at 1, 1/2, 1/4); it is divided by the total weight first, so the map reads a
weighted mean of passage scores on the family's scale.

Example:
    >>> round(to_relevance(0.0, "log-odds"), 3), round(to_relevance(-0.6931, "log-probability"), 3)
    (0.5, 0.5)
    >>> to_relevance(0.5, "cosine")
    0.75
"""

from __future__ import annotations

import math

#: The scales a family may declare, and what its score is on each.
SCALES = {
    "log-odds": "the log-odds of relevance (a classifier's logit)",
    "log-probability": "the log-probability of the relevant answer word",
    "cosine": "the cosine of two embeddings, in [-1, 1]",
    "maxsim": "the sum over query positions of each one's best cosine (ColBERT's MaxSim)",
}


def to_relevance(score: float, scale: str, positions: int = 1) -> float:
    """``score`` on ``scale`` mapped into [0, 1] by a strictly increasing function (see the table).

    Args:
        score: the score (a mean of passage scores when the document's score weighs several).
        scale: one of :data:`SCALES`.
        positions: for ``maxsim``, the query positions the sum runs over.

    Raises:
        ValueError: an unknown scale.

    Example:
        >>> to_relevance(16.0, "maxsim", positions=32)
        0.75
    """
    if not math.isfinite(score):
        return 1.0 if score > 0 else 0.0
    if scale == "log-odds":
        return _sigmoid(score)
    if scale == "log-probability":
        return math.exp(min(score, 0.0))
    if scale == "cosine":
        return min(1.0, max(0.0, (score + 1.0) / 2.0))
    if scale == "maxsim":
        return min(1.0, max(0.0, (score / max(1, positions) + 1.0) / 2.0))
    raise ValueError(f"unknown score scale {scale!r}; expected one of {', '.join(SCALES)}")


def _sigmoid(x: float) -> float:
    """The logistic function, without overflow for large negative ``x``."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)
