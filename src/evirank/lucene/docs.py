"""Read documents (title and text) back from a Lucene index's stored raw JSON.

Indexes built by :func:`evirank.lucene.build_index` (and Anserini's BEIR "flat" indexes) store
each document's raw JSON ``{"_id", "title", "text"}``; Pyserini JSONL indexes store
``{"id", "contents"}``. Both are understood.

Example:
    >>> document_from_raw("d1", '{"_id": "d1", "title": "Cats", "text": "Cats purr."}')
    Document(docno='d1', title='Cats', text='Cats purr.')
    >>> docs = LuceneDocs("/tmp/pets-index")  # doctest: +SKIP
    >>> docs.get(["d2"])["d2"].title  # doctest: +SKIP
    'Dogs'
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.lucene._owner import SearcherOwner

logger = logging.getLogger(__name__)


def document_from_raw(docno: str, raw: str) -> Document:
    """A Document from one stored raw record (BEIR JSON, Pyserini JSON, or plain text).

    Example:
        >>> document_from_raw("7", '{"id": "7", "contents": "just text"}').text
        'just text'
    """
    try:
        obj = json.loads(raw)
    except ValueError:
        return Document(docno, "", raw)
    if not isinstance(obj, dict):
        return Document(docno, "", raw)
    title = obj.get("title") or ""
    text = obj.get("text")
    if text is None:
        text = obj.get("contents") or ""
    url = obj.get("url")
    return Document(docno, str(title), str(text), url if isinstance(url, str) and url else None)


class LuceneDocs(SearcherOwner):
    """Look documents up by id in a Lucene index with stored raw documents.

    The index opens lazily, on the first lookup (this starts the JVM).

    Args:
        index: the index folder.
        searcher: a function returning a searcher opened (and closed) by someone else
            (:class:`evirank.pipeline.Collection`); None opens its own.

    Example:
        >>> LuceneDocs("/tmp/pets-index").get(["d1", "d2"])  # doctest: +SKIP
        {'d1': Document(docno='d1', title='Cats', text='Cats purr.'), 'd2': ...}
    """

    def __init__(self, index: str | os.PathLike[str], searcher: Callable[[], Any] | None = None) -> None:
        self.index = Path(index)
        self._init_searcher(searcher)

    def __repr__(self) -> str:
        return f"LuceneDocs({str(self.index)!r})"

    def _open(self) -> Any:
        with self._lock:
            if self._searcher is None:
                from evirank.lucene.index import check_index
                from evirank.lucene.java import simple_searcher

                if self._shared is not None:
                    searcher = self._shared()
                else:
                    check_index(self.index)
                    searcher = simple_searcher(self.index)
                if searcher.get_total_num_docs() > 0 and searcher.doc(0).get("raw") is None:
                    raise InputFormatError(
                        self.index,
                        None,
                        "an index with stored raw documents",
                        "none stored",
                        "rebuild it with: evirank index",
                    )
                self._searcher = searcher
            return self._searcher

    def get(self, docnos: Iterable[str]) -> dict[str, Document]:
        """The documents with these ids, keyed by id.

        Raises:
            KeyError: some ids are not in the index (the message lists the first few).
        """
        searcher = self._open()
        found: dict[str, Document] = {}
        missing: list[str] = []
        for docno in dict.fromkeys(str(d) for d in docnos):
            raw = searcher.doc_raw(docno)
            if raw is None:
                missing.append(docno)
            else:
                found[docno] = document_from_raw(docno, raw)
        if missing:
            shown = ", ".join(repr(d) for d in missing[:5]) + (", ..." if len(missing) > 5 else "")
            raise KeyError(f"{len(missing)} document id(s) not in {self.index}: {shown}")
        return found

    def __getitem__(self, docno: str) -> Document:
        return self.get([docno])[docno]

    def __len__(self) -> int:
        return int(self._open().get_total_num_docs())

    def __iter__(self) -> Iterator[Document]:
        """Every stored document, in the index's internal order (for embedding a whole index).

        Example:
            >>> [d.docno for d in LuceneDocs("/tmp/pets-index")]  # doctest: +SKIP
            ['d1', 'd2']
        """
        searcher = self._open()
        for internal in range(int(searcher.get_total_num_docs())):
            stored = searcher.doc(internal)
            if stored is None:
                continue
            docno = stored.get("id")
            raw = stored.get("raw")
            yield document_from_raw(str(docno), "" if raw is None else str(raw))
