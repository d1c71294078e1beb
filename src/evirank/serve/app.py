"""The FastAPI application: JSON API, HTML page, health, OpenAPI docs.

Searches run on a small pool of worker threads owned by the app (:class:`SearchRunner`), not on the
request threads: a request awaits its search with a timeout, so a slow model call is answered with a
clean 503 after ``timeout_s`` while the event loop stays free, and a search still queued when its
request gives up is dropped. Admission is bounded: at most ``max_pending`` searches are in flight, and
a search that would only queue past its timeout (the searches ahead of it, at the recent time per
search, shared by the workers) is refused at once; refusals are 503 with a ``Retry-After`` of the
expected wait, never a connection held until the timeout. The search endpoints are therefore
``async def`` awaiting that pool; the document lookup and health are plain ``def`` (run in FastAPI's
threadpool, as blocking calls should be).

Example:
    >>> from evirank.serve.testing import toy_searcher
    >>> from fastapi.testclient import TestClient
    >>> client = TestClient(create_app(toy_searcher()))
    >>> client.get("/v1/search", params={"q": "purr"}).json()["candidates"][0]["evidence"][0]["text"]
    'Cats purr when they are content.'
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from evirank.config import SETTINGS
from evirank.errors import UsageError
from evirank.extras import require
from evirank.serve.config import BadRequest, ServeConfig
from evirank.serve.metrics import ServiceMetrics
from evirank.serve.rerank import RerankService
from evirank.serve.searcher import (
    DocumentNotFound,
    PassageAttention,
    PassageNotFound,
    Searcher,
    SearchResult,
    SearchTimeout,
)
from evirank.version import __version__

if TYPE_CHECKING:
    from fastapi import FastAPI

logger = logging.getLogger(__name__)


class ServerBusy(SearchTimeout):
    """More searches are admitted than the service accepts at once (503, retry shortly)."""


class SearchRunner:
    """Run searches on a bounded pool of threads, with admission control and a deadline per search.

    Why not uvicorn's ``limit_concurrency``: it counts open connections (idle keep-alive ones too) and
    running tasks of every kind, and past its limit answers every request, health checks and the page
    included, a bare 503 without ``Retry-After``. Admission here counts searches only, refuses at once
    a search that could only time out in the queue, and tells the client when to retry.

    Args:
        searcher: the shared :class:`Searcher`.
        config: workers, max_pending and timeout_s.

    Example:
        >>> from evirank.serve.testing import toy_searcher
        >>> runner = SearchRunner(toy_searcher(), ServeConfig())
        >>> runner.run("purr", 1, 2, 2).candidates[0].docno
        'd1'
        >>> runner.close()
    """

    def __init__(self, searcher: Searcher, config: ServeConfig) -> None:
        self.searcher = searcher
        self.config = config
        self._pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="evirank-search")
        self._slots = threading.BoundedSemaphore(config.max_pending)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._service_s = 0.0  # moving average of a search's own time (queueing excluded)

    @property
    def in_flight(self) -> int:
        """Searches admitted and not yet finished (running, queued, or abandoned but still running)."""
        return self._in_flight

    def expected_wait(self) -> float:
        """Seconds a search admitted now would likely queue (the searches ahead, shared by the workers)."""
        ahead = self._in_flight - self.config.workers + 1
        return max(0.0, ahead / self.config.workers * self._service_s)

    def retry_after(self) -> int:
        """Seconds to wait before retrying (a 503's ``Retry-After``): the expected queue, at least 1."""
        return max(1, math.ceil(self.expected_wait()))

    def submit(self, query: str, top: int, depth: int, k: int) -> Future[SearchResult]:
        """Admit one search (``top`` results of ``depth`` re-ranked of ``k`` retrieved, as
        :meth:`Searcher.search`) and start it, or raise :class:`ServerBusy` at once.

        Refused: when ``max_pending`` searches are in flight, or when the searches ahead would keep it
        queued past ``timeout_s`` (it could only time out): answered now, not after the timeout.
        """
        wait = self.expected_wait()
        if wait >= self.config.timeout_s:
            raise ServerBusy(f"the server is busy (about {wait:.0f} s of searches queued); retry in a moment")
        if not self._slots.acquire(blocking=False):
            raise ServerBusy(
                f"the server is busy ({self.config.max_pending} searches in flight); retry in a moment"
            )
        with self._lock:
            self._in_flight += 1
        deadline = time.monotonic() + self.config.timeout_s
        try:
            future = self._pool.submit(self._search, time.perf_counter(), query, top, depth, k, deadline)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        return future

    def _search(
        self, submitted: float, query: str, top: int, depth: int, k: int, deadline: float
    ) -> SearchResult:
        """Run one search on a pool thread; time spent queued for the pool counts as ``wait``."""
        began = time.perf_counter()
        queued_ms = (began - submitted) * 1000.0
        result = self.searcher.search(query, top, depth, k=k, deadline=deadline)
        took = time.perf_counter() - began
        with self._lock:
            self._service_s = took if self._service_s == 0.0 else 0.8 * self._service_s + 0.2 * took
        timings = dict(result.timings)
        timings["wait"] = round(timings.get("wait", 0.0) + queued_ms, 3)
        timings["total"] = round(timings.get("total", 0.0) + queued_ms, 3)
        return replace(result, timings=timings)

    def _release(self, _: Future[SearchResult] | None) -> None:
        with self._lock:
            self._in_flight -= 1
        self._slots.release()

    def timeout_message(self) -> str:
        return (
            f"the search took longer than {self.config.timeout_s:g} s (the server's --timeout); "
            "try a smaller depth, or retry when the server is less busy"
        )

    def run(self, query: str, top: int, depth: int, k: int) -> SearchResult:
        """Blocking form of :meth:`submit` + wait, for callers outside the event loop."""
        future = self.submit(query, top, depth, k)
        try:
            return future.result(timeout=self.config.timeout_s)
        except TimeoutError as exc:
            future.cancel()
            raise SearchTimeout(self.timeout_message()) from exc

    async def run_async(self, query: str, top: int, depth: int, k: int) -> SearchResult:
        """Await one search; raise :class:`SearchTimeout` after ``timeout_s`` (a queued search is dropped)."""
        future = self.submit(query, top, depth, k)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout=self.config.timeout_s)
        except TimeoutError as exc:
            future.cancel()  # drops it if still queued; a running model call finishes in the background
            raise SearchTimeout(self.timeout_message()) from exc

    def close(self) -> None:
        """Stop accepting work; drop queued searches."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def create_app(
    searcher: Searcher | None = None,
    config: ServeConfig | None = None,
    *,
    rerank: RerankService | None = None,
    api_key: str | None = None,
    cors_origins: Sequence[str] = (),
) -> FastAPI:
    """Build the web application: search over ``searcher``'s index, ``/rerank`` over ``rerank``'s
    models, or both.

    Args:
        searcher: the pipeline behind search, the page and documents (None: no index; the service
            only reranks documents sent to it).
        config: the search's limits, defaults and timeout.
        rerank: the named models behind ``/v1/rerank``, ``/v2/rerank`` and ``/rerank`` (None: not
            served).
        api_key: a key every request but ``/health`` and ``/ready`` must send (None: open).
        cors_origins: origins whose pages may call the service from a browser.

    Returns:
        A FastAPI app; serve it with uvicorn (``evirank serve`` does).
    """
    if searcher is None and rerank is None:
        raise ValueError("serve an index (a Searcher), models to rerank with, or both")
    config = config or ServeConfig()
    runner = SearchRunner(searcher, config) if searcher is not None else None
    app = _new_app(config, runner, searcher, rerank)
    app.state.runner = runner
    app.state.searcher = searcher
    app.state.rerank = rerank
    app.state.config = config
    metrics = ServiceMetrics()
    app.state.metrics = metrics
    metrics.track_queue(lambda: (rerank.pending if rerank else 0) + (runner.in_flight if runner else 0))
    _add_error_handlers(app, runner)
    if searcher is not None and runner is not None:
        _add_api_routes(app, runner, searcher, config)
        _add_page_route(app, runner, searcher, config)
    else:
        _add_rerank_home(app, rerank)
    if rerank is not None:
        from evirank.serve.rerank_routes import add_rerank_routes

        add_rerank_routes(app, rerank, metrics)
    _add_service_routes(app, runner, searcher, rerank, config, metrics)
    _use_400_in_openapi(app)
    _add_middleware(app, api_key, metrics, cors_origins)
    return app


def _add_middleware(app: Any, api_key: str | None, metrics: ServiceMetrics, origins: Sequence[str]) -> None:
    """The key check and metrics around every route; CORS outside them, only when origins are named
    (so a browser's preflight is answered without a key)."""
    from evirank.serve.rerank_routes import ServiceMiddleware

    endpoints = {str(route.path) for route in app.routes if hasattr(route, "path")}
    app.add_middleware(ServiceMiddleware, key=api_key, metrics=metrics, endpoints=endpoints)
    if origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type"],
        )


