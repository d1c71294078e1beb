"""Build the real :class:`~evirank.serve.searcher.Searcher`: Lucene BM25, a segmenter, a model, an aggregator.

Everything heavy (the JVM, torch, the model) is imported here, inside :func:`build_searcher`, and
the model is loaded once by :func:`warm_up` before the service starts listening.

The ``--segment`` and ``--aggregate`` specs are those of ``evirank rerank``, parsed by the same
functions (:mod:`evirank.segment.spec`, :mod:`evirank.aggregate.registry`).

Example:
    >>> from evirank.aggregate import parse_aggregate
    >>> parse_aggregate("birch:2", alpha=0.3, weights="1,0.5").weights
    (1.0, 0.5)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from evirank.aggregate import parse_aggregate
from evirank.frames import RANK, Document
from evirank.segment.spec import SegmentSpec, SegmentSpecError
from evirank.serve.searcher import Searcher

logger = logging.getLogger(__name__)

#: First-stage depths that get their own searcher; a request's depth is rounded up to one of them and cut.
DEPTH_BUCKETS = (10, 20, 50, 100, 200, 500, 1000)


class BucketedBm25:
    """``(topics, depth) -> Run`` over a few :class:`evirank.lucene.Bm25` stages of fixed depths.

    Lucene loads each hit's stored document, so a request for depth 20 should not pay for 1,000 hits;
    one stage per depth would open one searcher per distinct depth. The middle way: a stage per bucket
    of :data:`DEPTH_BUCKETS` (opened on first use), each fetching text for all its hits, cut to the
    requested depth.

    Args:
        index: the Lucene index folder.
        max_depth: the largest depth that will be asked for.
        k1: BM25 k1.
        b: BM25 b.
    """

    def __init__(
        self, index: str | os.PathLike[str], max_depth: int, k1: float = 0.9, b: float = 0.4
    ) -> None:
        self.index = Path(index)
        self.k1 = k1
        self.b = b
        self.buckets = tuple(sorted({d for d in DEPTH_BUCKETS if d < max_depth} | {max_depth}))
        self._stages: dict[int, Any] = {}

    def stage(self, depth: int) -> Any:
        """The Bm25 stage serving ``depth`` (the smallest bucket at least as deep)."""
        from evirank.lucene import Bm25

        bucket = next((b for b in self.buckets if b >= depth), self.buckets[-1])
        if bucket not in self._stages:
            self._stages[bucket] = Bm25(self.index, k1=self.k1, b=self.b, k=bucket, fetch_text=bucket)
        return self._stages[bucket]

    def __call__(self, topics: pd.DataFrame, depth: int) -> pd.DataFrame:
        run = self.stage(depth)(topics)
        return run[run[RANK] <= depth].reset_index(drop=True)


def serve_segmenter(segment: str, title: str | None = None) -> SegmentSpec:
    """The service's segmenter spec: ``--segment`` in the one grammar, ``--title`` a deprecated override.

    ``title`` (``prepend``, ``segment`` or ``skip``; the old ``--title`` flag) replaces the spec's
    title mode when given, with a warning; write ``--segment sentences:prepend`` instead.

    Example:
        >>> serve_segmenter("sentences", "prepend").spec
        'sentences:prepend'
        >>> serve_segmenter("windows:100:50").spec
        'windows:100:50'
    """
    spec = SegmentSpec.parse(segment)
    if title is None:
        return spec
    if title not in ("prepend", "segment", "skip"):
        raise SegmentSpecError(f"--title must be prepend, segment or skip; found {title!r}")
    changed = spec.with_title(title)
    logger.warning("--title is deprecated: write --segment %s", changed.spec)
    return changed


#: The service's segmenter when neither ``--segment`` nor stored vectors choose one.
DEFAULT_SEGMENT = "sentences:prepend"


def stored_segment(index: str | os.PathLike[str], vectors: str | None) -> str | None:
    """The segmenter spec of the passage vectors the service would read, or None (none stored).

    So that ``evirank serve --index DIR`` over an index embedded with ``--segment whole`` uses
    ``whole`` without being told.

    Example:
        >>> stored_segment("no-such-index", "none") is None
        True
    """
    if vectors is not None and vectors.strip().lower() == "none":
        return None
    from evirank.vectors.index import VECTORS_DIR, vectors_entry
    from evirank.vectors.manifest import read_manifest

    try:  # the manifest only: the vectors are opened once, by the searcher
        if vectors is None:
            entry = vectors_entry(index) if Path(index).is_dir() else None
            if entry is None:
                return None
            vectors = str(Path(index) / str(entry.get("path", VECTORS_DIR)))
        spec = str(read_manifest(vectors).get("segment") or "") or None
    except (OSError, ValueError):  # reported where the vectors are opened for real
        return None
    if spec:
        logger.info("segmenter %s: the stored passage vectors' (give --segment to choose another)", spec)
    return spec


def build_searcher(
    index: str | os.PathLike[str],
    model: str | None = None,
    scorer: str = "auto",
    segment: str | None = None,
    title: str | None = None,
    aggregate: str = "birch:3",
    alpha: float | None = None,
    weights: str | Sequence[float] | None = None,
    scores: str | os.PathLike[str] | None = None,
    device: str | None = None,
    evidence: int = 3,
    max_depth: int = 100,
    vectors: str | None = None,
    prune: int | None = None,
    prune_by: str = "bm25",
    batch: int = 32,
    scorers: Sequence[str] | None = None,
    scorer_weights: Sequence[str] | str | None = None,
) -> Searcher:
    """The Lucene + model pipeline behind the service.

    Args:
        index: a Lucene index built by ``evirank index`` (raw documents stored).
        model: Hugging Face id or local folder; ``None`` is the offline all-MiniLM-L6-v2 bi-encoder.
        scorer: a model family (``bi``, ``cross``, ... :func:`~evirank.score.family.family_names`), or
            ``auto``: told from the model's files.
        segment: a segmenter spec (:mod:`evirank.segment.spec`), e.g. ``sentences:prepend``,
            ``windows:150:75``, ``whole``; ``None``: the stored vectors' segmenter when the
            service reads some, else ``sentences:prepend``.
        title: deprecated: overrides the spec's title mode (``prepend``, ``segment``, ``skip``).
        aggregate: ``birch[:N] | maxp | firstp | sump | meanp`` (:mod:`evirank.aggregate.registry`).
        alpha: weight of the first-stage score in the aggregation (default: Birch 0.5, others 0).
        weights: Birch's weights of the top-N passages (numbers or ``"1,0.5,0.25"``).
        scores: a persistent score store (SQLite path) to reuse and fill.
        device: ``cuda``, ``mps`` or ``cpu``; ``None`` picks the best available.
        evidence: passages returned per candidate.
        max_depth: the deepest re-ranking a request may ask for.
        vectors: stored passage vectors (a folder); ``None`` uses the index's own (``evirank index
            --embed``) when it has some, ``"none"`` never. With them a bi-encoder embeds only the
            query, and passages are read from the stored table instead of being split per query.
        prune: cascade: keep each document's ``prune`` best passages by ``prune_by`` (``bm25`` or a
            scorer spec such as ``bi``) and score only those.
        batch: with stored vectors and a bi-encoder, the most queries of concurrent requests embedded
            in one model call (:class:`evirank.serve.fast.BatchedQueries`).
        scorers: several scorers' evidence instead of ``scorer``/``model``, each
            ``[LABEL=]FAMILY[:MODEL]`` as ``evirank rerank --evidence``
            (:mod:`evirank.score.multi`); a bi-encoder reads the stored vectors when there are some.
        scorer_weights: ``LABEL=W`` weights of the scorers after the first (default: equal shares).

    Raises:
        ValueError: on a bad spec; FileNotFoundError when the index is missing.
    """
    segment = segment or stored_segment(index, vectors) or DEFAULT_SEGMENT
    if scorers and len(scorers) > 1:
        return _build_multi_searcher(
            index, scorers, scorer_weights, segment, title, aggregate, alpha, weights, scores, device,
            evidence, max_depth, vectors, prune,
        )  # fmt: skip
    from evirank.score.multi import ScorerSpec

    one = ScorerSpec.parse(scorers[0] if scorers else f"{scorer}:{model}" if model else scorer)
    if not Path(index).is_dir():
        raise FileNotFoundError(
            f"no index folder at {index}: build one with `evirank index --corpus ... --index {index}`"
        )
    from evirank.lucene import LuceneDocs
    from evirank.serve.fast import evidence_stages

    segment_spec = serve_segmenter(segment, title)
    try:
        aggregator = parse_aggregate(aggregate, alpha=alpha, weights=weights)
    except ValueError as exc:
        raise ValueError(f"--aggregate: {exc}") from None
    segmenter = segment_spec.build()
    model_stage = one.build(device=device or "auto", store=scores)
    fast = evidence_stages(
        index, segmenter, model_stage, aggregator, vectors, prune, prune_by, device, batch=batch
    )
    segmenter, model_stage = fast.segmenter, fast.scorer
    docs = LuceneDocs(index)

    def lookup(docno: str) -> Document | None:
        try:
            return docs[docno]
        except KeyError:
            return None

    model_name = one.model or "all-MiniLM-L6-v2 (offline default)"
    return Searcher(
        BucketedBm25(index, max_depth=max_depth),
        segmenter,
        model_stage,
        aggregator,
        lookup,
        evidence=evidence,
        info={
            **collection_info(index),
            "model": str(model_name),
            "scorer": one.family,
            "segment": segment_spec.spec,
            "aggregate": aggregator.spec,
            "store": Path(scores).name if scores else None,
            **fast.info,
        },
    )


def _build_multi_searcher(
    index: str | os.PathLike[str],
    scorers: Sequence[str],
    scorer_weights: Sequence[str] | str | None,
    segment: str,
    title: str | None,
    aggregate: str,
    alpha: float | None,
    weights: str | Sequence[float] | None,
    scores: str | os.PathLike[str] | None,
    device: str | None,
    evidence: int,
    max_depth: int,
    vectors: str | None,
    prune: int | None,
) -> Searcher:
    """:func:`build_searcher` with several scorers (:class:`~evirank.score.multi.Scorers`)."""
    from evirank.aggregate import parse_evidence_aggregate
    from evirank.lucene import LuceneDocs
    from evirank.rerank.prune import check_prune
    from evirank.score.multi import Scorers, parse_evidence_weights, parse_scorers
    from evirank.vectors import VectorsMismatchError
    from evirank.vectors.index import resolve_vectors

    if not Path(index).is_dir():
        raise FileNotFoundError(
            f"no index folder at {index}: build one with `evirank index --corpus ... --index {index}`"
        )
    if prune is not None:
        raise ValueError("--prune is for one cross-encoder; with several scorers every passage is scored")
    specs = parse_scorers(scorers)
    segment_spec = serve_segmenter(segment, title)
    try:
        aggregator = parse_evidence_aggregate(
            aggregate,
            [s.label for s in specs],
            alpha=alpha,
            weights=weights,
            evidence_weights=parse_evidence_weights(scorer_weights),
        )
    except ValueError as exc:
        raise ValueError(f"--aggregate: {exc}") from None
    check_prune(aggregator, prune)
    segmenter = segment_spec.build()
    stored = resolve_vectors(vectors, index)
    pairs: list[tuple[str, Any]] = []
    for spec in specs:
        model_scorer = spec.build(device=device or "auto")
        if spec.stores_passages and stored is not None:
            try:
                stored.check_scorer(model_scorer, segmenter)
            except VectorsMismatchError as exc:
                raise VectorsMismatchError(f"{exc}; or serve with --vectors none") from None
            model_scorer.vectors = stored
        elif scores is not None:
            model_scorer.store = scores
        pairs.append((spec.label, model_scorer))
    docs = LuceneDocs(index)

    def lookup(docno: str) -> Document | None:
        try:
            return docs[docno]
        except KeyError:
            return None

    shares = aggregator.evidence_weights() if hasattr(aggregator, "evidence_weights") else {}
    return Searcher(
        BucketedBm25(index, max_depth=max_depth),
        segmenter,
        Scorers(pairs),
        aggregator,
        lookup,
        evidence=evidence,
        info={
            **collection_info(index),
            "model": ", ".join(str(s) for s in specs),
            "scorer": "+".join(s.label for s in specs),
            "evidence_weights": ", ".join(f"{k}={v:g}" for k, v in shares.items()),
            "segment": segment_spec.spec,
            "aggregate": aggregator.spec,
            "store": Path(scores).name if scores else None,
            **({"vectors": f"{stored.path.name} ({len(stored):,} passages)"} if stored is not None else {}),
        },
    )


def collection_info(index: str | os.PathLike[str]) -> dict[str, Any]:
    """What the page says about the collection: its name (from the index record, else the folder's
    name) and a few example queries when the record has some.

    Example:
        >>> collection_info("/tmp/no-such-index")
        {'index': 'no-such-index'}
    """
    from evirank.lucene.index import read_index_info

    try:
        record = read_index_info(index) or {}
    except (OSError, ValueError):
        record = {}
    about = record.get("about") or {}
    out: dict[str, Any] = {"index": str(about.get("name") or Path(index).name)}
    examples = [str(q) for q in about.get("examples") or () if str(q).strip()]
    if examples:
        out["examples"] = examples
    return out
