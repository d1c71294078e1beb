"""The seam between the web service and the ranking pipeline: a query in, ranked candidates with evidence out.

A :class:`Searcher` runs one query through a first stage and the one re-ranking flow,
:class:`evirank.rerank.Rerank` (the same object ``evirank rerank`` runs), built from injected pieces::

    retrieve(topics, k)     -> Run      (first stage, with title and text of the top k hits)
    segmenter(Run)          -> Passages
    scorer(Passages)        -> Passages + score
    aggregator(Passages)    -> Run

and returns each candidate with its best passages (its *evidence*, best first) and the time each stage
took. A search names the three numbers of every evirank command: ``k`` documents retrieved (the
first-stage depth), the first ``depth`` of them re-ranked (all ``k`` when ``k`` is smaller), and the best
``top`` returned; only re-ranked documents are returned, so at most ``min(depth, k)``. Times are
given under the stage names of :data:`evirank.rerank.timing.STAGES`. The pieces are plain callables
and :class:`~evirank.stage.Stage` objects, so tests inject fakes (no JVM, no model) and the service
builds the real ones (``Bm25 >> Sentences >> BiEncoder >> MaxP``).

Thread safety: the service calls :meth:`Searcher.search` from several threads at once. Every piece
runs under its own lock unless it declares ``thread_safe = True`` (a class or instance attribute):
one model call at a time (fast tokenizers and score stores are not safe to share; on CPU a second
concurrent forward pass only competes for the same cores), while one request's retrieval overlaps
another's scoring. Locks are taken with the request's deadline, so a request that has waited too
long gives up (:class:`SearchTimeout`) instead of queueing work nobody will read.

Example:
    >>> import pandas as pd
    >>> from evirank.frames import make_run
    >>> from evirank.stage import Stage
    >>> def retrieve(topics, depth):
    ...     run = make_run([("q", "d1", 2.0), ("q", "d2", 1.0)])
    ...     return run.assign(query="cats", title="", text=["Cats purr. Dogs bark.", "Cats sleep."])
    >>> class Split(Stage):
    ...     def transform(self, run):
    ...         rows = [(r.qid, r.docno, i, s.strip() + ".", r.query, r.score)
    ...                 for r in run.itertuples() for i, s in enumerate(r.text.split(".")[:-1])]
    ...         cols = ["qid", "docno", "pid", "text", "query", "first_stage_score"]
    ...         return pd.DataFrame(rows, columns=cols)
    >>> class Overlap(Stage):
    ...     def transform(self, p):
    ...         return p.assign(score=[float("cat" in t.lower()) for t in p["text"]])
    >>> class MaxP(Stage):
    ...     def transform(self, p):
    ...         return make_run(p.groupby(["qid", "docno"], as_index=False)["score"].max())
    >>> result = Searcher(retrieve, Split(), Overlap(), MaxP()).search("cats", top=2, depth=2)
    >>> [(c.docno, c.evidence[0].text) for c in result.candidates]  # tied: docno descending
    [('d2', 'Cats sleep.'), ('d1', 'Cats purr.')]
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import pandas as pd

from evirank.config import SETTINGS
from evirank.errors import EvirankError
from evirank.frames import (
    DOCNO,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    TEXT,
    TITLE,
    URL,
    Document,
    make_run,
    make_topics,
    require_columns,
)
from evirank.ranker import ScoreTerm
from evirank.rerank.pipeline import Rerank
from evirank.rerank.timing import STAGES, StageTimings
from evirank.segment.spans import document_spans, passage_span
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: Retrieval: (Topics [qid, query], k) -> Run [qid, docno, score, rank] of the top k, with title and text.
Retrieve = Callable[[pd.DataFrame, int], pd.DataFrame]
#: Document lookup: docno -> Document, or None (or KeyError) when the index has no such document.
DocumentLookup = Callable[[str], Document | None]
#: A pipeline piece: a Stage or any frame -> frame callable.
Piece = Callable[[pd.DataFrame], pd.DataFrame]

_QID = "q"


_request = threading.local()


def time_left() -> float | None:
    """Seconds left before the deadline of the search running on this thread (None: no deadline).

    For pieces that wait on something of their own (a shared batch) instead of their piece's lock.

    Example:
        >>> time_left() is None  # not inside a search
        True
    """
    deadline = getattr(_request, "deadline", None)
    return None if deadline is None else deadline - time.monotonic()


class SearchTimeout(EvirankError, TimeoutError):
    """A search did not finish before its deadline (the service answers 503)."""


class PassageNotFound(EvirankError, LookupError):
    """The document has no passage with this pid (the service answers 404)."""


class DocumentNotFound(EvirankError, LookupError):
    """The index has no document with this docno (the service answers 404)."""

    def __init__(self, docno: str) -> None:
        self.docno = docno
        super().__init__(f"no document with docno {docno!r} in the index")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One scored passage of a candidate, with where it sits in the candidate's text.

    ``start``/``end`` are character offsets into the document text (``None`` when the passage is not a
    verbatim span of it, e.g. a title segment).

    Example:
        >>> Evidence("Cats purr.", 0.9, pid=0, start=0, end=10).end
        10
    """

    text: str
    score: float
    pid: int
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ranked document: its scores, its text and its evidence (best passage first).

    Example:
        >>> Candidate("d1", 1, 0.9, 7.5, 3, "Title", "Text.", ()).docno
        'd1'
    """

    docno: str
    rank: int
    score: float
    first_stage_score: float
    first_stage_rank: int
    title: str
    text: str
    evidence: tuple[Evidence, ...]
    terms: tuple[ScoreTerm, ...] = ()
    url: str | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The answer to one query: candidates best first, and milliseconds per stage.

    ``top``, ``depth`` and ``k`` are the numbers the search ran with: at most ``top`` candidates, from
    the ``depth`` documents re-ranked (``min(depth, k)`` of the request), of the ``k`` retrieved (fewer
    when the first stage found fewer).

    ``timings`` (milliseconds) has every stage of :data:`TIMING_KEYS`: the re-ranking stages of
    :data:`evirank.rerank.timing.STAGES` (``first_stage``, ``text_fetch``, ``segmentation``, ``pruning``,
    ``model_load``, ``tokenisation``, ``model``, ``scoring_other``, ``aggregation``), ``wait`` (time
    spent queueing for a busy piece) and ``total``.

    Example:
        >>> SearchResult("cats", 10, 20, 20, (), {"total": 1.5}, passages=0).timings["total"]
        1.5
    """

    query: str
    top: int
    depth: int
    k: int
    candidates: tuple[Candidate, ...]
    timings: dict[str, float]
    passages: int


