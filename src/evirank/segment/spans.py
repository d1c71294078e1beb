"""Where a passage is in its document: character offsets for highlighting and for evidence.

Segmenters rebuild passages from words (whitespace normalised, a title prepended, a long
sentence cut into chunks), so a passage is found by its words, not by its characters.

A document's passages are located in one pass (:class:`PassageLocator`, :func:`locate_passages`):
passages come in document order, so each one is looked for from where the one before it started,
and the text is read once, word by word, only as far as the passages reach. A document of
megabytes costs time in proportion to its words, not to its words times its passages.

Example:
    >>> passage_span("Dogs bark.", "", "Cats purr.  Dogs  bark.")
    ('text', 12, 23)
    >>> locate_passages(["Cats purr.", "Cats purr.", "Dogs bark."], "Cats purr.", "Cats purr. Dogs bark.")
    [('title', 0, 10), ('text', 0, 10), ('text', 11, 21)]
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator, Sequence

#: A word: a maximal run of non-whitespace characters (the units of ``str.split()``).
WORD = re.compile(r"\S+")

#: Where a passage is: ``(field, start, end)``, field ``"text"`` or ``"title"`` (all None: not found).
Span = tuple[str | None, int | None, int | None]
NOT_FOUND: Span = (None, None, None)

#: Words read from a text at a time.
_CHUNK = 4096


class _Words:
    """A text's words and their character spans, read lazily (only as far as a search needs).

    Equal words share one string object, so a text of millions of words keeps one pointer per
    word, and two character offsets in compact arrays.
    """

    def __init__(self, text: str) -> None:
        self._matches: Iterator[re.Match[str]] | None = WORD.finditer(text)
        self.words: list[str] = []
        self.starts = array("q")
        self.ends = array("q")
        self._vocabulary: dict[str, str] = {}
        #: Words read from the text, plus positions passed over and words compared by searches.
        self.read = 0

    @property
    def complete(self) -> bool:
        """Whether every word of the text has been read."""
        return self._matches is None

    def ensure(self, n: int) -> bool:
        """Read words until at least ``n`` are known (or the text ends); whether ``n`` are known."""
        while len(self.words) < n and self._matches is not None:
            self._read(max(_CHUNK, n - len(self.words)))
        return len(self.words) >= n

    def _read(self, count: int) -> None:
        assert self._matches is not None
        intern = self._vocabulary.setdefault
        for _ in range(count):
            match = next(self._matches, None)
            if match is None:
                self._matches = None
                return
            word = match.group()
            self.words.append(intern(word, word))
            self.starts.append(match.start())
            self.ends.append(match.end())
            self.read += 1

    def has_all(self, words: Sequence[str]) -> bool:
        """Whether every one of ``words`` occurs in the text (exact once the text is read)."""
        return not self.complete or all(w in self._vocabulary for w in words)

    def matches_at(self, wanted: Sequence[str], at: int) -> bool:
        """Whether the text's words from position ``at`` are ``wanted``."""
        n = len(wanted)
        if n == 0 or at < 0 or not self.ensure(at + n):
            return False
        words = self.words
        self.read += 1
        if words[at + n - 1] != wanted[-1] or words[at] != wanted[0]:  # most misses end here
            return False
        self.read += n
        return words[at : at + n] == list(wanted)

    def next_of(self, word: str, start: int, stop: int | None = None) -> int:
        """The first position in ``[start, stop)`` holding ``word`` (stop None: to the end), or -1."""
        while True:
            end = len(self.words) if stop is None else min(stop, len(self.words))
            try:
                found = self.words.index(word, start, max(end, start))
            except ValueError:
                self.read += max(end - start, 0)
                if self.complete or (stop is not None and end >= stop):
                    return -1
                start = max(start, end)
                self._read(_CHUNK)
            else:
                self.read += found - start + 1
                return found

    def first_match(
        self, candidates: Sequence[list[str]], start: int, stop: int | None = None
    ) -> tuple[int, int] | None:
        """The first position in ``[start, stop)`` where one of ``candidates`` starts (the earlier
        candidate at a tie), and its length; or None.

        The positions are searched in growing windows from ``start``, every candidate in each
        window, so the cost is about the distance to the match, whatever a candidate that is never
        found would cost on its own.
        """
        width = max(4, min(len(c) for c in candidates)) if candidates else 4
        low = start
        while stop is None or low < stop:
            high = low + width if stop is None else min(low + width, stop)
            best: tuple[int, int] | None = None
            for wanted in candidates:
                at = self.next_of(wanted[0], low, high if best is None else min(high, best[0]))
                while at >= 0:
                    if self.matches_at(wanted, at):
                        best = (at, len(wanted))
                        break
                    at = self.next_of(wanted[0], at + 1, high if best is None else min(high, best[0]))
            if best is not None:
                return best
            if self.complete and high >= len(self.words):
                return None
            low, width = high, width * 2
        return None


