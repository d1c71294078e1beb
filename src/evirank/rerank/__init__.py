"""Re-ranking a first-stage run by passage evidence: the glue of retrieval, text, scoring, aggregation.

- :class:`FetchText` adds document text to a run (from a Lucene index, a corpus file, or a mapping);
  :class:`AddQueries` adds query text from topics.
- :class:`Rerank` is the one re-ranking flow, built alike by ``evirank rerank``, the service and the
  Python API: fetch -> segment -> (prune) -> score -> aggregate on each query's top ``depth``, the rest
  of the run below in first-stage order, each stage timed (:class:`StageTimings`, :data:`STAGES`);
  :func:`rerank` runs it in one call.
- :func:`parse_segment` / :func:`parse_aggregate` read the ``--segment`` and ``--aggregate`` specs
  (``sentences:prepend``, ``windows:150:75``, ``birch:3``, ``maxp``...); they are defined once, in
  :mod:`evirank.segment.segment_spec` and :mod:`evirank.aggregate.registry`.

Importing this package loads neither torch nor the JVM.

Example:
    >>> from evirank.lucene import Bm25  # doctest: +SKIP
    >>> from evirank.score import BiEncoder  # doctest: +SKIP
    >>> from evirank.segment import Sentences
    >>> from evirank.aggregate import Birch
    >>> pipeline = (Bm25("indexes/scifact") % 100 >> FetchText(index="indexes/scifact")
    ...             >> Sentences() >> BiEncoder() >> Birch(top_n=3))  # doctest: +SKIP
    >>> run = pipeline(topics)  # doctest: +SKIP
"""

from __future__ import annotations

from evirank.aggregate.registry import AGGREGATORS, parse_aggregate
from evirank.rerank.fetch import AddQueries, FetchText, MissingDocumentsError, MissingQueriesError
from evirank.rerank.pipeline import (
    PASSAGE_FILE_COLUMNS,
    Rerank,
    RerankResult,
    rerank,
    save_passages,
)
from evirank.rerank.timing import STAGES, StageTimings
from evirank.segment.segment_spec import parse_segment

__all__ = [
    "AGGREGATORS",
    "PASSAGE_FILE_COLUMNS",
    "STAGES",
    "AddQueries",
    "FetchText",
    "MissingDocumentsError",
    "MissingQueriesError",
    "Rerank",
    "RerankResult",
    "StageTimings",
    "parse_aggregate",
    "parse_segment",
    "rerank",
    "save_passages",
]
