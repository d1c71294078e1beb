"""Topic fields and the query variants made from them (Dai & Callan, SIGIR 2019, Table 3).

A topic has a title, a description and a narrative; a query is one of them, several joined
(``title+description``), or a variant made from one: its keywords (``description-keywords``,
``narrative-keywords``) or its positive part (``narrative-positive``). The topic readers
(:mod:`evirank.io.topics`) and ir_datasets' topics (:mod:`evirank.io.irds`) read fields through here.

Example:
    >>> parse_field("title+desc")
    ('title', 'description')
"""

from __future__ import annotations

import re

from evirank.terms import STOPWORDS

#: The fields of a TREC topic.
TOPIC_FIELDS = ("title", "description", "narrative")
#: Query variants made from a field (Dai & Callan, SIGIR 2019, Table 3): name -> (field, how).
DERIVED_FIELDS = {
    "description-keywords": ("description", "keywords"),
    "narrative-keywords": ("narrative", "keywords"),
    "narrative-positive": ("narrative", "positive"),
}
_FIELD_ALIASES = {
    "title": "title",
    "t": "title",
    "query": "title",
    "description": "description",
    "desc": "description",
    "d": "description",
    "narrative": "narrative",
    "narr": "narrative",
    "n": "narrative",
    "description-keywords": "description-keywords",
    "desc-keywords": "description-keywords",
    "narrative-keywords": "narrative-keywords",
    "narr-keywords": "narrative-keywords",
    "narrative-positive": "narrative-positive",
    "narr-positive": "narrative-positive",
}


def parse_field(field: str) -> tuple[str, ...]:
    """Parse a field selection such as ``"title"``, ``"desc"``, ``"title+description"`` or
    ``"narrative-positive"``.

    Example:
        >>> parse_field("title+desc")
        ('title', 'description')
        >>> parse_field("desc-keywords")
        ('description-keywords',)
    """
    parts = [p.strip().lower() for p in re.split(r"[+,]", field)]
    out: list[str] = []
    for part in parts:
        if part not in _FIELD_ALIASES:
            raise ValueError(
                f"unknown topic field {part!r} in {field!r}; expected one of "
                f"{', '.join((*TOPIC_FIELDS, *DERIVED_FIELDS))} or a combination such as 'title+description'"
            )
        name = _FIELD_ALIASES[part]
        if name not in out:
            out.append(name)
    return tuple(out)


# --- query variants (Dai & Callan, Table 3) ---------------------------------------------

_ABBREVIATION = re.compile(r"\b(?:[^\W\d_]\.){2,}")
_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')]))\s+(?=[\"'(]?[A-Z])|(?<=[a-z])\s+(?=Documents\b)")
_CLAUSE_BREAK = re.compile(r";\s*|:\s+(?=[a-z])|,\s*(?=(?:but|except|however)\b)", re.IGNORECASE)
_NEGATIVE = re.compile(
    r"\b(?:irrelevant|non-?relevant|nonrelevance)\b"
    r"|(?:\bnot|n't|\bnever)\s+(?:\w+\s+){0,2}?relevan",
    re.IGNORECASE,
)


def keywords(text: str) -> str:
    """``text`` without punctuation and stopwords (Dai & Callan's keyword queries).

    Words are runs of letters and digits; an abbreviation such as ``U.S.`` keeps its letters
    (``US``); words in evirank's stopword list (:data:`evirank.terms.STOPWORDS`, 130
    common English function words: articles, pronouns, prepositions, auxiliaries) are removed,
    whatever their case; the others keep their case and order.

    Example:
        >>> keywords("What are the effects of U.S. air-traffic controllers' pay?")
        'effects US air traffic controllers pay'
    """
    text = _ABBREVIATION.sub(lambda m: m.group(0).replace(".", "") + " ", text)
    return " ".join(w for w in _WORD.findall(text) if w.lower() not in STOPWORDS)


def positive_narrative(text: str) -> str:
    """A narrative without the sentences that state what is not relevant (Dai & Callan's
    "positive" narratives).

    The narrative is split into sentences (at ``.``, ``!`` or ``?`` before a capital, and before
    "Documents" after a word without punctuation, where a narrative's list ends), and each
    sentence into clauses at semicolons, at a colon before a lower-case word, and before
    ``, but``, ``, except`` and ``, however``. A clause is dropped when it says "irrelevant",
    "non-relevant" or "nonrelevant", or has "not" (or "n't", "never") followed within three
    words by "relevant"/"relevance" ("would not be relevant", "should not be considered
    relevant", "does not constitute relevance"); the other clauses are kept, in order, a
    clause cut short ending with a period. A narrative that only says what is not relevant
    gives an empty text (:func:`read_topics` then uses the topic's title).

    Example:
        >>> positive_narrative("Relevant documents tell about pay for American controllers. "
        ...                    "Documents about foreign controllers are not relevant.")
        'Relevant documents tell about pay for American controllers.'
        >>> positive_narrative("Cases are relevant, except that letters are not relevant.")
        'Cases are relevant.'
    """
    kept = [
        clause.strip(" ,;:")
        for sentence in _SENTENCE_END.split(text)
        for clause in _CLAUSE_BREAK.split(sentence)
        if clause.strip(" ,;:") and _NEGATIVE.search(clause) is None
    ]
    return " ".join(c if c[-1] in ".!?\"')" else c + "." for c in kept)


def field_text(fields: dict[str, str], name: str) -> str:
    """The text of one field (:data:`TOPIC_FIELDS`) or query variant (:data:`DERIVED_FIELDS`) of a topic.

    Example:
        >>> field_text({"description": "Where are wind power installations located?"}, "description-keywords")
        'wind power installations located'
    """
    if name not in DERIVED_FIELDS:
        return fields.get(name, "")
    source, how = DERIVED_FIELDS[name]
    value = fields.get(source, "")
    return keywords(value) if how == "keywords" else positive_narrative(value)
