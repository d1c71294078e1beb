"""An index opened once: the one handle that every stage of a pipeline reads.

A :class:`Collection` holds what a pipeline reads from an index folder built by ``evirank
index``: its record (name, example queries), one Lucene searcher per BM25/RM3 setting (shared by
the first stage and by the stage that fetches document text), and the passage vectors stored
beside it. Each is opened on first use and then kept, so a service that retrieves, fetches text,
reads stored passages and looks up their vectors opens the index once.

Example:
    >>> collection = Collection("indexes/scifact")  # doctest: +SKIP
    >>> bm25 = collection.bm25(k=20, fetch_text=20)  # doctest: +SKIP
    >>> docs = collection.docs  # doctest: +SKIP
    >>> collection.close()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from evirank.config import SETTINGS

if TYPE_CHECKING:
    from evirank.lucene.docs import LuceneDocs
    from evirank.lucene.search import Bm25
    from evirank.vectors import PassageVectors

logger = logging.getLogger(__name__)

#: BM25's k1 and b when none are given (the settings table's).
K1, B = SETTINGS.default("bm25")


class Collection:
    """An index folder opened once (lazily), shared by the stages that read it.

    Args:
        index: a Lucene index folder (``evirank index``).

    Thread safety: opening is under a lock; the Java searchers it hands out are safe to search
    from several threads.
    """

    def __init__(self, index: str | os.PathLike[str]) -> None:
        self.path = Path(index)
        self._lock = threading.RLock()
        self._searchers: dict[tuple[float, float, Any], Any] = {}
        self._docs: Any = None
        self._info: dict[str, Any] | None = None
        self._info_read = False
        self._vectors: dict[str | None, Any] = {}

    def __repr__(self) -> str:
        return f"Collection({str(self.path)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # a copy in another process (a Ray worker) opens what it needs itself
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

    # ------------------------------------------------------------------------------------------
    def check(self) -> Path:
        """Raise unless the folder holds a complete Lucene index; return its path."""
        if not self.path.is_dir():
            raise FileNotFoundError(
                f"{self.path}: no such index folder; build one with: evirank index --corpus ... "
                f"--index {self.path}"
            )
        from evirank.lucene.index import check_index

        return check_index(self.path)

    @property
    def info(self) -> dict[str, Any] | None:
        """The index's record (``evirank-index.json``), read once; None for an index evirank did not build."""
        with self._lock:
            if not self._info_read:
                from evirank.lucene.index import read_index_info

                try:
                    self._info = read_index_info(self.path)
                except (OSError, ValueError):
                    self._info = None
                self._info_read = True
            return self._info

    def about(self) -> dict[str, Any]:
        """What a page says of the collection: its name (the record's, else the folder's) and example queries.

        Example:
            >>> Collection("/tmp/no-such-index").about()
            {'index': 'no-such-index'}
        """
        about = (self.info or {}).get("about") or {}
        out: dict[str, Any] = {"index": str(about.get("name") or self.path.name)}
        examples = [str(q) for q in about.get("examples") or () if str(q).strip()]
        if examples:
            out["examples"] = examples
        return out

    def searcher(self, k1: float = K1, b: float = B, rm3: Any = None) -> Any:
        """The Java searcher with these BM25 (and RM3) settings, opened on first use (starts the JVM)."""
        key = (float(k1), float(b), rm3)
        with self._lock:
            if key not in self._searchers:
                from evirank.lucene.search import open_searcher

                self._searchers[key] = open_searcher(self.path, k1, b, rm3)
                logger.debug("opened %s (BM25 k1=%g b=%g, rm3=%s)", self.path, k1, b, rm3)
            return self._searchers[key]

    def bm25(
        self,
        k: int = 1000,
        *,
        k1: float = K1,
        b: float = B,
        rm3: Any = None,
        threads: int = 1,
        fetch_text: int = 0,
    ) -> Bm25:
        """A :class:`~evirank.lucene.Bm25` stage over this collection's shared searcher (cheap to make).

        Example:
            >>> Collection("indexes/scifact").bm25(k=100, fetch_text=20)  # doctest: +SKIP
        """
        from evirank.lucene.search import Bm25

        return Bm25(
            self.path,
            k1=k1,
            b=b,
            rm3=rm3,
            k=k,
            threads=threads,
            fetch_text=fetch_text,
            searcher=lambda: self.searcher(k1, b, rm3),
        )

    @property
    def docs(self) -> LuceneDocs:
        """Document lookup by id (:class:`~evirank.lucene.LuceneDocs`) over the shared searcher."""
        with self._lock:
            if self._docs is None:
                from evirank.lucene.docs import LuceneDocs

                self._docs = LuceneDocs(self.path, searcher=self._any_searcher)
            return self._docs

    def _any_searcher(self) -> Any:
        with self._lock:
            if self._searchers:
                return next(iter(self._searchers.values()))
        return self.searcher()

    def vectors(self, spec: str | None = None) -> PassageVectors | None:
        """The passage vectors ``spec`` names (a folder), the index's own (None), or none (``"none"``).

        Opened once per spec; None when there are none.
        """
        key = None if spec is None else str(spec)
        with self._lock:
            if key not in self._vectors:
                from evirank.vectors.index import resolve_vectors

                self._vectors[key] = resolve_vectors(key, self.path)
            return self._vectors[key]

    def close(self) -> None:
        """Close the searchers (a later use reopens them)."""
        with self._lock:
            searchers, self._searchers = list(self._searchers.values()), {}
            self._docs = None
        for searcher in searchers:
            try:
                searcher.close()
            except Exception as exc:  # a searcher that will not close must not hide the others
                logger.debug("closing a searcher of %s: %s", self.path, exc)
