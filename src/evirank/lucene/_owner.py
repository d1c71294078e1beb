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
from collections.abc import Callable
from typing import Any, Self


class SearcherOwner:
    """Mixin: ``_searcher`` (opened lazily by the subclass under ``_lock``), ``close`` and pickling.

    A holder built with ``shared`` (a function that returns a searcher someone else opened and
    owns, e.g. :class:`evirank.pipeline.Collection`) uses that searcher and never closes it.
    """

    _searcher: Any
    _lock: threading.Lock
    _shared: Callable[[], Any] | None

    def _init_searcher(self, shared: Callable[[], Any] | None = None) -> None:
        self._searcher = None
        self._lock = threading.Lock()
        self._shared = shared

    def close(self) -> None:
        """Close the Java searcher (its index files stay mapped until then); the next use reopens it.

        A shared searcher is only let go of: its owner closes it."""
        with self._lock:
            if self._searcher is not None:
                if self._shared is None:
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
        state["_shared"] = None  # the owner stays in this process; the copy opens its own
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._lock = threading.Lock()
