"""Scoring on a Ray cluster: the same pipeline, with the model run by Ray Data actors.

A scorer whose runtime has ``ray=RayOptions(...)`` scores the distinct (query, passage) pairs missing from
its store by Ray Data ``map_batches`` over an actor pool (one model replica per GPU or per group
of CPU cores); everything else (first stage, text, segmentation, aggregation, outputs) stays in
the driver. :func:`rerank_in_blocks` streams a big job through the pipeline a block of queries at
a time. Ray is imported only when a job runs (the ``ray`` extra).

Example:
    >>> from evirank.config import Runtime
    >>> from evirank.scale import RayOptions
    >>> from evirank.score import CrossEncoder
    >>> scorer = CrossEncoder("models/minilm", Runtime(store="scores/", ray=RayOptions("local", workers=2)))
    >>> scorer.ray.workers
    2
"""

from __future__ import annotations

from evirank.scale.blocks import rerank_in_blocks
from evirank.scale.options import RayOptions

__all__ = ["RayOptions", "rerank_in_blocks"]