def _new_app(
    config: ServeConfig, runner: SearchRunner | None, searcher: Searcher | None, rerank: RerankService | None
) -> Any:
    """The FastAPI object (with Swagger UI served from a local copy when available: no internet)."""
    fastapi = require("fastapi", "serve")

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        if runner is not None:
            runner.close()
        if searcher is not None:
            searcher.close()
        if rerank is not None:
            rerank.close()

    parts = []
    if searcher is not None:
        parts.append(
            "Search a collection and see why each document ranks where it does: documents from the first "
            "stage (BM25) are re-ranked by the evidence their passages hold, and each candidate comes with "
            "its best passages. The response is a superset of Anserini's REST API."
        )
    if rerank is not None:
        parts.append(
            "Rerank documents you send, whole, by the evidence their passages hold, through the "
            "Cohere (v1, v2), Jina and Text Embeddings Inference /rerank shapes; each result adds its "
            "evidence passages with character offsets into the document as sent."
        )
    app_kwargs: dict[str, Any] = {
        "title": f"{config.title} {'search' if searcher is not None else 'rerank'} API",
        "version": __version__,
        "description": " ".join(parts),
        "lifespan": lifespan,
    }
    try:
        from fastapi_offline import FastAPIOffline

        return FastAPIOffline(**app_kwargs)
    except ImportError:
        return fastapi.FastAPI(**app_kwargs)


