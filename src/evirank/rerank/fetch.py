"""Glue stages that give a run what a re-ranker needs: the query text and the document text.

- :class:`AddQueries` adds each row's ``query`` from a Topics frame (a run read from a file
  carries only ids).
- :class:`FetchText` adds ``title`` and ``text`` for each row's document, from a Lucene index
  with stored documents (:class:`evirank.lucene.LuceneDocs`), from a corpus file or folder
  (:func:`evirank.io.load_texts`: BEIR ``{_id, title, text}`` or Pyserini ``{id, contents}``, so
  a TREC DL style run with its ``corpus.jsonl`` of passages works too), or from any mapping
  ``docno -> Document``.

Example:
    >>> from evirank.frames import Document, make_run, make_topics
    >>> run = make_run([("1", "d1", 2.0), ("1", "d2", 1.0)])
    >>> docs = {"d1": Document("d1", "Cats", "Cats purr."), "d2": Document("d2", "", "Dogs bark.")}
    >>> stage = AddQueries(make_topics([("1", "do cats purr")])) >> FetchText(docs=docs)
    >>> stage(run)[["docno", "query", "title", "text"]].values.tolist()
    [['d1', 'do cats purr', 'Cats', 'Cats purr.'], ['d2', 'do cats purr', '', 'Dogs bark.']]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

import pandas as pd

from evirank.errors import EvirankError
from evirank.frames import DOCNO, QID, QUERY, TEXT, TITLE, Document, require_columns
from evirank.stage import Stage

logger = logging.getLogger(__name__)

Missing = Literal["error", "keep"]
_MISSING = ("error", "keep")


class MissingDocumentsError(EvirankError, LookupError):
    """Documents of a run are not in the text source (index or corpus) given for them."""


class MissingQueriesError(EvirankError, LookupError):
    """Queries of a run have no topic (no query text) in the topics given."""


class DocumentSource(Protocol):
    """Anything with ``get(docnos) -> {docno: Document}`` (e.g. :class:`evirank.lucene.LuceneDocs`)."""

    def get(self, docnos: Iterable[str]) -> dict[str, Document]: ...


def _shown(ids: list[str], limit: int = 5) -> str:
    return ", ".join(repr(i) for i in ids[:limit]) + (", ..." if len(ids) > limit else "")


class AddQueries(Stage):
    """Add the ``query`` column to a run from a Topics frame [qid, query], by qid.

    Args:
        topics: the Topics frame.
        missing: ``"error"`` raises :class:`MissingQueriesError` when a run's qid has no topic;
            ``"drop"`` leaves those queries out (logged at WARNING, with how many). A run with
            no query in common with the topics is always an error.

    Example:
        >>> from evirank.frames import make_run, make_topics
        >>> AddQueries(make_topics([("1", "cats")]))(make_run([("1", "d1", 1.0)]))["query"].tolist()
        ['cats']
    """

    def __init__(self, topics: pd.DataFrame, missing: Literal["error", "drop"] = "error") -> None:
        require_columns(topics, (QID, QUERY), "AddQueries (topics)")
        if missing not in ("error", "drop"):
            raise ValueError(f"missing must be 'error' or 'drop', found {missing!r}")
        self.topics = topics
        self.missing = missing

    def __repr__(self) -> str:
        return f"AddQueries(<{len(self.topics)} topics>, missing={self.missing!r})"

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Return ``frame`` with ``query`` set from the topics (an existing ``query`` is replaced)."""
        require_columns(frame, (QID,), "AddQueries")
        queries = dict(zip(self.topics[QID].astype(str), self.topics[QUERY].astype(str), strict=True))
        text = frame[QID].astype(str).map(queries)
        absent = sorted(set(frame.loc[text.isna(), QID].astype(str)))
        out = frame.copy()
        if absent:
            total = int(frame[QID].nunique())
            message = f"{len(absent)} of the run's {total} quer(ies) have no topic: {_shown(absent)}"
            if len(absent) == total:
                raise MissingQueriesError(
                    f"no query of the run has a topic ({total} run queries, {len(self.topics)} topics, "
                    f"none in common; run queries: {_shown(absent)}): are the run and the topics "
                    "of the same collection?"
                )
            if self.missing == "error":
                raise MissingQueriesError(message + " (are the run and the topics of the same collection?)")
            logger.warning("%s; they are left out", message)
            keep = text.notna()
            out, text = out[keep], text[keep]
        out[QUERY] = text.astype(str)
        return out.reset_index(drop=True)


