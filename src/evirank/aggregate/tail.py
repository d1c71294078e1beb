"""Documents beyond the re-rank depth keep their first-stage order, below the re-ranked ones.

:func:`merge_tail` puts a re-ranked run (the top ``d`` of each query, with new scores) on
top of the rest of the original run. The tail's scores become ``floor - 1, floor - 2, ...``
in first-stage order, where ``floor`` is the query's lowest re-ranked score: strictly below
every re-ranked document, strictly decreasing so the first-stage order survives exactly
(even where first-stage scores tie), and with first_stage_score / first_stage_rank keeping
the original values. A query with no re-ranked document keeps its original scores.
:class:`RerankTop` wraps a re-ranking pipeline so that it sees only the top ``depth``.

Example:
    >>> from evirank.frames import make_run
    >>> original = make_run([("1", "a", 9.0), ("1", "b", 8.0), ("1", "c", 7.0), ("1", "d", 6.0)])
    >>> reranked = make_run([("1", "b", 0.9), ("1", "a", 0.1)])
    >>> merge_tail(reranked, original)[["docno", "score"]].values.tolist()
    [['b', 0.9], ['a', 0.1], ['c', -0.9], ['d', -1.9]]
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    QID,
    QUERY,
    RANK,
    SCORE,
    require_columns,
    sort_run,
)
from evirank.stage import Stage

logger = logging.getLogger(__name__)

_RUN_OUTPUT = (QID, QUERY, DOCNO, SCORE, RANK, FIRST_STAGE_SCORE, FIRST_STAGE_RANK)


def ranked_run(run: pd.DataFrame) -> pd.DataFrame:
    """``run`` with a rank column (kept when given, else from :func:`sort_run`), string ids.

    Example:
        >>> from evirank.frames import make_run
        >>> ranked_run(make_run([("1", "a", 1.0), ("1", "b", 2.0)]).drop(columns="rank"))["docno"].tolist()
        ['b', 'a']
    """
    out = run.copy()
    out[QID] = out[QID].astype(str)
    out[DOCNO] = out[DOCNO].astype(str)
    if RANK not in out.columns:
        out = sort_run(out)
    return out


def merge_tail(reranked: pd.DataFrame, original: pd.DataFrame) -> pd.DataFrame:
    """Re-ranked documents first, then the original run's other documents in first-stage order.

    Args:
        reranked: a Run over (part of) the original's documents, with new scores.
        original: the first-stage Run (rank used when present, else score order).

    Returns:
        A Run [qid, (query), docno, score, rank, first_stage_score, first_stage_rank]
        sorted by :func:`evirank.frames.sort_run`. Text columns are dropped.
    """
    require_columns(reranked, (QID, DOCNO, SCORE), "merge_tail (re-ranked run)")
    require_columns(original, (QID, DOCNO, SCORE), "merge_tail (original run)")
    head = reranked.copy()
    head[QID] = head[QID].astype(str)
    head[DOCNO] = head[DOCNO].astype(str)
    first = ranked_run(original)
    if len(first) <= len(head):  # maybe nothing below the depth (the service cuts its run to it)
        merged = _without_tail(head, first)
        if merged is not None:
            return merged

    seen = pd.MultiIndex.from_frame(head[[QID, DOCNO]])
    in_head = pd.MultiIndex.from_frame(first[[QID, DOCNO]]).isin(seen)
    tail = first[~in_head].copy()
    tail[FIRST_STAGE_SCORE] = tail[SCORE].astype(np.float64)
    tail[FIRST_STAGE_RANK] = tail[RANK].astype(np.int64)
    tail = tail.sort_values([QID, RANK, DOCNO], kind="mergesort")

    floors = head.groupby(QID)[SCORE].min()
    floor = tail[QID].map(floors)
    step = tail.groupby(QID, sort=False).cumcount().to_numpy() + 1.0
    has_floor = floor.notna().to_numpy()
    new_scores = tail[SCORE].to_numpy(dtype=np.float64).copy()
    new_scores[has_floor] = floor.to_numpy(dtype=np.float64)[has_floor] - step[has_floor]
    tail[SCORE] = new_scores
    logger.debug("merge_tail: %d re-ranked rows, %d tail rows", len(head), len(tail))

    if FIRST_STAGE_SCORE not in head.columns or FIRST_STAGE_RANK not in head.columns:
        lookup = first.drop_duplicates([QID, DOCNO]).set_index([QID, DOCNO])
        index = pd.MultiIndex.from_frame(head[[QID, DOCNO]])
        if FIRST_STAGE_SCORE not in head.columns:
            head[FIRST_STAGE_SCORE] = lookup[SCORE].reindex(index).to_numpy(dtype=np.float64)
        if FIRST_STAGE_RANK not in head.columns:
            head[FIRST_STAGE_RANK] = lookup[RANK].reindex(index).to_numpy()
    if QUERY not in head.columns and QUERY in tail.columns:
        queries = first.drop_duplicates(QID).set_index(QID)[QUERY]
        head[QUERY] = head[QID].map(queries)
    merged = pd.concat([head, tail], ignore_index=True)
    merged = merged[[c for c in _RUN_OUTPUT if c in merged.columns]]
    return sort_run(merged)


def _without_tail(head: pd.DataFrame, first: pd.DataFrame) -> pd.DataFrame | None:
    """:func:`merge_tail`'s result when every document of ``first`` is in ``head`` (else None).

    The same frame as the general path, in plain lists: this runs on every request of the service.
    """
    keys = list(zip(first[QID].tolist(), first[DOCNO].tolist(), strict=True))
    position = {key: i for i, key in reversed(list(enumerate(keys)))}  # a repeated key: its first row
    head_keys = list(zip(head[QID].tolist(), head[DOCNO].tolist(), strict=True))
    if not set(keys) <= set(head_keys):
        return None
    rows = [position.get(key, -1) for key in head_keys]
    missing = [i for i, row in enumerate(rows) if row < 0]

    def pick(column: str, dtype: type) -> np.ndarray | list[object]:
        values = first[column].to_numpy()
        if missing:
            return [values[r] if r >= 0 else np.nan for r in rows]
        return np.asarray(values[rows], dtype=dtype)

    if FIRST_STAGE_SCORE not in head.columns:
        head[FIRST_STAGE_SCORE] = np.asarray(pick(SCORE, np.float64), dtype=np.float64)
    if FIRST_STAGE_RANK not in head.columns:
        head[FIRST_STAGE_RANK] = pick(RANK, np.int64)
    if QUERY not in head.columns and QUERY in first.columns:
        queries = dict(reversed(list(zip(first[QID].tolist(), first[QUERY].tolist(), strict=True))))
        head[QUERY] = [queries.get(q) for q in head[QID].tolist()]
    return sort_run(head[[c for c in _RUN_OUTPUT if c in head.columns]])


class RerankTop(Stage):
    """Run ``stage`` on each query's top ``depth`` documents; the rest follow in first-stage order.

    Args:
        stage: the re-ranking pipeline (e.g. ``Sentences() >> scorer >> Birch()``).
        depth: how many top-ranked documents per query it re-ranks.

    Example:
        >>> from evirank.frames import make_run
        >>> class Reverse(Stage):
        ...     def transform(self, run):
        ...         return sort_run(run.assign(score=-run["score"]))
        >>> run = make_run([("1", "a", 3.0), ("1", "b", 2.0), ("1", "c", 1.0)])
        >>> RerankTop(Reverse(), depth=2)(run)["docno"].tolist()
        ['b', 'a', 'c']
    """

    def __init__(self, stage: Stage, depth: int = 100) -> None:
        if not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive integer, found {depth!r}")
        self.stage = stage
        self.depth = depth

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Re-rank the top ``depth`` of ``frame`` and merge the tail below."""
        require_columns(frame, (QID, DOCNO, SCORE), "RerankTop")
        run = ranked_run(frame)
        head = run[run[RANK] <= self.depth].reset_index(drop=True)
        return merge_tail(self.stage.transform(head), run)