def _error(status: int, message: str, headers: dict[str, str] | None = None, detail: Any = None) -> Any:
    """The JSON error body every failure gets: ``{"error": message}`` (plus ``detail`` for 400s)."""
    from fastapi.responses import JSONResponse

    body: dict[str, Any] = {"error": message}
    if detail is not None:
        body["detail"] = detail
    return JSONResponse(status_code=status, content=body, headers=headers)


def _add_error_handlers(app: Any, runner: SearchRunner | None) -> None:
    """Errors are always ``{"error": message}``, never a bare 500 for bad input; 503s say when to retry."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(RequestValidationError)
    async def on_validation(_: Request, exc: RequestValidationError) -> Any:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "path"))
            found = err.get("input")
            shown = (
                f" (found {_clip(found)!r})" if isinstance(found, str | int | float) and found != "" else ""
            )
            problems.append(f"{where}: {err.get('msg', 'invalid')}{shown}")
        detail = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type")} for e in exc.errors()
        ]
        return _error(400, "; ".join(problems) or "invalid request", detail=detail)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException) -> Any:
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(BadRequest)
    async def on_bad_request(_: Request, exc: BadRequest) -> Any:
        return _error(400, str(exc))

    @app.exception_handler(UsageError)
    async def on_usage(_: Request, exc: UsageError) -> Any:
        return _error(400, str(exc))

    @app.exception_handler(DocumentNotFound)
    async def on_not_found(_: Request, exc: DocumentNotFound) -> Any:
        return _error(404, str(exc))

    @app.exception_handler(PassageNotFound)
    async def on_no_passage(_: Request, exc: PassageNotFound) -> Any:
        return _error(404, str(exc))

    @app.exception_handler(SearchTimeout)
    async def on_timeout(_: Request, exc: SearchTimeout) -> Any:
        logger.warning("503: %s", exc)
        retry = runner.retry_after() if runner is not None else 1
        return _error(503, str(exc), headers={"Retry-After": str(retry)})

    @app.exception_handler(Exception)
    async def on_crash(_: Request, exc: Exception) -> Any:
        logger.error("search failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
        return _error(500, f"internal error: {type(exc).__name__}: {_clip(exc, 200)} (see the server log)")


def parameter_help(config: ServeConfig) -> dict[str, str]:
    """The OpenAPI descriptions of the search parameters ``top``, ``depth`` and ``k``: each setting's
    help from :data:`evirank.config.SETTINGS`, then what the service adds (its defaults and limits).

    Example:
        >>> described = parameter_help(ServeConfig(default_depth=20, max_depth=50))
        >>> described["k"].startswith(SETTINGS["k"].help), "at most 50" in described["k"]
        (True, True)
    """
    limit = f"at most {config.max_depth}, the server's --max-depth"
    return {
        "top": (
            f"{SETTINGS['top'].help}: the best re-ranked documents returned. Default {config.default_top}, "
            f"or depth when smaller; {limit}. Only re-ranked documents are returned, so a top above depth "
            "or k is cut to the smaller of them."
        ),
        "depth": (
            f"{SETTINGS['depth'].help}. Here only re-ranked documents are returned: the first depth of "
            f"the k retrieved, or all k when k is smaller. Default {config.default_depth}; {limit}."
        ),
        "k": (
            f"{SETTINGS['k'].help}. Default: the request's depth; {limit}, since the text of every "
            "document retrieved is fetched. Documents retrieved beyond depth are not re-ranked, carry no "
            "evidence and are not returned. A k below the results shown is refused when top is not "
            "given: top is the number of results."
        ),
    }


def _add_api_routes(app: Any, runner: SearchRunner, searcher: Searcher, config: ServeConfig) -> None:
    """``/v1/search``, ``/v1/doc/{docno}`` and ``/health``."""
    from fastapi import Query

    from evirank.serve import schema

    index_name = str(searcher.info.get("index", "index"))
    described = parameter_help(config)
    responses: dict[int | str, dict[str, Any]] = {
        400: {"model": schema.ErrorResponse, "description": "a parameter is missing or out of range"},
        503: {"model": schema.ErrorResponse, "description": "the search timed out or the server is busy"},
    }

    @app.get("/v1/search", response_model=schema.SearchResponse, responses=responses, tags=["search"])
    async def search(
        q: str | None = Query(
            None, description="the query", max_length=config.max_query_chars, examples=["cancer risk"]
        ),
        top: int | None = Query(None, ge=1, le=config.max_depth, description=described["top"]),
        depth: int | None = Query(None, ge=1, le=config.max_depth, description=described["depth"]),
        k: int | None = Query(None, ge=1, le=config.max_depth, description=described["k"]),
    ) -> schema.SearchResponse:
        """Rank documents for a query by their evidence; each candidate comes with its best passages.

        The first stage retrieves ``k`` documents, the first ``depth`` of them are re-ranked by the
        evidence their passages hold, and the best ``top`` are returned."""
        text, top_, depth_, k_ = config.check_request(q, top, depth, k)
        result = await runner.run_async(text, top_, depth_, k_)
        return _search_response(schema, index_name, result)

    @app.get(
        "/v1/doc/{docno:path}",
        response_model=schema.DocumentResponse,
        responses={404: {"model": schema.ErrorResponse, "description": "no such document"}},
        tags=["documents"],
    )
    def document(docno: str) -> schema.DocumentResponse:
        """A stored document by its id."""
        doc = searcher.document(docno)
        payload = schema.DocModel(title=doc.title, text=doc.text, url=getattr(doc, "url", None))
        return schema.DocumentResponse(
            index=index_name, docid=doc.docno, docno=doc.docno, title=doc.title, text=doc.text, doc=payload
        )

    @app.get(
        "/v1/attention",
        response_model=schema.AttentionResponse,
        responses={
            **responses,
            404: {"model": schema.ErrorResponse, "description": "no such document or passage"},
        },
        tags=["search"],
    )
    def attention(
        q: str | None = Query(None, description="the query", max_length=config.max_query_chars),
        docno: str = Query(..., description="the document id", min_length=1),
        pid: int = Query(..., ge=0, description="the passage (its pid in the search's evidence)"),
        layer: list[int] | None = Query(  # noqa: B008 (FastAPI's way to declare a repeated parameter)
            None, description="layers (0-based; -1 is the last; repeat for several; default: the last)"
        ),
        level: str = Query("word", pattern="^(word|token)$", description="word (pieces merged) or token"),
    ) -> schema.AttentionResponse:
        """What the model links between the query and one passage: from each query word to each passage
        word, mean over heads (a bi-encoder's and ColBERT's views are of their scores; see ``kind``).
        Computed on request, one model call."""
        text, *_ = config.check_request(q)
        found = searcher.attention(
            text, docno, pid, layer or None, level=level, deadline=time.monotonic() + config.timeout_s
        )
        return _attention_response(schema, found)


def _add_service_routes(
    app: Any,
    runner: SearchRunner | None,
    searcher: Searcher | None,
    rerank: RerankService | None,
    config: ServeConfig,
    metrics: ServiceMetrics,
) -> None:
    """``/health`` (liveness, what is served, the limits), ``/ready`` and ``/metrics``."""
    from fastapi.responses import JSONResponse, Response

    from evirank.serve import schema

    started = time.monotonic()

    @app.get("/health", response_model=schema.HealthResponse, tags=["service"])
    def health() -> schema.HealthResponse:
        """Liveness, what is served, and the limits."""
        info: dict[str, Any] = dict(searcher.info) if searcher is not None else {}
        limits: dict[str, int | float] = {}
        if searcher is not None:
            limits.update(
                max_depth=config.max_depth,
                max_query_chars=config.max_query_chars,
                timeout_s=config.timeout_s,
                workers=config.workers,
                max_pending=config.max_pending,
            )
        if rerank is not None:
            info["rerank_models"] = rerank.describe()
            limits.update(
                max_documents=rerank.limits.max_documents,
                max_document_chars=rerank.limits.max_document_chars,
                max_request_tokens=rerank.limits.max_request_tokens,
                rerank_timeout_s=rerank.limits.timeout_s,
                rerank_max_pending=rerank.limits.max_pending,
            )
        return schema.HealthResponse(
            uptime_s=round(time.monotonic() - started, 3),
            in_flight=(runner.in_flight if runner is not None else 0) + (rerank.pending if rerank else 0),
            info=info,
            limits=limits,
        )

    @app.get("/ready", tags=["service"])
    def ready() -> Any:
        """200 once the models are loaded and the service takes requests, else 503."""
        if getattr(app.state, "ready", True):
            return {"status": "ready"}
        return JSONResponse(status_code=503, content={"status": "loading"})

    @app.get("/metrics", tags=["service"], response_class=Response)
    def prometheus_metrics() -> Any:
        """Request counts, latency histograms, passages scored, batch sizes and queue depth, in
        Prometheus' text format."""
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)