class FetchText(Stage):
    """Add ``title`` and ``text`` to each row of a run from an index, a corpus or a mapping.

    Give exactly one source. Each distinct document is looked up once per call. A corpus file
    is read in one streaming pass per call for the documents not seen before; the documents
    found are kept on the stage (``cache_``), so later calls over the same candidates do not
    read the file again. Existing ``title``/``text`` columns are replaced.

    Args:
        index: a Lucene index folder with stored documents (``evirank index``); needs the
            ``lucene`` extra and starts the JVM on first use.
        corpus: a corpus file or folder, in any format :func:`evirank.io.read_corpus` reads
            (JSONL, a BEIR folder, or a collection as distributed: TREC, NYT, WaPo, WARC, MS MARCO).
        corpus_format: the corpus's format (default: told from the files, see
            :func:`evirank.io.corpus.corpus_format`).
        docs: a mapping ``docno -> Document`` or any object with ``get(docnos) -> {docno: Document}``.
        missing: ``"error"`` raises :class:`MissingDocumentsError` naming the absent documents;
            ``"keep"`` gives them empty title and text (logged at WARNING): they stay in the
            ranking with one empty segment.

    Example:
        >>> from evirank.frames import make_run
        >>> FetchText(corpus="../shared/datasets/trec-dl19-passage/corpus.jsonl")(
        ...     make_run([("1", "1002627", 3.0)]))["text"].str[:19].tolist()  # doctest: +SKIP
        ['What Part B covers.']
    """

    #: the opened index (LuceneDocs), once used
    source_: Any = None

    def __init__(
        self,
        index: str | os.PathLike[str] | None = None,
        corpus: str | os.PathLike[str] | None = None,
        docs: Mapping[str, Document] | DocumentSource | None = None,
        *,
        corpus_format: str | None = None,
        missing: Missing = "error",
    ) -> None:
        given = [
            name
            for name, value in (("index", index), ("corpus", corpus), ("docs", docs))
            if value is not None
        ]
        if len(given) != 1:
            raise ValueError(
                f"FetchText needs exactly one of index=, corpus= or docs=; found {given or 'none'}"
            )
        if missing not in _MISSING:
            raise ValueError(f"missing must be one of {_MISSING}, found {missing!r}")
        self.index = index
        self.corpus = corpus
        self.corpus_format = corpus_format
        self.docs = docs
        self.missing = missing

    def __repr__(self) -> str:
        if self.index is not None:
            source = f"index={str(self.index)!r}"
        elif self.corpus is not None:
            source = f"corpus={str(self.corpus)!r}"
            if self.corpus_format is not None:
                source += f", corpus_format={self.corpus_format!r}"
        else:
            source = f"docs=<{type(self.docs).__name__}>"
        return f"FetchText({source}, missing={self.missing!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(vars(self))
        state.pop("source_", None)  # a Lucene searcher reopens in the copy
        return state

    @property
    def source(self) -> str:
        """Where texts come from, for logs and config records."""
        if self.index is not None:
            return f"index {self.index}"
        if self.corpus is not None:
            return f"corpus {self.corpus}"
        return f"documents ({type(self.docs).__name__})"

    def _lucene(self) -> Any:
        if self.source_ is None:
            from evirank.lucene.docs import LuceneDocs

            self.source_ = LuceneDocs(Path(str(self.index)))
        return self.source_

    def close(self) -> None:
        """Release the index (a Lucene searcher) if one was opened; a later call reopens it."""
        if self.source_ is not None and hasattr(self.source_, "close"):
            self.source_.close()
        self.source_ = None

    def __enter__(self) -> FetchText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, docnos: Iterable[str]) -> tuple[dict[str, Document], list[str]]:
        """(the documents found by docno, the docnos not found), each distinct docno once."""
        wanted = list(dict.fromkeys(str(d) for d in docnos))
        if self.corpus is not None:
            from evirank.io.corpus import load_texts

            cache: dict[str, Document] = getattr(self, "cache_", None) or {}
            todo = [d for d in wanted if d not in cache]
            if todo:
                cache.update(load_texts(self.corpus, todo, format=self.corpus_format, missing="ignore"))
            self.cache_ = cache
            found = {d: cache[d] for d in wanted if d in cache}
        elif self.index is not None:
            found = self._get_each(self._lucene(), wanted)
        elif isinstance(self.docs, Mapping):
            found = {d: self.docs[d] for d in wanted if d in self.docs}
        else:
            found = self._get_each(self.docs, wanted)
        return found, [d for d in wanted if d not in found]

    @staticmethod
    def _get_each(source: Any, wanted: list[str]) -> dict[str, Document]:
        """``source.get`` for all ids; when it refuses (a missing id), one by one to find the rest."""
        try:
            return dict(source.get(wanted))
        except KeyError:
            found: dict[str, Document] = {}
            for docno in wanted:
                try:
                    found.update(source.get([docno]))
                except KeyError:
                    continue
            return found

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Return ``frame`` with ``title`` and ``text`` of each row's document."""
        require_columns(frame, (QID, DOCNO), "FetchText")
        docnos = frame[DOCNO].astype(str)
        found, absent = self.lookup(docnos)
        if absent:
            message = f"{len(absent)} document(s) of the run are not in {self.source}: {_shown(absent)}"
            if self.missing == "error":
                raise MissingDocumentsError(
                    message + " (is the run from this collection? missing='keep' / --missing-docs keep "
                    "ranks them with empty text)"
                )
            logger.warning("%s; they get empty text", message)
        logger.debug("FetchText: %d rows, %d documents from %s", len(frame), len(found), self.source)
        out = frame.copy()
        out[TITLE] = [found[d].title if d in found else "" for d in docnos]
        out[TEXT] = [found[d].text if d in found else "" for d in docnos]
        return out
