"""BM25 and BM25+RM3 retrieval from a Lucene index, as a :class:`~evirank.stage.Stage`.

Searching goes through Anserini's ``SimpleSearcher`` (the engine behind Pyserini's
``LuceneSearcher``), so runs are Pyserini's runs: same analysis (Porter stemming, English stop
words), same BM25 (Lucene's, with its one-byte document length norms), same RM3, and the same
scores, which Anserini rounds to 4 decimals and nudges apart by 1e-6 steps when they tie.

Tie order: the returned Run is ordered with :func:`evirank.frames.sort_run` (score descending,
then docno descending). Plain Lucene would break ties by its internal document number, which
depends on indexing order and threads; Anserini breaks them by docid (ascending) and nudges the
tied scores apart by 1e-6 steps, so the scores it returns no longer tie and ``sort_run`` keeps
Anserini's order and top-``k`` cut. Runs are therefore the
same whatever the number of indexing or search threads.

Example:
    >>> from evirank.frames import make_topics
    >>> run = Bm25("/tmp/pets-index", k=10)(make_topics([("1", "purring cats")]))  # doctest: +SKIP
    >>> run.columns.tolist()  # doctest: +SKIP
    ['qid', 'docno', 'score', 'rank', 'query']
    >>> pipeline = Bm25("/tmp/pets-index", rm3=Rm3()) % 100  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.config import SETTINGS
from evirank.errors import EvirankError, InputFormatError
from evirank.frames import DOCNO, QID, QUERY, RANK, SCORE, TEXT, TITLE, URL, require_columns, sort_run
from evirank.lucene._owner import SearcherOwner
from evirank.lucene.docs import document_from_raw
from evirank.progress import progress_bar
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: BM25's k1 and b when none are given: the settings table's (Anserini's defaults).
K1, B = SETTINGS.default("bm25")

# Queries per Java batch_search call: each holds k loaded documents per query in the JVM heap
# until the batch returns, so batches stay small enough for a 1 GB heap at k=1000.
_HITS_PER_BATCH = 64_000


_JAVA_INT = 2**31 - 1


def _positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _JAVA_INT:
        raise ValueError(f"{name} must be a positive integer up to {_JAVA_INT} (a Java int), found {value!r}")


@dataclass(frozen=True, slots=True)
class Rm3:
    """RM3 pseudo-relevance feedback, with Anserini's defaults.

    Args:
        fb_docs: feedback documents (the top of a first BM25 ranking).
        fb_terms: expansion terms taken from them.
        original_weight: weight of the original query in the expanded one (0 to 1).

    Example:
        >>> Rm3()
        Rm3(fb_docs=10, fb_terms=10, original_weight=0.5)
    """

    fb_docs: int = 10
    fb_terms: int = 10
    original_weight: float = 0.5

    def __post_init__(self) -> None:
        _positive_int("fb_docs", self.fb_docs)
        _positive_int("fb_terms", self.fb_terms)
        if not 0.0 <= float(self.original_weight) <= 1.0:  # NaN fails this too
            raise ValueError(f"original_weight must be within [0, 1], found {self.original_weight!r}")

    @classmethod
    def parse(cls, words: Sequence[str]) -> Rm3:
        """RM3 from the words of ``--rm3``: none (Anserini's defaults) or FB_DOCS FB_TERMS ORIG_WEIGHT.

        Raises:
            ValueError: not zero or three words, or words of the wrong type or range.

        Example:
            >>> Rm3.parse([])
            Rm3(fb_docs=10, fb_terms=10, original_weight=0.5)
            >>> Rm3.parse(["20", "5", "0.3"])
            Rm3(fb_docs=20, fb_terms=5, original_weight=0.3)
        """
        if not words:
            return cls()
        if len(words) != 3:
            raise ValueError(f"takes no value or three (FB_DOCS FB_TERMS ORIG_WEIGHT), found {len(words)}")
        try:
            fb_docs, fb_terms, weight = int(words[0]), int(words[1]), float(words[2])
        except ValueError:
            raise ValueError(
                f"expected FB_DOCS FB_TERMS ORIG_WEIGHT as integer integer number, found {list(words)}"
            ) from None
        return cls(fb_docs=fb_docs, fb_terms=fb_terms, original_weight=weight)


@dataclass(frozen=True, slots=True)
class Bm25Config:
    """Everything a :class:`Bm25` stage does, as data (written next to runs).

    Example:
        >>> Bm25Config().k1, Bm25Config().rm3
        (0.9, None)
    """

    k1: float = K1
    b: float = B
    rm3: Rm3 | None = None
    k: int = 1000
    threads: int = 1
    fetch_text: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(float(self.k1)) and float(self.k1) >= 0) or not 0.0 <= float(self.b) <= 1.0:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, found k1={self.k1!r}, b={self.b!r}")
        _positive_int("k", self.k)
        _positive_int("threads", self.threads)
        if isinstance(self.fetch_text, bool) or not isinstance(self.fetch_text, int) or self.fetch_text < 0:
            raise ValueError(f"fetch_text must be an integer >= 0, found {self.fetch_text!r}")
        if self.rm3 is not None and not isinstance(self.rm3, Rm3):
            raise TypeError(f"rm3 must be an Rm3(...) or None, found {type(self.rm3).__name__}")

    @property
    def name(self) -> str:
        """A short name for run tags: ``bm25`` or ``bm25+rm3``."""
        return "bm25" if self.rm3 is None else "bm25+rm3"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def _clean_scores(scores: Sequence[float]) -> np.ndarray:
    """Lucene's float32 scores as the shortest decimals that identify them (12.3456, not 12.345600128...).

    Distinct float32 values stay distinct and keep their order, so rankings do not change.
    """
    return np.asarray(scores, dtype=np.float32).astype(str).astype(np.float64)


def _has_docvectors(index: Path) -> bool:
    """Whether the index's first document has a stored term vector (RM3 needs them)."""
    from evirank.lucene.java import autoclass

    paths = autoclass("java.nio.file.Paths")
    with _java_errors(index, "reading its term vectors"):
        directory = autoclass("org.apache.lucene.store.FSDirectory").open(paths.get(str(index)))
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
        try:
            return reader.maxDoc() == 0 or reader.termVectors().get(0) is not None
        finally:
            reader.close()
            directory.close()


@contextmanager
def _java_errors(index: Path, what: str) -> Iterator[None]:
    """A Java exception in the body as one line naming the index and what was being done."""
    from evirank.lucene.java import java_error_text

    try:
        yield
    except Exception as exc:
        text = java_error_text(exc)
        if text is None:
            raise
        raise EvirankError(f"{index}: Lucene failed on {what}: {text}") from None


def open_searcher(index: str | os.PathLike[str], k1: float = K1, b: float = B, rm3: Rm3 | None = None) -> Any:
    """A Java ``SimpleSearcher`` over ``index`` set to BM25 (``k1``, ``b``) and optionally RM3.

    Starts the JVM.

    Raises:
        InputFormatError: not a Lucene index, or RM3 over an index without document vectors.
        FileNotFoundError: no such folder.
    """
    from evirank.lucene.index import check_index, read_index_info
    from evirank.lucene.java import simple_searcher

    path = Path(index)
    check_index(path)
    if read_index_info(path) is None:
        logger.info("%s was not built by evirank (no evirank-index.json); using it as is", path)
    if rm3 is not None and not _has_docvectors(path):
        raise InputFormatError(
            path,
            None,
            "an index with document vectors (RM3 needs them)",
            "none stored",
            "rebuild it with: evirank index",
        )
    searcher = simple_searcher(path)  # a damaged index: one line naming it
    searcher.set_bm25(float(k1), float(b))
    if rm3 is not None:
        # Anserini's argument order: expansion terms, then feedback documents.
        searcher.set_rm3(rm3.fb_terms, rm3.fb_docs, float(rm3.original_weight))
    return searcher


class Bm25(SearcherOwner, Stage):
    """Retrieve the top ``k`` documents per query with BM25 (optionally BM25+RM3) from a Lucene index.

    Takes Topics ``[qid, query]`` and returns a Run ``[qid, docno, score, rank, query]``
    (plus ``title`` and ``text`` with ``fetch_text``). The searcher opens lazily, once per stage.

    Args:
        index: a Lucene index folder (:func:`evirank.lucene.build_index`, or Pyserini's).
        k1: BM25's term-frequency saturation.
        b: BM25's length normalisation.
        rm3: an :class:`Rm3` to expand each query with pseudo-relevance feedback, or ``None``.
        k: documents retrieved per query.
        threads: search threads (above 1, queries are searched in parallel batches in Java).
        fetch_text: fill ``title`` and ``text`` for each query's top ``fetch_text`` documents
            (``None`` below that rank); 0 adds no such columns. Text is never loaded for all ``k``.
        searcher: a function returning an already opened searcher with these BM25/RM3 settings
            (:meth:`evirank.pipeline.Collection.searcher`): the stage uses it and never closes it.

    Example:
        >>> from evirank.frames import make_topics
        >>> stage = Bm25("/tmp/pets-index", rm3=Rm3(fb_docs=5), k=100, fetch_text=10)  # doctest: +SKIP
        >>> run = stage(make_topics([("1", "cats")]))  # doctest: +SKIP
    """

    def __init__(
        self,
        index: str | os.PathLike[str],
        k1: float = K1,
        b: float = B,
        rm3: Rm3 | None = None,
        k: int = 1000,
        threads: int = 1,
        fetch_text: int = 0,
        searcher: Callable[[], Any] | None = None,
    ) -> None:
        self.index = Path(index)
        self.config = Bm25Config(k1=k1, b=b, rm3=rm3, k=k, threads=threads, fetch_text=fetch_text)
        self._init_searcher(searcher)

    def __repr__(self) -> str:
        params = ", ".join(f"{f.name}={getattr(self.config, f.name)!r}" for f in fields(self.config))
        return f"Bm25({str(self.index)!r}, {params})"

    def _open(self) -> Any:
        with self._lock:
            if self._searcher is None:
                cfg = self.config
                if self._shared is not None:
                    self._searcher = self._shared()
                else:
                    self._searcher = open_searcher(self.index, cfg.k1, cfg.b, cfg.rm3)
                    logger.debug("opened %s for %r", self.index, self)
            return self._searcher

    def _hits(self, searcher: Any, qids: list[str], queries: list[str]) -> Iterator[tuple[str, list[Any]]]:
        """Yield (qid, Anserini ScoredDoc hits) per query, sequentially or in Java-side batches."""
        cfg = self.config
        bar = progress_bar(desc=cfg.name, total=len(qids), unit="query")
        try:
            if cfg.threads == 1:
                for qid, query in zip(qids, queries, strict=True):
                    with _java_errors(self.index, f"query {qid}"):
                        hits = searcher.search(query, cfg.k)
                    yield qid, hits
                    bar.update(1)
                return
            from evirank.lucene.java import autoclass

            array_list = autoclass("java.util.ArrayList")
            size = max(cfg.threads, _HITS_PER_BATCH // cfg.k)
            for start in range(0, len(qids), size):
                batch_q, batch_id = array_list(), array_list()
                for qid, query in zip(qids[start : start + size], queries[start : start + size], strict=True):
                    batch_q.add(query)
                    batch_id.add(qid)
                last = qids[min(start + size, len(qids)) - 1]
                with _java_errors(self.index, f"queries {qids[start]} to {last}"):
                    results = searcher.batch_search(batch_q, batch_id, cfg.k, cfg.threads)
                for qid in qids[start : start + size]:
                    yield qid, results.get(qid) or []
                bar.update(min(size, len(qids) - start))
        finally:
            bar.close()

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Search every topic; return the Run sorted by qid, score descending, docno descending."""
        require_columns(frame, (QID, QUERY), "Bm25")
        qids = frame[QID].astype(str).tolist()
        queries = frame[QUERY].astype(str).tolist()
        duplicated = frame[QID].astype(str)[frame[QID].astype(str).duplicated()].unique().tolist()
        if duplicated:
            raise ValueError(
                f"Bm25: each qid must appear once in the topics, found repeated qids {duplicated[:5]}"
            )
        cfg = self.config
        searcher = self._open()
        query_of = dict(zip(qids, queries, strict=True))
        parts: list[pd.DataFrame] = []
        nothing: list[str] = []
        for qid, hits in self._hits(searcher, qids, queries):
            if not hits:
                nothing.append(qid)
                continue
            docnos = [h.docid for h in hits]
            scores = _clean_scores([h.score for h in hits])
            part = pd.DataFrame({QID: qid, DOCNO: docnos, SCORE: scores, QUERY: query_of[qid]})
            if cfg.fetch_text:
                # Rank order (score descending, docno descending) decides which hits get their text.
                by_rank = sorted(range(len(hits)), key=lambda i: (scores[i], docnos[i]), reverse=True)
                order = by_rank[: cfg.fetch_text]
                titles: list[str | None] = [None] * len(hits)
                texts: list[str | None] = [None] * len(hits)
                urls: list[str | None] = [None] * len(hits)
                for i in order:
                    doc = document_from_raw(docnos[i], hits[i].lucene_document.get("raw") or "")
                    titles[i], texts[i], urls[i] = doc.title, doc.text, doc.url
                part[TITLE] = titles
                part[TEXT] = texts
                if any(urls):
                    part[URL] = urls
            parts.append(part)
        if nothing:
            _warn_empty(nothing, query_of, len(qids))
        columns = [QID, DOCNO, SCORE, RANK, QUERY] + ([TITLE, TEXT] if cfg.fetch_text else [])
        if any(URL in part.columns for part in parts):
            columns.append(URL)  # the documents' sources, when the corpus gave them
        if not parts:
            empty = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
            return empty.astype({SCORE: np.float64, RANK: np.int64})
        run = sort_run(pd.concat(parts, ignore_index=True))
        return run[columns]


def _warn_empty(qids: list[str], query_of: dict[str, str], total: int) -> None:
    """Say which queries retrieved no document (they are absent from the run), and why that happens.

    Example:
        >>> _warn_empty(["2"], {"1": "cats", "2": "the of and"}, 2)  # logs a warning
    """
    shown = ", ".join(f"{qid} ({query_of[qid]!r})" for qid in qids[:5])
    more = f" and {len(qids) - 5} more" if len(qids) > 5 else ""
    logger.warning(
        "%d of %d queries retrieved no document and are absent from the run: %s%s (each of their "
        "words is a stop word or in no document of the index)",
        len(qids),
        total,
        shown,
        more,
    )
