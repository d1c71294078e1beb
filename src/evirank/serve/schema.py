"""Pydantic models of the JSON API (imported only by :mod:`evirank.serve.app`; needs the ``serve`` extra).

The search response is a superset of Anserini's REST API (``api``, ``index``, ``query.text``,
``candidates[].docid/score/rank/doc``), so clients written for Anserini read it unchanged; evirank adds
``docno``, ``first_stage_score``, ``first_stage_rank``, ``title``, ``evidence`` and ``timings``.
Errors are ``{"error": message}`` as in Anserini, with ``detail`` for validation errors.

Example:
    >>> EvidenceModel(text="Cats purr.", score=0.9, pid=0, start=0, end=10).end
    10
"""

from __future__ import annotations

from typing import Any

from evirank.errors import MissingExtraError

try:
    from pydantic import BaseModel, Field
except ImportError as exc:  # pragma: no cover - pydantic comes with fastapi
    raise MissingExtraError("pydantic", "serve") from exc


class QueryModel(BaseModel):
    """The query as searched (stripped of surrounding spaces)."""

    text: str = Field(description="the query text")


class EvidenceModel(BaseModel):
    """One scored passage; ``start``/``end`` locate it in ``doc.text`` (null when not verbatim there)."""

    text: str = Field(description="the passage text")
    score: float = Field(description="the model's score of this passage for the query")
    pid: int = Field(description="the passage's position in its document (0-based)")
    start: int | None = Field(None, description="character offset of the passage in doc.text")
    end: int | None = Field(None, description="character offset just after the passage in doc.text")


class TermModel(BaseModel):
    """One term of a document's score: ``contribution = weight * value``; a document's contributions
    add up to its score."""

    name: str = Field(description="first stage, passage 1 (the best passage), ..., or LABEL: ... per scorer")
    weight: float = Field(description="the aggregator's weight of the term")
    value: float = Field(description="the normalised first-stage or passage score the term weighs")
    contribution: float = Field(description="weight x value")


class DocModel(BaseModel):
    """The stored document (Anserini's ``doc``, parsed)."""

    title: str
    text: str
    url: str | None = Field(default=None, description="the document's source, when its corpus gives one")


class CandidateModel(BaseModel):
    """One ranked document."""

    docid: str = Field(description="the document id (Anserini's name for docno)")
    docno: str = Field(description="the document id")
    rank: int = Field(ge=1, description="1-based rank after re-ranking")
    score: float = Field(
        description="the evidence score the ranking is by: the sum of the contributions in terms"
    )
    first_stage_score: float = Field(description="the first-stage (BM25) score")
    first_stage_rank: int = Field(ge=1, description="the first-stage rank")
    title: str
    url: str | None = Field(default=None, description="the document's source, when its corpus gives one")
    doc: DocModel
    evidence: list[EvidenceModel] = Field(description="the best passages, best first")
    terms: list[TermModel] = Field(default_factory=list, description="the score as a sum of weighted terms")


class TimingsModel(BaseModel):
    """Milliseconds spent per stage of this search (the stages of ``evirank rerank``'s timings)."""

    first_stage: float = Field(description="first stage (BM25), including fetching the hits' text")
    text_fetch: float = Field(description="looking up text the first stage did not return")
    segmentation: float = Field(description="splitting the hits into passages")
    pruning: float = Field(description="stages between segmentation and scoring (a cascade's cheaper pass)")
    model_load: float = Field(
        description="loading the model (the first search after a start without warm-up)"
    )
    tokenisation: float = Field(description="the model waiting for tokenised batches")
    model: float = Field(description="the model scoring passages")
    scoring_other: float = Field(description="the rest of the scoring: the score store, batching")
    aggregation: float = Field(description="passage scores to document scores, and the evidence shown")
    wait: float = Field(description="queueing: for a free worker, and for stages busy with other requests")
    total: float = Field(description="the whole search, from admission to answer, queueing included")


class SearchResponse(BaseModel):
    """Ranked candidates with their evidence."""

    api: str = "v1"
    index: str
    query: QueryModel
    top: int = Field(description="results asked for: the request's top (or the default), cut to depth and k")
    depth: int = Field(description="documents re-ranked: the request's depth (or the default), cut to k")
    k: int = Field(description="the first-stage depth: documents retrieved (the request's k, or its depth)")
    passages: int = Field(description="passages scored for this search")
    candidates: list[CandidateModel]
    timings: TimingsModel


class DocumentResponse(BaseModel):
    """A stored document."""

    api: str = "v1"
    index: str
    docid: str
    docno: str
    title: str
    text: str
    doc: DocModel


class AttentionUnit(BaseModel):
    """One word (or token) of the query or the passage."""

    text: str
    start: int = Field(description="character offset in its text (the query, or the passage text)")
    end: int = Field(description="character offset just after it")
    doc_start: int | None = Field(
        None, description="passage units: offset in doc.text (null when not there, e.g. a prepended title)"
    )
    doc_end: int | None = Field(None, description="passage units: offset just after it in doc.text")


class AttentionLayer(BaseModel):
    """One layer's matrix, mean over heads."""

    layer: int = Field(description="the layer, 0-based")
    weights: list[list[float]] = Field(description="one row per query unit, one column per passage unit")
    passage_totals: list[float] = Field(
        description="each passage unit's weight from the whole query (the rows combined by merge.query)"
    )


class AttentionResponse(BaseModel):
    """What the model links between the query and one passage (computed on request)."""

    api: str = "v1"
    query: str
    docno: str
    pid: int
    text: str = Field(description="the passage as the model read it")
    family: str = Field(description="the model family that computed the view")
    model: str
    kind: str = Field(
        description="attention (a joint-input model's self-attention), contribution (a bi-encoder's "
        "token pairs' parts of its cosine) or similarity (ColBERT's token cosines)"
    )
    level: str = Field(description="word (word pieces merged) or token")
    measure: str = Field(description="what a cell holds, in words")
    merge: dict[str, str] = Field(description="how word pieces merged into words, per side")
    note: str
    score: float | None = Field(None, description="the model's score of the pair, when computed")
    n_layers: int
    query_units: list[AttentionUnit]
    passage_units: list[AttentionUnit]
    layers: list[AttentionLayer]
    milliseconds: float = Field(description="time to compute the view")


class HealthResponse(BaseModel):
    """Liveness and what is being served."""

    status: str = "ok"
    uptime_s: float
    in_flight: int = Field(description="searches admitted and not finished (running or queued)")
    info: dict[str, Any] = Field(description="index, model, scorer, aggregation")
    limits: dict[str, int | float] = Field(
        description="max_depth (the largest top, depth and k), max_query_chars, timeout_s, workers, "
        "max_pending"
    )


class ErrorResponse(BaseModel):
    """What went wrong, in words."""

    error: str
    detail: list[dict[str, Any]] | None = None
