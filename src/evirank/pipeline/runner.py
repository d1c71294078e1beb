"""``evirank rerank`` as a function: a frozen :class:`RerankConfig` in, the run and its record out.

:func:`run_rerank` reads the topics and the first stage, builds the one pipeline of the config's
:class:`~evirank.pipeline.PipelineSpec` (:func:`~evirank.pipeline.build_pipeline`: the same
builder ``serve`` and ``search`` use), runs it, and writes the run, ``OUT.json`` (configuration,
canonical specs, counts, timings, versions) and optionally the scored passages. The command line
only turns flags into a config.

Example:
    >>> from evirank.pipeline import PipelineSpec
    >>> spec = PipelineSpec.from_mapping({"run": "runs/bm25.txt", "corpus": "corpus.jsonl",
    ...                                   "scorer": "bi", "aggregate": "maxp"})
    >>> config = RerankConfig(spec, topics="topics.tsv", output="runs/out.txt")
    >>> config.store_path()
    PosixPath('runs/out.txt.scores.sqlite')
    >>> sidecar(config.output)
    PosixPath('runs/out.txt.json')
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evirank.pipeline.spec import PipelineSpec, PipelineSpecError
from evirank.record import sidecar
from evirank.segment.base import DEFAULT_MAX_PASSAGES

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_PASSAGES", "RerankConfig", "RerankConfigError", "default_store", "run_rerank"]

#: A configuration of ``evirank rerank`` that cannot run (said before anything is loaded).
RerankConfigError = PipelineSpecError


@dataclass(frozen=True)
class RerankConfig:
    """One re-ranking job: the pipeline, the queries, and what is written.

    Attributes:
        pipeline: the pipeline (:class:`~evirank.pipeline.PipelineSpec`): first stage (a run or
            retrieval from the index), text source, segmenter, scorers, cascade, aggregator, depth,
            pairwise stage, runtime.
        topics: topics file, BEIR folder or ``irds:<id>``.
        output: the re-ranked TREC run (``OUT.json`` and, by default, ``OUT.scores.sqlite`` beside it).
        field: TREC topic field.
        split: BEIR split whose queries are kept.
        scores: the score store (None: ``OUT.scores.sqlite``).
        no_scores: keep no score store.
        tag: run tag (None: ``evirank-SCORERS-AGGREGATE``).
        save_passages: a Parquet file for the scored passages.
        overwrite: replace existing outputs (the score store is kept).
        query_block: re-rank this many queries at a time (None: all at once).
    """

    pipeline: PipelineSpec
    topics: str | Path
    output: str | Path
    field: str = "title"
    split: str | None = None
    scores: str | Path | None = None
    no_scores: bool = False
    tag: str | None = None
    save_passages: str | Path | None = None
    overwrite: bool = False
    query_block: int | None = None

    def check(self) -> None:
        """Refuse settings that cannot run, before anything is loaded.

        Raises:
            RerankConfigError: with what to give instead.
        """
        spec = self.pipeline
        if spec.first_stage.run is None and spec.index is None:
            raise RerankConfigError("give --run RUN, or --index DIR to retrieve the first stage with BM25")
        if spec.index is None and spec.corpus is None:
            raise RerankConfigError("give a text source: --index DIR or --corpus PATH")
        if self.query_block is not None and self.query_block < 1:
            raise RerankConfigError(f"--query-block must be a positive integer, found {self.query_block}")

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

    def outputs(self) -> list[Path]:
        """The files this job writes (checked before any work)."""
        extra = [Path(self.save_passages)] if self.save_passages else []
        return [Path(self.output), sidecar(self.output), *extra]

    def run_tag(self) -> str:
        """The run tag: ``tag``, else ``evirank-LABELS-AGGREGATE`` (``evirank-cross-birch3``).

        With several scorers, their labels joined by ``+`` (``evirank-cross+bi-birch3``).
        """
        scorer = "+".join(s.label for s in self.pipeline.scorers)
        return self.tag or f"evirank-{scorer}-{self.pipeline.aggregate.spec.replace(':', '')}"

    def describe(self) -> dict[str, Any]:
        """The job as a plain dict, for its record."""
        return {
            "topics": str(self.topics),
            "output": str(self.output),
            "field": self.field,
            "split": self.split,
            "scores": None if self.scores is None else str(self.scores),
            "no_scores": self.no_scores,
            "tag": self.tag,
            "save_passages": None if self.save_passages is None else str(self.save_passages),
            "overwrite": self.overwrite,
            "query_block": self.query_block,
            "pipeline": self.pipeline.describe(),
        }


def default_store(output: str | Path) -> Path:
    """The default score store of a run: ``OUT.scores.sqlite`` next to ``OUT``."""
    path = Path(output)
    return path.with_name(path.name + ".scores.sqlite")


def read_first_stage(config: RerankConfig, pipeline: Any) -> tuple[Any, Any, dict[str, Any]]:
    """(topics, the first-stage run, how it was made): a given run read, or the pipeline's first stage."""
    from evirank.io import read_run, read_topics

    spec = config.pipeline
    topics = read_topics(config.topics, field=config.field, split=config.split)
    if spec.first_stage.run is not None:
        return topics, read_run(spec.first_stage.run), {"run": str(spec.first_stage.run)}
    stage = pipeline.first_stage
    first = stage(topics)
    config_of = getattr(getattr(stage, "config", None), "to_dict", None)
    if config_of is not None:  # BM25 (or BM25+RM3): its settings as Lucene ran them
        return topics, first, {"bm25": config_of(), "index": str(spec.index)}
    return topics, first, {**spec.first_stage.describe(), "index": str(spec.index)}


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
    from evirank.pipeline import build_pipeline
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
        from evirank.score.stores import check_store_path

        check_store_path(store)

    timings = StageTimings()
    started = time.perf_counter()
    spec = config.pipeline
    # models are resolved (families told from their files) when the spec is made; the pipeline's
    # stages are built before the first stage runs, so a bad combination fails before any search
    pipeline = build_pipeline(spec, store=store)
    rerank = pipeline.reranker
    by_lookup = all(getattr(scorer, "vectors", None) is not None for _, scorer in _scorers_of(rerank.scorer))
    if by_lookup and pipeline.duo is None:
        if config.scores is not None:
            raise RerankConfigError(
                f"--scores {config.scores}: every scorer reads the stored passage vectors (scores by "
                "lookup are not kept in a store); keep the scored passages with --save-passages FILE "
                "(evirank tune --passages FILE reads them), or pass --vectors none to compute and store "
                "every score"
            )
        store = None  # scores by lookup cost microseconds: they are not kept in a store
    # with a duo stage the store keeps its pair scores (a rerun or a smaller k computes none)
    logger.info("pipeline: %s (depth %d)", describe_stage(rerank), spec.depth)
    with pipeline:
        with timings.measure("first_stage"):
            topics, first, first_stage = read_first_stage(config, pipeline)
        if first.empty:
            raise RerankConfigError(
                f"the first stage has no documents ({spec.first_stage.run or spec.index})"
            )
        if config.query_block:
            from evirank.scale import rerank_in_blocks

            result = rerank_in_blocks(
                rerank,
                first,
                query_block=config.query_block,
                topics=topics,
                timings=timings,
                keep_passages=bool(config.save_passages),
            )
        else:
            result = rerank.run(first, topics=topics, timings=timings)
    duo = pipeline.duo
    if duo is not None:
        from evirank.score.document_pairs import best_passages

        with timings.measure("duo"):
            result.run = duo(best_passages(result.run, result.passages))
        stats = getattr(duo.scorer, "stats_", None)
        for name in ("distinct", "cached", "computed"):
            result.counts[f"duo_{name}"] = int(getattr(stats, name, 0))
    tag = config.run_tag()
    scorer = rerank.scorer
    # The run, its record and the passages succeed or fail together: all are written under
    # temporary names first and renamed into place only when every one of them is complete.
    with atomic_outputs(*((path, None) for path in outputs), overwrite=config.overwrite) as temps:
        with timings.measure("write"):
            write_run(result.run, temps[0], tag=tag)
            if config.save_passages:
                save_passages(result.passages, temps[2])
        record = make_record(
            "rerank",
            config.describe(),
            run=config.output,
            tag=tag,
            first_stage=first_stage,
            text=spec.text_source(),
            topics={
                "path": config.topics,
                "field": config.field,
                "split": config.split,
                "count": len(topics),
            },
            depth=spec.depth,
            segment=spec_of(rerank.segmenter),
            segmenter=describe_stage(rerank.segmenter),
            prune=[describe_stage(stage) for stage in rerank.passage_stages] or None,
            vectors=describe_vectors(rerank),
            scorer={**_describe(scorer), "fingerprint": _fingerprint(scorer)},
            evidence=_evidence_record(rerank) if spec.multi else None,
            duo=None if duo is None else {**duo.describe(), "fingerprint": _fingerprint(duo.scorer)},
            aggregate=spec.aggregate.spec,
            aggregator=describe_stage(rerank.aggregator),
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


def _scorers_of(scorer: Any) -> list[tuple[str, Any]]:
    """(label, scorer) of each scorer of a scorer stage (one, or :class:`~evirank.score.multi.Scorers`)."""
    items = getattr(scorer, "items", None)
    return list(items()) if callable(items) else [("", scorer)]


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
