"""Segmentation done at indexing time: a document's passages read from its stored passage table.

:class:`StoredSegments` is a segmenter whose passages come from a passage-vector folder (the exact
texts the build's segmenter produced), so a query pays no sentence splitting; documents the folder does
not hold are split by the ``fallback`` segmenter. The output is the same Passages frame as any
:class:`~evirank.segment.Segmenter`'s.

Example:
    >>> vectors = PassageVectors.open("indexes/scifact/vectors")  # doctest: +SKIP
    >>> stored = StoredSegments(vectors, fallback=Sentences())  # doctest: +SKIP
    >>> stored(run)[["docno", "pid", "text"]].head(2)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    TEXT,
    require_columns,
    sort_run,
)
from evirank.stage import Stage
from evirank.vectors.reader import PassageVectors

logger = logging.getLogger(__name__)


class StoredSegments(Stage):
    """Passages of a candidate Run from stored passage tables; the ``fallback`` splits the rest.

    Args:
        vectors: the passage-vector folder whose table is read.
        fallback: the segmenter the vectors were built with, for documents not stored.

    Read-only after construction, so it is safe to share between threads (``thread_safe``).
    """

    thread_safe = True

    def __init__(self, vectors: PassageVectors, fallback: Stage) -> None:
        self.vectors = vectors
        self.fallback = fallback
        vectors.lookup(["\x00"], [0])  # build the docno index now, not in the first (concurrent) request

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A Passages frame [qid, query, docno, pid, text, first_stage_score, first_stage_rank]."""
        require_columns(frame, (QID, DOCNO, SCORE), "StoredSegments")
        run = frame if RANK in frame.columns else sort_run(frame)
        docnos = run[DOCNO].astype(str).to_numpy(dtype=object)
        stored = self.vectors.passages(docnos)  # rows in run order, absent documents skipped
        per_row = self.vectors.counts(docnos)
        held = per_row > 0
        row = np.repeat(np.arange(len(run)), per_row)
        columns: dict[str, Any] = {QID: run[QID].astype(str).to_numpy()[row]}
        if QUERY in run.columns:
            columns[QUERY] = run[QUERY].to_numpy()[row]
        columns[DOCNO] = docnos[row]
        columns[PID] = stored[PID].to_numpy(dtype=np.int64)
        columns[TEXT] = stored[TEXT].to_numpy(dtype=object)
        columns[FIRST_STAGE_SCORE] = run[SCORE].to_numpy(dtype=np.float64)[row]
        columns[FIRST_STAGE_RANK] = run[RANK].to_numpy(dtype=np.int64)[row]
        out = pd.DataFrame(columns)
        if held.all():
            return out
        missing = np.flatnonzero(~held)
        logger.info("%d candidate(s) not in the stored passages: segmented now", len(missing))
        extra = self.fallback(run.iloc[missing])[list(out.columns)]
        # A segmenter keeps its input's row order, then pid, and gives every document a segment.
        extra_row = missing[np.cumsum(extra[PID].to_numpy() == 0) - 1]
        merged = pd.concat([out.assign(_row=row), extra.assign(_row=extra_row)], ignore_index=True)
        merged = merged.sort_values(["_row", PID], kind="mergesort")
        return merged.drop(columns="_row").reset_index(drop=True)
