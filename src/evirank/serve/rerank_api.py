"""The request and response shapes of the rerank APIs the field's clients speak, field for field.

Three shapes, one engine (:class:`~evirank.serve.rerank.RerankService`):

* **Cohere v1** and **Jina**, ``POST /v1/rerank``: ``{model, query, documents, top_n, rank_fields,
  return_documents, max_chunks_per_doc}`` -> ``{id, model, results: [{index, relevance_score,
  document?}], meta, usage}``. Jina's clients read the same fields (``model``, ``results``,
  ``usage``); a request whose ``model`` starts with ``jina`` gets Jina's default
  ``return_documents: true``, every other one Cohere's ``false``. Errors: ``{"message", "detail"}``
  (Cohere's field and Jina's).
* **Cohere v2**, ``POST /v2/rerank``: ``{model, query, documents, top_n, max_tokens_per_doc}`` ->
  ``{id, results: [{index, relevance_score}], meta}``. Errors: ``{"message"}``.
* **Hugging Face TEI**, ``POST /rerank``: ``{query, texts, truncate, raw_scores, return_text,
  truncation_direction}`` -> ``[{index, score, text?}]``, best first. Errors: ``{"error",
  "error_type"}`` with TEI's status codes (422 for a request that does not validate, 413 for one too
  large). A body with ``documents`` instead of ``texts`` (what vLLM's and infinity's ``/rerank``
  take) is read and answered in the Cohere v1 / Jina shape.

Documents are strings, or (Cohere v1, Jina, v2) objects: ``rank_fields`` names the fields ranked
(default ``text``, with ``title`` as the title when the object has one). Every result also carries
what evirank adds, in fields strict clients ignore: ``evidence`` (the best passages, each with
``field``, ``start`` and ``end``: character offsets into that field of the document as sent),
``terms`` (the score as a sum of weighted terms), ``passages`` (passages the model read) and
``raw_score`` (the score on the model's own scale). ``relevance_score`` (and TEI's ``score`` unless
``raw_scores``) is that score mapped into [0, 1] (:mod:`evirank.score.relevance`).

evirank reads whole documents, passage by passage, so nothing is truncated by default: Cohere's
``max_chunks_per_doc`` caps the passages read per document and v2's ``max_tokens_per_doc`` the tokens
read, only when a request gives them. TEI's ``truncate`` and ``truncation_direction`` are accepted
and change nothing.

Example:
    >>> api = API["cohere-v1"]
    >>> model, job, options = api.parse(b'{"query": "cats", "documents": ["Cats purr.", "Dogs bark."]}')
    >>> job.query, len(job.documents), options.top_n, options.return_documents
    ('cats', 2, None, False)
    >>> api.parse(b'{"query": "cats", "documents": []}')
    Traceback (most recent call last):
    ...
    evirank.serve.rerank_api.ApiProblem: documents: the list of documents is empty
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evirank.errors import EvirankError
from evirank.serve.config import BadRequest
from evirank.serve.rerank import CallerDocument, Hit, RerankJob, RerankOutcome


class ApiProblem(EvirankError, ValueError):
    """A request refused before any work: its HTTP status, message and TEI error type.

    Example:
        >>> ApiProblem("bad", status=413).status
        413
    """

    def __init__(self, message: str, status: int = 400, kind: str = "Validation") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class _CohereRequest(_Strict):
    model: str | None = None
    query: str
    documents: list[str | dict[str, Any]]
    top_n: int | None = None
    rank_fields: list[str] | None = None
    return_documents: bool | None = None


class CohereV1Request(_CohereRequest):
    """Cohere's ``/v1/rerank`` request (Jina's is the same, less ``rank_fields`` and chunks)."""

    max_chunks_per_doc: int | None = None


class CohereV2Request(_CohereRequest):
    """Cohere's ``/v2/rerank`` request."""

    max_tokens_per_doc: int | None = None


class TeiRequest(_Strict):
    """Text Embeddings Inference's ``/rerank`` request."""

    query: str
    texts: list[str]
    truncate: bool | None = False
    raw_scores: bool = False
    return_text: bool = False
    truncation_direction: Literal["left", "right", "Left", "Right"] = "Right"


