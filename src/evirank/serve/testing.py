"""Stand-ins for the real pipeline pieces, to test and demonstrate the service without a JVM or a model.

:func:`toy_searcher` builds a :class:`~evirank.serve.searcher.Searcher` over a handful of in-memory
documents: word-overlap retrieval, a regular-expression sentence splitter, a word-overlap "model" (with
an optional delay, and a count of how many calls overlap, to test locking and timeouts) and MaxP.
None of these are meant for real ranking.

Example:
    >>> result = toy_searcher().search("cats purr content", top=2, depth=3)
    >>> result.candidates[0].docno, result.candidates[0].evidence[0].text
    ('d1', 'Cats purr when they are content.')
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any

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
    Document,
    make_run,
    require_columns,
)
from evirank.serve.searcher import Searcher
from evirank.stage import Stage

TOY_DOCUMENTS = (
    Document(
        "d1",
        "Why cats purr",
        "Cats purr when they are content. Purring also happens when a cat is hurt. "
        "The sound comes from the larynx.",
    ),
    Document(
        "d2",
        "Dogs and their bark",
        "Dogs bark to warn their pack. A bark can also be a greeting. Some dogs rarely bark at all.",
    ),
    Document(
        "d3",
        "Pets at home",
        "Many homes keep a cat or a dog. Cats sleep for most of the day. Dogs need daily walks.",
    ),
    Document(
        "d4",
        "Ocean currents",
        "Ocean currents move heat around the planet. Winds and the rotation of the earth drive them.",
    ),
    Document(
        "d5",
        'Unsafe <markup> & "quotes"',
        "A title with <b>tags</b> must be escaped. Cats do not read HTML.",
    ),
)

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"[^.!?]+[.!?]?")


def _words(text: str) -> list[str]:
    return [w.rstrip("s") or w for w in _WORD.findall(text.lower())]


class ToyIndex:
    """In-memory documents with word-overlap retrieval and lookup by docno.

    Example:
        >>> ToyIndex().retrieve(pd.DataFrame({"qid": ["q"], "query": ["ocean"]}), 5)["docno"].tolist()
        ['d4']
    """

    def __init__(self, documents: Sequence[Document] = TOY_DOCUMENTS) -> None:
        self.documents = {d.docno: d for d in documents}

    def lookup(self, docno: str) -> Document | None:
        """The document, or None."""
        return self.documents.get(docno)

    def retrieve(self, topics: pd.DataFrame, k: int) -> pd.DataFrame:
        """The ``k`` documents sharing most words with the query, scored by the count of shared words
        (ties by docno)."""
        rows = []
        for topic in topics.itertuples(index=False):
            terms = set(_words(str(getattr(topic, QUERY))))
            for doc in self.documents.values():
                overlap = sum(1 for w in _words(doc.contents) if w in terms)
                if overlap:
                    rows.append((str(getattr(topic, QID)), doc.docno, float(overlap)))
        run = make_run(rows)
        run = run[run[RANK] <= k].reset_index(drop=True)
        docs = [self.documents[d] for d in run[DOCNO]]
        queries = dict(zip(topics[QID].astype(str), topics[QUERY], strict=True))
        return run.assign(
            **{
                QUERY: [queries[q] for q in run[QID]],
                TITLE: [d.title for d in docs],
                TEXT: [d.text for d in docs],
            }
        )


class ToySentences(Stage):
    """Split each hit's text into sentences with a regular expression (the real one is evirank.segment)."""

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        require_columns(frame, (QID, DOCNO, TEXT, SCORE, RANK), "ToySentences")
        rows = []
        for hit in frame.itertuples(index=False):
            sentences = [s.strip() for s in _SENTENCE.findall(str(getattr(hit, TEXT))) if s.strip()]
            for pid, sentence in enumerate(sentences or [str(getattr(hit, TITLE, ""))]):
                rows.append(
                    (
                        getattr(hit, QID),
                        getattr(hit, DOCNO),
                        pid,
                        sentence,
                        getattr(hit, QUERY, ""),
                        float(getattr(hit, SCORE)),
                        int(getattr(hit, RANK)),
                    )
                )
        columns = [QID, DOCNO, PID, TEXT, QUERY, FIRST_STAGE_SCORE, FIRST_STAGE_RANK]
        return pd.DataFrame(rows, columns=columns)


class ToyScorer(Stage):
    """Score a passage by the fraction of query words it holds; optionally slow, and counting overlaps.

    Args:
        delay_s: seconds to sleep per call (a slow model, for timeout tests).
        fail_on: raise RuntimeError when the query contains this word (a broken model, for error tests).

    Attributes:
        calls: how many times it was called.
        max_concurrent: the most calls seen running at the same time (1 when calls are serialised).
    """

    def __init__(self, delay_s: float = 0.0, fail_on: str | None = None) -> None:
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.calls = 0
        self.max_concurrent = 0
        self._running = 0
        self._count = threading.Lock()

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        require_columns(frame, (QUERY, TEXT), "ToyScorer")
        with self._count:
            self.calls += 1
            self._running += 1
            self.max_concurrent = max(self.max_concurrent, self._running)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            scores = []
            for query, text in zip(frame[QUERY], frame[TEXT], strict=True):
                if self.fail_on and self.fail_on in str(query).split():
                    raise RuntimeError("the toy model failed on purpose")
                terms = set(_words(str(query)))
                words = set(_words(str(text)))
                scores.append(len(terms & words) / max(1, len(terms)))
            return frame.assign(**{SCORE: scores})
        finally:
            with self._count:
                self._running -= 1


class ToyMaxP(Stage):
    """A document's score is its best passage's score (the real one is evirank.aggregate.MaxP)."""

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        require_columns(frame, (QID, DOCNO, SCORE), "ToyMaxP")
        best = frame.groupby([QID, DOCNO], as_index=False)[SCORE].max()
        return make_run(best)


def toy_searcher(
    delay_s: float = 0.0, documents: Sequence[Document] = TOY_DOCUMENTS, evidence: int = 3
) -> Searcher:
    """A complete Searcher over a few in-memory documents; ``delay_s`` makes its model slow.

    Example:
        >>> toy_searcher().document("d4").title
        'Ocean currents'
    """
    index = ToyIndex(documents)
    return Searcher(
        index.retrieve,
        ToySentences(),
        ToyScorer(delay_s=delay_s),
        ToyMaxP(),
        index.lookup,
        evidence=evidence,
        info={"index": "toy", "model": "word overlap", "scorer": "toy", "aggregate": "maxp"},
    )


def toy_ranker(delay_s: float = 0.0, fail_on: str | None = None) -> Any:
    """A :class:`~evirank.Ranker` over the toy word-overlap model (no model files), for ``/rerank``.

    Example:
        >>> toy_ranker().rank("cats purr", ["Stocks fell.", "Cats purr."])[0].id
        '1'
    """
    from evirank.ranker import Ranker

    return Ranker(scorer=ToyScorer(delay_s=delay_s, fail_on=fail_on), segment="sentences", aggregate="maxp")
