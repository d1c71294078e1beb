"""Concurrent requests on CPU engines: one batch split into row groups that run at once.

On a few CPU cores, one inference request spread over all of them waits at a barrier after every
operator; several requests of one thread each keep every core busy without those waits (OpenVINO
calls them streams). The ONNX Runtime and OpenVINO backends split each batch's rows into
:func:`default_streams` groups, each padded only to its own longest row, run the groups
concurrently and put the outputs back in row order. Measured on 2 cores with MiniLM-L6, one thread
per request used 15-25% less CPU time per pair than one request over two threads
(``docs/speed.md``).

Example:
    >>> import numpy as np
    >>> from evirank.score.backends import TokenBatch
    >>> batch = TokenBatch(np.array([[5, 6, 7], [8, 9, 0]]), np.array([[1, 1, 1], [1, 1, 0]]))
    >>> [part.shape for part in split_batch(batch, 2)]
    [(1, 3), (1, 2)]
"""

from __future__ import annotations

import os

import numpy as np

from evirank.score.devices import default_threads
from evirank.score.token_batch import TokenBatch


def default_streams(threads: int | None = None) -> int:
    """Concurrent requests per batch: ``$EVIRANK_STREAMS``, else 2 when there are at least 2 threads.

    More streams than 2 cut each batch into groups too small to keep matrix products efficient;
    the threads are shared out among the streams.

    Example:
        >>> default_streams(1)
        1
    """
    env = os.environ.get("EVIRANK_STREAMS")
    threads = threads or default_threads()
    if env:
        return max(1, min(int(env), threads))
    return 2 if threads >= 2 else 1


def split_batch(batch: TokenBatch, parts: int) -> list[TokenBatch]:
    """``batch``'s rows in at most ``parts`` contiguous groups, each cut to its own longest row.

    Rows come sorted longest first from the scorer, so later groups are shorter and lose padding.
    """
    rows = batch.shape[0]
    parts = max(1, min(parts, rows))
    if parts == 1:
        return [batch]
    out = []
    for index in np.array_split(np.arange(rows), parts):
        lo, hi = int(index[0]), int(index[-1]) + 1
        mask = batch.attention_mask[lo:hi]
        width = int(mask.sum(axis=1).max()) if mask.size else 0
        width = max(width, 1)
        types = batch.token_type_ids[lo:hi, :width] if batch.token_type_ids is not None else None
        out.append(TokenBatch(batch.input_ids[lo:hi, :width], mask[:, :width], types))
    return out


def feeds(batch: TokenBatch, inputs: list[str]) -> dict[str, np.ndarray]:
    """The input arrays an engine's graph asks for (``inputs``: its input names)."""
    out: dict[str, np.ndarray] = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
    if "token_type_ids" in inputs:
        out["token_type_ids"] = (
            batch.token_type_ids if batch.token_type_ids is not None else np.zeros_like(batch.input_ids)
        )
    return {name: np.ascontiguousarray(value) for name, value in out.items()}


def mean_pooled_numpy(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Unit-length means of ``hidden`` (rows x tokens x dim) over real tokens: the bi-encoder's embedding.

    Example:
        >>> hidden = np.array([[[3.0, 0.0], [0.0, 4.0], [9.0, 9.0]]])
        >>> [round(float(v), 3) for v in mean_pooled_numpy(hidden, np.array([[1, 1, 0]]))[0]]
        [0.6, 0.8]
    """
    mask = attention_mask[..., None].astype(np.float32)
    pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32)
