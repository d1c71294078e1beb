"""Rerank documents a caller sends: named models, requests batched together, limits, deadlines.

This is what ``/v1/rerank``, ``/v2/rerank`` and ``/rerank`` run (their request and response shapes
are in :mod:`evirank.serve.rerank_api`). A request becomes a :class:`RerankJob`: one query and its
documents, each document ranked whole by the evidence its passages hold (the same
:class:`~evirank.Ranker` as ``evirank rank``: the segmenter, the family, the aggregator and the score
store from the one spec). The jobs of concurrent requests for one model go through a
:class:`~evirank.serve.batcher.MicroBatcher`: the batch's documents are segmented together and their
passages share the model's token-budget batches, so ten requests of twenty passages cost about what
one request of two hundred does.

Limits are checked before any work: documents per request, characters per document, and tokens per
request (estimated as the words and punctuation runs between spaces, which no tokenizer makes fewer
of); each is answered 413 naming the limit. At most ``max_pending`` jobs wait or run; more are
refused at once (503 with ``Retry-After``). A job that does not finish within ``timeout_s`` is
answered 503, and a job whose client has gone is dropped before its batch starts.

Example:
    >>> from evirank.serve.testing import toy_ranker
    >>> service = RerankService({"toy": toy_ranker()})
    >>> job = RerankJob.of("why do cats purr", ["Stocks fell.", "Dogs bark. Cats purr when content."])
    >>> outcome = service.rerank_blocking(None, job)
    >>> [(hit.index, hit.evidence[0].text) for hit in outcome.hits]
    [(1, 'Cats purr when content.'), (0, 'Stocks fell.')]
    >>> service.close()
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from evirank.config import SETTINGS
from evirank.errors import EvirankError
from evirank.score.relevance import to_relevance
from evirank.segment.spans import WORD
from evirank.serve.batcher import MicroBatcher
from evirank.serve.config import BadRequest

logger = logging.getLogger(__name__)


class LimitExceeded(BadRequest):
    """A request over one of the service's limits (answered 413; the message names the limit)."""


class UnknownModel(BadRequest):
    """A request naming a model the service does not serve (400; the message lists the served names)."""


class RerankBusy(EvirankError, RuntimeError):
    """Too many requests are waiting (503); ``retry_after`` says when to try again, in seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RerankTimeout(RerankBusy):
    """A request took longer than the service's deadline (503 with ``Retry-After``)."""


class ClientGone(EvirankError, RuntimeError):
    """The client disconnected before its request was answered; its queued work was dropped."""


