"""evirank: rank documents by the evidence their sentences and passages hold.

The core is light: importing ``evirank`` loads pandas and numpy, never torch or a JVM.
Heavy parts (Lucene, transformers, the web service) live behind optional extras and are
imported when first used.

``evirank.rank(query, documents)`` ranks documents held in memory by their passages' evidence, and
``evirank.Ranker`` does the same with the model loaded once (:mod:`evirank.ranker`).
``evirank.adapt(corpus, output_dir=...)`` adapts a model to a collection from its text alone
(:mod:`evirank.train.adaptation`).

Example:
    >>> import evirank
    >>> evirank.__version__
    '0.1.0'
"""

from __future__ import annotations

import logging
from typing import Any

from evirank.version import __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["Ranker", "__version__", "adapt", "rank"]


def __getattr__(name: str) -> Any:
    """``rank``, ``Ranker`` and ``adapt``, imported on first use (the bare import stays light)."""
    if name in ("rank", "Ranker"):
        from evirank import ranker

        return getattr(ranker, name)
    if name == "adapt":
        from evirank.train.adaptation import adapt

        return adapt
    raise AttributeError(f"module 'evirank' has no attribute {name!r}")
