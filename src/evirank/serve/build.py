"""Build the real :class:`~evirank.serve.searcher.Searcher`: Lucene BM25, a segmenter, a model, an aggregator.

Everything heavy (the JVM, torch, the model) is imported here, inside :func:`build_searcher`, and
the model is loaded once by :func:`warm_up` before the service starts listening.

Example:
    >>> parse_aggregate("birch:2", alpha=0.3, weights="1,0.5").weights
    (1.0, 0.5)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from evirank.frames import RANK, Document
from evirank.serve.searcher import Searcher

logger = logging.getLogger(__name__)

#: First-stage depths that get their own searcher; a request's depth is rounded up to one of them and cut.
DEPTH_BUCKETS = (10, 20, 50, 100, 200, 500, 1000)
#: Birch's alpha for serving: an even mix of normalised BM25 and evidence (the untuned zero-shot setting
#: that beat MaxP alone on SciFact, see /work/shared/NOTES.md); weights default to 1, 1/2, 1/4.
BIRCH_ALPHA = 0.5


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


def parse_aggregate(
    spec: str, alpha: float | None = None, weights: str | Sequence[float] | None = None
) -> Any:
    """An aggregator from ``birch[:N] | maxp | firstp | sump | meanp``.

    ``alpha`` and ``weights`` apply to Birch (defaults :data:`BIRCH_ALPHA` and 1, 1/2, 1/4, ...;
    per-query min-max normalisation); ``alpha`` also to the others (default 0: evidence only).
    """
    from evirank import aggregate

    name, _, arg = spec.strip().lower().partition(":")
    if isinstance(weights, str):
        try:
            weights = [float(w) for w in weights.split(",") if w.strip()]
        except ValueError as exc:
            raise ValueError(f"--weights must be comma-separated numbers, found {weights!r}") from exc
    if name == "birch":
        try:
            top_n = int(arg) if arg else 3
        except ValueError as exc:
            raise ValueError(f"--aggregate birch:N needs a whole number N, found {arg!r}") from exc
        # weights default to 1, 1/2, 1/4, ... (Birch's own default; untuned)
        return aggregate.Birch(
            top_n=top_n, alpha=BIRCH_ALPHA if alpha is None else alpha, weights=weights, normalise="minmax"
        )
    classes = {"maxp": "MaxP", "firstp": "FirstP", "sump": "SumP", "meanp": "MeanP"}
    if name not in classes or arg:
        raise ValueError(f"--aggregate must be birch[:N], maxp, firstp, sump or meanp; found {spec!r}")
    cls = getattr(aggregate, classes[name])
    return cls(alpha=alpha or 0.0, normalise="minmax" if alpha else "none")


def parse_segment(spec: str, title: str) -> Any:
    """A segmenter from ``sentences | windows:LENGTH:STRIDE``."""
    from evirank import segment

    modes: dict[str, Literal["prepend", "segment", "skip"]] = {
        "prepend": "prepend",
        "segment": "segment",
        "skip": "skip",
    }
    if title not in modes:
        raise ValueError(f"--title must be prepend, segment or skip; found {title!r}")
    name, *args = spec.strip().lower().split(":")
    if name == "sentences" and not args:
        return segment.Sentences(title=modes[title])
    if name == "windows" and len(args) <= 2:
        try:
            length, stride = (int(a) for a in (args + ["150", "75"][len(args) :]))
        except ValueError as exc:
            raise ValueError(f"--segment windows:LENGTH:STRIDE needs whole numbers, found {spec!r}") from exc
        return segment.Windows(length=length, stride=stride, title=title != "skip")
    raise ValueError(f"--segment must be sentences or windows:LENGTH:STRIDE, found {spec!r}")


def build_searcher(
    index: str | os.PathLike[str],
    model: str | None = None,
    scorer: str = "bi",
    segment: str = "sentences",
    title: str = "prepend",
    aggregate: str = "birch:3",
    alpha: float | None = None,
    weights: str | Sequence[float] | None = None,
    scores: str | os.PathLike[str] | None = None,
    device: str | None = None,
    evidence: int = 3,
    max_depth: int = 100,
) -> Searcher:
    """The Lucene + model pipeline behind the service.

    Args:
        index: a Lucene index built by ``evirank index`` (raw documents stored).
        model: Hugging Face id or local folder; ``None`` with ``scorer="bi"`` is the offline all-MiniLM-L6-v2.
        scorer: ``"bi"`` (cosine of embeddings) or ``"cross"`` (a sequence-classification model).
        segment: ``sentences`` or ``windows:LENGTH:STRIDE``.
        title: how titles enter the passages: ``prepend``, ``segment`` or ``skip``.
        aggregate: ``birch[:N] | maxp | firstp | sump | meanp``.
        alpha: weight of the first-stage score in the aggregation.
        weights: Birch's weights of the top-N passages.
        scores: a persistent score store (SQLite path) to reuse and fill.
        device: ``cuda``, ``mps`` or ``cpu``; ``None`` picks the best available.
        evidence: passages returned per candidate.
        max_depth: the deepest re-ranking a request may ask for.

    Raises:
        ValueError: on a bad spec; FileNotFoundError when the index is missing.
    """
    if scorer not in ("bi", "cross"):
        raise ValueError(f"--scorer must be bi or cross, found {scorer!r}")
    if scorer == "cross" and model is None:
        raise ValueError(
            "--scorer cross needs --model (a cross-encoder id or folder, e.g. one from `evirank train`)"
        )
    if not Path(index).is_dir():
        raise FileNotFoundError(
            f"no index folder at {index}: build one with `evirank index --corpus ... --index {index}`"
        )
    from evirank import score as scoring
    from evirank.lucene import LuceneDocs

    segmenter = parse_segment(segment, title)
    aggregator = parse_aggregate(aggregate, alpha, weights)
    kwargs: dict[str, Any] = {"device": device or "auto"}
    if scores is not None:
        kwargs["store"] = scores
    if scorer == "cross" and model is not None:
        model_stage: Any = scoring.CrossEncoder(model, **kwargs)
    else:
        model_stage = scoring.BiEncoder(model, **kwargs)
    docs = LuceneDocs(index)

    def lookup(docno: str) -> Document | None:
        try:
            return docs[docno]
        except KeyError:
            return None

    model_name = model or "all-MiniLM-L6-v2 (offline default)"
    return Searcher(
        BucketedBm25(index, max_depth=max_depth),
        segmenter,
        model_stage,
        aggregator,
        lookup,
        evidence=evidence,
        info={
            "index": Path(index).name,
            "model": str(model_name),
            "scorer": scorer,
            "segment": f"{segment} (title {title})",
            "aggregate": aggregate,
            "store": Path(scores).name if scores else None,
        },
    )