def _add_rerank_home(app: Any, rerank: RerankService | None) -> None:
    """``/`` of a service without an index: what it serves, in JSON."""

    @app.get("/", include_in_schema=False)
    def home() -> dict[str, Any]:
        return {
            "service": "evirank rerank",
            "models": rerank.names if rerank is not None else [],
            "endpoints": ["/v1/rerank", "/v2/rerank", "/rerank", "/health", "/ready", "/metrics", "/docs"],
        }


def _add_page_route(app: Any, runner: SearchRunner, searcher: Searcher, config: ServeConfig) -> None:
    """``/``: the search page (whole, or only its results section with ``partial=1`` for the script)."""
    from fastapi.responses import HTMLResponse

    from evirank.serve.page import render_page, render_results, security_headers

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page(
        q: str | None = None,
        top: str | None = None,
        depth: str | None = None,
        k: str | None = None,
        partial: str | None = None,
    ) -> Any:
        given = {"top": top, "depth": depth, "k": k}
        numbers = {name: _as_int(value) for name, value in given.items()}
        result, message, status = None, None, 200
        if q is not None:
            result, message, status = await _page_search(runner, config, q, given, numbers)
        headers = security_headers()
        if status == 503:
            headers["Retry-After"] = str(runner.retry_after())
        if partial:
            body = render_results(result, message, searcher.info, searcher.has_attention)
            return HTMLResponse(body, status_code=status, headers=headers)
        body = render_page(
            config,
            searcher.info,
            query=(q or "").strip(),
            top=_whole(numbers["top"]),
            depth=_whole(numbers["depth"]),
            k=_whole(numbers["k"]),
            result=result,
            error=message,
            attention=searcher.has_attention,
        )
        return HTMLResponse(body, status_code=status, headers=headers)


