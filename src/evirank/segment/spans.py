"""Where a passage is in its document: character offsets for highlighting and for evidence.

Segmenters rebuild passages from words (whitespace normalised, a title prepended, a long
sentence cut into chunks), so a passage is found by its words, not by its characters.

Example:
    >>> passage_span("Dogs bark.", "", "Cats purr.  Dogs  bark.")
    ('text', 12, 23)
"""

from __future__ import annotations

import re

#: A word: a maximal run of non-whitespace characters (the units of ``str.split()``).
WORD = re.compile(r"\S+")


def passage_span(
    passage: str, title: str, text: str, after: int = 0
) -> tuple[str | None, int | None, int | None]:
    """Where a passage's words are in a document: ``(field, start, end)`` character offsets.

    The passage's words are looked for as a run of the text's words, from word ``after`` on first
    (passages come in order; windows overlap), then anywhere; a title the segmenter put in front
    of the passage is skipped; a passage that is the title alone is found in the title.

    Example:
        >>> passage_span("Second one.", "T", "First one.  Second one.")
        ('text', 12, 23)
        >>> passage_span("T Second one.", "T", "First one.  Second one.")
        ('text', 12, 23)
        >>> passage_span("T", "T", "First one.")
        ('title', 0, 1)
    """
    words = passage.split()
    spans = [(m.start(), m.end()) for m in WORD.finditer(text)]
    doc_words = [text[a:b] for a, b in spans]
    title_words = title.split()
    candidates = [words]
    if title_words and words[: len(title_words)] == title_words and len(words) > len(title_words):
        candidates.append(words[len(title_words) :])
    for wanted in candidates:  # the passage as it is first, then without a prepended title
        n = len(wanted)
        if n == 0:
            continue
        for start_at in (after, 0):
            for i in range(start_at, len(doc_words) - n + 1):
                if doc_words[i : i + n] == wanted:
                    return "text", spans[i][0], spans[i + n - 1][1]
    if title_words and words == title_words:
        found = [(m.start(), m.end()) for m in WORD.finditer(title)]
        return "title", found[0][0], found[-1][1]
    return None, None, None


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