@dataclass(frozen=True, slots=True)
class PassageAttention:
    """What the model links between a query and one passage of a document (``/v1/attention``).

    ``view`` is the scorer's :class:`~evirank.score.attention.AttentionView` of the passage as the
    segmenter cuts it; ``document_spans`` gives each of the view's passage units its span in the
    document text (None for a unit not in it, such as a prepended title's words).
    """

    query: str
    docno: str
    pid: int
    text: str
    view: Any
    document_spans: tuple[tuple[int, int] | None, ...]
    milliseconds: float


#: The keys of a search's ``timings``: the re-ranking stages (writing excepted), queueing, the total.
TIMING_KEYS = (*(s for s in STAGES if s != "write"), "wait", "total")
#: Which piece's lock a stage takes (stages not listed take none).
_LOCK_OF = {
    "first_stage": "retrieve",
    "segmentation": "segment",
    "scoring": "score",
    "aggregation": "aggregate",
}


@dataclass
class _Clock:
    """Per-request stopwatch, deadline and stage timings (seconds)."""

    deadline: float | None
    started: float = field(default_factory=time.perf_counter)
    timings: StageTimings = field(default_factory=StageTimings)

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check(self, before: str) -> None:
        left = self.remaining()
        if left is not None and left <= 0:
            raise SearchTimeout(f"the search ran out of time before the {before} stage")

    def milliseconds(self) -> dict[str, float]:
        """Every key of :data:`TIMING_KEYS` in milliseconds, ``total`` up to now."""
        seconds = self.timings.as_dict(digits=9)
        seconds["total"] = time.perf_counter() - self.started
        return {name: round(seconds.get(name, 0.0) * 1000.0, 3) for name in TIMING_KEYS}


