"""One description of a re-ranking pipeline, parsed once: :class:`PipelineSpec`.

A pipeline is: a first stage (a given run, or BM25 / BM25+RM3 / dense / fused retrieval from an
index, depth ``k``), a text source (the index or a corpus), a segmenter, one or more scorers (model
families, each ``[LABEL=]FAMILY[:MODEL]``) with their weights, an optional cascade (a cheap scorer
keeps each document's best passages), an aggregator, the number of documents re-ranked (``depth``)
and an optional pairwise stage (``duo``). Every part is written in the one spec grammar
(:mod:`evirank.grammar`) and parsed here, when the spec is made, so a bad spec or a model that cannot
be read fails before any work. The same spec comes from flags (:mod:`evirank.pipeline.flags`),
from a mapping (a conditions file) or from Python, and one function builds it
(:func:`evirank.pipeline.build_pipeline`).

Example:
    >>> spec = PipelineSpec.from_mapping({"index": "indexes/scifact", "scorer": ["bi"],
    ...                                   "aggregate": "birch:2", "segment": "windows:100:50"})
    >>> spec.describe()["scorers"], spec.segment.spec, spec.aggregate.spec
    (['bi=bi'], 'windows:100:50', 'birch:2')
    >>> PipelineSpec.from_mapping({"corpus": "c.jsonl", "duo": 1, "duo_model": "m"})
    Traceback (most recent call last):
    ...
    evirank.pipeline.spec.PipelineSpecError: --duo re-ranks at least 2 documents per query, found 1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from evirank.config import SETTINGS, Runtime, SettingError

if TYPE_CHECKING:
    from evirank.aggregate import Aggregator, MultiEvidence

#: The largest first-stage depth Lucene accepts (a Java int).
MAX_K = 2**31 - 1


class PipelineSpecError(SettingError):
    """A pipeline description that cannot run (said before anything is loaded)."""


def _checked(name: str, value: Any) -> Any:
    """``value`` of setting ``name``, checked by the settings table (a PipelineSpecError if it is bad)."""
    try:
        return SETTINGS.check(name, value)
    except SettingError as exc:
        raise PipelineSpecError(str(exc)) from None


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

    method: str = SETTINGS.default("first_stage")
    k: int = SETTINGS.default("k")
    bm25: tuple[float, float] = SETTINGS.default("bm25")
    rm3: Any = None
    run: str | None = None
    threads: int = SETTINGS.default("threads")

    def __post_init__(self) -> None:
        from evirank.firststage.build import parse_first_stage

        try:
            object.__setattr__(self, "method", parse_first_stage(self.method))
        except ValueError as exc:
            raise PipelineSpecError(f"--first-stage: {exc}") from None
        _checked("k", self.k)
        _checked("threads", self.threads)
        k1, b = _checked("bm25", tuple(self.bm25))
        if not (k1 >= 0 and 0 <= b <= 1):
            raise PipelineSpecError(f"--bm25 K1 B: expected K1 >= 0 and B in [0, 1], found {k1} {b}")
        object.__setattr__(self, "bm25", (k1, b))
        if self.run is not None and self.method != "bm25":
            raise PipelineSpecError(
                f"--first-stage {self.method} searches the index; --run is a finished first stage: "
                "give one of them"
            )
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
            ``min``, ``max`` (duoBERT) or ``sym-sum`` (duoT5;
            :data:`evirank.score.document_pairs.DUO_AGGREGATES`).
        runtime: devices, backend, batching, Ray (:class:`Runtime`).
    """

    index: str | None = None
    corpus: str | None = None
    corpus_format: str | None = None
    missing_docs: str = SETTINGS.default("missing_docs")
    first_stage: FirstStageSpec = field(default_factory=FirstStageSpec)
    scorers: tuple[Any, ...] = ()
    scorer_weights: tuple[tuple[str, float], ...] = ()
    scorer_options: tuple[tuple[str, Any], ...] = ()
    segment: Any = SETTINGS.default("segment")
    default_segment: str = SETTINGS.default("default_segment")
    max_passages: int = SETTINGS.default("max_passages")
    vectors: str | None = None
    prune: int | None = None
    prune_by: str = SETTINGS.default("prune_by")
    aggregate: Any = SETTINGS.default("aggregate")
    alpha: float | None = None
    weights: tuple[float, ...] | None = None
    normalise: str | None = None
    depth: int = SETTINGS.default("depth")
    duo: int | None = None
    duo_model: str | None = None
    duo_aggregate: str = SETTINGS.default("duo_aggregate")
    runtime: Runtime = field(default_factory=Runtime)

    def __post_init__(self) -> None:
        from evirank.aggregate import AggregateSpec
        from evirank.aggregate.evidence import check_labels
        from evirank.score.multi import ScorerSpec
        from evirank.segment import SegmentSpec

        if self.index is not None and self.corpus is not None:
            raise PipelineSpecError("give one text source: --index DIR or --corpus PATH, not both")
        for name in (
            "corpus_format",
            "missing_docs",
            "max_passages",
            "depth",
            "prune",
            "alpha",
            "duo_aggregate",
        ):
            object.__setattr__(self, name, _checked(name, getattr(self, name)))
        if self.weights is not None:
            object.__setattr__(self, "weights", tuple(_checked("weights", list(self.weights))))
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
            if isinstance(exc, PipelineSpecError):
                raise
            raise PipelineSpecError(str(exc)) from exc
        self._check_scorer_kinds()
        self._check_cascade()
        if (self.duo is None) != (self.duo_model is None):
            raise PipelineSpecError("--duo K and --duo-model MODEL go together")
        if self.duo is not None and (
            isinstance(self.duo, bool) or not isinstance(self.duo, int) or self.duo < 2
        ):
            raise PipelineSpecError(f"--duo re-ranks at least 2 documents per query, found {self.duo}")
        if self.duo is not None and self.duo > self.depth:
            raise PipelineSpecError(
                f"--duo {self.duo} compares the top {self.duo} documents by their best passages, but only "
                f"the top {self.depth} are split into passages and scored (--depth {self.depth}): give "
                f"--duo at most {self.depth}, or --depth at least {self.duo}"
            )
        if self.first_stage.run is None and self.first_stage.method != "bm25":
            self.require_index(f"--first-stage {self.first_stage.method}")
        from evirank.score.devices import DeviceUnavailableError, check_device

        try:
            check_device(self.runtime.device)
        except DeviceUnavailableError as exc:
            raise PipelineSpecError(str(exc)) from None

    def _check_scorer_kinds(self) -> None:
        """Refuse, before anything loads, scorers the pipeline cannot use as they are named: a
        pairwise family as a passage scorer, and ``--aggregate document`` over a scorer that writes
        no document score."""
        from evirank.score.family import family_names, get_family

        for scorer in self.scorers:
            family = get_family(scorer.family)
            if family.pairwise:
                passage_families = [n for n in family_names() if not get_family(n).pairwise]
                model = scorer.model or "MODEL"
                raise PipelineSpecError(
                    f"--scorer {family.name}:{model}: the {family.name} family compares two documents "
                    f"for a query (a pairwise model), it does not score one passage; it re-ranks the top "
                    f"documents after aggregation: --duo K --duo-model {family.name}:{model}, with a "
                    f"passage scorer as --scorer ({', '.join(passage_families)})"
                )
        if self.aggregate.kind == "document":
            for scorer in self.scorers:
                family = get_family(scorer.family)
                if not family.document_score:
                    writers = [n for n in family_names() if get_family(n).document_score]
                    raise PipelineSpecError(
                        f"--aggregate document reads the score a document-level scorer gives each "
                        f"document (--scorer {' or '.join(writers) or 'parade'}); the {family.name} "
                        "scorer scores passages only: aggregate them with maxp, firstp, birch, sump or meanp"
                    )

    def _check_cascade(self) -> None:
        from evirank.rerank.prune import BM25, check_prune

        if self.prune is None:
            return
        try:
            check_prune(self.aggregator(), self.prune)
            if self.prune_by != BM25:
                from evirank.score.family import get_family
                from evirank.score.multi import ScorerSpec

                cheap = get_family(ScorerSpec.parse(self.prune_by).family)
                if cheap.pairwise:
                    raise PipelineSpecError(
                        f"--prune-by {self.prune_by}: the {cheap.name} family compares two documents (a "
                        "pairwise model); the cascade needs a scorer of one passage (bm25, bi, cross, ...)"
                    )
        except PipelineSpecError:
            raise
        except ValueError as exc:
            raise PipelineSpecError(f"--prune-by: {exc}" if "scorer" in str(exc) else str(exc)) from exc
        if len(self.scorers) > 1:
            raise PipelineSpecError("--prune is for one scorer; with several scorers every passage is scored")

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], **overrides: Any) -> PipelineSpec:
        """The spec of flag-like options (a parsed command line's ``vars(args)``, or a mapping read
        from a conditions file): the keys are the settings' names (``-`` or ``_``), a key that is
        absent or None takes the setting's default (:data:`~evirank.config.SETTINGS`), unknown keys
        are ignored, and ``overrides`` win.

        Raises:
            PipelineSpecError: a bad value, naming the flag.
        """
        given = {str(k).replace("-", "_"): v for k, v in {**options, **overrides}.items()}

        def get(name: str) -> Any:
            try:
                return SETTINGS.value(given, name)
            except SettingError as exc:
                raise PipelineSpecError(str(exc)) from None

        scorers = _scorer_texts(get("scorer"), get("model"))
        ray = given.get("ray")
        if ray is None or isinstance(ray, str):
            from evirank.scale.options import RayOptions

            try:
                ray = RayOptions.from_mapping(given)
            except ValueError as exc:
                raise PipelineSpecError(
                    f"--ray: {exc}" if not isinstance(exc, SettingError) else str(exc)
                ) from None
        try:
            runtime = Runtime.from_mapping(given, ray=ray)
        except SettingError as exc:
            raise PipelineSpecError(str(exc)) from None
        weights = get("weights")
        return cls(
            index=_path(get("index")),
            corpus=_path(get("corpus")),
            corpus_format=get("corpus_format"),
            missing_docs=get("missing_docs"),
            first_stage=FirstStageSpec(
                method=get("first_stage"),
                k=get("k"),
                bm25=tuple(get("bm25")),
                rm3=_rm3(given.get("rm3")),
                run=_path(get("run")),
                threads=get("threads"),
            ),
            scorers=scorers,
            scorer_weights=_weights(get("scorer_weights")),
            scorer_options=tuple(dict(given.get("scorer_options") or {}).items()),
            segment=get("segment"),
            default_segment=get("default_segment"),
            max_passages=get("max_passages"),
            vectors=_path(get("vectors")),
            prune=get("prune"),
            prune_by=get("prune_by"),
            aggregate=get("aggregate"),
            alpha=get("alpha"),
            weights=None if weights is None else tuple(weights),
            normalise=get("normalise"),
            depth=get("depth"),
            duo=get("duo"),
            duo_model=get("duo_model"),
            duo_aggregate=get("duo_aggregate"),
            runtime=runtime,
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

    def require_index(self, purpose: str) -> str:
        """The index folder, or a :class:`PipelineSpecError` saying that ``purpose`` needs one.

        Example:
            >>> PipelineSpec(corpus="corpus.jsonl").require_index("the service")
            Traceback (most recent call last):
            ...
            evirank.pipeline.spec.PipelineSpecError: the service searches an index: give --index DIR
        """
        if self.index is None:
            raise PipelineSpecError(f"{purpose} searches an index: give --index DIR")
        return self.index

    def aggregator(self) -> Aggregator | MultiEvidence:
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


def _path(value: Any) -> str | None:
    """A path given as text or as a path (None stays None)."""
    return None if value is None else str(value)


def _rm3(value: Any) -> Any:
    """RM3 from a flag's words (``[]``: Anserini's defaults), a switch (True/False) or an Rm3."""
    if value is None or value is False:
        return None
    from evirank.lucene.search import Rm3

    if value is True:
        return Rm3()
    if isinstance(value, Rm3):
        return value
    try:
        return Rm3.parse([str(v) for v in (value.split() if isinstance(value, str) else value)])
    except (TypeError, ValueError) as exc:
        raise PipelineSpecError(f"--rm3: {exc}") from None


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
