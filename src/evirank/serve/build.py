"""Build the real :class:`~evirank.serve.searcher.Searcher` from a pipeline spec: the one builder's stages.

The service's pipeline is built by :func:`evirank.pipeline.build_pipeline`, the function
``evirank rerank`` and ``search`` use, over one :class:`~evirank.pipeline.Collection`: the index
is opened once and shared by the first stage, the document lookup, the stored passages and their
vectors. What the service adds is for answering many queries fast: each request retrieves its own
``k`` documents through the same searcher, passages come from the stored table when the stored vectors
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
from typing import TYPE_CHECKING, Any

from evirank.config import SETTINGS
from evirank.frames import Document
from evirank.serve.searcher import Searcher

if TYPE_CHECKING:
    from evirank.pipeline import Collection, PipelineSpec

logger = logging.getLogger(__name__)


def searcher_from_spec(
    spec: PipelineSpec,
    *,
    scores: str | os.PathLike[str] | None = None,
    show_passages: int = SETTINGS.default("show_passages"),
    batch: int = SETTINGS.default("batch"),
    collection: Collection | None = None,
) -> Searcher:
    """The service's :class:`Searcher` for ``spec`` (a :class:`~evirank.pipeline.PipelineSpec` with an index).

    Args:
        spec: the pipeline (each request names its own ``k``, ``depth`` and ``top``).
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

    index = spec.require_index("the service")
    collection = collection if collection is not None else Collection(index)
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
    for stage in pipeline.reranker.passage_stages:  # the cascade: prune, then score, as one piece
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

    def retrieve(topics: Any, k: int) -> Any:
        return pipeline.retriever(k, fetch_text=k)(topics)

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
    *,
    scores: str | os.PathLike[str] | None = None,
    show_passages: int | None = None,
    batch: int | None = None,
    scorers: Sequence[str] | None = None,
    **settings: Any,
) -> Searcher:
    """:func:`searcher_from_spec` from keyword settings: the settings of ``evirank serve``'s flags,
    by name (``scorer``, ``segment``, ``aggregate``, ``alpha``, ``depth``, ``device``, ...), each
    left out at the default every front end shares (:data:`evirank.config.SETTINGS`).

    ``scorers`` are several scorer specs (``[LABEL=]FAMILY[:MODEL]``) instead of ``scorer`` and
    ``model``; ``depth`` is what a request gets when it names none (each request may name its own).

    Raises:
        ValueError: a bad spec; FileNotFoundError when the index is missing.

    Example:
        >>> searcher = build_searcher("indexes/scifact", aggregate="birch:2", depth=20)  # doctest: +SKIP
    """
    from evirank.pipeline import PipelineSpec

    scorer = settings.pop("scorer", None)
    spec = PipelineSpec.from_mapping(
        {
            **settings,
            "index": str(index),
            "scorer": list(scorers) if scorers else None if scorer is None else [scorer],
            "model": None if scorers else model,
        }
    )
    show = SETTINGS.default("show_passages") if show_passages is None else show_passages
    queries = SETTINGS.default("batch") if batch is None else batch
    return searcher_from_spec(spec, scores=scores, show_passages=show, batch=queries)