@dataclass(frozen=True)
class Options:
    """What a request asks of the response: how many results, with documents, raw scores."""

    top_n: int | None = None
    return_documents: bool = False
    raw_scores: bool = False
    jina: bool = False


@dataclass(frozen=True)
class Api:
    """One API shape: its name, request model, how it reads a request and writes a response or error.

    Attributes:
        name: ``cohere-v1``, ``cohere-v2`` or ``tei``.
        path: the route it is served at.
        request: the pydantic model of its request body.
        invalid_status: the status of a request that does not validate (400 Cohere, 422 TEI).
    """

    name: str
    path: str
    request: type[BaseModel]
    invalid_status: int
    read: Callable[[Any], tuple[str | None, RerankJob, Options]]
    respond: Callable[[RerankOutcome, RerankJob, Options], Any]
    error: Callable[[str, str], dict[str, Any]]

    def parse(self, body: bytes) -> tuple[str | None, RerankJob, Options]:
        """The model named, the job and the options of a request body.

        Raises:
            ApiProblem: the body is not UTF-8 JSON, does not fit the shape, or asks for nothing.
        """
        try:
            data = json.loads(body)
        except UnicodeDecodeError as exc:
            raise ApiProblem(f"the body is not UTF-8 text (byte {exc.start}); send JSON in UTF-8") from None
        except ValueError as exc:
            raise ApiProblem(f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiProblem(
                f"the body must be a JSON object, found {type(data).__name__}", self.invalid_status
            )
        try:
            request = self.request.model_validate(data)
        except ValidationError as exc:
            raise ApiProblem(_validation_message(exc), self.invalid_status) from None
        try:
            return self.read(request)
        except BadRequest as exc:
            raise ApiProblem(str(exc), self.invalid_status) from None


def _validation_message(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith(("str", "dict[")))
        found = err.get("input")
        shown = ""
        if isinstance(found, str | int | float | bool) and err.get("type") != "missing":
            text = repr(found)
            shown = f" (found {text[:40]}{'…' if len(text) > 40 else ''})"
        problems.append(f"{where or 'body'}: {err.get('msg', 'invalid')}{shown}")
    more = len(exc.errors()) - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def _check_text(text: str, where: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(
            f"{where}: a lone surrogate at character {exc.start} (\\u{ord(text[exc.start]):04x}); "
            "send valid Unicode"
        ) from None
    return text


def _job(
    query: str,
    documents: list[str | dict[str, Any]],
    rank_fields: list[str] | None,
    *,
    max_passages: int | None = None,
    max_tokens: int | None = None,
) -> RerankJob:
    if not query.strip():
        raise BadRequest("query: the query is empty")
    _check_text(query, "query")
    if not documents:
        raise BadRequest("documents: the list of documents is empty")
    parsed = []
    for position, item in enumerate(documents):
        try:
            doc = CallerDocument.of(item, rank_fields)
            _check_text(doc.text, "")
            _check_text(doc.title, "")
            if not doc.text.strip() and not doc.title.strip():
                raise BadRequest("the document is empty")
        except BadRequest as exc:
            raise BadRequest(f"documents.{position}: {str(exc).lstrip(': ')}") from None
        parsed.append(doc)
    return RerankJob(query, tuple(parsed), max_passages=max_passages, max_tokens=max_tokens)


def _positive(value: int | None, name: str) -> int | None:
    if value is not None and value < 1:
        raise BadRequest(f"{name} must be at least 1, found {value}")
    return value


def _read_v1(request: CohereV1Request) -> tuple[str | None, RerankJob, Options]:
    jina = (request.model or "").lower().startswith("jina")
    job = _job(
        request.query,
        request.documents,
        request.rank_fields,
        max_passages=_positive(request.max_chunks_per_doc, "max_chunks_per_doc"),
    )
    returned = request.return_documents if request.return_documents is not None else jina
    return request.model, job, Options(_positive(request.top_n, "top_n"), returned, jina=jina)


def _read_v2(request: CohereV2Request) -> tuple[str | None, RerankJob, Options]:
    job = _job(
        request.query,
        request.documents,
        request.rank_fields,
        max_tokens=_positive(request.max_tokens_per_doc, "max_tokens_per_doc"),
    )
    return request.model, job, Options(_positive(request.top_n, "top_n"), bool(request.return_documents))


def _read_tei(request: TeiRequest) -> tuple[str | None, RerankJob, Options]:
    job = _job(request.query, list(request.texts), None)
    return None, job, Options(None, request.return_text, request.raw_scores)


def _extras(hit: Hit) -> dict[str, Any]:
    """evirank's additions to a result: the evidence with offsets into the caller's field, the
    score's terms, the passages read and the raw score."""
    return {
        "evidence": [
            {"text": p.text, "score": p.score, "field": p.field, "start": p.start, "end": p.end}
            for p in hit.evidence
        ],
        "terms": [dict(t) for t in hit.terms],
        "passages": hit.passages,
        "raw_score": hit.score,
    }


def _document(job: RerankJob, index: int) -> dict[str, Any]:
    sent = job.documents[index].sent
    if isinstance(sent, Mapping):
        return {"text": job.documents[index].text, **sent}
    return {"text": sent}


def _cohere_results(outcome: RerankOutcome, job: RerankJob, options: Options) -> list[dict[str, Any]]:
    """Cohere's (and Jina's) results: the best ``top_n``, each with its relevance, the document when
    asked, and evirank's additions."""
    shown = outcome.hits if options.top_n is None else outcome.hits[: options.top_n]
    results = []
    for hit in shown:
        result: dict[str, Any] = {"index": hit.index, "relevance_score": hit.relevance}
        if options.return_documents:
            result["document"] = _document(job, hit.index)
        results.append({**result, **_extras(hit)})
    return results


def _respond_v1(outcome: RerankOutcome, job: RerankJob, options: Options) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "model": outcome.model,
        "results": _cohere_results(outcome, job, options),
        "meta": {"api_version": {"version": "1"}, "billed_units": {"search_units": 1}},
        "usage": {"total_tokens": outcome.tokens, "prompt_tokens": outcome.tokens},
    }


def _respond_v2(outcome: RerankOutcome, job: RerankJob, options: Options) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "results": _cohere_results(outcome, job, options),
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    }