class PassageLocator:
    """Find a document's passages, one after the other, in time linear in the document's words.

    Each passage is looked for in the text from where the previous one started (windows
    overlap; sentences follow each other), as it is or without a title the segmenter put in
    front of it, whichever comes first; then anywhere in the text. Passages made of the title
    come first in a document (``sentences`` keeps the title as its own passages): while no
    passage has been found in the text, a passage found in the title is attributed to the title,
    unless the text also starts with it and the next passage does not (a segmenter that skips
    the title, over a text whose first sentence is the title).

    Attributes:
        work: word positions read or compared so far (a measure of the cost, for tests).

    Example:
        >>> locator = PassageLocator("T", "a b c a b c d")
        >>> [locator.locate(p) for p in ("a b c", "a b c d")]
        [('text', 0, 5), ('text', 6, 13)]
    """

    def __init__(self, title: str, text: str, *, after: int = 0) -> None:
        self._title = _Words(title)
        self._text = _Words(text)
        self._title.ensure(1 << 62)  # a title is short; read it whole
        self._title_words = self._title.words
        self._title_at = 0  # where the next title passage may start (title words)
        self._cursor = max(int(after), 0)  # where the next text passage may start (text words)
        self._in_title = True  # no passage found in the text yet
        self._compared = 0

    @property
    def work(self) -> int:
        """Word positions read from the text and title, plus words compared."""
        return self._text.read + self._title.read + self._compared

    def locate(self, passage: str, following: str | None = None) -> Span:
        """Where ``passage`` is (see the class); ``following`` is the next passage, if any.

        Example:
            >>> PassageLocator("T", "First one.  Second one.").locate("T Second one.")
            ('text', 12, 23)
        """
        words = passage.split()
        if not words:
            return NOT_FOUND
        self._compared += len(words)
        if self._in_title:
            at = self._title_match(words, self._title_at)
            if at >= 0 and not self._text_starts_instead(words, following):
                self._title_at = at + 1
                return self._span("title", self._title, at, len(words))
        found = self._forward(words, self._cursor)
        if found is None:
            found = self._anywhere(words)
        if found is not None:
            at, n = found
            self._in_title = False
            self._cursor = at + 1
            return self._span("text", self._text, at, n)
        at = self._title_match(words, 0)
        if at >= 0:
            return self._span("title", self._title, at, len(words))
        return NOT_FOUND

    def locate_all(self, passages: Sequence[str]) -> list[Span]:
        """Where each of a document's passages is, given in document order.

        Example:
            >>> PassageLocator("T", "x y").locate_all(["T", "x y"])
            [('title', 0, 1), ('text', 0, 3)]
        """
        out = []
        for i, passage in enumerate(passages):
            following = passages[i + 1] if i + 1 < len(passages) else None
            out.append(self.locate(passage, following))
        return out

    # ------------------------------------------------------------------------------------------
    def _candidates(self, words: list[str]) -> list[list[str]]:
        """The passage as it is, then without a title the segmenter put in front of it."""
        title = self._title_words
        n = len(title)
        if n and len(words) > n and words[:n] == title:
            return [words, words[n:]]
        return [words]

    def _forward(self, words: list[str], start: int) -> tuple[int, int] | None:
        """The first position >= ``start`` where a candidate starts, and its length."""
        return self._text.first_match(self._candidates(words), start)

    def _anywhere(self, words: list[str]) -> tuple[int, int] | None:
        """The first position before the cursor where a candidate starts (the forward search
        looked from the cursor on, and read the text whole)."""
        if self._cursor == 0:
            return None
        candidates = [c for c in self._candidates(words) if self._text.has_all(c)]
        return self._text.first_match(candidates, 0, self._cursor) if candidates else None

    def _title_match(self, words: list[str], start: int) -> int:
        """The first position >= ``start`` of the title holding ``words``, or -1."""
        title = self._title
        at = title.next_of(words[0], start) if title.words else -1
        while at >= 0:
            self._compared += len(words)
            if title.matches_at(words, at):
                return at
            at = title.next_of(words[0], at + 1)
        return -1

    def _text_starts_instead(self, words: list[str], following: str | None) -> bool:
        """Whether a passage found in the title is rather the text's own first words: the text
        starts with them too, and the next passage is neither more of the title nor found there."""
        if not self._text.matches_at(words, self._cursor):
            return False
        if following is None:
            return True
        after = following.split()
        if not after:
            return True
        if self._title_match(after, self._title_at) >= 0:
            return False
        return not any(self._text.matches_at(c, self._cursor) for c in self._candidates(after))

    @staticmethod
    def _span(name: str, words: _Words, at: int, n: int) -> Span:
        return name, int(words.starts[at]), int(words.ends[at + n - 1])