@dataclass(frozen=True, slots=True)
class RerankLimits:
    """What one rerank request may hold, and how long and how many wait.

    Args:
        max_documents: documents per request.
        max_document_chars: characters per document (all its ranked fields together).
        max_request_tokens: tokens per request, the query counted once per document (estimated as
            runs of characters between spaces: never fewer than a tokenizer's pieces).
        timeout_s: a request not answered in this time gets 503.
        max_pending: requests waiting or running at once; more get 503 at once.
        max_batch: the most requests one model call takes together.
        batch_tokens: the most (estimated) tokens of requests batched together.

    Example:
        >>> RerankLimits(max_documents=2).check_size(3, [10, 10, 10], 5)
        Traceback (most recent call last):
        ...
        evirank.serve.rerank.LimitExceeded: 3 documents: at most 2 per request (the server's --max-documents)
    """

    max_documents: int = SETTINGS.default("max_documents")
    max_document_chars: int = SETTINGS.default("max_document_chars")
    max_request_tokens: int = SETTINGS.default("max_request_tokens")
    timeout_s: float = SETTINGS.default("timeout")
    max_pending: int = SETTINGS.default("max_pending")
    max_batch: int = 64
    batch_tokens: int = 65_536

    def __post_init__(self) -> None:
        for name in ("max_documents", "max_document_chars", "max_request_tokens", "max_pending"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, found {getattr(self, name)!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, found {self.timeout_s!r}")

    def check_size(self, documents: int, chars: Sequence[int], tokens: int) -> None:
        """Refuse a request over a limit (documents, characters of its longest document, tokens).

        Raises:
            LimitExceeded: naming the limit, its flag and what was found.
        """
        if documents > self.max_documents:
            raise LimitExceeded(
                f"{documents} documents: at most {self.max_documents} per request "
                "(the server's --max-documents)"
            )
        longest = max(chars, default=0)
        if longest > self.max_document_chars:
            position = list(chars).index(longest)
            raise LimitExceeded(
                f"document {position} has {longest} characters: at most {self.max_document_chars} per "
                "document (the server's --max-document-chars)"
            )
        if tokens > self.max_request_tokens:
            raise LimitExceeded(
                f"the request holds about {tokens} tokens (the query once per document, and the "
                f"documents): at most {self.max_request_tokens} (the server's --max-request-tokens)"
            )


@dataclass(frozen=True, slots=True)
class CallerDocument:
    """A document as ranked, and where its ranked text came from in what the caller sent.

    Attributes:
        text: the text ranked (one field, or the ``rank_fields`` joined by newlines).
        title: the title ranked with it ("" when none).
        parts: ``(field, start, end)`` of each caller field inside ``text``, so a passage's offsets
            can be given in the caller's own field.
        title_field: the caller's field the title came from (None: no title).
        sent: the document as the caller sent it (a string or an object), returned on request.
    """

    text: str
    title: str = ""
    parts: tuple[tuple[str, int, int], ...] = ()
    title_field: str | None = None
    sent: Any = None

    @classmethod
    def of(cls, item: str | Mapping[str, Any], rank_fields: Sequence[str] | None = None) -> CallerDocument:
        """A document from a string, or from an object whose ``rank_fields`` are ranked (default:
        ``text``, with ``title`` as its title when present).

        Raises:
            BadRequest: an object without a ranked field, or with one that is not a string.

        Example:
            >>> doc = CallerDocument.of({"title": "Cats", "body": "They purr."}, ["title", "body"])
            >>> doc.title, doc.text, doc.parts
            ('Cats', 'They purr.', (('body', 0, 10),))
        """
        if isinstance(item, str):
            return cls(item, "", (("text", 0, len(item)),), None, item)
        fields = list(rank_fields) if rank_fields else ["text", *(["title"] if "title" in item else [])]
        title_field = "title" if "title" in fields else None
        texts = []
        for name in fields:
            if name not in item:
                raise BadRequest(f"it has no field {name!r} (rank_fields: {', '.join(fields)})")
            value = item[name]
            if not isinstance(value, str):
                raise BadRequest(f"its field {name!r} must be a string, found {type(value).__name__}")
            if name != title_field:
                texts.append((name, value))
        parts, pieces, offset = [], [], 0
        for name, value in texts:
            parts.append((name, offset, offset + len(value)))
            pieces.append(value)
            offset += len(value) + 1
        title = item[title_field] if title_field else ""
        return cls("\n".join(pieces), title, tuple(parts), title_field, item)

    def locate(
        self, where: str | None, start: int | None, end: int | None
    ) -> tuple[str | None, int | None, int | None]:
        """A passage's ``(field, start, end)`` in the ranked text or title, as the caller's field and
        offsets in it (``(None, None, None)`` when it spans two fields or was not located)."""
        if where == "title" and self.title_field is not None:
            return self.title_field, start, end
        if where != "text" or start is None or end is None:
            return None, None, None
        for name, begin, stop in self.parts:
            if begin <= start and end <= stop:
                return name, start - begin, end - begin
        return None, None, None


@dataclass(frozen=True, slots=True)
class RerankJob:
    """One request's work: a query, its documents, and per-request reading limits.

    Attributes:
        query: the query.
        documents: the documents in the caller's order.
        max_passages: read at most this many passages of each document (None: the model's limit).
        max_tokens: read each document up to this many tokens of the model's tokenizer (None: whole).
    """

    query: str
    documents: tuple[CallerDocument, ...]
    max_passages: int | None = None
    max_tokens: int | None = None

    @classmethod
    def of(cls, query: str, documents: Sequence[str | Mapping[str, Any]], **limits: Any) -> RerankJob:
        """A job from a query and strings or objects (see :meth:`CallerDocument.of`)."""
        return cls(query, tuple(CallerDocument.of(d) for d in documents), **limits)

    @property
    def tokens(self) -> int:
        """The request's size in estimated tokens: the query once per document, plus the documents."""
        query = _estimate_tokens(self.query)
        return sum(query + _estimate_tokens(d.title) + _estimate_tokens(d.text) for d in self.documents)


@dataclass(frozen=True, slots=True)
class Passage:
    """An evidence passage of a ranked document, located in the caller's own field."""

    text: str
    score: float
    field: str | None
    start: int | None
    end: int | None


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked document of a request.

    Attributes:
        index: its position in the request's documents.
        score: evirank's score (the family's scale, aggregated).
        relevance: the score mapped into [0, 1] (:func:`evirank.score.relevance.to_relevance`).
        evidence: its best passages, best first, with offsets in the caller's field.
        terms: the score's terms (name, weight, value, contribution).
        passages: passages the model read.
    """

    index: int
    score: float
    relevance: float
    evidence: tuple[Passage, ...]
    terms: tuple[dict[str, Any], ...]
    passages: int


@dataclass(frozen=True, slots=True)
class RerankOutcome:
    """What a request gets back: the served model's name and every document ranked, best first."""

    model: str
    hits: tuple[Hit, ...]
    tokens: int
    milliseconds: float = 0.0

    @property
    def passages(self) -> int:
        return sum(hit.passages for hit in self.hits)


@dataclass
class _Stats:
    seconds_per_job: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, jobs: int) -> None:
        per_job = seconds / max(1, jobs)
        with self.lock:
            self.seconds_per_job = (
                per_job if self.seconds_per_job == 0 else 0.8 * self.seconds_per_job + 0.2 * per_job
            )


