"""The cross-encoder's training recipe: a sequence-classification head over ``[CLS] q [SEP] d [SEP]``.

Pointwise (each pair classified on its own, as in the papers: BCE on one logit, or cross-entropy
over two classes) or listwise (:mod:`evirank.train.listwise`). A plain encoder gets a fresh head;
``init`` continues a relevance model with its head. Validation scores pairs with
:class:`evirank.score.CrossEncoder` itself (:func:`evirank.train._model.predict_relevance`).

Example:
    >>> ClassifierRecipe().losses
    ('pointwise', 'listwise')
    >>> from evirank.train.config import TrainConfig
    >>> ClassifierRecipe().score_rule(TrainConfig(num_labels=2))
    'logit[1] - logit[0]'
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import DOCNO, LABEL, PID, QID, QUERY, TEXT
from evirank.train import _model
from evirank.train.listwise import Listwise, listwise_items
from evirank.train.recipe import PairRecipe

if TYPE_CHECKING:
    from evirank.train.config import TrainConfig
    from evirank.train.trainer import TrainResult

logger = logging.getLogger(__name__)


def bce(scores: np.ndarray, labels: np.ndarray) -> float:
    """Binary cross-entropy with logits, numerically stable (also 2-class CE on z1 - z0).

    Example:
        >>> round(bce(np.array([0.0]), np.array([1.0])), 4)
        0.6931
    """
    return float(np.mean(np.maximum(scores, 0) - scores * labels + np.log1p(np.exp(-np.abs(scores)))))


class Classification:
    """Relevance as classification: BCE on one logit, or cross-entropy over two classes."""

    columns: tuple[str, ...] = (QUERY, TEXT, LABEL)
    pairs_per_item = 1

    def __init__(self, num_labels: int) -> None:
        self.num_labels = num_labels
        self.name = "bce" if num_labels == 1 else "cross-entropy"

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: Any, device: str) -> Any:
        torch = require("torch", "torch")
        inputs = _model.encode(
            tokenizer, rows[QUERY].tolist(), rows[TEXT].tolist(), config.max_length, device
        )
        logits = model(**inputs).logits.float()
        labels = rows[LABEL].to_numpy(dtype=np.int64, copy=True)
        if self.num_labels == 1:
            return torch.nn.functional.binary_cross_entropy_with_logits(
                logits[:, 0], _model.tensor_labels(labels, device)
            )
        return torch.nn.functional.cross_entropy(
            logits, torch.as_tensor(labels, dtype=torch.long, device=device)
        )

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        return bce(scores, rows[LABEL].to_numpy(dtype=np.float64))


class ClassifierRecipe(PairRecipe):
    """How ``evirank train --scorer cross`` fine-tunes a cross-encoder (see the module)."""

    kind = "cross-encoder"
    losses: tuple[str, ...] = ("pointwise", "listwise")
    continues = True

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any, dict[str, Any]]:
        if config.init is not None and not _model.has_classification_head(config.init):
            raise ValueError(
                f"--init {config.init} has no sequence-classification head; use --model for a plain encoder"
            )
        model, tokenizer, fresh_head = _model.load_classifier(
            source, num_labels=config.num_labels, dropout=config.dropout, seed=config.seed
        )
        logger.info("%s: %s classification head", source, "fresh" if fresh_head else "kept")
        return model, tokenizer, {"fresh_head": fresh_head}

    def reload(self, folder: Path) -> Any:
        return require("transformers", "torch").AutoModelForSequenceClassification.from_pretrained(folder)

    def objective(self, examples: pd.DataFrame, config: TrainConfig, source: str) -> tuple[pd.DataFrame, Any]:
        if config.loss == "listwise":
            items = listwise_items(examples, same_source=config.negatives_from == "source")
            logger.info(
                "listwise: %d positives, each in a group of %d texts (%d queries)",
                len(items),
                config.group_size,
                items[QID].nunique(),
            )
            return items, Listwise(config.group_size)
        columns = [c for c in (QID, QUERY, DOCNO, PID, TEXT, LABEL) if c in examples.columns]
        return examples[columns], Classification(config.num_labels)

    def predict(self, model: Any, tokenizer: Any, queries: Any, texts: Any, **options: Any) -> np.ndarray:
        return _model.predict_relevance(model, tokenizer, queries, texts, **options)

    def score_rule(self, config: TrainConfig) -> str:
        return "logit" if config.num_labels == 1 else "logit[1] - logit[0]"


def train_cross_encoder(
    examples: pd.DataFrame,
    config: TrainConfig | None = None,
    output_dir: str | os.PathLike[str] = "model",
    **options: Any,
) -> TrainResult:
    """Fine-tune a cross-encoder on (query, text, label) examples and save it to ``output_dir``.

    Takes the arguments of :func:`evirank.train.trainer.train_model`.

    Raises:
        ValueError: ``config`` is another family's (use :func:`~evirank.train.train_model`).

    Example:
        >>> from evirank.train import TrainConfig, train_cross_encoder  # doctest: +SKIP
        >>> cfg = TrainConfig(epochs=1)  # doctest: +SKIP
        >>> train_cross_encoder(train, cfg, "models/mb", validation=val)  # doctest: +SKIP
    """
    from evirank.train.trainer import train_model

    if config is not None and config.encoder != "cross":
        raise ValueError(
            "train_cross_encoder trains a cross-encoder; use train_bi_encoder for encoder='bi' "
            "(train_model for any family)"
        )
    return train_model(examples, config, output_dir, **options)
