"""Word-level building blocks shared by the segmenters: word spans, boundary snapping, budgets.

Every segmenter cuts a text only *between* whitespace-delimited words (``str.split()``
words), so a segment's words are always a contiguous run of the document's words and no
word is ever dropped or altered: sentence splitters only propose boundaries, which are
snapped to the word they fall in.

Example:
    >>> spans = word_spans("Cats purr. Dogs bark.")
    >>> group_words(spans, [0, 11])
    [(0, 2), (2, 4)]
    >>> balanced_chunks([1] * 5, budget=3)
    [(0, 3), (3, 5)]
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

# A word is a maximal run of non-whitespace characters: the same units as ``str.split()``.
_WORD = re.compile(r"\S+")

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text (no special tokens), e.g. ``lambda s: len(tok.tokenize(s))``."""


def word_spans(text: str) -> np.ndarray:
    """The ``[start, end)`` character spans of the words of ``text``, shape ``[n_words, 2]``.

    Example:
        >>> word_spans("a  bc").tolist()
        [[0, 1], [3, 5]]
    """
    spans = [m.span() for m in _WORD.finditer(text)]
    return np.asarray(spans, dtype=np.int64).reshape(-1, 2)


def group_words(spans: np.ndarray, starts: Sequence[int]) -> list[tuple[int, int]]:
    """Group words into units given proposed unit start offsets (characters).

    Each word belongs to the unit whose start offset is the last one at or before the
    word's first character (words before the first start belong to the first unit), so
    a boundary falling inside a word moves to that word's end, and units left without
    words vanish. Returns ``[first_word, end_word)`` ranges covering every word once.

    Example:
        >>> group_words(word_spans("ab cd ef"), [0, 4, 6])
        [(0, 2), (2, 3)]
    """
    n = len(spans)
    if n == 0:
        return []
    bounds = np.unique(np.asarray(starts, dtype=np.int64))
    if len(bounds) == 0:
        return [(0, n)]
    unit = np.searchsorted(bounds, spans[:, 0], side="right") - 1
    unit = np.maximum(unit, 0)
    cuts = np.flatnonzero(np.diff(unit)) + 1
    edges = [0, *cuts.tolist(), n]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def align_sentences(text: str, sentences: Sequence[str]) -> list[int]:
    """Start offsets in ``text`` of sentences a splitter returned as strings.

    Splitters may normalise whitespace or even alter characters, so the sentences' words
    are located in order, each searched for from the end of the previous match; a word
    that is not found is passed over. A sentence starts where its first found word does.
    Alignment can thus lose a boundary (two sentences merge) but never a word.

    Example:
        >>> align_sentences("One. Two one.  One more.", ["One.", "Two one.", "One more."])
        [0, 5, 15]
    """
    starts: list[int] = []
    cursor = 0
    for sentence in sentences:
        first = True
        for word in sentence.split():
            found = text.find(word, cursor)
            if found < 0:
                continue
            if first:
                starts.append(found)
                first = False
            cursor = found + len(word)
    return starts


def _greedy(costs: Sequence[int], cap: int) -> list[tuple[int, int]]:
    """Pack consecutive items into the fewest ranges whose cost sum stays within ``cap``.

    An item costing more than ``cap`` on its own gets a range of its own.
    """
    ranges: list[tuple[int, int]] = []
    start, total = 0, 0
    for i, cost in enumerate(costs):
        if i > start and total + cost > cap:
            ranges.append((start, i))
            start, total = i, 0
        total += cost
    if len(costs):
        ranges.append((start, len(costs)))
    return ranges


def _proportional(costs: Sequence[int], k: int) -> list[tuple[int, int]]:
    """Cut consecutive items into ``k`` ranges at the points nearest to equal cost shares."""
    cum = np.cumsum(np.asarray(costs, dtype=np.float64))
    total = float(cum[-1])
    edges = [0]
    for j in range(1, k):
        target = total * j / k
        at = int(np.searchsorted(cum, target))  # the item where the running cost reaches target
        before = cum[at - 1] if at > 0 else 0.0
        cut = at if target - before < cum[at] - target else at + 1
        edges.append(min(max(cut, edges[-1] + 1), len(costs) - (k - j)))
    edges.append(len(costs))
    return [(edges[i], edges[i + 1]) for i in range(k)]


def balanced_chunks(costs: Sequence[int], budget: int) -> list[tuple[int, int]]:
    """Split consecutive items (words with token costs) into the fewest chunks within ``budget``,
    as evenly as possible, dropping nothing.

    The number of chunks ``k`` is the minimum any split can reach (greedy packing is optimal
    for that). The chunks are then cut at equal shares of the total cost when that keeps
    each within the budget, and otherwise with the smallest cap that still allows ``k``
    chunks (binary search), so a long sentence is not cut into full chunks and a
    three-word tail. A single item costing more than ``budget`` becomes a chunk of its own
    (a word is never cut; the scorer truncates it).

    Example:
        >>> balanced_chunks([1] * 7, budget=4)
        [(0, 4), (4, 7)]
        >>> balanced_chunks([1] * 10, budget=4)
        [(0, 3), (3, 7), (7, 10)]
    """
    if budget < 1:
        raise ValueError(f"a chunk budget must be at least 1 token, found {budget}")
    ranges = _greedy(costs, budget)
    k = len(ranges)
    if k <= 1:
        return ranges

    def within(candidate: list[tuple[int, int]]) -> bool:
        return all(b - a == 1 or sum(costs[a:b]) <= budget for a, b in candidate)

    even = _proportional(costs, k)
    if within(even):
        return even
    # Below ceil(sum / k) (over the items that fit the budget) no cap can do with k chunks.
    fitting = sum(cost for cost in costs if cost <= budget)
    lo, hi = max(1, min(budget, math.ceil(fitting / k))), budget
    while lo < hi:
        mid = (lo + hi) // 2
        if len(_greedy(costs, mid)) <= k:
            hi = mid
        else:
            lo = mid + 1
    best = _greedy(costs, lo)
    return best if len(best) == k else ranges


def fits_without_counting(text: str, n_words: int, budget: int) -> bool:
    """Whether ``text`` surely has at most ``budget`` tokens, without calling the tokenizer.

    Subword tokenizers (WordPiece, byte-level BPE, SentencePiece with byte fallback) emit at
    most one token per UTF-8 byte, plus at most one word-boundary marker per word, so a
    text whose bytes plus words fit the budget needs no tokenizer call. This skips the
    tokenizer for almost every sentence; only long ones are counted.
    """
    return len(text.encode("utf-8")) + n_words <= budget
