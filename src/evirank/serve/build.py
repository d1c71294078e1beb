"""Build the real :class:`~evirank.serve.searcher.Searcher` from a pipeline spec: the one builder's stages.

The service's pipeline is built by :func:`evirank.pipeline.build_pipeline`, the function
``evirank rerank`` and ``search`` use, over one :class:`~evirank.pipeline.Collection`: the index
is opened once and shared by the first stage, the document lookup, the stored passages and their
vectors. What the service adds is for answering many queries fast: each request retrieves at its
own depth through the same searcher, passages come from the stored table when the stored vectors
were made by the same segmenter, the queries of concurrent requests are embedded together
(:class:`~evirank.serve.fast.BatchedQueries`), and a cascade runs as one piece.

Everything heavy (the JVM, torch, the model) loads on first use; :meth:`Searcher.warm_up` does it
before the service starts listening.

Example:
    >>> from evirank.pipeline import PipelineSpec
    >>> spec = PipelineSpec.from_mapping({"index": "indexes/scifact", "aggregate": "maxp"})
    >>> searcher = searcher_from_spec(spec, show_passages=3)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from evirank.frames import Document
from evirank.segment.segment_spec import SegmentSpec, SegmentSpecError
from evirank.serve.searcher import Searcher

logger = logging.getLogger(__name__)

#: The service's segmenter when neither ``--segment`` nor stored vectors choose one.
DEFAULT_SEGMENT = "sentences:prepend"


def serve_segmenter(segment: str | None, title: str | None = None) -> str | None:
    """The ``--segment`` spec with the deprecated ``--title`` applied (None: not given).

    ``title`` (``prepend``, ``segment`` or ``skip``; the old ``--title`` flag) replaces the spec's
    title mode, with a warning; write ``--segment sentences:prepend`` instead.

    Example:
        >>> serve_segmenter("sentences", "prepend")
        'sentences:prepend'
        >>> serve_segmenter("windows:100:50")
        'windows:100:50'
    """
    if title is None:
        return segment
    if title not in ("prepend", "segment", "skip"):
        raise SegmentSpecError(f"--title must be prepend, segment or skip; found {title!r}")
    changed = SegmentSpec.parse(segment or DEFAULT_SEGMENT).with_title(title)
    logger.warning("--title is deprecated: write --segment %s", changed.spec)
    return changed.spec


def searcher_from_spec(
    spec: Any,
    *,
    scores: str | os.PathLike[str] | None = None,
    show_passages: int = 3,
    batch: int = 32,
    collection: Any = None,
) -> Searcher:
    """The service's :class:`Searcher` for ``spec`` (a :class:`~evirank.pipeline.PipelineSpec` with an index).

    Args:
        spec: the pipeline (its ``depth`` is the requests' default; each request retrieves its own).
        scores: a persistent score store to reuse and fill.
        show_passages: passages returned per candidate.
        batch: with a scorer that reads stored passage vectors, the most queries of concurrent
            requests embedded in one model call.
        collection: the opened index (default: one opened from ``spec.index``).

    Raises:
        ValueError: a spec without an index; FileNotFoundError when the index is missing.
    """
    from evirank.pipeline import Collection, build_pipeline
    from evirank.score.family import family_of
    from evirank.serve.fast import BatchedQueries, CascadeStage

    if spec.index is None:
        raise ValueError("the service searches an index: give --index DIR")
    collection = collection if collection is not None else Collection(spec.index)
    collection.check()
    pipeline = build_pipeline(spec, collection, store=scores, stored_segments=True)
    scorer = pipeline.scorer
    info: dict[str, Any] = {}
    reads_stored = not spec.multi and family_of(scorer).stores_passages
    if reads_stored:
        if pipeline.vectors is not None:
            scorer = BatchedQueries(scorer, max_batch=batch)
            info["evidence"] = "stored passage vectors: only the query is embedded"
        else:
            info["evidence"] = "passages embedded per query (no stored vectors: evirank index --embed)"
    for stage in pipeline.rerank.passage_stages:  # the cascade: prune, then score, as one piece
        scorer = CascadeStage(stage, scorer)
        info["evidence"] = (
            f"{getattr(scorer, 'family', 'the')} scorer on each document's {spec.prune} best passages "
            f"by {spec.prune_by}"
        )
        if spec.prune_by != "bm25" and pipeline.vectors is None:
            logger.warning(
                "--prune-by %s without stored vectors embeds every candidate passage per query", spec.prune_by
            )
    docs = collection.docs

    def lookup(docno: str) -> Document | None:
        try:
            return docs[docno]
        except KeyError:
            return None

    def retrieve(topics: Any, depth: int) -> Any:
        return pipeline.retriever(depth, fetch_text=depth)(topics)

    labels = [s.label for s in spec.scorers]
    models = [str(s.model) if s.model else f"{s.family} (its default model)" for s in spec.scorers]
    aggregator = pipeline.aggregator
    shares = aggregator.evidence_weights() if hasattr(aggregator, "evidence_weights") else {}
    return Searcher(
        retrieve,
        pipeline.segmenter,
        scorer,
        aggregator,
        lookup,
        evidence=show_passages,
        info={
            **collection.about(),
            "model": ", ".join(models) if spec.multi else models[0],
            "scorer": "+".join(labels) if spec.multi else spec.scorers[0].family,
            **({"evidence_weights": ", ".join(f"{k}={v:g}" for k, v in shares.items())} if shares else {}),
            "segment": pipeline.info["segment"],
            "aggregate": aggregator.spec,
            "first_stage": spec.first_stage.name,
            "store": os.path.basename(str(scores)) if scores else None,
            **{k: v for k, v in pipeline.info.items() if k == "vectors"},
            **info,
        },
    )


def build_searcher(
    index: str | os.PathLike[str],
    model: str | None = None,
    scorer: str = "auto",
    segment: str | None = None,
    title: str | None = None,
    aggregate: str = "birch:3",
    alpha: float | None = None,
    weights: Sequence[float] | None = None,
    scores: str | os.PathLike[str] | None = None,
    device: str | None = None,
    show_passages: int = 3,
    vectors: str | None = None,
    prune: int | None = None,
    prune_by: str = "bm25",
    batch: int = 32,
    scorers: Sequence[str] | None = None,
    scorer_weights: Sequence[str] | str | None = None,
    depth: int = 20,
) -> Searcher:
    """:func:`searcher_from_spec` from keyword settings (the flags of ``evirank serve``).

    ``scorers`` are several scorer specs (``[LABEL=]FAMILY[:MODEL]``) instead of ``scorer`` and
    ``model``; ``segment`` None takes the stored passage vectors' segmenter when the index has some,
    else ``sentences:prepend``.

    Raises:
        ValueError: a bad spec; FileNotFoundError when the index is missing.
    """
    from evirank.pipeline import PipelineSpec

    spec = PipelineSpec.from_mapping(
        {
            "index": str(index),
            "scorer": list(scorers) if scorers else [scorer],
            "model": None if scorers else model,
            "scorer_weights": scorer_weights,
            "segment": serve_segmenter(segment, title),
            "default_segment": DEFAULT_SEGMENT,
            "aggregate": aggregate,
            "alpha": alpha,
            "weights": weights,
            "device": device or "auto",
            "vectors": vectors,
            "prune": prune,
            "prune_by": prune_by,
            "depth": depth,
        }
    )
    return searcher_from_spec(spec, scores=scores, show_passages=show_passages, batch=batch)
