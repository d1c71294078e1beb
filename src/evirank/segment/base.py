"""The shared shape of a segmenter: a candidate Run with document text in, a Passages frame out.

Input columns: qid, docno, score, text (required); query, title, rank (used when present;
without rank, ranks follow :func:`evirank.frames.sort_run`). Missing text or title values
(None/NaN) count as empty strings.

Output columns: qid, [query], docno, pid, text, first_stage_score, first_stage_rank, one
row per segment, in the input's row order and then by pid (0-based position in the
document). Every document yields at least one segment, so none is lost from the ranking.

Segmentation does not depend on the query: within one call, a document retrieved for many
queries is split once (cached by docno, title and text).

A document yields at most ``max_passages`` segments (:data:`DEFAULT_MAX_PASSAGES` unless
set; ``None``: no limit), its first ones, with a warning naming the document: a huge
document (megabytes of text) is then segmented and scored in bounded time. Only a prefix of
such a document is segmented at all (:meth:`Segmenter.prefix_words` words).

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

import copy
import itertools
import logging
import re
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

DEFAULT_MAX_PASSAGES = 1000
"""Segments kept per document by default (``rerank --max-passages``); far above any ordinary
document (a SciFact abstract has about 10 sentences, a long news article a few hundred)."""

WORDS_PER_PASSAGE = 100
"""With a passage limit N, only the first N x this many words of a document are segmented."""

_WORD = re.compile(r"\S+")


def word_prefix(text: str, words: int) -> str:
    """The first ``words`` whitespace-delimited words of ``text`` (all of it when shorter).

    Example:
        >>> word_prefix("a b  c d", 3)
        'a b  c'
    """
    if words <= 0:
        return ""
    if len(text) <= words:  # cannot hold more words than characters
        return text
    match = next(itertools.islice(_WORD.finditer(text), words - 1, None), None)
    return text if match is None else text[: match.end()]


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
    """Base class: subclasses implement :meth:`segments` for one document.

    ``max_passages`` caps the segments of one document (see the module docstring).
    """

    max_passages: int | None = DEFAULT_MAX_PASSAGES

    def with_max_passages(self, max_passages: int | None) -> Segmenter:
        """A copy of this segmenter that keeps at most ``max_passages`` segments per document.

        Example:
            >>> from evirank.segment import Sentences
            >>> Sentences().with_max_passages(5).max_passages
            5
        """
        if max_passages is not None and (not isinstance(max_passages, int) or max_passages < 1):
            raise ValueError(f"max_passages must be a positive integer or None, found {max_passages!r}")
        clone = copy.copy(self)
        clone.max_passages = max_passages
        return clone

    def prefix_words(self, max_passages: int) -> int:
        """How many leading words of a document can hold its first ``max_passages`` segments."""
        return max_passages * WORDS_PER_PASSAGE

    def _capped_segments(self, docno: str, title: str, text: str) -> list[str]:
        limit = self.max_passages
        if limit is None:
            return self.segments(title, text) or [""]
        head = word_prefix(text, self.prefix_words(limit))
        segs = self.segments(title, head) or [""]
        if len(segs) > limit or len(head) < len(text.rstrip()):
            logger.warning(
                "document %s is long (%d characters): only its first %d segments are kept "
                "(max_passages=%d, rerank --max-passages)",
                docno, len(text), min(limit, len(segs)), limit,
            )  # fmt: skip
            segs = segs[:limit]
        return segs

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
                segs = self._capped_segments(docnos[i], titles[i], texts[i])
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
