"""The HTTP side of ``/rerank``: routes for each API shape, the body read within a limit, errors in
each shape's own form, and the middleware that checks the API key and counts every request.

Example:
    >>> from fastapi.testclient import TestClient
    >>> from evirank.serve.app import create_app
    >>> from evirank.serve.rerank import RerankService
    >>> from evirank.serve.testing import toy_ranker
    >>> client = TestClient(create_app(rerank=RerankService({"toy": toy_ranker()})))
    >>> body = {"model": "any", "query": "purr", "documents": ["Dogs bark.", "Cats purr."]}
    >>> client.post("/v2/rerank", json=body).json()["results"][0]["index"]
    1
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import Request

from evirank.serve.access import OPEN_PATHS, key_matches
from evirank.serve.batcher import BatcherClosed
from evirank.serve.metrics import ServiceMetrics
from evirank.serve.rerank import ClientGone, LimitExceeded, RerankBusy, RerankFront, UnknownModel
from evirank.serve.rerank_api import API, Api, ApiProblem, api_for_body, api_for_path

logger = logging.getLogger(__name__)

#: The largest request body read, in bytes (a bigger one is answered 413 before it is read whole).
MAX_BODY_BYTES = 64 * 1024 * 1024

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTooLarge(ApiProblem):
    """A request body over :data:`MAX_BODY_BYTES` (413)."""


async def read_body(request: Any, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, refused with :class:`BodyTooLarge` as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the request body has {int(declared)} bytes: at most {limit}", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the request body is over {limit} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def error_response(
    api: Api | None, status: int, message: str, kind: str, headers: dict[str, str] | None = None
) -> Any:
    """An error in the shape of ``api`` (``{"error": ...}`` outside the rerank routes)."""
    from fastapi.responses import JSONResponse

    body = api.error(message, kind) if api is not None else {"error": message}
    return JSONResponse(status_code=status, content=body, headers=headers)


def add_rerank_routes(app: Any, service: RerankFront, metrics: ServiceMetrics | None = None) -> None:
    """``POST /v1/rerank`` (Cohere v1, Jina), ``/v2/rerank`` (Cohere v2) and ``/rerank`` (TEI)."""
    for api in API.values():
        app.add_api_route(
            api.path,
            _endpoint(api, service, metrics),
            methods=["POST"],
            tags=["rerank"],
            summary=_SUMMARIES[api.name],
            description=_DESCRIPTION,
            openapi_extra={
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": api.request.model_json_schema()}},
                }
            },
        )


_SUMMARIES = {
    "cohere-v1": "Rerank documents (Cohere v1 and Jina shapes)",
    "cohere-v2": "Rerank documents (Cohere v2 shape)",
    "tei": "Rerank texts (Text Embeddings Inference shape)",
}
_DESCRIPTION = (
    "Ranks the documents sent by the evidence their passages hold: each document is split into "
    "passages, every passage is scored, and the document's score aggregates them, so nothing past "
    "the model's input length is lost. Each result adds its evidence passages with character offsets "
    "into the document as sent, the score's terms and the passages read."
)


def _endpoint(api: Api, service: RerankFront, metrics: ServiceMetrics | None) -> Callable[..., Any]:
    async def rerank(request: Request) -> Any:
        from fastapi.responses import JSONResponse, Response

        shape = api
        try:
            body = await read_body(request)
            shape = api_for_body(api, body)
            model, job, options = shape.parse(body)
            outcome = await service.rerank(model, job, request.is_disconnected)
        except ApiProblem as exc:
            return error_response(shape, exc.status, str(exc), exc.kind)
        except LimitExceeded as exc:
            return error_response(shape, 413, str(exc), "Validation")
        except UnknownModel as exc:
            return error_response(shape, shape.invalid_status, str(exc), "Validation")
        except RerankBusy as exc:
            logger.warning("503: %s", exc)
            return error_response(shape, 503, str(exc), "Overloaded", {"Retry-After": str(exc.retry_after)})
        except BatcherClosed:
            return error_response(
                shape, 503, "the server is shutting down", "Unhealthy", {"Retry-After": "5"}
            )
        except ClientGone:
            return Response(status_code=499)
        except Exception as exc:  # a model failure: logged whole, answered without a traceback
            logger.error("rerank failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
            return error_response(
                api, 500, f"internal error: {type(exc).__name__} (see the server log)", "Backend"
            )
        if metrics is not None:
            metrics.documents.inc(len(job.documents))
            metrics.passages.inc(outcome.passages)
        return JSONResponse(shape.respond(outcome, job, options))

    rerank.__name__ = f"rerank_{api.name.replace('-', '_')}"
    return rerank


class ServiceMiddleware:
    """ASGI middleware: the API key check (401 in the route's own error shape) and request metrics.

    Written as plain ASGI, not ``BaseHTTPMiddleware``, so a route still sees its client disconnect
    and streaming bodies pass through untouched.
    """

    def __init__(
        self, app: Any, key: str | None, metrics: ServiceMetrics | None, endpoints: set[str]
    ) -> None:
        self.app = app
        self.key = key
        self.metrics = metrics
        self.endpoints = endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        started = time.perf_counter()
        status = {"code": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
                status["started"] = 1
            await send(message)

        try:
            if self.key is not None and path not in OPEN_PATHS and scope.get("method") != "OPTIONS":
                headers = {
                    k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())
                }
                if not key_matches(headers.get("authorization"), self.key):
                    response = error_response(
                        api_for_path(path),
                        401,
                        "missing or wrong API key: send Authorization: Bearer KEY",
                        "Unauthorized",
                        {"WWW-Authenticate": "Bearer"},
                    )
                    await response(scope, receive, sending)
                    return
            try:
                await self.app(scope, receive, sending)
            except asyncio.CancelledError:
                # The server stopped the request (its grace period at shutdown ran out): answer it
                # in its route's shape rather than leave the server's bare 500 and a traceback.
                if "started" in status:
                    raise
                logger.warning("503: %s stopped before its answer was ready (shutting down)", path)
                response = error_response(
                    api_for_path(path),
                    503,
                    "the server is shutting down and stopped this request before its answer was ready; "
                    "send it again",
                    "Unhealthy",
                    {"Retry-After": "5"},
                )
                await response(scope, receive, sending)
        finally:
            if self.metrics is not None:
                endpoint = path if path in self.endpoints else "other"
                self.metrics.request(endpoint, status["code"], time.perf_counter() - started)
