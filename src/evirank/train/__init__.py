"""Training relevance models: example builders, fine-tuning (cross- and bi-encoders), distillation.

Importing this package is light (pandas only); torch and transformers load when a model is
trained.

Example:
    >>> from evirank.train import TrainConfig, make_examples, split_by_query
    >>> TrainConfig().learning_rate
    3e-05
"""

from __future__ import annotations

from evirank.train.config import DistillConfig, TrainConfig
from evirank.train.distill import DistillResult, distill, make_student
from evirank.train.estimator import FineTunedCrossEncoder
from evirank.train.examples import (
    EXAMPLE_COLUMNS,
    document_examples,
    evidence_examples,
    make_examples,
    read_evidence,
    read_pairs,
    short_text_examples,
    split_by_qids,
    split_by_query,
    summarize_examples,
    write_examples,
)
from evirank.train.trainer import (
    TrainResult,
    result_from_json,
    train_bi_encoder,
    train_cross_encoder,
    train_model,
)

__all__ = [
    "EXAMPLE_COLUMNS",
    "DistillConfig",
    "DistillResult",
    "FineTunedCrossEncoder",
    "TrainConfig",
    "TrainResult",
    "distill",
    "document_examples",
    "evidence_examples",
    "make_examples",
    "make_student",
    "read_evidence",
    "read_pairs",
    "result_from_json",
    "short_text_examples",
    "split_by_qids",
    "split_by_query",
    "summarize_examples",
    "train_bi_encoder",
    "train_cross_encoder",
    "train_model",
    "write_examples",
]