class Searcher:
    """Answer one query at a time with ranked candidates and their evidence; safe to share across threads.

    Args:
        retrieve: first stage, ``(topics, k) -> Run`` of the top ``k`` hits, with their ``title`` and ``text``
            (see :func:`stage_retriever` to adapt a Stage).
        segmenter: Run -> Passages [qid, docno, pid, text, ...].
        scorer: Passages -> Passages with ``score`` (the model; loaded once, called under a lock).
        aggregator: scored Passages -> Run [qid, docno, score, rank].
        documents: docno -> Document lookup for :meth:`document` and for hits without text.
        evidence: how many passages to return per candidate, best first.
        info: what to report on ``/health`` (index, model, scorer, ...).

    Example:
        See the module docstring.
    """

    def __init__(
        self,
        retrieve: Retrieve,
        segmenter: Piece,
        scorer: Piece,
        aggregator: Piece,
        documents: DocumentLookup | None = None,
        *,
        evidence: int = 3,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        if evidence < 1:
            raise ValueError(f"evidence must be a positive number of passages, found {evidence!r}")
        self.retrieve = retrieve
        self.segmenter = segmenter
        self.scorer = scorer
        self.aggregator = aggregator
        self.pipeline = Rerank(
            _as_stage(segmenter), _as_stage(scorer), _as_stage(aggregator), fetch=_LookupText(self)
        )
        self.documents = documents
        self.evidence = evidence
        self.info: dict[str, Any] = dict(info or {})
        self._locks: dict[str, _LockLike] = {
            name: _NullLock() if getattr(piece, "thread_safe", False) else threading.Lock()
            for name, piece in (
                ("retrieve", retrieve),
                ("segment", segmenter),
                ("score", scorer),
                ("aggregate", aggregator),
                ("documents", documents),
            )
        }

    # ------------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        top: int | None = None,
        depth: int | None = None,
        *,
        k: int | None = None,
        deadline: float | None = None,
    ) -> SearchResult:
        """Retrieve ``k`` first-stage hits for ``query``, re-rank the first ``depth`` of them by their
        evidence, and return the best ``top``.

        Args:
            query: the query text (non-empty).
            top: how many candidates to return (default: every document re-ranked); only re-ranked
                documents are returned, so at most ``min(depth, k)`` are.
            depth: how many first-stage hits to re-rank (default: the ``depth`` setting's); all ``k``
                when ``k`` is smaller, as ``evirank rerank --k 50 --depth 100`` re-ranks 50.
            k: the first-stage depth, how many documents to retrieve (default: ``depth``); those
                beyond ``depth`` are not re-ranked and not returned.
            deadline: a :func:`time.monotonic` instant after which the search gives up.

        Raises:
            ValueError: on an empty query, or a ``top``, ``depth`` or ``k`` below 1.
            SearchTimeout: when the deadline passes.
        """
        if not query.strip():
            raise ValueError("the query is empty")
        depth = SETTINGS.default("depth") if depth is None else depth
        k = depth if k is None else k
        reranked = min(depth, k)
        top = reranked if top is None else top
        if min(top, depth, k) < 1:
            raise ValueError(f"top, depth and k must be at least 1, found top={top}, depth={depth}, k={k}")
        clock = _Clock(deadline)
        _request.deadline = deadline
        try:
            return self._search(query, min(top, reranked), reranked, k, clock)
        finally:
            _request.deadline = None

    def _search(self, query: str, top: int, depth: int, k: int, clock: _Clock) -> SearchResult:
        """The search of :meth:`search`: ``top <= depth <= k`` here (``depth``: documents re-ranked)."""
        topics = make_topics([(_QID, query)])

        with self._guard(clock, "first_stage"), clock.timings.measure("first_stage"):
            run = self.retrieve(topics, k)
        require_columns(run, (QID, DOCNO, SCORE, RANK), "first stage run")
        run = run[run[RANK] <= k].reset_index(drop=True)
        if run.empty:
            return SearchResult(query, top, depth, k, (), clock.milliseconds(), passages=0)
        if QUERY not in run.columns:
            run = run.assign(**{QUERY: query})

        result = self.pipeline.run(run, depth=depth, timings=clock.timings, guard=partial(self._guard, clock))
        scored = result.passages
        require_columns(scored, (QID, DOCNO, PID, TEXT, SCORE), "scorer output")
        with clock.timings.measure("aggregation"):
            best = result.run.head(top)  # the re-ranked documents come first, and top <= depth
            terms = self._terms(scored, set(best[DOCNO].astype(str)))
            candidates = self._candidates(result.documents, scored, best, terms)
        timings = clock.milliseconds()
        logger.debug("query %r: %d candidates, timings %s", query, len(candidates), timings)
        return SearchResult(query, top, depth, k, candidates, timings, passages=len(scored))

    @property
    def has_attention(self) -> bool:
        """Whether the scorer has an attention view (:meth:`attention` works)."""
        from evirank.score.attention import find_attention_hook

        return find_attention_hook(self.scorer) is not None

    def attention(
        self,
        query: str,
        docno: str,
        pid: int,
        layers: Sequence[int] | None = None,
        *,
        level: str = "word",
        deadline: float | None = None,
    ) -> PassageAttention:
        """The attention view of passage ``pid`` of ``docno`` for ``query``, computed now by the
        scorer's ``attention`` hook (one model call, under the scorer's lock).

        The passage is cut from the stored document by the service's segmenter, as searches cut it.

        Raises:
            NoAttentionError: the scorer has no attention view.
            DocumentNotFound / PassageNotFound: no such document, or no such passage in it.
            UsageError: a layer the model does not have.
            SearchTimeout: the deadline passed while waiting for the segmenter or the model.
        """
        from evirank.score.attention import attention_hook

        if not query.strip():
            raise ValueError("the query is empty")
        if level not in ("word", "token"):
            raise ValueError(f"level must be word or token, not {level!r}")
        began = time.perf_counter()
        hook = attention_hook(self.scorer)
        doc = self.document(docno)
        clock = _Clock(deadline)
        run = make_run([(_QID, doc.docno, 0.0)]).assign(**{QUERY: query, TITLE: doc.title, TEXT: doc.text})
        with self._guard(clock, "segmentation"):
            passages = self.segmenter(run)
        found = passages[passages[PID].astype(int) == int(pid)]
        if found.empty:
            raise PassageNotFound(
                f"document {docno!r} has no passage {pid} ({len(passages)} passages, pids "
                f"{', '.join(str(p) for p in sorted(passages[PID].astype(int).tolist())[:20])})"
            )
        text = str(found[TEXT].iloc[0])
        with self._guard(clock, "scoring"):
            view = hook(query, text, layers)
        if level == "word":
            view = view.by_word()
        spans = document_spans(text, doc.title, doc.text, list(view.passage.spans), after=0)
        took = (time.perf_counter() - began) * 1000.0
        return PassageAttention(query, doc.docno, int(pid), text, view, tuple(spans), round(took, 3))

    def warm_up(self, query: str = "evidence") -> float:
        """Open the index and load the model now, not on the first request; return the seconds it took.

        Runs one retrieval and scores one made-up passage (a retrieval may find nothing to score).
        """
        began = time.perf_counter()
        with self._locks["retrieve"]:
            self.retrieve(make_topics([(_QID, query)]), 1)
        passage = pd.DataFrame(
            {
                QID: [_QID],
                DOCNO: ["warm-up"],
                PID: [0],
                TEXT: [query],
                QUERY: [query],
                FIRST_STAGE_SCORE: [0.0],
            }
        )
        with self._locks["score"]:
            self.scorer(passage)
        return time.perf_counter() - began

    def close(self) -> None:
        """Release what the pieces hold (a piece with a ``close()`` method is closed; the service
        calls this on shutdown)."""
        for piece in (self.retrieve, self.segmenter, self.scorer, self.aggregator):
            close = getattr(type(piece), "close", None)
            if callable(close):
                close(piece)

    def document(self, docno: str) -> Document:
        """The stored document ``docno``.

        Raises:
            DocumentNotFound: when the index has none (or no lookup was configured).
        """
        if self.documents is None:
            raise DocumentNotFound(docno)
        try:
            with self._locks["documents"]:
                doc = self.documents(docno)
        except KeyError:
            doc = None
        if doc is None:
            raise DocumentNotFound(docno)
        return doc

    # ------------------------------------------------------------------------------------------
    @contextmanager
    def _guard(self, clock: _Clock, stage: str) -> Iterator[None]:
        """Before a stage: check the deadline and take the stage's piece's lock (time waited: ``wait``)."""
        clock.check(stage)
        lock = self._locks.get(_LOCK_OF.get(stage, ""), _NullLock())
        waited = time.perf_counter()
        left = clock.remaining()
        acquired = lock.acquire(timeout=max(left, 0.0)) if left is not None else lock.acquire()
        clock.timings.add("wait", time.perf_counter() - waited)
        if not acquired:
            raise SearchTimeout(f"the search ran out of time waiting for the {stage} stage (server busy)")
        try:
            clock.check(stage)
            yield
        finally:
            lock.release()

    def with_text(self, run: pd.DataFrame) -> pd.DataFrame:
        """The run with title and text columns (looked up in ``documents`` when the first stage gave none)."""
        run = run.copy()
        if TEXT not in run.columns or TITLE not in run.columns:
            docs = [self._maybe_document(d) for d in run[DOCNO]]
            if TEXT not in run.columns:
                run[TEXT] = [d.text if d else "" for d in docs]
            if TITLE not in run.columns:
                run[TITLE] = [d.title if d else "" for d in docs]
        run[TEXT] = run[TEXT].fillna("").astype(str)
        run[TITLE] = run[TITLE].fillna("").astype(str)
        return run

    def _maybe_document(self, docno: str) -> Document | None:
        try:
            return self.document(docno)
        except DocumentNotFound:
            return None

    def _terms(self, scored: pd.DataFrame, docnos: set[str]) -> dict[str, tuple[ScoreTerm, ...]]:
        """The terms of each shown document's score, as its aggregator computes them (by docno)."""
        terms_of = getattr(self.aggregator, "terms", None)
        if terms_of is None:
            return {}
        table = terms_of(scored)
        table = table[table[DOCNO].astype(str).isin(docnos)]
        out: dict[str, list[ScoreTerm]] = {}
        for docno, name, weight, value, part in zip(
            table[DOCNO].astype(str),
            table["term"],
            table["weight"],
            table["value"],
            table["contribution"],
            strict=True,
        ):
            out.setdefault(docno, []).append(ScoreTerm(str(name), float(weight), float(value), float(part)))
        return {docno: tuple(items) for docno, items in out.items()}

    def _candidates(
        self,
        run: pd.DataFrame,
        scored: pd.DataFrame,
        ranked: pd.DataFrame,
        terms: Mapping[str, tuple[ScoreTerm, ...]] | None = None,
    ) -> tuple[Candidate, ...]:
        # Plain lists and one sort, not per-row pandas lookups: this runs on every request.
        position = {docno: i for i, docno in enumerate(run[DOCNO].astype(str).tolist())}
        texts, titles = run[TEXT].astype(str).tolist(), run[TITLE].astype(str).tolist()
        urls = [u if isinstance(u, str) and u else None for u in run[URL].tolist()] if URL in run else []
        first_scores, first_ranks = run[SCORE].tolist(), run[RANK].tolist()
        p_docnos = scored[DOCNO].astype(str).tolist()
        p_texts, p_scores, p_pids = (
            scored[TEXT].astype(str).tolist(),
            scored[SCORE].tolist(),
            scored[PID].tolist(),
        )
        wanted = set(ranked[DOCNO].astype(str).tolist())
        by_doc: dict[str, list[int]] = {}
        for i in sorted(  # best first: score descending, then pid
            (i for i, d in enumerate(p_docnos) if d in wanted), key=lambda i: (-p_scores[i], p_pids[i])
        ):
            picked = by_doc.setdefault(p_docnos[i], [])
            if len(picked) < self.evidence:
                picked.append(i)
        out = []
        for docno, rank, score in zip(
            ranked[DOCNO].astype(str).tolist(), ranked[RANK].tolist(), ranked[SCORE].tolist(), strict=True
        ):
            hit = position[docno]
            text, title = texts[hit], titles[hit]
            evidence = []
            for i in by_doc.get(docno, []):
                where, start, end = passage_span(p_texts[i], title, text)
                in_text = where == "text"
                evidence.append(
                    Evidence(
                        p_texts[i],
                        float(p_scores[i]),
                        int(p_pids[i]),
                        start if in_text else None,
                        end if in_text else None,
                    )
                )
            out.append(
                Candidate(
                    docno=docno,
                    rank=int(rank),
                    score=float(score),
                    first_stage_score=float(first_scores[hit]),
                    first_stage_rank=int(first_ranks[hit]),
                    title=title,
                    text=text,
                    evidence=tuple(evidence),
                    terms=(terms or {}).get(docno, ()),
                    url=urls[hit] if urls else None,
                )
            )
        return tuple(out)


