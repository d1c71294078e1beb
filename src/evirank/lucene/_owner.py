"""The life cycle shared by objects that hold one Java ``SimpleSearcher``.

:class:`~evirank.lucene.docs.LuceneDocs` and :class:`~evirank.lucene.search.Bm25` both open a
searcher lazily under a lock, close it on request (or at the end of a ``with`` block), and pickle
without it: a copy in another process opens its own on first use.

Example:
    >>> class Holder(SearcherOwner):
    ...     def __init__(self):
    ...         self._init_searcher()
    >>> with Holder() as holder:
    ...     holder._searcher is None
    True
"""

from __future__ import annotations

import threading
from typing import Any, Self


class SearcherOwner:
    """Mixin: ``_searcher`` (opened lazily by the subclass under ``_lock``), ``close`` and pickling."""

    _searcher: Any
    _lock: threading.Lock

    def _init_searcher(self) -> None:
        self._searcher = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the Java searcher (its index files stay mapped until then); the next use reopens it."""
        with self._lock:
            if self._searcher is not None:
                self._searcher.close()
                self._searcher = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # Picklable (for worker processes): the Java searcher and the lock are not carried over;
        # the copy opens its own searcher on first use.
        state = dict(vars(self))
        state["_searcher"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._lock = threading.Lock()
