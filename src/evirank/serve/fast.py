"""What makes a new query fast in the service: batched query embeddings and a cascade in one piece.

The service's pipeline comes from the one builder (:func:`evirank.pipeline.build_pipeline`), which
already reads passages from the stored table and scores a bi-encoder by lookup when the index has
passage vectors made by the same model and segmenter. Two things are the service's own:

* the queries of concurrent requests are embedded together (:class:`BatchedQueries`): one model
  call for the requests that arrive while another call runs, each answer bitwise the same as alone;
* a cascade (``--prune N``) runs as one piece (:class:`CascadeStage`): a cheap scorer keeps each
  document's N best passages and only those reach the expensive scorer, under one lock.

Example:
    >>> stage = BatchedQueries(BiEncoder(vectors="indexes/scifact/vectors"))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import pandas as pd

from evirank.serve.batcher import MicroBatcher
from evirank.serve.searcher import SearchTimeout, time_left
from evirank.stage import Stage

logger = logging.getLogger(__name__)


class CascadeStage(Stage):
    """Prune, then score: one piece for the service (it runs under the scorer's lock).

    Example:
        >>> CascadeStage(Prune(3), scorer)(passages)  # doctest: +SKIP
    """

    def __init__(self, prune: Stage, scorer: Any) -> None:
        self.prune = prune
        self.scorer = scorer

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return self.scorer(self.prune(frame))

    def __getattr__(self, name: str) -> Any:  # warm_up and stats reach the real scorer
        if name in ("prune", "scorer"):
            raise AttributeError(name)
        return getattr(self.scorer, name)


class BatchedQueries(Stage):
    """A bi-encoder over stored passage vectors whose query embeddings are batched across requests.

    Safe to call from several threads at once (``thread_safe``): each call looks its passages up on
    its own thread and hands its query to a :class:`~evirank.serve.batcher.MicroBatcher`, whose one
    thread embeds the queries that are waiting in one model call (``BiEncoder.embed_exact``: grouped
    by token length and never padded, so every vector, hence every answer, is bitwise the one the
    query would get alone). A request with passages that are not stored embeds them with its query
    as ``BiEncoder`` does, under the same model lock. ``stats_`` is per thread: the pipeline's
    timings of one request are its own, and its ``model`` time includes waiting for its batch.

    Args:
        scorer: a :class:`~evirank.score.BiEncoder` with stored ``vectors``.
        max_batch: the most queries in one model call.
        max_wait_s: how long a lone query waits for company (while a call runs, queries gather anyway).

    Example:
        >>> stage = BatchedQueries(BiEncoder(vectors="indexes/scifact/vectors"))  # doctest: +SKIP
        >>> stage(passages)["score"]  # doctest: +SKIP
    """

    thread_safe = True

    def __init__(self, scorer: Any, max_batch: int = 32, max_wait_s: float = 0.0) -> None:
        if max_batch < 1:
            raise ValueError(f"--batch must be at least 1, found {max_batch!r}")
        self.scorer = scorer
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._model = threading.Lock()
        self._local = threading.local()
        self._last_stats: Any = None
        self._checked = False
        self._batcher: MicroBatcher[str, Any] | None = None
        self._started = threading.Lock()

    def __repr__(self) -> str:
        return f"BatchedQueries({self.scorer!r}, max_batch={self.max_batch})"

    def __getattr__(self, name: str) -> Any:  # model_load timing, info and warm-up reach the scorer
        if name.startswith("_") or name in ("scorer", "max_batch", "max_wait_s"):
            raise AttributeError(name)
        return getattr(self.scorer, name)

    @property
    def stats_(self) -> Any:
        """The counts of this thread's last call; on a thread that made none, of the last call."""
        return getattr(self._local, "stats", None) or self._last_stats

    @property
    def batch_sizes(self) -> list[int]:
        """Queries per model call so far (the last 1,000)."""
        return list(self._batcher.batch_sizes) if self._batcher is not None else []

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        batcher = self._start()

        waited = [0.0]

        def embed(texts: list[str]) -> Any:
            began = time.perf_counter()
            left = time_left()
            try:
                return np.stack(batcher.submit(texts, timeout=None if left is None else max(left, 0.0)))
            except TimeoutError:
                raise SearchTimeout(
                    "the search ran out of time waiting for the model (server busy)"
                ) from None
            finally:
                waited[0] += time.perf_counter() - began

        def embed_together(texts: list[str]) -> Any:
            began = time.perf_counter()
            try:
                return self._embed_together(texts)
            finally:
                waited[0] += time.perf_counter() - began

        scored, stats = self.scorer.score_by_lookup(frame, embed, embed_together)
        stats.model_s += waited[0]  # the model call, with the wait for its batch
        self._local.stats = self._last_stats = stats
        return scored

    def close(self) -> None:
        """Stop the batcher's thread (queued queries fail); a later call starts a new one."""
        with self._started:
            batcher, self._batcher = self._batcher, None
        if batcher is not None:
            batcher.close()

    def _start(self) -> MicroBatcher[str, Any]:
        with self._started:
            if self._batcher is None or self._batcher.closed:
                with self._model:  # model, tokenizer and stored vectors ready before threads share them
                    self.scorer.prepare()
                    self.scorer.load()
                    self.scorer.passage_vectors()
                if self.max_batch > 1 and not self._checked:
                    self.check_exact()
                    self._checked = True
                self._batcher = MicroBatcher(
                    self._embed_batch,
                    max_batch=self.max_batch,
                    max_wait_s=self.max_wait_s,
                    name="evirank-query-batcher",
                )
            return self._batcher

    def check_exact(self) -> bool:
        """Whether this machine embeds a query bitwise the same in a batch as alone (probe texts of
        8 to 40 tokens); when not, each query runs alone from then on (``max_batch`` 1).
        """
        words = [
            "evidence",
            "passage",
            "query",
            "ranking",
            "vaccine",
            "virus",
            "cell",
            "risk",
            "study",
            "dose",
            "mat",
            "cat",
        ]
        with self._model:
            for n_words in (6, 10, 14, 20, 38):
                base = (words * 4)[:n_words]  # rotations: the same tokens, so one length, one call
                texts = [" ".join(base[k:] + base[:k]) for k in range(4)]
                together = self.scorer.embed_exact(texts)
                alone = np.stack([self.scorer.embed_exact([t])[0] for t in texts])
                if not np.array_equal(together, alone):
                    logger.warning(
                        "query batching is off: on this machine a query's embedding in a batch differs "
                        "in its last bits from its embedding alone (each query runs alone instead)"
                    )
                    self.max_batch = 1
                    return False
        return True

    def _embed_batch(self, texts: list[str]) -> list[Any]:
        with self._model:
            return list(self.scorer.embed_exact(texts))

    def _embed_together(self, texts: list[str]) -> Any:
        from evirank.score.transformer import ScoringStats

        with self._model:
            return self.scorer._embed_distinct(texts, ScoringStats(), None, None)
