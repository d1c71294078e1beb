"""``evirank rerank`` as a function: a frozen :class:`RerankConfig` in, the run and its record out.

:func:`run_rerank` reads the inputs, builds the one :class:`~evirank.rerank.Rerank` pipeline from
the config (the segmenter and aggregator from their specs, the scorer with its score store), runs
it, and writes the run, ``OUT.json`` (configuration, canonical specs, counts, timings, versions)
and optionally the scored passages. The command line only turns flags into a config.

Example:
    >>> config = RerankConfig(topics="topics.tsv", output="runs/out.txt", run="runs/bm25.txt",
    ...                       corpus="corpus.jsonl", scorer="bi", aggregate="maxp")
    >>> config.store_path()
    PosixPath('runs/out.txt.scores.sqlite')
    >>> sidecar(config.output)
    PosixPath('runs/out.txt.json')
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evirank.errors import UsageError
from evirank.record import sidecar

logger = logging.getLogger(__name__)

#: Segments kept per document by default (the value of
#: :data:`evirank.segment.base.DEFAULT_MAX_PASSAGES`, repeated so the command line stays light).
DEFAULT_MAX_PASSAGES = 1000


class RerankConfigError(UsageError):
    """A configuration of ``evirank rerank`` that cannot run (said before anything is loaded)."""


@dataclass(frozen=True)
class RerankConfig:
    """The inputs and settings of one re-ranking job (the flags of ``evirank rerank``).

    Attributes:
        topics: topics file, BEIR folder or ``irds:<id>``.
        output: the re-ranked TREC run (``OUT.json`` and, by default, ``OUT.scores.sqlite`` beside it).
        run: the first-stage run; None retrieves BM25 from ``index`` (top ``k``, ``rm3``).
        index: Lucene index with stored documents (text, and the first stage without ``run``).
        corpus: a corpus file or BEIR folder with the text instead of ``index``.
        field: TREC topic field.
        split: BEIR split whose queries are kept.
        missing_docs: ``"error"`` or ``"keep"`` documents absent from the text source.
        k: BM25 depth without ``run``.
        rm3: BM25+RM3 without ``run``.
        scorer: ``"cross"`` or ``"bi"``.
        model: Hugging Face id or local folder (cross needs one).
        max_length: input token cap (None: the scorer's).
        batch_tokens: token budget per batch (None: by device).
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:1``, ``mps``.
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        scores: the score store (None: ``OUT.scores.sqlite``).
        no_scores: keep no score store.
        segment: a segmenter spec (:mod:`evirank.segment.spec`).
        max_passages: segments kept per document, its first ones (0: no limit).
        aggregate: an aggregator spec (:mod:`evirank.aggregate.registry`).
        alpha: the first-stage weight (None: the aggregator's default).
        weights: Birch's top-n weights (None: 1, 1/2, 1/4, ...).
        normalise: ``"minmax"`` or ``"none"`` (None: the default, ``"minmax"``).
        depth: documents re-ranked per query.
        tag: run tag (None: ``evirank-SCORER-AGGREGATE``).
        save_passages: a Parquet file for the scored passages.
        overwrite: replace existing outputs (the score store is kept).
        vectors: stored passage vectors for a bi-encoder (None: the index's own, if any; ``"none"``: off).
        prune: the cascade: passages kept per document by ``prune_by`` before scoring (None: all).
        prune_by: ``"bm25"`` or ``"bi"`` (:class:`evirank.rerank.prune.Prune`).
        ray: run the model on Ray: ``local``, ``auto`` or a cluster address (None: in this process).
        ray_workers: model replicas on Ray (None: by the cluster's resources).
        ray_cpus: cores per replica.
        ray_gpus: GPUs per replica.
        query_block: re-rank this many queries at a time (None: all at once).
        first_stage: without ``run``: ``bm25``, ``dense`` (the index's passage vectors, or
            ``vectors``), ``rrf[:K]`` or ``interp[:WEIGHT]`` (the two fused; :mod:`evirank.firststage`).
    """

    topics: str | Path
    output: str | Path
    run: str | Path | None = None
    index: str | Path | None = None
    corpus: str | Path | None = None
    field: str = "title"
    split: str | None = None
    missing_docs: str = "error"
    k: int = 1000
    rm3: bool = False
    scorer: str = "cross"
    model: str | None = None
    max_length: int | None = None
    batch_tokens: int | None = None
    device: str = "auto"
    backend: str = "torch"
    scores: str | Path | None = None
    no_scores: bool = False
    segment: str = "sentences"
    max_passages: int = DEFAULT_MAX_PASSAGES
    aggregate: str = "birch:3"
    alpha: float | None = None
    weights: tuple[float, ...] | None = None
    normalise: str | None = None
    depth: int = 100
    tag: str | None = None
    save_passages: str | Path | None = None
    overwrite: bool = False
    vectors: str | Path | None = None
    prune: int | None = None
    prune_by: str = "bm25"
    ray: str | None = None
    ray_workers: int | None = None
    ray_cpus: float = 1.0
    ray_gpus: float = 0.0
    query_block: int | None = None
    first_stage: str = "bm25"

    def check(self) -> None:
        """Refuse inconsistent settings and bad specs before anything is loaded.

        Raises:
            RerankConfigError: with what to give instead.
        """
        if self.run is None and self.index is None:
            raise RerankConfigError("give --run RUN, or --index DIR to retrieve the first stage with BM25")
        if self.first_stage != "bm25":
            from evirank.firststage import parse_first_stage

            try:
                parse_first_stage(self.first_stage)
            except ValueError as exc:
                raise RerankConfigError(f"--first-stage: {exc}") from exc
            if self.run is not None or self.index is None:
                raise RerankConfigError("--first-stage retrieves from --index: give --index, and no --run")
        if (self.index is None) == (self.corpus is None):
            raise RerankConfigError("give exactly one text source: --index DIR or --corpus PATH")
        if self.scorer not in ("cross", "bi"):
            raise RerankConfigError(f"--scorer must be cross or bi, found {self.scorer!r}")
        if self.scorer == "cross" and not self.model:
            raise RerankConfigError(
                "--scorer cross needs --model (a Hugging Face model id or a local folder)"
            )
        try:
            from evirank.rerank.prune import check_prune

            check_prune(self.aggregator(), self.prune)
            self.segment_spec()
        except ValueError as exc:
            raise RerankConfigError(str(exc)) from exc

    def aggregator(self) -> Any:
        """The aggregator stage of ``aggregate``, ``alpha``, ``weights`` and ``normalise``."""
        from evirank.aggregate import parse_aggregate

        return parse_aggregate(
            self.aggregate,
            alpha=self.alpha,
            weights=None if self.weights is None else list(self.weights),
            normalise=self.normalise,  # type: ignore[arg-type]
        )

    def segment_spec(self) -> Any:
        """The parsed ``segment`` (:class:`evirank.segment.SegmentSpec`)."""
        from evirank.segment import SegmentSpec

        return SegmentSpec.parse(self.segment)

    def store_path(self) -> Path | None:
        """The score store: ``scores``, else ``OUT.scores.sqlite``; None with ``no_scores``.

        A URL (``s3://...``) is kept as it is: use :meth:`store_location`."""
        if self.no_scores:
            return None
        return Path(self.scores) if self.scores else default_store(self.output)

    def store_location(self) -> str | Path | None:
        """:meth:`store_path`, or the URL of a store on object storage."""
        if self.scores is not None and "://" in str(self.scores):
            return str(self.scores)
        return self.store_path()

    def ray_options(self) -> Any:
        """The :class:`~evirank.scale.RayOptions` of ``ray``, ``ray_workers``, ... (None without ``ray``)."""
        if self.ray is None:
            return None
        from evirank.scale import RayOptions

        return RayOptions(self.ray, self.ray_workers, self.ray_cpus, self.ray_gpus)

    def outputs(self) -> list[Path]:
        """The files this job writes (checked before any work)."""
        extra = [Path(self.save_passages)] if self.save_passages else []
        return [Path(self.output), sidecar(self.output), *extra]

    def run_tag(self) -> str:
        """The run tag: ``tag``, else ``evirank-SCORER-AGGREGATE`` (``evirank-cross-birch3``)."""
        return self.tag or f"evirank-{self.scorer}-{self.aggregate.replace(':', '')}"


def default_store(output: str | Path) -> Path:
    """The default score store of a run: ``OUT.scores.sqlite`` next to ``OUT``."""
    path = Path(output)
    return path.with_name(path.name + ".scores.sqlite")


def build_scorer(config: RerankConfig, store: str | Path | None, vectors: Any = None) -> Any:
    """The scorer the config asks for (nothing heavy is loaded yet); a bi-encoder reads ``vectors``."""
    from evirank.score import BiEncoder, CrossEncoder

    kwargs: dict[str, Any] = {
        "batch_tokens": config.batch_tokens,
        "device": config.device,
        "store": store,
        "backend": config.backend,
        "ray": config.ray_options(),
    }
    if config.scorer == "bi":
        return BiEncoder(config.model, max_length=config.max_length, vectors=vectors, **kwargs)
    if config.max_length is not None:
        kwargs["max_length"] = config.max_length
    return CrossEncoder(config.model, **kwargs)  # type: ignore[arg-type]


def build_pipeline(config: RerankConfig, store: str | Path | None) -> Any:
    """The :class:`~evirank.rerank.Rerank` pipeline of ``config``: fetch, segment, score, aggregate.

    Sentences are cut to the scorer's room for a passage (:meth:`~evirank.score.BiEncoder.passage_budget`).
    """
    from evirank.rerank import FetchText, Rerank, passage_budget

    fetch = (
        FetchText(index=config.index, missing=config.missing_docs)  # type: ignore[arg-type]
        if config.index
        else FetchText(corpus=config.corpus, missing=config.missing_docs)  # type: ignore[arg-type]
    )
    from evirank.rerank.prune import cascade_from_flags

    aggregator = config.aggregator()
    cascade = cascade_from_flags(config, aggregator, RerankConfigError)
    bi_vectors = cascade.vectors if config.scorer == "bi" else None
    scorer = build_scorer(config, None if bi_vectors is not None else store, bi_vectors)
    budget = passage_budget(scorer)
    segmenter = (
        config.segment_spec()
        .build(tokenizer=budget[0] if budget else None, max_tokens=budget[1] if budget else None)
        .with_max_passages(config.max_passages or None)
    )
    prune = cascade.stage(segmenter, scorer if config.scorer == "bi" else None)
    return Rerank(
        segmenter,
        scorer,
        aggregator,
        fetch=fetch,
        depth=config.depth,
        passage_stages=(prune,) if prune is not None else (),
    )


def read_first_stage(config: RerankConfig) -> tuple[Any, Any, dict[str, Any]]:
    """(topics, the first-stage run, how it was made): ``run`` read, or BM25 retrieved from ``index``."""
    from evirank.io import read_run, read_topics

    topics = read_topics(config.topics, field=config.field, split=config.split)
    if config.run is not None:
        return topics, read_run(config.run), {"run": str(config.run)}
    from evirank.lucene import Bm25, Rm3

    if config.first_stage != "bm25":
        return topics, *_retrieve(config, topics)
    with Bm25(config.index, rm3=Rm3() if config.rm3 else None, k=config.k) as bm25:  # type: ignore[arg-type]
        first = bm25(topics)
    return topics, first, {"bm25": bm25.config.to_dict(), "index": str(config.index)}


def _retrieve(config: RerankConfig, topics: Any) -> tuple[Any, dict[str, Any]]:
    """A dense or fused first stage (``--first-stage``) from the index and its passage vectors."""
    from evirank.firststage import build_first_stage, parse_first_stage
    from evirank.lucene import Rm3
    from evirank.score import BiEncoder
    from evirank.vectors.index import resolve_vectors

    assert config.index is not None
    vectors = resolve_vectors(None if config.vectors in (None, "none") else str(config.vectors), config.index)
    bi = config.scorer == "bi"  # the query encoder is the re-ranking bi-encoder, or the default one
    scorer = BiEncoder(
        config.model if bi else None, max_length=config.max_length if bi else None, device=config.device
    )
    try:
        stage = build_first_stage(
            config.first_stage,
            config.index,
            k=config.k,
            rm3=Rm3() if config.rm3 else None,
            vectors=vectors,
            scorer=scorer,
        )
    except ValueError as exc:
        raise RerankConfigError(str(exc)) from exc
    first = stage(topics)
    close = getattr(getattr(stage, "first", stage), "close", None)
    if close is not None:
        close()
    spec = parse_first_stage(config.first_stage)
    return first, {"first_stage": spec, "index": str(config.index), "rm3": config.rm3, "k": config.k}


def run_rerank(config: RerankConfig) -> dict[str, Any]:
    """Read the inputs, re-rank, write the run, its record, and optionally the scored passages.

    Returns:
        The record written to ``OUT.json``.

    Raises:
        RerankConfigError: a bad configuration or an empty first stage.
        OutputExistsError: an output exists and ``overwrite`` is False.
    """
    from evirank.io import write_run
    from evirank.outputs import atomic_outputs, check_output
    from evirank.record import compact_json, make_record
    from evirank.rerank import StageTimings
    from evirank.rerank.pipeline import describe_stage, save_passages
    from evirank.rerank.prune import describe_vectors
    from evirank.segment import spec_of

    config.check()
    outputs = config.outputs()
    for path in outputs:
        check_output(path, config.overwrite)  # before any (long) work
    store = config.store_location()
    if store is not None:
        from evirank.score.store import check_store_path

        check_store_path(store)

    timings = StageTimings()
    started = time.perf_counter()
    with timings.measure("first_stage"):
        topics, first, first_stage = read_first_stage(config)
    if first.empty:
        raise RerankConfigError(f"the first stage has no documents ({config.run or config.index})")
    pipeline = build_pipeline(config, store)
    logger.info("pipeline: %s (depth %d)", describe_stage(pipeline), config.depth)
    if getattr(pipeline.scorer, "vectors", None) is not None:
        store = None  # scores by lookup cost microseconds: they are not kept in a store

    assert pipeline.fetch is not None
    with pipeline.fetch:
        if config.query_block:
            from evirank.scale import rerank_in_blocks

            result = rerank_in_blocks(
                pipeline,
                first,
                query_block=config.query_block,
                topics=topics,
                timings=timings,
                keep_passages=bool(config.save_passages),
            )
        else:
            result = pipeline.run(first, topics=topics, timings=timings)
    tag = config.run_tag()
    scorer = pipeline.scorer
    # The run, its record and the passages succeed or fail together: all are written under
    # temporary names first and renamed into place only when every one of them is complete.
    with atomic_outputs(*((path, None) for path in outputs), overwrite=config.overwrite) as temps:
        with timings.measure("write"):
            write_run(result.run, temps[0], tag=tag)
            if config.save_passages:
                save_passages(result.passages, temps[2])
        record = make_record(
            "rerank",
            asdict(config),
            run=config.output,
            tag=tag,
            first_stage=first_stage,
            text={"index": config.index} if config.index else {"corpus": config.corpus},
            topics={
                "path": config.topics,
                "field": config.field,
                "split": config.split,
                "count": len(topics),
            },
            depth=config.depth,
            segment=spec_of(pipeline.segmenter),
            segmenter=describe_stage(pipeline.segmenter),
            prune=[describe_stage(stage) for stage in pipeline.passage_stages] or None,
            vectors=describe_vectors(pipeline),
            scorer={**_describe(scorer), "fingerprint": _fingerprint(scorer)},
            aggregate=pipeline.aggregator.spec,
            aggregator=describe_stage(pipeline.aggregator),
            scores=store,
            passages_file=config.save_passages,
            counts=result.counts,
            timings_s=timings.as_dict(),
            wall_s=round(time.perf_counter() - started, 3),
        )
        temps[1].write_text(compact_json(record) + "\n", encoding="utf-8")
    counts = result.counts
    logger.info(
        "re-ranked %d documents of %d queries (%d passages; model ran on %s items; from the store: "
        "%s pairs, %s embeddings) into %s",
        counts["documents_reranked"],
        counts["queries"],
        counts["passages"],
        counts.get("scorer_computed", "?"),
        counts.get("scorer_cached", "?"),
        counts.get("scorer_embeddings_cached", 0),
        config.output,
    )
    logger.info("time per stage:\n%s", timings.table())
    return record


def _describe(scorer: Any) -> dict[str, Any]:
    describe = getattr(scorer, "describe", None)
    return dict(describe()) if describe is not None else {"stage": repr(scorer)}


def _fingerprint(scorer: Any) -> str | None:
    value = getattr(scorer, "fingerprint", None)
    return None if value is None else str(value)