def locate_passages(passages: Sequence[str], title: str, text: str) -> list[Span]:
    """Where each of a document's passages (in document order) is: ``(field, start, end)``.

    Linear in the document's words (see :class:`PassageLocator`).

    Example:
        >>> locate_passages(["T", "a b", "b c"], "T", "a b c")
        [('title', 0, 1), ('text', 0, 3), ('text', 2, 5)]
    """
    return PassageLocator(title, text).locate_all(passages)


def passage_span(passage: str, title: str, text: str, after: int = 0) -> Span:
    """Where one passage's words are in a document: ``(field, start, end)`` character offsets.

    The passage's words are looked for as a run of the text's words, from word ``after`` on first
    (passages come in order; windows overlap), then anywhere; a title the segmenter put in front
    of the passage is skipped; a passage found nowhere in the text is looked for in the title. (To
    locate all of a document's passages, :func:`locate_passages` is linear where calling this
    once per passage is not.)

    Example:
        >>> passage_span("Second one.", "T", "First one.  Second one.")
        ('text', 12, 23)
        >>> passage_span("T Second one.", "T", "First one.  Second one.")
        ('text', 12, 23)
        >>> passage_span("T", "T", "First one.")
        ('title', 0, 1)
    """
    locator = PassageLocator(title, text, after=after)
    locator._in_title = False  # one passage without its neighbours: the text first, then the title
    return locator.locate(passage)


def document_spans(
    passage: str, title: str, text: str, spans: list[tuple[int, int]], after: int = 0
) -> list[tuple[int, int] | None]:
    """Character spans inside ``passage`` moved to where they are in the document ``text``.

    The passage is located as :func:`passage_span` locates it; a span inside one of its words is
    moved with that word (segmenters rebuild passages from the text's words). A span in a title the
    segmenter put in front, or in a passage not found in the text, is None.

    Example:
        >>> document_spans("T Dogs bark.", "T", "Cats purr.  Dogs  bark.", [(0, 1), (2, 6), (7, 11)])
        [None, (12, 16), (18, 22)]
    """
    where, start, end = passage_span(passage, title, text, after)
    out: list[tuple[int, int] | None] = [None] * len(spans)
    if where != "text" or start is None or end is None:
        return out
    doc_words = [(m.start(), m.end()) for m in WORD.finditer(text, start, end)]
    own_words = [(m.start(), m.end()) for m in WORD.finditer(passage)]
    skip = len(own_words) - len(doc_words)  # words of a prepended title
    if skip < 0:
        return out
    for i, (a, b) in enumerate(spans):
        for k, (lo, hi) in enumerate(own_words):
            if lo <= a and b <= hi:
                if k >= skip:
                    shift = doc_words[k - skip][0] - lo
                    out[i] = (a + shift, b + shift)
                break
    return out
