"""Word-window segments (Dai & Callan 2019; Steensland 2021): overlapping windows of words.

Windows start every ``stride`` words and hold ``length`` words; the last window is the one
that reaches the document's end (it may be shorter), so every word is in some window. The
title is prepended to every window, as Dai & Callan did, unless it has more than
``max_title_words`` words (Steensland skipped titles of 50 words or more so that they do not
crowd out the body): then it is not repeated but read as the first words of the body, so
its words are not lost either.

Example:
    >>> import pandas as pd
    >>> run = pd.DataFrame({"qid": ["1"], "docno": ["d1"], "score": [3.0],
    ...                     "title": ["T"], "text": ["a b c d e"]})
    >>> Windows(length=3, stride=2)(run)["text"].tolist()
    ['T a b c', 'T c d e']
"""

from __future__ import annotations

import logging

from evirank.segment._units import word_spans
from evirank.segment.base import DEFAULT_MAX_PASSAGES, Segmenter

logger = logging.getLogger(__name__)


def window_starts(n_words: int, length: int, stride: int) -> list[int]:
    """First-word positions of the windows over ``n_words`` words (none for zero words).

    Example:
        >>> window_starts(10, length=4, stride=3)
        [0, 3, 6]
        >>> window_starts(3, length=4, stride=3)
        [0]
    """
    starts: list[int] = []
    start = 0
    while start < n_words:
        starts.append(start)
        if start + length >= n_words:
            break
        start += stride
    return starts


class Windows(Segmenter):
    """Split each document into overlapping word windows.

    Args:
        length: words per window (the title not counted).
        stride: words between window starts; at most ``length`` (larger would skip words).
        title: prepend the title to every window. False ignores the title unless the
            document has no body text.
        max_title_words: a longer title is not prepended but becomes the start of the body.
        max_passages: keep only the first this many windows of a document (None: all; the
            default is :data:`~evirank.segment.base.DEFAULT_MAX_PASSAGES`). The
            words after the last kept window are then knowingly dropped: the only way any
            segmenter here drops words.

    A document with no body text yields its title as its only segment; one with neither
    yields one empty segment (scorers give it a low score; it stays in the ranking).

    Example:
        >>> Windows(length=2, stride=2, title=False).segments("Title", "a b c d e")
        ['a b', 'c d', 'e']
    """

    def __init__(
        self,
        length: int = 150,
        stride: int = 75,
        *,
        title: bool = True,
        max_title_words: int = 50,
        max_passages: int | None = DEFAULT_MAX_PASSAGES,
    ) -> None:
        if not isinstance(length, int) or length < 1:
            raise ValueError(f"length must be a positive integer, found {length!r}")
        if not isinstance(stride, int) or not 1 <= stride <= length:
            raise ValueError(f"stride must be an integer in [1, length={length}], found {stride!r}")
        if max_title_words < 0:
            raise ValueError(f"max_title_words must be >= 0, found {max_title_words}")
        if max_passages is not None and (not isinstance(max_passages, int) or max_passages < 1):
            raise ValueError(f"max_passages must be a positive integer or None, found {max_passages!r}")
        self.length = length
        self.stride = stride
        self.title = title
        self.max_title_words = max_title_words
        self.max_passages = max_passages

    def prefix_words(self, max_passages: int) -> int:
        """The words that the first ``max_passages`` windows cover (the title's included)."""
        return (max_passages - 1) * self.stride + self.length + self.max_title_words

    def segments(self, title: str, text: str) -> list[str]:
        """The windows of one document, title prepended (see the class docstring)."""
        title_words = title.split()
        prefix = ""
        if self.title and title_words:
            if len(title_words) <= self.max_title_words:
                prefix = " ".join(title_words)
            else:
                text = f"{title.strip()}\n{text}"
        spans = word_spans(text)
        if len(spans) == 0:
            return [" ".join(title_words)]
        starts = window_starts(len(spans), self.length, self.stride)
        if self.max_passages is not None:
            starts = starts[: self.max_passages]
        out = []
        for start in starts:
            end = min(start + self.length, len(spans))
            window = text[spans[start, 0] : spans[end - 1, 1]]
            out.append(f"{prefix} {window}" if prefix else window)
        return out
