"""Aggregators: a scored Passages frame -> a Run (Birch, MaxP, FirstP, SumP, MeanP, and the
document score of a document-level scorer).

The arithmetic lives in :mod:`evirank.aggregate.core` as array functions
(:func:`top_passage_matrix`, :func:`birch_scores`) shared with the tuner; the stages here
wrap it. :mod:`evirank.aggregate.registry` registers every aggregator under its spec name
(:data:`AGGREGATORS`) and parses ``--aggregate`` specs (:class:`AggregateSpec`,
:func:`parse_aggregate`) for rerank, serve, tune and report alike; :class:`MultiEvidence`
combines several scorers' evidence (:mod:`evirank.aggregate.evidence`). :func:`merge_tail` and
:class:`RerankTop` keep documents beyond the re-rank depth in first-stage order below the
re-ranked ones.

Example:
    >>> import pandas as pd
    >>> passages = pd.DataFrame({"qid": ["1"] * 4, "docno": ["a", "a", "b", "b"], "pid": [0, 1, 0, 1],
    ...                          "score": [0.1, 0.8, 0.6, 0.7], "first_stage_score": [9.0, 9.0, 7.0, 7.0]})
    >>> [f"{name}: {stage(passages)['docno'].tolist()}" for name, stage in
    ...  [("MaxP", MaxP()), ("SumP", SumP()), ("Birch", Birch(top_n=2, alpha=0.5, weights=(1, 1)))]]
    ["MaxP: ['a', 'b']", "SumP: ['b', 'a']", "Birch: ['a', 'b']"]
"""

from __future__ import annotations

from evirank.aggregate.aggregators import (
    DEFAULT_NORMALISE,
    Aggregator,
    Birch,
    DocumentScore,
    FirstP,
    MaxP,
    MeanP,
    SumP,
    default_weights,
)
from evirank.aggregate.core import (
    NORMALISATIONS,
    PassageTable,
    birch_scores,
    minmax_by_group,
    top_passage_matrix,
)
from evirank.aggregate.evidence import (
    EvidenceSpecError,
    EvidenceTable,
    MultiEvidence,
    evidence_column,
    evidence_tables,
)
from evirank.aggregate.registry import (
    AGGREGATORS,
    AggregateSpec,
    AggregateSpecError,
    parse_aggregate,
    parse_evidence_aggregate,
    parse_weights,
)
from evirank.aggregate.tail import RerankTop, merge_tail

__all__ = [
    "AGGREGATORS",
    "DEFAULT_NORMALISE",
    "NORMALISATIONS",
    "AggregateSpec",
    "AggregateSpecError",
    "Aggregator",
    "Birch",
    "DocumentScore",
    "EvidenceSpecError",
    "EvidenceTable",
    "FirstP",
    "MaxP",
    "MeanP",
    "MultiEvidence",
    "PassageTable",
    "RerankTop",
    "SumP",
    "birch_scores",
    "default_weights",
    "evidence_column",
    "evidence_tables",
    "merge_tail",
    "minmax_by_group",
    "parse_aggregate",
    "parse_evidence_aggregate",
    "parse_weights",
    "top_passage_matrix",
]
