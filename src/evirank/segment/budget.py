"""How much of a passage a scorer reads: the room a segmenter may fill without truncation.

Segmenters cut long sentences and windows to a token budget; the budget is the scorer's
(:meth:`evirank.score.Scorer.passage_budget`: a cross-encoder's ``max_length`` less its special
tokens and the query's share, a bi-encoder's ``max_length`` less its special tokens). It lives with
the segmenters, below the scorers, so that scoring, the vector builder and the pipeline builder
read it from one place.

Example:
    >>> class Budget:
    ...     def passage_budget(self):
    ...         return "tokenizer", 254.0
    >>> passage_budget(Budget()), passage_budget(object())
    (('tokenizer', 254), None)
"""

from __future__ import annotations

from typing import Any


def passage_budget(scorer: Any) -> tuple[Any, int] | None:
    """(tokenizer, tokens left for a passage) of a scorer that has ``passage_budget()``, else None.

    Loads the scorer's tokenizer, not its model weights.
    """
    budget = getattr(scorer, "passage_budget", None)
    if budget is None:
        return None
    tokenizer, room = budget()
    return tokenizer, int(room)