class RerankFront:
    """What every rerank service shares: the served names, the limits, admission and the deadline.

    A subclass says how a job reaches a model (:meth:`_start`): :class:`RerankService` in this process,
    :class:`evirank.serve.ray_serve.RayRerank` on Ray Serve replicas.

    Args:
        names: the served models' names (the first is the default).
        limits: what a request may hold and how long it may wait.
    """

    def __init__(self, names: Sequence[str], limits: RerankLimits | None = None) -> None:
        if not names:
            raise ValueError("serve at least one model")
        self._names = list(names)
        self.limits = limits or RerankLimits()
        #: called after each model batch with (requests, passages read, seconds), e.g. for metrics
        self.on_batch: Callable[[int, int, float], None] | None = None
        self._stats = _Stats()
        self._pending = 0
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        """The served models' names, the default first."""
        return list(self._names)

    @property
    def pending(self) -> int:
        """Requests admitted and not yet answered (waiting or running)."""
        return self._pending

    def resolve(self, requested: str | None) -> str:
        """The served model a request's ``model`` names.

        With one model served, any name (or none) picks it, as single-model rerank servers answer
        whatever name a client must send; with several, the name must be one of them.

        Raises:
            UnknownModel: naming the served models.
        """
        if len(self._names) == 1 or requested is None or not str(requested).strip():
            return self._names[0]
        if requested in self._names:
            return str(requested)
        raise UnknownModel(f"unknown model {requested!r}; this server serves {', '.join(self._names)}")

    def check(self, job: RerankJob) -> None:
        """Refuse a job over the limits (413) before any work."""
        self.limits.check_size(
            len(job.documents), [len(d.text) + len(d.title) for d in job.documents], job.tokens
        )

    def retry_after(self) -> int:
        """Seconds a refused client should wait: the queue ahead at the recent time per request."""
        return max(1, math.ceil(self._pending * self._stats.seconds_per_job))

    def _admit(self) -> None:
        with self._lock:
            if self._pending >= self.limits.max_pending:
                raise RerankBusy(
                    f"the server is busy ({self.limits.max_pending} requests waiting or running, the "
                    "server's --max-pending); retry in a moment",
                    self.retry_after(),
                )
            self._pending += 1

    def _release(self, _: Any = None) -> None:
        with self._lock:
            self._pending -= 1

    def _start(self, name: str, job: RerankJob) -> asyncio.Future[RerankOutcome]:
        """Start an admitted job in the running event loop; call :meth:`_release` when its work ends."""
        raise NotImplementedError

    async def rerank(
        self,
        model: str | None,
        job: RerankJob,
        disconnected: Callable[[], Awaitable[bool]] | None = None,
        poll_s: float = 0.25,
    ) -> RerankOutcome:
        """Rank ``job``'s documents with the model ``model`` names.

        Args:
            disconnected: checked while waiting; when it says the client is gone, the job is
                dropped (if its batch has not started) and :class:`ClientGone` is raised.

        Raises:
            UnknownModel: a model not served. LimitExceeded: a job over a limit. RerankBusy: the
            queue is full. RerankTimeout: no answer within the limits' ``timeout_s``.
        """
        name = self.resolve(model)
        self.check(job)
        self._admit()
        try:
            waiting = self._start(name, job)
        except BaseException:
            self._release()
            raise
        deadline = time.monotonic() + self.limits.timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                waiting.cancel()
                raise RerankTimeout(self._timeout_message(), self.retry_after())
            done, _ = await asyncio.wait({waiting}, timeout=min(poll_s, left))
            if done:
                return waiting.result()
            if disconnected is not None and await disconnected():
                waiting.cancel()
                raise ClientGone("the client disconnected; its request was dropped")

    def _timeout_message(self) -> str:
        return (
            f"the request took longer than {self.limits.timeout_s:g} s (the server's --timeout); send "
            "fewer or shorter documents, or retry when the server is less busy"
        )

    def describe(self) -> dict[str, dict[str, Any]]:
        """What each served model is (for ``/health``)."""
        return {name: {} for name in self._names}

    def close(self) -> None:
        """Stop taking work."""


