"""The shared shape of a segmenter: a candidate Run with document text in, a Passages frame out.

Input columns: qid, docno, score, text (required); query, title, rank (used when present;
without rank, ranks follow :func:`evirank.frames.sort_run`). Missing text or title values
(None/NaN) count as empty strings.

Output columns: qid, [query], docno, pid, text, first_stage_score, first_stage_rank, one
row per segment, in the input's row order and then by pid (0-based position in the
document). Every document yields at least one segment, so none is lost from the ranking.

Segmentation does not depend on the query: within one call, a document retrieved for many
queries is split once (cached by docno, title and text).

Example:
    >>> import pandas as pd
    >>> class Halves(Segmenter):
    ...     def segments(self, title, text):
    ...         words = text.split()
    ...         return [" ".join(words[:1]), " ".join(words[1:])]
    >>> run = pd.DataFrame({"qid": ["1"], "docno": ["d"], "score": [2.0], "text": ["a b c"]})
    >>> Halves()(run)[["pid", "text", "first_stage_rank"]].values.tolist()
    [[0, 'a', 1], [1, 'b c', 1]]
"""

from __future__ import annotations

import logging
from abc import abstractmethod
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
    TITLE,
    require_columns,
    sort_run,
)
from evirank.progress import progress
from evirank.stage import Stage

logger = logging.getLogger(__name__)

INPUT_COLUMNS = (QID, DOCNO, SCORE, TEXT)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    return str(value)


def _first_stage_ranks(frame: pd.DataFrame) -> np.ndarray:
    if RANK in frame.columns:
        return frame[RANK].to_numpy(dtype=np.int64)
    ordered = sort_run(frame[[QID, DOCNO, SCORE]].assign(_row=np.arange(len(frame))))
    ranks = np.empty(len(frame), dtype=np.int64)
    ranks[ordered["_row"].to_numpy()] = ordered[RANK].to_numpy()
    return ranks


class Segmenter(Stage):
    """Base class: subclasses implement :meth:`segments` for one document."""

    @abstractmethod
    def segments(self, title: str, text: str) -> list[str]:
        """The segments of one document, in document order; never empty."""

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Split every candidate document of ``frame`` into a Passages frame."""
        where = type(self).__name__
        require_columns(frame, INPUT_COLUMNS, where)
        n = len(frame)
        docnos = frame[DOCNO].astype(str).tolist()
        texts = [_as_text(v) for v in frame[TEXT].tolist()]
        titles = [_as_text(v) for v in frame[TITLE].tolist()] if TITLE in frame.columns else [""] * n

        cache: dict[tuple[str, str, str], list[str]] = {}
        counts = np.empty(n, dtype=np.int64)
        pieces: list[str] = []
        for i in progress(range(n), desc=f"{where} segmenting", total=n, unit="doc"):
            key = (docnos[i], titles[i], texts[i])
            segs = cache.get(key)
            if segs is None:
                segs = self.segments(titles[i], texts[i]) or [""]
                cache[key] = segs
            counts[i] = len(segs)
            pieces.extend(segs)
        logger.debug("%s: %d rows, %d distinct documents, %d segments", where, n, len(cache), len(pieces))

        row = np.repeat(np.arange(n), counts)
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]) if n else np.zeros(0, dtype=np.int64)
        columns: dict[str, Any] = {QID: frame[QID].astype(str).to_numpy()[row]}
        if QUERY in frame.columns:
            columns[QUERY] = frame[QUERY].to_numpy()[row]
        columns[DOCNO] = np.asarray(docnos, dtype=object)[row]
        columns[PID] = np.arange(len(pieces), dtype=np.int64) - np.repeat(offsets, counts)
        columns[TEXT] = np.asarray(pieces, dtype=object)
        columns[FIRST_STAGE_SCORE] = frame[SCORE].to_numpy(dtype=np.float64)[row]
        columns[FIRST_STAGE_RANK] = _first_stage_ranks(frame)[row]
        return pd.DataFrame(columns)
