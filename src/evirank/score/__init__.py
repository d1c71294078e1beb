"""Scoring (query, passage) pairs: model families behind one registry, and a persistent score store.

Every family's scorer is a Stage: Passages in, Passages + ``score`` out. ``make_scorer(family,
model, runtime)`` builds one by the family's name (``cross``, ``bi``, ``seq2seq``, ``llm``, ``colbert``,
...; ``auto`` tells it from the model's files); ``CrossEncoder(model, runtime)`` and
``BiEncoder(model, runtime)`` are the two classic ones. The runtime (:class:`evirank.config.Runtime`)
says where and how models run; with its ``store`` a SQLite file, a folder or a URL of Parquet shards
(:func:`open_store`), scores are reused across runs and an interrupted run resumes. Torch and
transformers are imported on first use, so importing this package stays light; :func:`explain`
shows a document's passages, best first.

Example:
    >>> from evirank.config import Runtime
    >>> from evirank.score import CrossEncoder
    >>> scorer = CrossEncoder("models/minilm-mb", Runtime(store="runs/scores.sqlite"))  # doctest: +SKIP
    >>> scored = scorer(passages)  # doctest: +SKIP
"""

from __future__ import annotations

from evirank.score.backends import (
    Backend,
    ModelHead,
    TokenBatch,
    available_backends,
    get_backend,
    register_backend,
)
from evirank.score.default_model import DEFAULT_BI_ENCODER_HUB_ID, default_bi_encoder
from evirank.score.explain import NotScoredError, explain
from evirank.score.families.bi import BiEncoder
from evirank.score.families.cross import CrossEncoder, relevance_from_logits
from evirank.score.family import (
    Family,
    ModelInfo,
    Scorer,
    UnknownFamilyError,
    detect_family,
    family_names,
    family_of,
    get_family,
    make_scorer,
    register_family,
)
from evirank.score.query_passage import PairScorer
from evirank.score.store import FingerprintError, ScoreStore, Store, text_hash
from evirank.score.store_parquet import ParquetScoreStore
from evirank.score.stores import open_store

__all__ = [
    "DEFAULT_BI_ENCODER_HUB_ID",
    "Backend",
    "BiEncoder",
    "CrossEncoder",
    "Family",
    "FingerprintError",
    "ModelHead",
    "ModelInfo",
    "NotScoredError",
    "PairScorer",
    "ParquetScoreStore",
    "ScoreStore",
    "Scorer",
    "Store",
    "TokenBatch",
    "UnknownFamilyError",
    "available_backends",
    "default_bi_encoder",
    "detect_family",
    "explain",
    "family_names",
    "family_of",
    "get_backend",
    "get_family",
    "make_scorer",
    "open_store",
    "register_backend",
    "register_family",
    "relevance_from_logits",
    "text_hash",
]
