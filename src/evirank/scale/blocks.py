"""A big re-ranking job streamed through the pipeline a block of queries at a time.

Each query's re-ranking depends only on its own documents, so re-ranking the queries in blocks
and concatenating the runs gives the same run as one call over all of them (and, with the same
blocks, the same bits with or without Ray). The driver then holds the first-stage run (ids and
scores), the topics, the re-ranked run so far (ids and scores), and the text, passages and
distinct pairs of one block only; the scored passages of earlier blocks are kept only when asked
(``keep_passages``, for ``--save-passages``).
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from evirank.frames import QID

logger = logging.getLogger(__name__)


def rerank_in_blocks(
    pipeline: Any,
    run: pd.DataFrame,
    *,
    query_block: int,
    topics: pd.DataFrame | None = None,
    timings: Any = None,
    keep_passages: bool = True,
) -> Any:
    """:meth:`evirank.rerank.Rerank.run` over blocks of ``query_block`` queries; one combined result.

    Args:
        pipeline: the :class:`~evirank.rerank.Rerank` pipeline.
        run: the first-stage Run.
        query_block: queries per block, in the run's order.
        topics: Topics for a run without queries.
        timings: where the stage timings add up (a new one when None).
        keep_passages: keep every block's scored passages in the result (else it has none).

    Returns:
        A :class:`~evirank.rerank.RerankResult` whose counts add up the blocks'.

    Example:
        >>> result = rerank_in_blocks(pipeline, bm25_run, query_block=100, topics=topics)  # doctest: +SKIP
    """
    from evirank.rerank import RerankResult, StageTimings

    if query_block < 1:
        raise ValueError(f"query_block must be at least 1, found {query_block}")
    timings = StageTimings() if timings is None else timings
    keys = run[QID].astype(str)
    qids = pd.unique(keys)
    runs: list[pd.DataFrame] = []
    passages: list[pd.DataFrame] = []
    counts: dict[str, int] = {}
    blocks = range(0, len(qids), query_block)
    for number, start in enumerate(blocks, 1):
        chosen = set(qids[start : start + query_block])
        logger.info("query block %d of %d (%d queries)", number, len(blocks), len(chosen))
        part = pipeline.run(run[keys.isin(chosen)], topics=topics, timings=timings)
        runs.append(part.run)
        if keep_passages:
            passages.append(part.passages)
        for name, value in part.counts.items():
            counts[name] = counts.get(name, 0) + int(value)
    combined = pd.concat(runs, ignore_index=True) if runs else pd.DataFrame()
    scored = pd.concat(passages, ignore_index=True) if passages else pd.DataFrame()
    return RerankResult(combined, scored, timings, counts)
