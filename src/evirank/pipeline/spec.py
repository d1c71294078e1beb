"""One description of a re-ranking pipeline, parsed once: :class:`PipelineSpec`.

A pipeline is: a first stage (a given run, or BM25 / BM25+RM3 / dense / fused retrieval from an
index, depth ``k``), a text source (the index or a corpus), a segmenter, one or more scorers (model
families, each ``[LABEL=]FAMILY[:MODEL]``) with their weights, an optional cascade (a cheap scorer
keeps each document's best passages), an aggregator, the number of documents re-ranked (``depth``)
and an optional pairwise stage (``duo``). Every part is written in the one spec grammar
(:mod:`evirank.spec`) and parsed here, when the spec is made, so a bad spec or a model that cannot
be read fails before any work. The same spec comes from flags (:mod:`evirank.pipeline.flags`),
from a mapping (a conditions file) or from Python, and one function builds it
(:func:`evirank.pipeline.build_pipeline`).

Example:
    >>> spec = PipelineSpec.from_mapping({"index": "indexes/scifact", "scorer": ["bi"],
    ...                                   "aggregate": "maxp", "segment": "sentences:prepend"})
    >>> spec.describe()["scorers"], spec.segment.spec, spec.aggregate.spec
    (['bi=bi'], 'sentences:prepend', 'maxp')
    >>> PipelineSpec.from_mapping({"corpus": "c.jsonl", "duo": 1, "duo_model": "m"})
    Traceback (most recent call last):
    ...
    evirank.pipeline.spec.PipelineSpecError: --duo re-ranks at least 2 documents per query, found 1
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evirank.errors import UsageError
from evirank.segment.base import DEFAULT_MAX_PASSAGES

#: The largest first-stage depth Lucene accepts (a Java int).
MAX_K = 2**31 - 1
#: Anserini's BM25 defaults (k1, b).
BM25_DEFAULTS = (0.9, 0.4)


class PipelineSpecError(UsageError):
    """A pipeline description that cannot run (said before anything is loaded)."""


def _check_positive(name: str, value: Any, *, allow_none: bool = False, limit: int | None = None) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PipelineSpecError(f"{name} must be a positive integer, found {value!r}")
    if limit is not None and value > limit:
        raise PipelineSpecError(f"{name} must be at most {limit:,}, found {value:,}")


@dataclass(frozen=True)
class FirstStageSpec:
    """Where the candidates come from.

    Attributes:
        method: ``bm25``, ``dense`` (the index's passage vectors), ``rrf[:K]`` or ``interp[:WEIGHT]``
            (the two fused; :mod:`evirank.firststage`), in canonical spelling.
        k: documents retrieved per query.
        bm25: BM25's (k1, b).
        rm3: RM3 expansion of BM25's queries (:class:`~evirank.lucene.Rm3`), or None.
        run: a TREC run file given instead of retrieval (its documents are the candidates).
        threads: search threads.

    Example:
        >>> FirstStageSpec("interp:0.30").method, FirstStageSpec().name
        ('interp:0.3', 'bm25')
    """

    method: str = "bm25"
    k: int = 1000
    bm25: tuple[float, float] = BM25_DEFAULTS
    rm3: Any = None
    run: str | None = None
    threads: int = 1

    def __post_init__(self) -> None:
        from evirank.firststage.build import parse_first_stage

        try:
            object.__setattr__(self, "method", parse_first_stage(self.method))
        except ValueError as exc:
            raise PipelineSpecError(f"--first-stage: {exc}") from None
        _check_positive("--k", self.k, limit=MAX_K)
        _check_positive("--threads", self.threads)
        k1, b = (float(v) for v in self.bm25)
        if not (math.isfinite(k1) and k1 >= 0 and math.isfinite(b) and 0 <= b <= 1):
            raise PipelineSpecError(f"--bm25 K1 B: expected K1 >= 0 and B in [0, 1], found {k1} {b}")
        object.__setattr__(self, "bm25", (k1, b))
        if self.run is not None and self.method != "bm25":
            raise PipelineSpecError("--first-stage retrieves from --index: give --index, and no --run")
        if self.rm3 is not None and self.method == "dense":
            raise PipelineSpecError(
                "--rm3 expands BM25's queries; a dense first stage has no BM25 (fuse them: rrf or interp)"
            )

    @property
    def name(self) -> str:
        """``bm25``, ``bm25+rm3``, ``dense``, ``bm25+dense-rrf60``, or ``run``."""
        if self.run is not None:
            return "run"
        lexical = "bm25+rm3" if self.rm3 is not None else "bm25"
        if self.method == "bm25":
            return lexical
        if self.method == "dense":
            return "dense"
        return f"{lexical}+dense-{self.method.replace(':', '')}"

    @property
    def uses_vectors(self) -> bool:
        """Whether it retrieves with stored passage vectors (dense or fused)."""
        return self.run is None and self.method != "bm25"

    def describe(self) -> dict[str, Any]:
        """A plain dict for records."""
        if self.run is not None:
            return {"run": str(self.run)}
        rm3 = None if self.rm3 is None else vars(self.rm3) if hasattr(self.rm3, "__dict__") else str(self.rm3)
        return {"method": self.method, "k": self.k, "bm25": list(self.bm25), "rm3": rm3}


@dataclass(frozen=True)
class Runtime:
    """Where and how models run (every scorer of the pipeline).

    Attributes:
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:1``, ``mps``.
        backend: a backend the scorers' families run on (``torch``, ``onnx``, ``onnx-int8``, ...).
        dtype: the precision the models compute in: ``auto`` (each backend's default: bf16 on
            GPUs, fp32 on CPUs), ``fp32``, ``bf16``, ``fp16``.
        batch_tokens: token budget per batch (None: by device).
        max_length: input token cap (None: each scorer's).
        ray: :class:`~evirank.scale.RayOptions` to run the model on Ray (None: in this process).
        options: other keyword options of the scorers (a family's own, e.g. an LLM's
            ``instruction``), as (name, value) pairs.
    """

    device: str = "auto"
    backend: str = "torch"
    dtype: str = "auto"
    batch_tokens: int | None = None
    max_length: int | None = None
    ray: Any = None
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        _check_positive("--batch-tokens", self.batch_tokens, allow_none=True)
        _check_positive("--max-length", self.max_length, allow_none=True)

    def scorer_options(self) -> dict[str, Any]:
        """The keyword options every family's scorer takes (None: the family's default)."""
        return {
            "device": self.device,
            "backend": self.backend,
            **({"dtype": self.dtype} if self.dtype != "auto" else {}),
            "batch_tokens": self.batch_tokens,
            "max_length": self.max_length,
            "ray": self.ray,
            **dict(self.options),
        }


@dataclass(frozen=True)
class PipelineSpec:
    """A whole re-ranking pipeline, every part parsed (see the module).

    Attributes:
        index: a Lucene index folder (first stage and text), or None.
        corpus: a corpus (file or folder) with the documents' text instead of ``index``.
        corpus_format: its format (:data:`evirank.io.corpus.CORPUS_FORMATS`; None: told from the files).
        missing_docs: ``error`` or ``keep`` candidates absent from the text source.
        first_stage: the candidates (:class:`FirstStageSpec`).
        scorers: the scorers (:class:`~evirank.score.multi.ScorerSpec`), at least one.
        scorer_weights: weights of the scorers after the first (``label -> weight``).
        segment: the segmenter (:class:`~evirank.segment.SegmentSpec`); None: the stored passage
            vectors' segmenter when the pipeline reads some, else :attr:`default_segment`.
        default_segment: the segmenter when ``segment`` is None and no vectors choose one.
        max_passages: segments kept per document, its first ones (0: no limit).
        vectors: stored passage vectors: a folder, ``none``, or None (the index's own, if any).
        prune: the cascade: passages kept per document by ``prune_by`` before scoring (None: all).
        prune_by: ``bm25`` or a scorer spec (the cheap scorer).
        aggregate: the aggregator (:class:`~evirank.aggregate.AggregateSpec`).
        alpha: the first-stage weight (None: the aggregator's default).
        weights: Birch's top-n weights (None: 1, 1/2, 1/4, ...).
        normalise: ``minmax`` (per query) or ``none`` (None: ``minmax``).
        depth: documents re-ranked per query.
        duo: a pairwise stage over the top ``duo`` documents (None: none).
        duo_model: its model, ``[FAMILY:]MODEL``.
        duo_aggregate: how its pair probabilities become document scores: ``sum``, ``binary``,
            ``min``, ``max`` (duoBERT) or ``sym-sum`` (duoT5; :data:`evirank.score.pairwise.DUO_AGGREGATES`).
        runtime: devices, backend, batching, Ray (:class:`Runtime`).
    """

    index: str | None = None
    corpus: str | None = None
    corpus_format: str | None = None
    missing_docs: str = "error"
    first_stage: FirstStageSpec = field(default_factory=FirstStageSpec)
    scorers: tuple[Any, ...] = ()
    scorer_weights: tuple[tuple[str, float], ...] = ()
    segment: Any = None
    default_segment: str = "sentences"
    max_passages: int = DEFAULT_MAX_PASSAGES
    vectors: str | None = None
    prune: int | None = None
    prune_by: str = "bm25"
    aggregate: Any = "birch:3"
    alpha: float | None = None
    weights: tuple[float, ...] | None = None
    normalise: str | None = None
    depth: int = 100
    duo: int | None = None
    duo_model: str | None = None
    duo_aggregate: str = "sym-sum"
    runtime: Runtime = field(default_factory=Runtime)

    def __post_init__(self) -> None:
        from evirank.aggregate import AggregateSpec
        from evirank.aggregate.evidence import check_labels
        from evirank.score.multi import ScorerSpec
        from evirank.segment import SegmentSpec

        if self.index is not None and self.corpus is not None:
            raise PipelineSpecError("give one text source: --index DIR or --corpus PATH, not both")
        if self.corpus_format is not None:
            from evirank.io.corpus import CORPUS_FORMATS

            if self.corpus_format not in CORPUS_FORMATS:
                expected = ", ".join(CORPUS_FORMATS)
                found = repr(self.corpus_format)
                raise PipelineSpecError(f"--corpus-format must be one of {expected}, found {found}")
        if self.missing_docs not in ("error", "keep"):
            raise PipelineSpecError(f"--missing-docs must be error or keep, found {self.missing_docs!r}")
        try:
            scorers = tuple(s if isinstance(s, ScorerSpec) else ScorerSpec.parse(s) for s in self.scorers)
            object.__setattr__(self, "scorers", scorers or (ScorerSpec.parse("auto"),))
            check_labels([s.label for s in self.scorers])
            if self.segment is not None and not isinstance(self.segment, SegmentSpec):
                object.__setattr__(self, "segment", SegmentSpec.parse(self.segment))
            SegmentSpec.parse(self.default_segment)
            labels = [s.label for s in self.scorers]
            if self.scorer_weights and not self.multi:
                raise PipelineSpecError("--scorer-weights needs two scorers or more (--scorer, repeated)")
            if not isinstance(self.aggregate, AggregateSpec):
                object.__setattr__(
                    self,
                    "aggregate",
                    AggregateSpec.parse(
                        self.aggregate,
                        self.normalise,  # type: ignore[arg-type]
                        top_n=len(self.weights) if self.weights else None,
                        scorers=labels if len(labels) > 1 else (),
                    ),
                )
            self.aggregator()  # alpha, weights and the scorer weights checked now
        except ValueError as exc:
            raise PipelineSpecError(str(exc)) from exc
        _check_positive("--depth", self.depth)
        if not isinstance(self.max_passages, int) or self.max_passages < 0:
            raise PipelineSpecError(f"--max-passages must be 0 or more, found {self.max_passages!r}")
        self._check_cascade()
        if (self.duo is None) != (self.duo_model is None):
            raise PipelineSpecError("--duo K and --duo-model MODEL go together")
        if self.duo is not None and (
            isinstance(self.duo, bool) or not isinstance(self.duo, int) or self.duo < 2
        ):
            raise PipelineSpecError(f"--duo re-ranks at least 2 documents per query, found {self.duo}")
        from evirank.score.pairwise import duo_aggregate

        try:
            duo_aggregate(self.duo_aggregate)
        except ValueError as exc:
            raise PipelineSpecError(f"--duo-aggregate: {exc}") from None
        object.__setattr__(self, "duo_aggregate", str(self.duo_aggregate).strip().lower())
        if self.first_stage.run is None and self.index is None and self.first_stage.method != "bm25":
            raise PipelineSpecError("--first-stage retrieves from --index: give --index")

    def _check_cascade(self) -> None:
        from evirank.rerank.prune import BM25, check_prune

        if self.prune is None:
            return
        _check_positive("--prune", self.prune)
        try:
            check_prune(self.aggregator(), self.prune)
            if self.prune_by != BM25:
                from evirank.score.multi import ScorerSpec

                ScorerSpec.parse(self.prune_by)
        except ValueError as exc:
            raise PipelineSpecError(f"--prune-by: {exc}" if "scorer" in str(exc) else str(exc)) from exc
        if len(self.scorers) > 1:
            raise PipelineSpecError("--prune is for one scorer; with several scorers every passage is scored")

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], **overrides: Any) -> PipelineSpec:
        """The spec of flag-like options (a parsed command line's ``vars(args)``, or a mapping read
        from a conditions file): the keys are the flags' names (``-`` or ``_``), unknown keys are
        ignored, and ``overrides`` win.

        Raises:
            PipelineSpecError: a bad value, naming the flag.
        """
        given = {str(k).replace("-", "_"): v for k, v in {**options, **overrides}.items()}

        def get(name: str, default: Any = None) -> Any:
            value = given.get(name)
            return default if value is None else value

        scorers = _scorer_texts(get("scorer"), get("model"))
        bm25 = get("bm25", BM25_DEFAULTS)
        rm3 = get("rm3")
        if rm3 is True:
            from evirank.lucene.search import Rm3

            rm3 = Rm3()
        elif rm3 is False:
            rm3 = None
        ray = get("ray")
        if isinstance(ray, str):
            from evirank.scale import RayOptions

            try:
                ray = RayOptions(ray, given.get("ray_workers"), get("ray_cpus", 1.0), get("ray_gpus", 0.0))
            except ValueError as exc:
                raise PipelineSpecError(f"--ray: {exc}") from None
        weights = get("weights")
        return cls(
            index=None if get("index") is None else str(get("index")),
            corpus=None if get("corpus") is None else str(get("corpus")),
            corpus_format=get("corpus_format"),
            missing_docs=get("missing_docs", "error"),
            first_stage=FirstStageSpec(
                method=get("first_stage", "bm25"),
                k=get("k", 1000),
                bm25=tuple(bm25),
                rm3=rm3,
                run=None if get("run") is None else str(get("run")),
                threads=get("threads", 1),
            ),
            scorers=scorers,
            scorer_weights=_weights(get("scorer_weights")),
            segment=get("segment"),
            default_segment=get("default_segment", "sentences"),
            max_passages=get("max_passages", DEFAULT_MAX_PASSAGES),
            vectors=None if get("vectors") is None else str(get("vectors")),
            prune=get("prune"),
            prune_by=get("prune_by", "bm25"),
            aggregate=get("aggregate", "birch:3"),
            alpha=get("alpha"),
            weights=None if weights is None else tuple(float(w) for w in weights),
            normalise=get("normalise"),
            depth=get("depth", 100),
            duo=get("duo"),
            duo_model=get("duo_model"),
            duo_aggregate=get("duo_aggregate", "sym-sum"),
            runtime=Runtime(
                device=get("device", "auto"),
                backend=get("backend", "torch"),
                dtype=get("dtype", "auto") or "auto",
                batch_tokens=get("batch_tokens"),
                max_length=get("max_length"),
                ray=ray,
                options=tuple(dict(get("scorer_options", {})).items()),
            ),
        )

    def with_changes(self, **changes: Any) -> PipelineSpec:
        """A copy with some fields replaced (checked again)."""
        return replace(self, **changes)

    # ------------------------------------------------------------------------------------------
    @property
    def multi(self) -> bool:
        """Whether several scorers' evidence is combined."""
        return len(self.scorers) > 1

    @property
    def reads_vectors(self) -> bool:
        """Whether some stage reads stored passage vectors (a scorer, the cheap scorer or the first stage)."""
        from evirank.rerank.prune import BM25
        from evirank.score.multi import ScorerSpec

        cheap = (
            self.prune is not None
            and self.prune_by != BM25
            and ScorerSpec.parse(self.prune_by).stores_passages
        )
        return cheap or self.first_stage.uses_vectors or any(s.stores_passages for s in self.scorers)

    def aggregator(self) -> Any:
        """The aggregator stage (with several scorers, a :class:`~evirank.aggregate.MultiEvidence`)."""
        from evirank.aggregate import parse_aggregate, parse_evidence_aggregate

        weights = None if self.weights is None else list(self.weights)
        spec = self.aggregate
        if self.multi:
            return parse_evidence_aggregate(
                spec.spec,
                [s.label for s in self.scorers],
                alpha=self.alpha,
                weights=weights,
                evidence_weights=dict(self.scorer_weights),
                normalise=spec.normalise,
            )
        return parse_aggregate(spec.spec, alpha=self.alpha, weights=weights, normalise=spec.normalise)

    def text_source(self) -> dict[str, Any]:
        """Where the documents' text comes from, for records: the index, or the corpus (and its
        format when one was given).

        Example:
            >>> PipelineSpec(corpus="disk45", corpus_format="trec").text_source()
            {'corpus': 'disk45', 'format': 'trec'}
        """
        if self.index:
            return {"index": self.index}
        if self.corpus_format is None:
            return {"corpus": self.corpus}
        return {"corpus": self.corpus, "format": self.corpus_format}

    def describe(self) -> dict[str, Any]:
        """A plain dict of every part (canonical specs), for records and logs."""
        return {
            "first_stage": self.first_stage.describe(),
            "text": self.text_source(),
            "segment": None if self.segment is None else self.segment.spec,
            "max_passages": self.max_passages,
            "scorers": [str(s) for s in self.scorers],
            "scorer_weights": dict(self.scorer_weights) or None,
            "vectors": self.vectors,
            "prune": None if self.prune is None else {"n": self.prune, "by": self.prune_by},
            "aggregate": self.aggregate.spec,
            "normalise": self.aggregate.normalise,
            "alpha": self.alpha,
            "weights": None if self.weights is None else list(self.weights),
            "depth": self.depth,
            "duo": None
            if self.duo is None
            else {"k": self.duo, "model": self.duo_model, "aggregate": self.duo_aggregate},
            "device": self.runtime.device,
            "backend": self.runtime.backend,
            "dtype": self.runtime.dtype,
            "batch_tokens": self.runtime.batch_tokens,
            "max_length": self.runtime.max_length,
            "ray": None if self.runtime.ray is None else self.runtime.ray.to_dict(),
        }


def _scorer_texts(scorer: Any, model: Any) -> tuple[str, ...]:
    """The scorer specs of ``--scorer`` (one or repeated) and ``--model``.

    ``--model M`` goes with one ``--scorer FAMILY`` (or none: the family is told from M).
    """
    texts = [scorer] if isinstance(scorer, str) else list(scorer or ())
    if model is None:
        return tuple(str(t) for t in texts)
    if len(texts) > 1:
        raise PipelineSpecError(
            "with several --scorer, give each scorer's model in its spec (cross:MODEL, bi:MODEL), not --model"
        )
    family = texts[0] if texts else "auto"
    if ":" in family or "=" in family:
        raise PipelineSpecError(
            f"--scorer {family} already names its model; --model {model} would be a second one"
        )
    return (f"{family}:{model}",)


def _weights(value: Any) -> tuple[tuple[str, float], ...]:
    """``LABEL=W`` items (a list, one string, or a mapping) as sorted-by-input pairs."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        return tuple((str(k), float(v)) for k, v in value.items())
    from evirank.score.multi import parse_evidence_weights

    items: str | Sequence[str] = value if isinstance(value, str) else [str(v) for v in value]
    try:
        return tuple(parse_evidence_weights(items).items())
    except ValueError as exc:
        raise PipelineSpecError(f"--scorer-weights: {exc}") from None
