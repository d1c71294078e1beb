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
        corpus: a corpus file or folder with the text instead of ``index``.
        corpus_format: its format (None: told from the files; see :data:`evirank.io.CORPUS_FORMATS`).
        field: TREC topic field.
        split: BEIR split whose queries are kept.
        missing_docs: ``"error"`` or ``"keep"`` documents absent from the text source.
        k: BM25 depth without ``run``.
        rm3: BM25+RM3 without ``run``.
        scorer: a model family (:func:`evirank.score.family.family_names`), or ``auto`` to tell it
            from the model's files (without ``model``: the default bi-encoder).
        model: Hugging Face id or local folder (every family but ``bi`` needs one).
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
        prune_by: ``"bm25"`` or a scorer spec such as ``bi`` (:class:`evirank.rerank.prune.Prune`).
        ray: run the model on Ray: ``local``, ``auto`` or a cluster address (None: in this process).
        ray_workers: model replicas on Ray (None: by the cluster's resources).
        ray_cpus: cores per replica.
        ray_gpus: GPUs per replica.
        query_block: re-rank this many queries at a time (None: all at once).
        first_stage: without ``run``: ``bm25``, ``dense`` (the index's passage vectors, or
            ``vectors``), ``rrf[:K]`` or ``interp[:WEIGHT]`` (the two fused; :mod:`evirank.firststage`).
        evidence: several scorers instead of ``scorer``/``model``, each ``[LABEL=]FAMILY[:MODEL]``
            (:class:`~evirank.score.multi.ScorerSpec`); their evidence is
            combined by :class:`~evirank.aggregate.MultiEvidence`.
        evidence_weights: ``LABEL=W`` weights of the scorers after the first (the first gets 1
            minus their sum; None: equal shares).
        duo: after aggregation, re-rank each query's top ``duo`` documents with a pairwise model
            (:class:`~evirank.score.pairwise.Duo`: k(k-1) model calls per query), each document
            read as its best passage; None: no pairwise stage.
        duo_model: the pairwise model, ``[FAMILY:]MODEL`` (the family: a pairwise one; None: the
            pairwise family that recognises the model).
    """

    topics: str | Path
    output: str | Path
    run: str | Path | None = None
    index: str | Path | None = None
    corpus: str | Path | None = None
    corpus_format: str | None = None
    field: str = "title"
    split: str | None = None
    missing_docs: str = "error"
    k: int = 1000
    rm3: bool = False
    scorer: str = "auto"
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
    evidence: tuple[str, ...] = ()
    evidence_weights: tuple[str, ...] | None = None
    duo: int | None = None
    duo_model: str | None = None

    def scorer_specs(self) -> tuple[Any, ...]:
        """The scorers: :attr:`evidence` parsed, or the one of ``scorer`` and ``model``.

        Example:
            >>> config = RerankConfig("t", "o", corpus="c", evidence=("cross:m", "bi"))
            >>> [str(s) for s in config.scorer_specs()]
            ['cross=cross:m', 'bi=bi']
        """
        from evirank.score.multi import ScorerSpec, parse_scorers

        if self.evidence:
            return parse_scorers(self.evidence)
        return (ScorerSpec.parse(f"{self.scorer}:{self.model}" if self.model else self.scorer),)

    @property
    def multi(self) -> bool:
        """Whether several scorers' evidence is combined."""
        return len(self.evidence) > 1

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
        if self.evidence and self.model:
            raise RerankConfigError(
                "with --evidence, give each scorer's model there (cross:MODEL, bi:MODEL), not --model"
            )
        if (self.duo is None) != (self.duo_model is None):
            raise RerankConfigError("--duo K and --duo-model MODEL go together")
        if self.duo is not None and self.duo < 2:
            raise RerankConfigError(f"--duo re-ranks at least 2 documents per query, found {self.duo}")
        if self.evidence_weights and not self.multi:
            raise RerankConfigError("--evidence-weights needs two scorers or more (--evidence, repeated)")
        try:
            from evirank.rerank.prune import check_prune

            self.scorer_specs()  # an unknown family or a model that cannot be read fails here

            check_prune(self.aggregator(), self.prune)
            self.segment_spec()
        except ValueError as exc:
            raise RerankConfigError(str(exc)) from exc

    def aggregator(self) -> Any:
        """The aggregator stage of ``aggregate``, ``alpha``, ``weights`` and ``normalise``.

        With several scorers, a :class:`~evirank.aggregate.MultiEvidence` with ``evidence_weights``.
        """
        from evirank.aggregate import parse_aggregate, parse_evidence_aggregate

        if self.multi:
            from evirank.score.multi import parse_evidence_weights

            return parse_evidence_aggregate(
                self.aggregate,
                [spec.label for spec in self.scorer_specs()],
                alpha=self.alpha,
                weights=None if self.weights is None else list(self.weights),
                evidence_weights=parse_evidence_weights(self.evidence_weights),
                normalise=self.normalise,  # type: ignore[arg-type]
            )
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
        """The run tag: ``tag``, else ``evirank-FAMILY-AGGREGATE`` (``evirank-cross-birch3``).

        With several scorers, their labels joined by ``+`` (``evirank-cross+bi-birch3``).
        """
        scorer = "+".join(s.label for s in self.scorer_specs())
        return self.tag or f"evirank-{scorer}-{self.aggregate.replace(':', '')}"


def default_store(output: str | Path) -> Path:
    """The default score store of a run: ``OUT.scores.sqlite`` next to ``OUT``."""
    path = Path(output)
    return path.with_name(path.name + ".scores.sqlite")


def build_scorer(
    config: RerankConfig, store: str | Path | None, vectors: Any = None, spec: Any = None
) -> Any:
    """The scorer the config asks for (nothing heavy is loaded yet), through the family registry.

    ``spec`` (a :class:`~evirank.score.multi.ScorerSpec`) picks one of several scorers; a family
    that stores passage representations reads ``vectors`` when given.
    """
    chosen = spec if spec is not None else config.scorer_specs()[0]
    options: dict[str, Any] = {
        "max_length": config.max_length,
        "batch_tokens": config.batch_tokens,
        "device": config.device,
        "store": store,
        "backend": config.backend,
        "ray": config.ray_options(),
    }
    if vectors is not None:
        options["vectors"] = vectors
    return chosen.build(**options)


def build_scorers(config: RerankConfig, store: str | Path | None, vectors: Any = None) -> Any:
    """The :class:`~evirank.score.multi.Scorers` of several scorers, each with the score store.

    A scorer that stores passage representations reads ``vectors`` when given (its scores are
    then lookups, not kept in the store).
    """
    from evirank.score.multi import Scorers

    pairs = []
    for spec in config.scorer_specs():
        reads = vectors if spec.stores_passages else None
        pairs.append((spec.label, build_scorer(config, None if reads is not None else store, reads, spec)))
    return Scorers(pairs)


def build_pipeline(config: RerankConfig, store: str | Path | None) -> Any:
    """The :class:`~evirank.rerank.Rerank` pipeline of ``config``: fetch, segment, score, aggregate.

    Passages are cut to the scorer's room for a passage (its ``passage_budget``).
    """
    from evirank.rerank import FetchText, Rerank, passage_budget
    from evirank.rerank.prune import cascade_from_flags

    fetch = (
        FetchText(index=config.index, missing=config.missing_docs)  # type: ignore[arg-type]
        if config.index
        else FetchText(
            corpus=config.corpus,
            corpus_format=config.corpus_format,
            missing=config.missing_docs,  # type: ignore[arg-type]
        )
    )
    aggregator = config.aggregator()
    specs = config.scorer_specs()
    reads_passages = any(spec.stores_passages for spec in specs)
    cascade = cascade_from_flags(config, aggregator, RerankConfigError, reads_passages)
    stored = cascade.vectors if reads_passages else None
    if config.multi:
        scorer = build_scorers(config, store, stored)
        reader = None
    else:
        scorer = build_scorer(config, None if stored is not None else store, stored, specs[0])
        reader = scorer if specs[0].stores_passages else None
    budget = passage_budget(scorer)
    segmenter = (
        config.segment_spec()
        .build(tokenizer=budget[0] if budget else None, max_tokens=budget[1] if budget else None)
        .with_max_passages(config.max_passages or None)
    )
    prune = cascade.stage(segmenter, reader)
    return Rerank(
        segmenter,
        scorer,
        aggregator,
        fetch=fetch,
        depth=config.depth,
        passage_stages=(prune,) if prune is not None else (),
    )


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


def build_duo(config: RerankConfig, store: str | Path | None) -> Any:
    """The pairwise stage of ``duo`` / ``duo_model`` (None without one), sharing the score store."""
    if config.duo is None or config.duo_model is None:
        return None
    from evirank.score.pairwise import Duo

    family, model = duo_spec(config.duo_model)
    options = {
        "store": store,
        "device": config.device,
        "batch_tokens": config.batch_tokens,
        "max_length": config.max_length,
        "ray": config.ray_options(),
    }
    return Duo(model, config.duo, family=family, **options)


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
    # the query encoder: the re-ranking scorer when it is a bi-encoder, else the default one
    one = config.scorer_specs()[0]
    own = not config.multi and isinstance(build_scorer(config, None, spec=one), BiEncoder)
    scorer = BiEncoder(
        one.model if own else None, max_length=config.max_length if own else None, device=config.device
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
    duo = build_duo(config, store)
    if duo is not None:
        from evirank.score.pairwise import best_passages

        with timings.measure("duo"):
            result.run = duo(best_passages(result.run, result.passages))
        stats = getattr(duo.scorer, "stats_", None)
        for name in ("distinct", "cached", "computed"):
            result.counts[f"duo_{name}"] = int(getattr(stats, name, 0))
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
            text={"index": config.index}
            if config.index
            else {"corpus": config.corpus, "format": config.corpus_format},
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
            evidence=_evidence_record(pipeline) if config.multi else None,
            duo=None if duo is None else {**duo.describe(), "fingerprint": _fingerprint(duo.scorer)},
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


def _evidence_record(pipeline: Any) -> dict[str, Any]:
    """The scorers' labels, weights (lambda, summing to 1) and fingerprints, for the record."""
    from evirank.aggregate.evidence import describe_evidence
    from evirank.rerank.prune import Cascade

    by_lookup = {
        label: Cascade(scorer.vectors).describe()
        for label, scorer in pipeline.scorer.items()
        if hasattr(getattr(scorer, "vectors", None), "manifest")
    }
    return {
        "weights": describe_evidence(pipeline.aggregator),
        "fingerprints": pipeline.scorer.fingerprints(),
        "vectors": by_lookup or None,
    }


def _fingerprint(scorer: Any) -> str | None:
    value = getattr(scorer, "fingerprint", None)
    return None if value is None else str(value)
