"""Training relevance models: example builders, fine-tuning (every family with a recipe),
distillation.

Importing this package is light: its names load from their modules on first use (so a model
family can register its training recipe, :mod:`evirank.train.recipe`, without loading the
trainer), and torch and transformers load when a model is trained.

Example:
    >>> from evirank.train import TrainConfig, make_examples, split_by_query
    >>> TrainConfig().learning_rate
    3e-05
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evirank.train.adaptation import AdaptConfig, adapt
    from evirank.train.classifier import train_cross_encoder
    from evirank.train.config import DistillConfig, TrainConfig
    from evirank.train.contrastive import train_bi_encoder
    from evirank.train.distillation import DistillResult, distill, make_student
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
    from evirank.train.trainer import TrainResult, result_from_json, train_model

#: Each public name and the module that defines it.
_WHERE = {
    "AdaptConfig": "adaptation",
    "adapt": "adaptation",
    "train_cross_encoder": "classifier",
    "DistillConfig": "config",
    "TrainConfig": "config",
    "train_bi_encoder": "contrastive",
    "DistillResult": "distillation",
    "distill": "distillation",
    "make_student": "distillation",
    "FineTunedCrossEncoder": "estimator",
    **dict.fromkeys(
        (
            "EXAMPLE_COLUMNS",
            "document_examples",
            "evidence_examples",
            "make_examples",
            "read_evidence",
            "read_pairs",
            "short_text_examples",
            "split_by_qids",
            "split_by_query",
            "summarize_examples",
            "write_examples",
        ),
        "examples",
    ),
    "TrainResult": "trainer",
    "result_from_json": "trainer",
    "train_model": "trainer",
}

__all__ = [
    "EXAMPLE_COLUMNS",
    "AdaptConfig",
    "DistillConfig",
    "DistillResult",
    "FineTunedCrossEncoder",
    "TrainConfig",
    "TrainResult",
    "adapt",
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


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
