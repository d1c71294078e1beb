"""Scoring (query, passage) pairs: cross-encoders, bi-encoders, and a persistent score store.

``CrossEncoder(model)`` and ``BiEncoder(model)`` are Stages: Passages in, Passages + ``score``
out. Torch and transformers are imported on first use, so importing this package stays light.
With ``store=`` a SQLite file, a folder or a URL of Parquet shards (:func:`open_store`), scores are
reused across runs and an interrupted run resumes; :func:`explain` shows a document's passages, best first.

Example:
    >>> from evirank.score import CrossEncoder, ScoreStore
    >>> scorer = CrossEncoder("models/minilm-mb", store="runs/scores.sqlite")  # doctest: +SKIP
    >>> scored = scorer(passages)  # doctest: +SKIP
"""

from __future__ import annotations

from evirank.score.backends import Backend, TokenBatch, available_backends, get_backend, register_backend
from evirank.score.bi import BiEncoder, default_bi_encoder
from evirank.score.cross import CrossEncoder, relevance_from_logits
from evirank.score.explain import NotScoredError, explain
from evirank.score.store import FingerprintError, ScoreStore, Store, open_store, text_hash
from evirank.score.store_parquet import ParquetScoreStore

__all__ = [
    "Backend",
    "BiEncoder",
    "CrossEncoder",
    "FingerprintError",
    "NotScoredError",
    "ParquetScoreStore",
    "ScoreStore",
    "Store",
    "TokenBatch",
    "available_backends",
    "default_bi_encoder",
    "explain",
    "get_backend",
    "open_store",
    "register_backend",
    "relevance_from_logits",
    "text_hash",
]