async def _page_search(
    runner: SearchRunner,
    config: ServeConfig,
    q: str,
    given: dict[str, str | None],
    numbers: dict[str, int | str | None],
) -> tuple[SearchResult | None, str | None, int]:
    """Run the page's search; return (result, error message, HTTP status).

    ``given``: the form's ``top``, ``depth`` and ``k`` as sent; ``numbers``: the same as
    :func:`_as_int` reads them (a string where one is not a whole number)."""
    try:
        for name, value in numbers.items():
            if isinstance(value, str):
                raise BadRequest(f"{name} must be a whole number, found {_clip(given[name])!r}")
        top, depth, k = (_whole(numbers[name]) for name in ("top", "depth", "k"))
        text, top_ok, depth_ok, k_ok = config.check_request(q, top, depth, k)
        return await runner.run_async(text, top_ok, depth_ok, k_ok), None, 200
    except BadRequest as exc:
        return None, str(exc), 400
    except SearchTimeout as exc:
        return None, str(exc), 503
    except Exception as exc:
        logger.error("search failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
        return None, f"internal error: {type(exc).__name__} (see the server log)", 500


def _use_400_in_openapi(app: Any) -> None:
    """OpenAPI: our 400 replaces FastAPI's default 422."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return dict(app.openapi_schema)
        spec = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        for operations in spec.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            spec.get("components", {}).get("schemas", {}).pop(name, None)
        app.openapi_schema = spec
        return spec

    app.openapi = openapi


def _clip(value: object, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _as_int(value: str | None) -> int | str | None:
    """An optional integer form field: None when blank, the int, or the raw string when not a number."""
    if value is None or not value.strip():
        return None
    try:
        return int(value.strip())
    except ValueError:
        return value


def _whole(value: int | str | None) -> int | None:
    """A form field read by :func:`_as_int`, when it is a whole number."""
    return value if isinstance(value, int) else None


def _attention_response(schema: Any, found: PassageAttention) -> Any:
    data = found.view.to_dict()
    passage_units = [
        schema.AttentionUnit(
            **unit,
            doc_start=None if span is None else span[0],
            doc_end=None if span is None else span[1],
        )
        for unit, span in zip(data["passage"], found.document_spans, strict=True)
    ]
    return schema.AttentionResponse(
        query=found.query,
        docno=found.docno,
        pid=found.pid,
        text=found.text,
        family=data["family"],
        model=data["model"],
        kind=data["kind"],
        level=data["level"],
        measure=data["measure"],
        merge=data["merge"],
        note=data["note"],
        score=data["score"],
        n_layers=data["n_layers"],
        query_units=[schema.AttentionUnit(**unit) for unit in data["query"]],
        passage_units=passage_units,
        layers=[schema.AttentionLayer(**layer) for layer in data["layers"]],
        milliseconds=found.milliseconds,
    )


def _search_response(schema: Any, index: str, result: SearchResult) -> Any:
    candidates = [
        schema.CandidateModel(
            docid=c.docno,
            docno=c.docno,
            rank=c.rank,
            score=c.score,
            first_stage_score=c.first_stage_score,
            first_stage_rank=c.first_stage_rank,
            title=c.title,
            url=c.url,
            doc=schema.DocModel(title=c.title, text=c.text, url=c.url),
            evidence=[
                schema.EvidenceModel(text=e.text, score=e.score, pid=e.pid, start=e.start, end=e.end)
                for e in c.evidence
            ],
            terms=[
                schema.TermModel(name=t.name, weight=t.weight, value=t.value, contribution=t.contribution)
                for t in c.terms
            ],
        )
        for c in result.candidates
    ]
    return schema.SearchResponse(
        index=index,
        query=schema.QueryModel(text=result.query),
        top=result.top,
        depth=result.depth,
        k=result.k,
        passages=result.passages,
        candidates=candidates,
        timings=schema.TimingsModel(**result.timings),
    )
