"""Per-stage wall-clock timings of a re-ranking run, so users see where their time goes.

One vocabulary of stage names (:data:`STAGES`) for every re-ranking: ``evirank rerank``'s record
and log, the service's per-request ``timings`` (in milliseconds, with ``wait`` and ``total``),
and the Python API's :class:`~evirank.rerank.Rerank` all time the same steps under the same names.

Example:
    >>> timings = StageTimings()
    >>> with timings.measure("segmentation"):
    ...     _ = sum(range(1000))
    >>> timings.add("model", 2.0)
    >>> list(timings.as_dict())
    ['segmentation', 'model']
    >>> timings["model"]
    2.0
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The stages of a re-ranking run, in order. ``pruning`` times the stages a pipeline runs between
#: segmentation and scoring (a cascade's cheaper pass); the scoring is split into ``model_load``,
#: ``tokenisation``, ``model`` and ``scoring_other`` (the store, batching, bookkeeping).
STAGES = (
    "first_stage",
    "text_fetch",
    "segmentation",
    "pruning",
    "model_load",
    "tokenisation",
    "model",
    "scoring_other",
    "aggregation",
    "write",
)

_LABELS = {
    "first_stage": "first stage",
    "text_fetch": "text fetch",
    "segmentation": "segmentation",
    "pruning": "pruning",
    "model_load": "model loading",
    "tokenisation": "tokenisation",
    "model": "model",
    "scoring_other": "scoring (other)",
    "aggregation": "aggregation",
    "write": "writing outputs",
    "wait": "waiting",
    "total": "total",
}
#: The stages that make up the scoring.
SCORING_PARTS = ("model_load", "tokenisation", "model", "scoring_other")


def stage_label(name: str) -> str:
    """A stage's name for people (``model_load`` -> ``model loading``).

    Example:
        >>> stage_label("text_fetch")
        'text fetch'
    """
    return _LABELS.get(name, name.replace("_", " "))


class StageTimings:
    """Seconds per named stage, kept in the order stages were first timed; repeated names add up."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to stage ``name``."""
        self._seconds[name] = self._seconds.get(name, 0.0) + max(0.0, float(seconds))

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        """Time the body of a ``with`` block under ``name`` (also when it raises)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def __getitem__(self, name: str) -> float:
        return self._seconds[name]

    def __contains__(self, name: object) -> bool:
        return name in self._seconds

    @property
    def total(self) -> float:
        """The sum over all stages."""
        return sum(self._seconds.values())

    def as_dict(self, digits: int = 3) -> dict[str, float]:
        """``{stage: seconds}`` rounded, in the order timed (for JSON records)."""
        return {name: round(value, digits) for name, value in self._seconds.items()}

    def table(self) -> str:
        """A small aligned text table: stage, seconds, share of the total.

        Example:
            >>> t = StageTimings(); t.add("model", 3.0); t.add("aggregation", 1.0)
            >>> print(t.table())
            stage              seconds  share
            model                3.000  75.0%
            aggregation          1.000  25.0%
            total                4.000 100.0%
        """
        total = self.total
        lines = [f"{'stage':<16} {'seconds':>9} {'share':>6}"]
        for name, value in self._seconds.items():
            share = 100.0 * value / total if total > 0 else 0.0
            lines.append(f"{stage_label(name)[:16]:<16} {value:>9.3f} {share:>5.1f}%")
        lines.append(f"{'total':<16} {total:>9.3f} {100.0 if total > 0 else 0.0:>5.1f}%")
        return "\n".join(lines)
