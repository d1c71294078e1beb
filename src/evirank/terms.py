"""Query terms: tokens, stopwords, a light stemmer, query length, and term matching.

Used by the topic readers (keyword queries), the query-length breakdown (Birch's Table 5.4 counts
the words of a title, stopwords excluded) and by the pruned analysis (Table 5.6 keeps only the
sentences that contain no query term). Tokens are lower-cased runs of letters and digits
(Unicode-aware). Terms are the tokens that are not stopwords, reduced by Harman's "S" stemmer
(plurals: ``-ies`` -> ``-y``, ``-es`` -> ``-e``, ``-s`` -> ``""`` with the usual exceptions), so
that "rats" in a sentence matches "rat" in a query; ``stem=False`` matches exact tokens only.

Example:
    >>> query_terms("The effects of smoking on rats")
    ('effect', 'smoking', 'rat')
    >>> query_length("The effects of smoking on rats")
    3
    >>> contains_any("A rat was exposed.", query_terms("smoking rats"))
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

#: A common English stopword list (function words only), used to count and match query terms.
STOPWORDS: frozenset[str] = frozenset(
    (
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "cannot",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "don",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "let",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
    )
)


def tokens(text: str) -> list[str]:
    """Lower-cased letter/digit runs.

    Example:
        >>> tokens("BM25's top-100, re-ranked!")
        ['bm25', 's', 'top', '100', 're', 'ranked']
    """
    return _TOKEN.findall(text.lower())


def s_stem(token: str) -> str:
    """Harman's S stemmer: strip plural endings of a lower-cased token.

    Example:
        >>> [s_stem(w) for w in ("studies", "does", "cells", "glass", "virus", "mice")]
        ['study', 'doe', 'cell', 'glass', 'virus', 'mice']
    """
    if len(token) > 3 and token.endswith("ies") and not token.endswith(("eies", "aies")):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith("es") and not token.endswith(("aes", "ees", "oes")):
        return token[:-1]
    if len(token) > 2 and token.endswith("s") and not token.endswith(("us", "ss")):
        return token[:-1]
    return token


def query_terms(query: str, *, stem: bool = True) -> tuple[str, ...]:
    """The query's terms: tokens that are not stopwords, stemmed, in order, without repeats."""
    words = [t for t in tokens(query) if t not in STOPWORDS]
    if stem:
        words = [s_stem(t) for t in words]
    return tuple(dict.fromkeys(words))


def query_length(query: str) -> int:
    """The number of words of a query, stopwords excluded (repeats counted), as Birch counted."""
    return sum(1 for t in tokens(query) if t not in STOPWORDS)


def contains_any(text: str, terms: Iterable[str], *, stem: bool = True) -> bool:
    """Whether ``text`` holds any of ``terms`` (compared after the same stemming)."""
    wanted = set(terms)
    if not wanted:
        return False
    return any((s_stem(token) if stem else token) in wanted for token in tokens(text))
