"""Sentence segments (Birch): a document becomes its sentences, each within a token budget.

The sentence splitter is syntok (pure Python, offline, no model download), chosen by
measurement on SciFact abstracts (``benchmarks/segment_speed.py``): about 6x faster than
pysbd with boundaries nearly as close to SciFact's gold sentences; blingfire was faster
still but ships no Linux ARM64 binary; spaCy's rule sentencizer imports torch (through
thinc). ``splitter="pysbd"`` or any callable ``str -> list[str]`` can replace it.

Splitters only propose boundaries: segments are always runs of the document's whitespace-
delimited words, cut between words, so no word is dropped or altered (see
:mod:`evirank.segment._units`). A sentence longer than the budget is cut into balanced,
budget-bounded chunks that together keep every word (Birch's chunking dropped the
leftover).

Example:
    >>> import pandas as pd
    >>> run = pd.DataFrame({"qid": ["1"], "query": ["q"], "docno": ["d1"], "score": [7.5],
    ...                     "title": ["A title"], "text": ["First one. Second one here."]})
    >>> Sentences()(run)[["pid", "text"]].values.tolist()
    [[0, 'A title'], [1, 'First one.'], [2, 'Second one here.']]
    >>> Sentences(title="prepend", max_tokens=4)(run)["text"].tolist()
    ['A title First one.', 'A title Second one', 'A title here.']
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

from evirank.extras import require
from evirank.segment._units import (
    TokenCounter,
    align_sentences,
    balanced_chunks,
    fits_without_counting,
    group_words,
    word_spans,
)
from evirank.segment.base import Segmenter

logger = logging.getLogger(__name__)

TitleMode = Literal["segment", "prepend", "skip"]
_TITLE_MODES: dict[Any, TitleMode] = {
    "segment": "segment",
    "prepend": "prepend",
    "skip": "skip",
    True: "segment",
    False: "skip",
}
SPLITTERS = ("syntok", "pysbd")


def _syntok_starts(text: str) -> list[int]:
    from syntok import segmenter  # a core dependency, imported when first used

    return [sentence[0].offset for paragraph in segmenter.analyze(text) for sentence in paragraph if sentence]


@functools.lru_cache(maxsize=1)
def _pysbd_segmenter() -> Any:
    pysbd = require("pysbd", extra="segment")
    return pysbd.Segmenter(language="en", clean=False)


def _pysbd_starts(text: str) -> list[int]:
    return align_sentences(text, _pysbd_segmenter().segment(text))


def count_tokens_with(tokenizer: Any) -> TokenCounter:
    """A token counter from a Hugging Face tokenizer (no special tokens) or a counting callable.

    Example:
        >>> count = count_tokens_with(lambda s: len(s.split()))
        >>> count("two words")
        2
    """
    if hasattr(tokenizer, "tokenize"):
        return lambda text: len(tokenizer.tokenize(text))
    if callable(tokenizer):
        return tokenizer
    raise TypeError(
        "tokenizer must be a Hugging Face tokenizer (with .tokenize) or a callable str -> int, "
        f"found {type(tokenizer).__name__}"
    )


class Sentences(Segmenter):
    """Split each document into sentences, each within ``max_tokens``, keeping every word.

    Args:
        title: how the document's title is used. ``"segment"`` (or ``True``): the title is
            its own first segment (pid 0), then the body's sentences. ``"prepend"``: the
            title is put before every sentence (useful when sentences need the document's
            topic, as on SciFact); a title longer than ``max_title_words`` words, or taking
            more than half of ``max_tokens``, is its own first segment instead. ``"skip"``
            (or ``False``): sentences of the body only, as Birch did. In every mode a
            document with no body text yields its title, and one with neither yields one
            empty segment (scorers give it a low score; it stays in the ranking).
        max_tokens: the budget of one segment (title included in ``"prepend"`` mode), in
            words when ``tokenizer`` is None, else in the tokenizer's tokens. For a
            cross-encoder, ``max_length - query tokens - 3`` (the special tokens). None: no
            limit.
        tokenizer: a Hugging Face tokenizer (tokens counted with ``.tokenize``, without
            special tokens) or a callable ``str -> int`` counting tokens.
        splitter: ``"syntok"``, ``"pysbd"``, or a callable ``str -> list[str]`` (its
            sentences are aligned back onto the text; it may normalise whitespace).
        max_title_words: the longest title that ``"prepend"`` repeats before sentences.

    Example:
        >>> Sentences(title="skip").segments("Title", "One two. Three.")
        ['One two.', 'Three.']
        >>> Sentences(max_tokens=3).segments("", "a b c d e")
        ['a b c', 'd e']
    """

    def __init__(
        self,
        *,
        title: TitleMode | bool = "segment",
        max_tokens: int | None = None,
        tokenizer: Any = None,
        splitter: str | Callable[[str], Sequence[str]] = "syntok",
        max_title_words: int = 50,
    ) -> None:
        if title not in _TITLE_MODES or not isinstance(title, str | bool):
            raise ValueError(
                f"title must be one of 'segment', 'prepend', 'skip', True, False; found {title!r}"
            )
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be a positive integer or None, found {max_tokens!r}")
        if tokenizer is not None and max_tokens is None:
            raise ValueError("a tokenizer only matters with max_tokens; give max_tokens too")
        if not callable(splitter) and splitter not in SPLITTERS:
            raise ValueError(f"splitter must be one of {SPLITTERS} or a callable, found {splitter!r}")
        if max_title_words < 0:
            raise ValueError(f"max_title_words must be >= 0, found {max_title_words}")
        self.title = title
        self.max_tokens = max_tokens
        self.tokenizer = tokenizer
        self.splitter = splitter
        self.max_title_words = max_title_words

    # --- pieces ------------------------------------------------------------------------
    def _starts(self, text: str) -> list[int]:
        if self.splitter == "syntok":
            return _syntok_starts(text)
        if self.splitter == "pysbd":
            return _pysbd_starts(text)
        return align_sentences(text, self.splitter(text))  # type: ignore[operator]

    def _count(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        # Not cached on self: a stored lambda would make the stage unpicklable (process pools, Ray).
        return int(count_tokens_with(self.tokenizer)(text))

    def _fits(self, text: str, n_words: int, budget: int) -> bool:
        if self.tokenizer is None:
            return n_words <= budget
        return fits_without_counting(text, n_words, budget) or self._count(text) <= budget

    def _bounded(self, text: str, spans: Any, first: int, end: int, budget: int | None) -> list[str]:
        """The words ``[first, end)`` of ``text`` as one or more pieces within ``budget``."""
        piece = text[spans[first, 0] : spans[end - 1, 1]]
        if budget is None or self._fits(piece, end - first, budget):
            return [piece]
        if self.tokenizer is None:
            costs = [1] * (end - first)
        else:
            costs = [self._count(text[s:e]) for s, e in spans[first:end].tolist()]
        out: list[str] = []
        for a, b in balanced_chunks(costs, budget):
            a, b = first + a, first + b
            chunk = text[spans[a, 0] : spans[b - 1, 1]]
            if b - a > 1 and not self._fits(chunk, b - a, budget):
                # Tokenizers are not always additive over words (BPE merges across a space):
                # halve and try again; a single word is kept whole.
                mid = a + (b - a) // 2
                out += self._bounded(text, spans, a, mid, budget) + self._bounded(text, spans, mid, b, budget)
            else:
                out.append(chunk)
        return out

    def _units(self, text: str, budget: int | None) -> list[str]:
        spans = word_spans(text)
        if len(spans) == 0:
            return []
        out: list[str] = []
        for first, end in group_words(spans, self._starts(text)):
            out += self._bounded(text, spans, first, end, budget)
        return out

    def _title_units(self, title: str) -> list[str]:
        spans = word_spans(title)
        return self._bounded(title, spans, 0, len(spans), self.max_tokens) if len(spans) else []

    # --- one document ------------------------------------------------------------------
    def segments(self, title: str, text: str) -> list[str]:
        """The segments of one document (see the class docstring for the title modes)."""
        mode = _TITLE_MODES[self.title]
        title_words = title.split()
        if mode == "prepend" and title_words:
            clean = " ".join(title_words)
            cost = self._count(clean)
            short = len(title_words) <= self.max_title_words
            if short and (self.max_tokens is None or cost <= self.max_tokens // 2):
                body_budget = None if self.max_tokens is None else self.max_tokens - cost
                body = self._units(text, body_budget)
                return [f"{clean} {unit}" for unit in body] or [clean]
            mode = "segment"
        body = self._units(text, self.max_tokens)
        if mode == "segment" or not body:
            return (self._title_units(title) + body) or [""]
        return body
