"""Dense first stage: documents retrieved by their best passage's inner product with the query.

The collection's passages are already embedded (a passage-vector folder, ``evirank embed`` or
``evirank index --embed``); at query time only the query is embedded, with the model that made the
vectors (another model is refused: :class:`~evirank.vectors.VectorsMismatchError`).

Two layers, so that an approximate index can replace exact search without touching callers:

- a :class:`PassageSearcher` finds each query's top passages (rows of the vector matrix) by inner
  product. :class:`ExactSearcher` scans the memory-mapped float16 matrix block by block (numpy,
  float32 products), keeping a running top list: exact, and fast enough for collections of a few
  million passages. An HNSW or FAISS index over the same rows only has to implement ``search``.
- :class:`DenseRetriever` (a :class:`~evirank.stage.Stage`: Topics -> Run) embeds the queries,
  asks the searcher for passages and max-pools them to documents: a document's score is its best
  passage's. It asks for more passages until each query has ``k`` distinct documents (or the
  collection is exhausted), so with an exact searcher the top ``k`` documents are exact.

Ties: passages of equal score are ordered by row; documents by :func:`evirank.frames.sort_run`
(score descending, then docno descending), which also decides which of the documents tied at the
``k``-th place are kept.

Example:
    >>> from evirank.frames import make_topics
    >>> retriever = DenseRetriever("indexes/scifact/vectors", k=100)  # doctest: +SKIP
    >>> run = retriever(make_topics([("1", "vitamin D and bone density")]))  # doctest: +SKIP
    >>> run.columns.tolist()  # doctest: +SKIP
    ['qid', 'docno', 'score', 'rank', 'query']
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from evirank.frames import DOCNO, QID, QUERY, RANK, SCORE, require_columns, sort_run
from evirank.progress import progress_bar
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: Rows of the float16 matrix converted and multiplied at a time by :class:`ExactSearcher`.
DEFAULT_BLOCK_ROWS = 16_384
#: Queries multiplied at a time by :class:`ExactSearcher`.
DEFAULT_QUERY_BLOCK = 256


@runtime_checkable
class PassageSearcher(Protocol):
    """Finds the passages (rows of a passage-vector matrix) with the largest inner product.

    An approximate index (HNSW, FAISS) implements the same method over the same rows; the
    document pooling of :class:`DenseRetriever` is the same for every searcher.
    """

    def __len__(self) -> int:
        """How many passages (rows) can be returned."""

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Each query's top ``k`` passages: ``(scores, rows)``, both ``[queries, min(k, len)]``.

        Args:
            queries: float32 ``[queries, dim]`` query vectors.
            k: passages per query.

        Returns:
            float32 scores, descending along each row (ties by row ascending), and int64 rows.
        """


