"""Composable stages: ``Bm25(index) % 100 >> Sentences() >> CrossEncoder(m) >> Birch()``.

A :class:`Stage` has one method, ``transform(frame) -> frame``; it never mutates its input.
``a >> b`` runs ``a`` then ``b``; ``a % k`` keeps each query's top ``k`` rows by rank.
An :class:`Estimator` is a Stage with ``fit`` (scikit-learn's contract: ``__init__`` only
stores parameters, learned state ends in ``_``).

Example:
    >>> import pandas as pd
    >>> class AddOne(Stage):
    ...     def transform(self, frame):
    ...         return frame.assign(score=frame["score"] + 1)
    >>> run = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "b"], "score": [2.0, 1.0], "rank": [1, 2]})
    >>> (AddOne() >> AddOne() % 1)(run)["score"].tolist()
    [4.0]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pandas as pd

from evirank.frames import QID, RANK, require_columns


class Stage(ABC):
    """One step of a pipeline: a pure function from a frame to a frame."""

    @abstractmethod
    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Return a new frame; never mutate ``frame``."""

    def __call__(self, frame: pd.DataFrame) -> pd.DataFrame:
        return self.transform(frame)

    def __rshift__(self, other: Stage) -> Chain:
        if not isinstance(other, Stage):
            return NotImplemented
        return Chain(self, other)

    def __mod__(self, k: int) -> Chain:
        return Chain(self, CutOff(k))

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.endswith("_"))
        return f"{type(self).__name__}({params})"


class Chain(Stage):
    """Stages run in order (what ``a >> b`` makes); nested chains are flattened."""

    def __init__(self, *stages: Stage) -> None:
        flat: list[Stage] = []
        for stage in stages:
            flat.extend(stage.stages if isinstance(stage, Chain) else [stage])
        self.stages: tuple[Stage, ...] = tuple(flat)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        for stage in self.stages:
            frame = stage.transform(frame)
        return frame

    def __repr__(self) -> str:
        return " >> ".join(repr(s) for s in self.stages)


class CutOff(Stage):
    """Keep the rows whose ``rank`` is at most ``k`` within each query.

    Args:
        k: the cut-off depth (>= 1).
    """

    def __init__(self, k: int) -> None:
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"cut-off depth must be a positive integer, found {k!r}")
        self.k = k

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        require_columns(frame, (QID, RANK), "CutOff")
        return frame[frame[RANK] <= self.k].reset_index(drop=True)


class Estimator(Stage):
    """A Stage that learns parameters with ``fit(...) -> self``."""

    @abstractmethod
    def fit(self, *args: Any, **kwargs: Any) -> Estimator:
        """Learn state (attributes ending in ``_``) and return ``self``."""