class RerankService(RerankFront):
    """Named rankers in this process; each model's requests batched together.

    Args:
        rankers: the served models by name (:class:`~evirank.Ranker` objects; the first one is the
            default).
        limits: what a request may hold and how long it may wait.
        on_batch: called after each model batch with (requests, passages read, seconds), e.g. to
            update metrics.

    Example:
        See the module docstring.
    """

    def __init__(
        self,
        rankers: Mapping[str, Any],
        limits: RerankLimits | None = None,
        on_batch: Callable[[int, int, float], None] | None = None,
    ) -> None:
        super().__init__(list(rankers), limits)
        self.rankers = dict(rankers)
        self.on_batch = on_batch
        self._batchers: dict[str, MicroBatcher[RerankJob, RerankOutcome]] = {
            name: MicroBatcher(
                self._runner(name),
                max_batch=self.limits.max_batch,
                max_wait_s=0.002,
                name=f"evirank-rerank-{name}",
                size=lambda job: job.tokens,
                max_size=self.limits.batch_tokens,
            )
            for name in self.rankers
        }

    def describe(self) -> dict[str, dict[str, Any]]:
        """What each served model is: its family, model, segmenter, aggregator and score scale."""
        described = {}
        for name, ranker in self.rankers.items():
            spec = getattr(ranker, "spec_", None)
            scorer = getattr(ranker, "scorer", None)
            described[name] = {
                "scorer": getattr(scorer, "family", type(scorer).__name__),
                "model": str(getattr(scorer, "model", None) or "default"),
                "segment": str(getattr(ranker, "segment", None) or getattr(spec, "default_segment", None)),
                "aggregate": str(getattr(getattr(spec, "aggregate", None), "spec", None)),
                "scale": score_scale(ranker),
            }
        return described

    def submit(self, model: str | None, job: RerankJob) -> tuple[str, Future[RerankOutcome]]:
        """Check and admit ``job`` for the model ``model`` names; return its name and the job's future.

        Raises:
            UnknownModel: a model not served. LimitExceeded: a job over a limit. RerankBusy: the
            queue is full.
        """
        name = self.resolve(model)
        self.check(job)
        self._admit()
        try:
            return name, self._enqueue(name, job)
        except BaseException:
            self._release()
            raise

    def _enqueue(self, name: str, job: RerankJob) -> Future[RerankOutcome]:
        (future,) = self._batchers[name].enqueue([job])
        future.add_done_callback(self._release)  # when the batch ends, or the job is dropped unstarted
        return future

    def _start(self, name: str, job: RerankJob) -> asyncio.Future[RerankOutcome]:
        # cancelling the asyncio future cancels the queued job; a running batch finishes
        return asyncio.wrap_future(self._enqueue(name, job))

    def rerank_blocking(self, model: str | None, job: RerankJob) -> RerankOutcome:
        """:meth:`rerank` for callers outside an event loop."""
        _, future = self.submit(model, job)
        try:
            return future.result(timeout=self.limits.timeout_s)
        except TimeoutError:
            future.cancel()
            raise RerankTimeout(self._timeout_message(), self.retry_after()) from None

    def warm_up(self) -> float:
        """Load every model (one tiny request each); return the seconds it took."""
        started = time.perf_counter()
        for name in self.rankers:
            self.rerank_blocking(name, RerankJob.of("warm up", ["A first sentence. A second one."]))
        return time.perf_counter() - started

    def close(self) -> None:
        """Stop the batchers (queued jobs fail with BatcherClosed)."""
        for batcher in self._batchers.values():
            batcher.close()

    # -- the batch ------------------------------------------------------------------------------
    def _runner(self, name: str) -> Callable[[list[RerankJob]], list[RerankOutcome]]:
        def run(jobs: list[RerankJob]) -> list[RerankOutcome]:
            started = time.perf_counter()
            outcomes = run_jobs(name, self.rankers[name], jobs)
            seconds = time.perf_counter() - started
            self._stats.add(seconds, len(jobs))
            if self.on_batch is not None:
                self.on_batch(len(jobs), sum(o.passages for o in outcomes), seconds)
            return [RerankOutcome(o.model, o.hits, o.tokens, round(seconds * 1000.0, 3)) for o in outcomes]

        return run


