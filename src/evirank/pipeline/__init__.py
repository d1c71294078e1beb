"""One pipeline spec, resolved once, built once.

:class:`PipelineSpec` describes a re-ranking pipeline (first stage, text source, segmenter,
scorers and their weights, cascade, aggregator, depth, pairwise stage, runtime) in the one spec
grammar; :class:`Collection` is the index opened once; :func:`build_pipeline` makes the stages.
Every front end (``rerank``, ``serve``, ``search``, ``embed``, the Python API) goes through these.

Example:
    >>> from evirank.pipeline import PipelineSpec
    >>> PipelineSpec.from_mapping({"corpus": "c.jsonl", "aggregate": "maxp"}).aggregate.spec
    'maxp'
"""

from evirank.pipeline.build import Pipeline, build_pipeline
from evirank.pipeline.collection import Collection
from evirank.pipeline.spec import FirstStageSpec, PipelineSpec, PipelineSpecError, Runtime

__all__ = [
    "Collection",
    "FirstStageSpec",
    "Pipeline",
    "PipelineSpec",
    "PipelineSpecError",
    "Runtime",
    "build_pipeline",
]