class ExactSearcher:
    """Exact inner-product search over a (memory-mapped) matrix, block by block.

    Each block of ``block_rows`` rows is converted to float32 and multiplied with a block of
    queries; the best ``k`` of every block join a running top-``k`` list per query. Memory stays
    at about ``query_block x block_rows`` floats whatever the collection's size.

    Args:
        matrix: ``[passages, dim]`` vectors (float16 from a passage-vector folder, or any float).
        block_rows: rows per block.
        query_block: queries per block.

    Example:
        >>> matrix = np.eye(3, dtype=np.float16)
        >>> scores, rows = ExactSearcher(matrix, block_rows=2).search(np.array([[0.1, 0.9, 0.5]]), 2)
        >>> rows.tolist(), scores.astype(float).round(2).tolist()
        ([[1, 2]], [[0.9, 0.5]])
    """

    def __init__(
        self, matrix: np.ndarray, block_rows: int = DEFAULT_BLOCK_ROWS, query_block: int = DEFAULT_QUERY_BLOCK
    ) -> None:
        if matrix.ndim != 2:
            raise ValueError(f"expected a 2-dimensional matrix, found shape {matrix.shape}")
        if block_rows < 1 or query_block < 1:
            raise ValueError(f"block_rows and query_block must be >= 1, found {block_rows}, {query_block}")
        self.matrix = matrix
        self.block_rows = int(block_rows)
        self.query_block = int(query_block)

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def __repr__(self) -> str:
        return f"ExactSearcher({self.matrix.shape[0]} x {self.matrix.shape[1]}, block_rows={self.block_rows})"

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """See :meth:`PassageSearcher.search`."""
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        n, dim = self.matrix.shape
        if q.shape[1] != dim:
            raise ValueError(f"query vectors have {q.shape[1]} dimensions, the passages {dim}")
        if k < 1:
            raise ValueError(f"k must be >= 1, found {k}")
        depth = min(int(k), n)
        scores = np.empty((len(q), depth), dtype=np.float32)
        rows = np.empty((len(q), depth), dtype=np.int64)
        if depth == 0:
            return scores, rows
        for qs in range(0, len(q), self.query_block):
            scores[qs : qs + self.query_block], rows[qs : qs + self.query_block] = self._search_block(
                q[qs : qs + self.query_block], depth
            )
        return scores, rows

    def _search_block(self, q: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        n = len(self)
        best_s = np.empty((len(q), 0), dtype=np.float32)
        best_r = np.empty((len(q), 0), dtype=np.int64)
        for start in range(0, n, self.block_rows):
            block = np.asarray(self.matrix[start : start + self.block_rows], dtype=np.float32)
            s = q @ block.T
            r = np.broadcast_to(np.arange(start, start + len(block), dtype=np.int64), s.shape)
            best_s, best_r = _top(np.hstack([best_s, s]), np.hstack([best_r, r]), depth)
        order = np.lexsort((best_r, -best_s), axis=-1)
        return np.take_along_axis(best_s, order, axis=1), np.take_along_axis(best_r, order, axis=1)


def _top(scores: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest scores of each query (unordered) with their rows.

    ``np.argpartition`` decides among scores tied exactly at the cut: the same inputs always give
    the same choice, so runs are repeatable.
    """
    if scores.shape[1] <= k:
        return scores, rows
    keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return np.take_along_axis(scores, keep, axis=1), np.take_along_axis(rows, keep, axis=1)


class DenseRetriever(Stage):
    """Retrieve each query's top ``k`` documents by their best passage (MaxP over stored vectors).

    Takes Topics ``[qid, query]``; returns a Run ``[qid, docno, score, rank, query]`` whose score
    is the largest inner product (cosine: the vectors are unit length) between the query and a
    passage of the document.

    Args:
        vectors: a :class:`~evirank.vectors.PassageVectors` or its folder.
        scorer: the bi-encoder that embeds queries (default: the offline all-MiniLM-L6-v2); it must
            be the model that made the vectors (checked by fingerprint).
        k: documents per query.
        searcher: a :class:`PassageSearcher` over the vectors' rows (default: :class:`ExactSearcher`).
        passage_depth: passages asked for first (default: ``k`` times the mean passages per
            document, at least ``2 k``); multiplied by 4 while a query has fewer than ``k`` documents.

    Example:
        >>> from evirank.frames import make_topics
        >>> run = DenseRetriever("vectors/mine", k=10)(make_topics([("1", "cats")]))  # doctest: +SKIP
    """

    def __init__(
        self,
        vectors: Any,
        scorer: Any = None,
        k: int = 1000,
        searcher: PassageSearcher | None = None,
        passage_depth: int | None = None,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive integer, found {k!r}")
        self.vectors = vectors
        self.scorer = scorer
        self.k = k
        self.searcher = searcher
        self.passage_depth = passage_depth

    def __repr__(self) -> str:
        where = getattr(self.vectors, "path", self.vectors)
        return f"DenseRetriever({str(where)!r}, k={self.k}, searcher={self.searcher!r})"

    def _open(self) -> tuple[Any, Any, PassageSearcher]:
        opened = getattr(self, "vectors_", None)
        if opened is None:
            from evirank.score import BiEncoder
            from evirank.vectors import PassageVectors

            vectors = (
                self.vectors
                if isinstance(self.vectors, PassageVectors)
                else PassageVectors.open(os.fspath(self.vectors))
            )
            scorer = self.scorer if self.scorer is not None else BiEncoder()
            vectors.check_scorer(scorer)  # the model (fingerprint), whatever the segmenter
            self.vectors_, self.scorer_ = vectors, scorer
            self.searcher_ = self.searcher if self.searcher is not None else ExactSearcher(vectors.matrix)
            if len(self.searcher_) != len(vectors):
                raise ValueError(
                    f"the searcher holds {len(self.searcher_)} passages, the vectors {len(vectors)}"
                )
        return self.vectors_, self.scorer_, self.searcher_

    def embed_queries(self, queries: list[str]) -> np.ndarray:
        """float32 unit vectors of ``queries`` (with the bi-encoder's query prefix)."""
        _, scorer, _ = self._open()
        prefix = str(getattr(scorer, "query_prefix", ""))
        return np.asarray(scorer.embed([prefix + q for q in queries]), dtype=np.float32)

    def search_vectors(self, query_vectors: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each query's top ``k`` documents, and any tied with the ``k``-th: (positions, scores), best first.

        Passages are asked for until the ``k``-th best document scores strictly above the last
        passage returned (or every passage was returned), so no document that could reach the top
        ``k``, ties included, is left out; :meth:`transform` cuts ties by docno.
        """
        vectors, _, searcher = self._open()
        n = len(searcher)
        per_doc = max(1, int(np.ceil(n / max(vectors.documents, 1))))
        depth = self.passage_depth or max(2 * self.k, self.k * per_doc)
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(query_vectors)
        todo = np.arange(len(query_vectors))
        while len(todo):
            depth = min(depth, n)
            scores, rows = searcher.search(query_vectors[todo], depth)
            short = []
            for i, query in enumerate(todo.tolist()):
                docs, best = max_pool(vectors.document_of(rows[i]), scores[i], len(rows[i]))
                if depth < n and (len(docs) < self.k or scores[i][-1] >= best[self.k - 1]):
                    short.append(query)
                    continue
                if len(best) > self.k:
                    keep = best >= best[self.k - 1]  # the top k and any tied with the k-th
                    docs, best = docs[keep], best[keep]
                out[query] = (docs, best)
            if short:
                logger.debug(
                    "%d queries need more than %d passages for %d documents", len(short), depth, self.k
                )
                depth *= 4
            todo = np.array(short, dtype=np.int64)
        return [o for o in out if o is not None]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Embed and search every topic; return the Run sorted by qid, score descending, docno descending."""
        require_columns(frame, (QID, QUERY), "DenseRetriever")
        qids = frame[QID].astype(str).tolist()
        queries = frame[QUERY].astype(str).tolist()
        repeated = sorted({q for q in qids if qids.count(q) > 1}) if len(set(qids)) != len(qids) else []
        if repeated:
            raise ValueError(f"DenseRetriever: each qid must appear once in the topics, found {repeated[:5]}")
        columns = [QID, DOCNO, SCORE, RANK, QUERY]
        if not qids:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in columns}).astype(
                {SCORE: np.float64, RANK: np.int64}
            )
        vectors, _, _ = self._open()
        query_vectors = self.embed_queries(queries)
        parts = []
        bar = progress_bar(desc="dense search", total=len(qids), unit="query")
        try:
            step = DEFAULT_QUERY_BLOCK
            for start in range(0, len(qids), step):
                found = self.search_vectors(query_vectors[start : start + step])
                for qid, query, (docs, scores) in zip(
                    qids[start : start + step], queries[start : start + step], found, strict=True
                ):
                    parts.append(
                        pd.DataFrame(
                            {
                                QID: qid,
                                DOCNO: vectors.docnos(docs),
                                SCORE: scores.astype(np.float64),
                                QUERY: query,
                            }
                        )
                    )
                bar.update(len(found))
        finally:
            bar.close()
        run = sort_run(pd.concat(parts, ignore_index=True))
        return run[run[RANK] <= self.k].reset_index(drop=True)[columns]


def max_pool(documents: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Passages sorted best first -> each document's best score, best first, at most ``k`` documents.

    Example:
        >>> docs, best = max_pool(np.array([3, 1, 3, 2]), np.array([0.9, 0.8, 0.7, 0.1]), 2)
        >>> docs.tolist(), best.tolist()
        ([3, 1], [0.9, 0.8])
    """
    _, first = np.unique(documents, return_index=True)
    first = np.sort(first)[:k]
    return documents[first], scores[first]