def run_jobs(name: str, ranker: Any, jobs: Sequence[RerankJob]) -> list[RerankOutcome]:
    """Rank several jobs with one ranker: jobs with the same reading limits share one model pass.

    Example:
        >>> from evirank.serve.testing import toy_ranker
        >>> jobs = [RerankJob.of("purr", ["x", "cats purr"]), RerankJob.of("x", ["x", "cats purr"])]
        >>> [outcome.hits[0].index for outcome in run_jobs("toy", toy_ranker(), jobs)]
        [1, 0]
    """
    outcomes: dict[int, RerankOutcome] = {}
    groups: dict[tuple[int | None, int | None], list[int]] = {}
    for position, job in enumerate(jobs):
        groups.setdefault((job.max_passages, job.max_tokens), []).append(position)
    for (max_passages, max_tokens), positions in groups.items():
        group = [jobs[p] for p in positions]
        limit = max_passages
        if limit is not None and ranker.max_passages:
            limit = min(limit, int(ranker.max_passages))
        documents = [
            [_as_ranked(d, ranker, max_tokens, i) for i, d in enumerate(job.documents)] for job in group
        ]
        ranked = ranker.rank_many([job.query for job in group], documents, max_passages=limit)
        for position, job, results in zip(positions, group, ranked, strict=True):
            outcomes[position] = RerankOutcome(name, _hits(ranker, job, results), job.tokens)
    return [outcomes[p] for p in range(len(jobs))]


def _as_ranked(doc: CallerDocument, ranker: Any, max_tokens: int | None, position: int) -> dict[str, str]:
    text = doc.text if max_tokens is None else first_tokens(doc.text, ranker, max_tokens)
    return {"id": str(position), "title": doc.title, "text": text}


def first_tokens(text: str, ranker: Any, tokens: int) -> str:
    """``text`` up to the end of its first ``tokens`` tokens of the ranker's tokenizer (words when it
    has none). A text of at most ``tokens`` characters is returned whole: no piece is shorter than
    a character.

    Example:
        >>> first_tokens("one two three four", object(), 2)
        'one two'
    """
    if len(text) <= tokens:
        return text
    from evirank.segment.budget import passage_budget

    budget = passage_budget(getattr(ranker, "scorer", None))
    tokenizer = budget[0] if budget else None
    if tokenizer is not None and getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, truncation=True, max_length=tokens
        )
        offsets = encoded["offset_mapping"]
        return text[: offsets[-1][1]] if offsets else ""
    words = list(WORD.finditer(text))
    return text if len(words) <= tokens else text[: words[tokens - 1].end()]


def _hits(ranker: Any, job: RerankJob, results: Sequence[Any]) -> tuple[Hit, ...]:
    """The ranked documents of one job, with their relevance in [0, 1] and caller-side offsets."""
    scale = score_scale(ranker)
    positions = 1
    if scale == "maxsim":
        counter = getattr(getattr(ranker, "scorer", None), "query_positions", None)
        positions = int(counter(job.query)) if counter is not None else 1
    weight = max(
        (sum(t.weight for t in doc.terms if t.name != "first stage") for doc in results), default=1.0
    )
    weight = weight if weight > 0 else 1.0
    hits = []
    for doc in results:
        caller = job.documents[int(doc.id)]
        evidence = tuple(
            Passage(e.text, e.score, *caller.locate(e.field, e.start, e.end)) for e in doc.evidence
        )
        hits.append(
            Hit(
                index=int(doc.id),
                score=doc.score,
                relevance=to_relevance(doc.score / weight, scale, positions),
                evidence=evidence,
                terms=tuple(vars(t) for t in doc.terms),
                passages=doc.passages,
            )
        )
    return tuple(hits)


def score_scale(ranker: Any) -> str:
    """The scale of a ranker's scores (its family's; ``log-odds`` when its scorers' families differ
    or it has no registered family).

    Example:
        >>> from evirank.serve.testing import toy_ranker
        >>> score_scale(toy_ranker())
        'log-odds'
    """
    from evirank.score.family import family_names, get_family

    scorer = getattr(ranker, "scorer", None)
    families = [getattr(s, "family", None) for s in getattr(scorer, "scorers", (scorer,))]
    known = set(family_names())
    scales = {get_family(f).scale for f in families if isinstance(f, str) and f in known}
    return scales.pop() if len(scales) == 1 and None not in families else "log-odds"


def _estimate_tokens(text: str) -> int:
    return len(WORD.findall(text)) if text else 0
