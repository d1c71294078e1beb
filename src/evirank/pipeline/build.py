"""The one builder: a :class:`~evirank.pipeline.PipelineSpec` in, a runnable :class:`Pipeline` out.

``evirank rerank``, ``serve``, ``search``, ``embed``, the conditions (through those commands) and
the Python API all build their pipeline here, so a spec means the same everywhere: the first stage
over the one :class:`~evirank.pipeline.Collection` handle, the text fetch over that same handle (or
a corpus), the segmenter cut to the scorer's room for a passage, the scorers made through the
model-family registry (a family that stores passage representations reads the stored vectors, the
others go through the score store), the cascade, the aggregator and the pairwise stage. Nothing
here asks which kind of model runs.

Example:
    >>> from evirank.pipeline import PipelineSpec
    >>> spec = PipelineSpec.from_mapping({"corpus": "corpus.jsonl", "scorer": "bi", "aggregate": "maxp"})
    >>> pipeline = build_pipeline(spec)  # doctest: +SKIP
    >>> result = pipeline.reranker.run(first_stage_run, topics=topics)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from evirank.pipeline.collection import Collection
from evirank.pipeline.spec import PipelineSpec, PipelineSpecError
from evirank.segment.budget import passage_budget

if TYPE_CHECKING:
    from evirank.aggregate import Aggregator, MultiEvidence
    from evirank.rerank import Rerank
    from evirank.score.document_pairs import Duo
    from evirank.score.family import Scorer
    from evirank.stage import Stage
    from evirank.vectors import PassageVectors

logger = logging.getLogger(__name__)


@dataclass
class Pipeline:
    """A built pipeline: its stages, ready to run (models load on first use).

    Attributes:
        spec: what it was built from.
        collection: the index handle every stage reads (None with a corpus and a given run).
        rerank: fetch, segment, (prune), score, aggregate: :class:`~evirank.rerank.Rerank`.
        first_stage: topics -> Run (None when the spec gives a run file).
        duo: the pairwise stage over the aggregated top documents (None: none).
        vectors: the stored passage vectors some stage reads (None: none).
        segment_source: where the segmenter came from (``given``, ``stored vectors``, ``default``).
    """

    spec: PipelineSpec
    collection: Collection | None
    rerank: Rerank | None
    first_stage: Stage | None = None
    duo: Duo | None = None
    vectors: PassageVectors | None = None
    segment_source: str = "given"
    info: dict[str, Any] = field(default_factory=dict)
    _retrievers: dict[tuple[int | None, int], Any] = field(default_factory=dict, repr=False)
    _encoder: Any = field(default=None, repr=False)

    @property
    def segmenter(self) -> Stage:
        """The segmenter stage."""
        return self.reranker.segmenter

    @property
    def reranker(self) -> Rerank:
        """The re-ranking stages (a pipeline built for its first stage alone has none).

        Raises:
            PipelineSpecError: the pipeline was built with ``first_stage_only``.
        """
        if self.rerank is None:
            raise PipelineSpecError("this pipeline was built for its first stage alone: it re-ranks nothing")
        return self.rerank

    @property
    def scorer(self) -> Stage:
        """The scorer stage (a :class:`~evirank.score.multi.Scorers` for several)."""
        return self.reranker.scorer

    @property
    def aggregator(self) -> Aggregator | MultiEvidence:
        """The aggregator stage (the builder makes it from :meth:`PipelineSpec.aggregator`)."""
        return cast("Aggregator | MultiEvidence", self.reranker.aggregator)

    def retriever(self, k: int | None = None, *, fetch_text: int = 0) -> Stage:
        """The first stage with another depth ``k`` (and the text of its top ``fetch_text`` hits),
        over the same opened index and the same query encoder: what a service asks per request.

        Raises:
            PipelineSpecError: the pipeline reads a given run (nothing to retrieve from).
        """
        if self.collection is None or self.spec.first_stage.run is not None:
            raise PipelineSpecError("this pipeline re-ranks a given run: it has no first stage to search")
        key = (k, fetch_text)
        stage = self._retrievers.get(key)
        if stage is None:
            if self.spec.first_stage.uses_vectors and self._encoder is None:
                stored = self.collection.vectors(self.spec.vectors)
                if stored is not None:  # else first_stage_of says how to build them
                    self._encoder = query_encoder(self.spec, stored)
            stage = first_stage_of(
                self.spec,
                self.collection,
                k=k,
                fetch_text=fetch_text,
                vectors=self.vectors,
                encoder=self._encoder,
            )
            self._retrievers[key] = stage
        return stage

    def close(self) -> None:
        """Release the index (searchers) and the text source; a later use reopens them."""
        fetch = getattr(self.rerank, "fetch", None)
        if fetch is not None and hasattr(fetch, "close"):
            fetch.close()
        if self.collection is not None:
            self.collection.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_pipeline(
    spec: PipelineSpec,
    collection: Collection | None = None,
    *,
    store: str | os.PathLike[str] | None = None,
    stored_segments: bool = False,
    first_stage_only: bool = False,
) -> Pipeline:
    """Build every stage of ``spec`` (nothing heavy is loaded: models load on first use).

    Args:
        spec: the pipeline.
        collection: the opened index (default: one made from ``spec.index``).
        store: the score store of the scorers that compute scores (a scorer that reads stored passage
            vectors scores by lookup and keeps no store).
        stored_segments: take each document's passages from the stored passage vectors when they were
            made by the same segmenter (no splitting per query; the service's fast path).
        first_stage_only: build the first stage alone (``evirank search``): ``rerank`` is None.

    Raises:
        PipelineSpecError: parts that do not fit together (e.g. stored vectors of another model).
    """
    from evirank.rerank import FetchText, Rerank
    from evirank.rerank.prune import Cascade

    if collection is None and spec.index is not None:
        collection = Collection(spec.index)
    vectors = _vectors(spec, collection)
    if first_stage_only:
        if spec.first_stage.run is not None:
            raise PipelineSpecError("a first stage makes the run that --run would give: drop --run")
        if collection is None:
            collection = Collection(spec.require_index("a first stage"))
        stage = first_stage_of(spec, collection, vectors=vectors)
        return Pipeline(spec, collection, None, stage, None, vectors, "none")
    scorer, readers = _scorers(spec, vectors, store)
    segment, source = _segment(spec, collection, vectors)
    budget = passage_budget(scorer)
    segmenter = segment.build(
        tokenizer=budget[0] if budget else None, max_tokens=budget[1] if budget else None
    ).with_max_passages(spec.max_passages or None)
    cascade = Cascade(  # the cheap scorer runs where and how the others do (in this process, unstored)
        vectors,
        spec.prune,
        spec.prune_by,
        from_index=spec.vectors is None,
        runtime=spec.runtime.with_changes(store=None, ray=None),
    )
    for reader in readers:
        cascade.check(segmenter, reader)
    prune = cascade.stage(segmenter, readers[0] if len(readers) == 1 and not spec.multi else None)
    if stored_segments and vectors is not None and vectors.identity.segment == segment.spec:
        from evirank.vectors.segments import StoredSegments

        segmenter = StoredSegments(vectors, fallback=segmenter)
    if collection is not None:
        fetch = FetchText(docs=collection.docs, missing=spec.missing_docs)  # type: ignore[arg-type]
    elif spec.corpus is not None:
        fetch = FetchText(
            corpus=spec.corpus,
            corpus_format=spec.corpus_format,
            missing=spec.missing_docs,  # type: ignore[arg-type]
        )
    else:
        fetch = None  # the runs carry their text (the in-memory ranker)
    rerank = Rerank(
        segmenter,
        scorer,
        spec.aggregator(),
        fetch=fetch,
        depth=spec.depth,
        passage_stages=(prune,) if prune is not None else (),
    )
    first = None
    if collection is not None and spec.first_stage.run is None:
        first = first_stage_of(spec, collection, vectors=vectors)
    duo = _duo(spec, store)
    info = {"segment": segment.spec, "segment_source": source}
    if vectors is not None:
        info["vectors"] = f"{vectors.path.name} ({len(vectors):,} passages, {vectors.identity.segment})"
    return Pipeline(spec, collection, rerank, first, duo, vectors, source, info)


def _vectors(spec: PipelineSpec, collection: Collection | None) -> PassageVectors | None:
    """The stored passage vectors the pipeline reads (None when no stage reads any)."""
    named = spec.vectors
    if not spec.reads_vectors:
        if named is not None and named.strip().lower() != "none":
            logger.warning(
                "--vectors %s is not used: neither a scorer, --prune-by nor the first stage reads "
                "stored passage vectors",
                named,
            )
        return None
    if collection is not None:
        vectors = collection.vectors(named)
    else:
        from evirank.vectors.index import resolve_vectors

        vectors = resolve_vectors(named, None)
    if vectors is not None:
        logger.info("passage vectors: %s", vectors)
    elif spec.first_stage.uses_vectors:
        where = spec.index or "the index"
        raise PipelineSpecError(
            f"{where} has no passage vectors for a {spec.first_stage.method} first stage: build them with "
            f"`evirank embed --index {where}`, or name a folder with --vectors VDIR"
        )
    return vectors


def _scorers(spec: PipelineSpec, vectors: Any, store: Any) -> tuple[Any, list[Any]]:
    """(the scorer stage, the scorers that read stored vectors)."""
    from evirank.score.multi import Scorers

    options = dict(spec.scorer_options)
    built, readers = [], []
    for scorer_spec in spec.scorers:
        reads = vectors if scorer_spec.stores_passages and vectors is not None else None
        extra = {"vectors": reads} if reads is not None else {}
        runtime = spec.runtime.with_changes(store=None if reads is not None else store)
        scorer = scorer_spec.build(runtime, **options, **extra)
        if reads is not None:
            readers.append(scorer)
        built.append((scorer_spec.label, scorer))
    if spec.multi:
        return Scorers(built), readers
    return built[0][1], readers


def _segment(spec: PipelineSpec, collection: Collection | None, vectors: Any) -> tuple[Any, str]:
    """(the segmenter spec, where it came from): given, the stored vectors', or the default."""
    from evirank.segment import SegmentSpec

    if spec.segment is not None:
        return spec.segment, "given"
    stored = vectors if vectors is not None else collection.vectors(spec.vectors) if collection else None
    if stored is not None and stored.identity.segment:
        logger.info(
            "segmenter %s: the stored passage vectors' (give --segment to choose another)",
            stored.identity.segment,
        )
        return SegmentSpec.parse(stored.identity.segment), "stored vectors"
    return SegmentSpec.parse(spec.default_segment), "default"


def first_stage_of(
    spec: PipelineSpec,
    collection: Collection,
    *,
    k: int | None = None,
    fetch_text: int = 0,
    vectors: PassageVectors | None = None,
    encoder: Scorer | None = None,
) -> Stage:
    """The first-stage stage of ``spec`` over ``collection`` (BM25, dense or fused), depth ``k``.

    A dense side embeds queries with ``encoder`` (default: :func:`query_encoder`).
    """
    first = spec.first_stage
    depth = first.k if k is None else k
    lexical = {"k1": first.bm25[0], "b": first.bm25[1], "rm3": first.rm3, "threads": first.threads}
    if first.method == "bm25":
        return collection.bm25(depth, fetch_text=fetch_text, **lexical)
    from evirank.firststage.dense import DenseRetriever
    from evirank.firststage.fusion import Fusion, Hybrid

    stored = vectors if vectors is not None else collection.vectors(spec.vectors)
    if stored is None:
        raise PipelineSpecError(
            f"{collection.path} has no passage vectors for a dense first stage: build them with "
            f"`evirank embed --index {collection.path}`, or name a folder with --vectors VDIR"
        )
    dense = DenseRetriever(stored, scorer=encoder or query_encoder(spec, stored), k=depth)
    if first.method == "dense":
        return dense
    return Hybrid(collection.bm25(depth, **lexical), dense, Fusion.parse(first.method), k=depth)


def query_encoder(spec: PipelineSpec, stored: PassageVectors) -> Scorer:
    """The model that embeds queries for a search over ``stored`` passage vectors.

    The family that made the vectors (their manifest says it): the pipeline's scorer of that
    family (its model), else the family's default model; another model than the vectors' is refused
    when searching.
    """
    from evirank.score.family import make_scorer

    made_by = str((stored.manifest.get("model") or {}).get("kind") or "") or None
    own = next((s for s in spec.scorers if s.family == made_by), None)
    # the pipeline's engine, precision and threads, as every stage that runs a model; the vectors'
    # fingerprint names the ones they were made with, and another one is refused when searching
    runtime = spec.runtime.with_changes(
        store=None, ray=None, max_length=spec.runtime.max_length if own is not None else None
    )
    return make_scorer(
        own.family if own is not None else made_by, own.model if own is not None else None, runtime
    )


def _duo(spec: PipelineSpec, store: Any) -> Duo | None:
    """The pairwise stage (None without ``duo``), sharing the score store."""
    if spec.duo is None or spec.duo_model is None:
        return None
    from evirank.score.document_pairs import Duo

    family, model = duo_spec(spec.duo_model)
    runtime = spec.runtime.with_changes(store=store)
    return Duo(model, spec.duo, aggregate=spec.duo_aggregate, family=family, runtime=runtime)


def duo_spec(text: str) -> tuple[str | None, str]:
    """(family, model) of ``[FAMILY:]MODEL`` (a prefix that is no registered family is part of the model).

    Example:
        >>> duo_spec("models/duo")
        (None, 'models/duo')
    """
    from evirank.score.family import family_names

    family, sep, model = text.partition(":")
    if sep and family.strip().lower() in family_names():
        return family.strip().lower(), model
    return None, text