def _respond_tei(outcome: RerankOutcome, job: RerankJob, options: Options) -> list[dict[str, Any]]:
    results = []
    for hit in outcome.hits:
        result: dict[str, Any] = {
            "index": hit.index,
            "score": hit.score if options.raw_scores else hit.relevance,
        }
        if options.return_documents:
            result["text"] = job.documents[hit.index].text
        results.append({**result, **_extras(hit)})
    return results


API: dict[str, Api] = {
    "cohere-v1": Api(
        "cohere-v1",
        "/v1/rerank",
        CohereV1Request,
        400,
        _read_v1,
        _respond_v1,
        lambda message, kind: {"message": message, "detail": message},
    ),
    "cohere-v2": Api(
        "cohere-v2",
        "/v2/rerank",
        CohereV2Request,
        400,
        _read_v2,
        _respond_v2,
        lambda message, kind: {"message": message},
    ),
    "tei": Api(
        "tei",
        "/rerank",
        TeiRequest,
        422,
        _read_tei,
        _respond_tei,
        lambda message, kind: {"error": message, "error_type": kind},
    ),
}
"""The served shapes by name."""


def api_for_body(api: Api, body: bytes) -> Api:
    """The shape a request body is in: TEI's ``/rerank`` also takes the Cohere/Jina body (``documents``
    rather than ``texts``), as vLLM's and infinity's ``/rerank`` do, and answers it in that shape.

    Example:
        >>> api_for_body(API["tei"], b'{"query": "q", "documents": ["a"]}').name
        'cohere-v1'
        >>> api_for_body(API["tei"], b'{"query": "q", "texts": ["a"]}').name
        'tei'
    """
    if api.name != "tei" or b'"documents"' not in body:
        return api
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return api
    if isinstance(data, dict) and "documents" in data and "texts" not in data:
        return API["cohere-v1"]
    return api


def api_for_path(path: str) -> Api | None:
    """The shape served at ``path`` (None: not a rerank route).

    Example:
        >>> api_for_path("/v2/rerank").name, api_for_path("/v1/search")
        ('cohere-v2', None)
    """
    return next((api for api in API.values() if api.path == path.rstrip("/")), None)