class _LookupText(Stage):
    """The service's text fetch: a first stage that gave no text gets it from the document lookup."""

    thread_safe = True

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher

    def __repr__(self) -> str:
        return "LookupText()"

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return self.searcher.with_text(frame)


class _Callable(Stage):
    """A frame -> frame callable (a test's fake piece) as a Stage; ``thread_safe`` carries over."""

    def __init__(self, piece: Piece) -> None:
        self.piece = piece
        self.thread_safe = bool(getattr(piece, "thread_safe", False))

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return self.piece(frame)


def _as_stage(piece: Piece) -> Stage:
    return piece if isinstance(piece, Stage) else _Callable(piece)


def stage_retriever(make_stage: Callable[[int], Piece]) -> Retrieve:
    """Adapt a first-stage factory ``k -> Stage`` to the ``(topics, k) -> Run`` shape.

    Example:
        >>> from evirank.frames import make_run
        >>> retrieve = stage_retriever(lambda k: (lambda topics: make_run([("q", "d1", 1.0)])))
        >>> retrieve(make_topics([("q", "cats")]), 5)["docno"].tolist()
        ['d1']
    """

    def retrieve(topics: pd.DataFrame, k: int) -> pd.DataFrame:
        return make_stage(k)(topics)

    return retrieve


class _LockLike(Protocol):
    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc: Any) -> Any: ...


class _NullLock:
    """A lock that never blocks, for pieces that declare ``thread_safe = True``."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return True

    def release(self) -> None:
        return None

    def __enter__(self) -> bool:
        return True

    def __exit__(self, *exc: Any) -> None:
        return None
