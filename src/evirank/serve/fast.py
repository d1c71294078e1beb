"""What makes a new query fast: stored passages and vectors, and a cross-encoder cascade.

:func:`evidence_stages` turns the service's segmenter and scorer into their fast forms when it can:

* the index has passage vectors (``evirank index --embed``) made by the same bi-encoder and segmenter:
  passages are read from the stored table (no sentence splitting per query) and a bi-encoder scores
  them by lookup, embedding only the query;
* ``prune=N`` with a cross-encoder: a cheap scorer (BM25 over the passages, or the bi-encoder by
  lookup) keeps each document's N best passages, and only those reach the cross-encoder.

Example:
    >>> stages = evidence_stages(
    ...     "indexes/scifact", Sentences(), BiEncoder(), Birch(), None, None, "bm25", None
    ... )  # doctest: +SKIP
    >>> stages.info["evidence"]  # doctest: +SKIP
    'stored passage vectors (45,123 passages): only the query is embedded'
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from evirank.stage import Stage

logger = logging.getLogger(__name__)


@dataclass
class EvidenceStages:
    """The segmenter and scorer the service runs, and what to tell users about them."""

    segmenter: Any
    scorer: Any
    info: dict[str, Any] = field(default_factory=dict)


def evidence_stages(
    index: str | os.PathLike[str],
    segmenter: Any,
    scorer: Any,
    aggregator: Any,
    vectors: str | None,
    prune: int | None,
    prune_by: str,
    device: str | None,
) -> EvidenceStages:
    """The fast forms of ``segmenter`` and ``scorer`` for ``index`` (see the module docstring).

    Args:
        index: the Lucene index (its marker may record passage vectors).
        segmenter: the service's segmenter.
        scorer: the service's scorer (a BiEncoder or a CrossEncoder).
        aggregator: the aggregator (Birch's top n must not exceed ``prune``).
        vectors: a vector folder, ``"none"``, or None for the index's own.
        prune: passages kept per document before a cross-encoder, or None.
        prune_by: ``bm25`` or ``bi``.
        device: where a bi-encoder built for pruning runs.

    Raises:
        VectorsMismatchError: a bi-encoder would read vectors made by another model or segmenter.
        ValueError: ``prune`` below Birch's top n, or ``prune`` with a bi-encoder scorer.
    """
    from evirank.rerank.prune import Prune, check_prune
    from evirank.score import BiEncoder
    from evirank.vectors import VectorsMismatchError
    from evirank.vectors.index import resolve_vectors
    from evirank.vectors.manifest import segment_spec
    from evirank.vectors.segments import StoredSegments

    is_bi = isinstance(scorer, BiEncoder)
    if prune is not None and is_bi:
        raise ValueError("--prune is for a cross-encoder (--scorer cross); a bi-encoder reads every passage")
    check_prune(aggregator, prune)
    stored = resolve_vectors(vectors, index)
    info: dict[str, Any] = {}
    cheap = None
    if prune is not None and prune_by == "bi":
        cheap = BiEncoder(device=device or "auto")
    reader = scorer if is_bi else cheap
    if stored is not None:
        same_segments = stored.identity.segment == segment_spec(segmenter)
        if reader is not None:
            try:
                stored.check_scorer(reader, segmenter)
            except VectorsMismatchError as exc:
                hint = "; or serve with --vectors none" if vectors is None else ""
                raise VectorsMismatchError(f"{exc}{hint}") from None
            reader.vectors = stored
        if same_segments:
            segmenter = StoredSegments(stored, fallback=segmenter)
        info["vectors"] = f"{stored.path.name} ({len(stored):,} passages, {stored.identity.segment})"
    elif cheap is not None:
        logger.warning("--prune-by bi without stored vectors embeds every candidate passage per query")
    if is_bi:
        info["evidence"] = (
            "stored passage vectors: only the query is embedded"
            if stored is not None
            else "passages embedded per query (no stored vectors: evirank index --embed)"
        )
    if prune is not None:
        scorer = _Cascade(Prune(prune, prune_by, cheap), scorer)
        info["evidence"] = f"cross-encoder on each document's {prune} best passages by {prune_by}"
    return EvidenceStages(segmenter, scorer, info)


class _Cascade(Stage):
    """Prune, then score: one piece for the service (it runs under the scorer's lock)."""

    def __init__(self, prune: Stage, scorer: Any) -> None:
        self.prune = prune
        self.scorer = scorer

    def transform(self, frame: Any) -> Any:
        return self.scorer(self.prune(frame))

    def __getattr__(self, name: str) -> Any:  # warm_up and stats reach the real scorer
        if name in ("prune", "scorer"):
            raise AttributeError(name)
        return getattr(self.scorer, name)
