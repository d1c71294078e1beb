"""Model plumbing shared by training and distillation (torch and transformers, imported lazily).

Training reads a relevance score from a sequence-classification head exactly as inference does,
through :func:`evirank.score.relevance_from_logits` (one logit: the logit; two: ``logit[1] -
logit[0]``, the log-odds of "relevant"), and scores pairs for validation, distillation targets and
speed through :class:`evirank.score.CrossEncoder` with the model in memory
(:func:`predict_relevance`): the same tokenisation, truncation, padding and batching as
``evirank rerank``. The device rule is :func:`evirank.score.devices.resolve_device` (cuda, then
mps, then cpu).

Example:
    >>> from evirank.score import relevance_from_logits
    >>> relevance_from_logits([[0.0, 1.5]]).tolist()
    [1.5]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

# Config attributes that hold dropout probabilities in common encoder architectures.
_DROPOUT_KEYS = (
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "classifier_dropout",
    "dropout",
    "attention_dropout",
    "seq_classif_dropout",
)


def default_model_path() -> str:
    """The default initialisation: all-MiniLM-L6-v2, the default bi-encoder (offline copy, else Hub id)."""
    from evirank.score import default_bi_encoder

    return default_bi_encoder()


def model_source(path: str) -> str:
    """Where ``path`` loads from: the bundled offline copy when it is the default bi-encoder's Hub
    id (``sentence-transformers/all-MiniLM-L6-v2``), else ``path`` itself.

    Example:
        >>> model_source("models/minilm-mb")
        'models/minilm-mb'
    """
    from evirank.score.default_model import offline_copy

    local = offline_copy(str(path))
    return str(local) if local is not None else str(path)


def has_classification_head(path: str) -> bool:
    """Whether the model at ``path`` was saved with a sequence-classification head."""
    transformers = require("transformers", "torch")
    config = transformers.AutoConfig.from_pretrained(model_source(path))
    return any(name.endswith("ForSequenceClassification") for name in (config.architectures or []))


def set_dropout(config: Any, dropout: float | None) -> None:
    """Set every dropout probability a model config holds to ``dropout`` (None: leave them)."""
    if dropout is None:
        return
    for key in _DROPOUT_KEYS:
        if hasattr(config, key) and isinstance(getattr(config, key), float | int | type(None)):
            setattr(config, key, float(dropout))


def load_classifier(
    path: str, *, num_labels: int | None, dropout: float | None, seed: int
) -> tuple[Any, Any, bool]:
    """Load ``path`` as a sequence classifier and its tokenizer.

    A model saved with a classification head keeps it (``num_labels`` must then match it or
    be None); a plain encoder gets a fresh head, initialised under ``seed``.

    Returns:
        (model, tokenizer, fresh_head).
    """
    torch = require("torch", "torch")
    transformers = require("transformers", "torch")
    path = model_source(path)
    config = transformers.AutoConfig.from_pretrained(path)
    fresh_head = not any(a.endswith("ForSequenceClassification") for a in (config.architectures or []))
    if not fresh_head and num_labels is not None and config.num_labels != num_labels:
        raise ValueError(
            f"{path} has a classification head with num_labels={config.num_labels}, asked for "
            f"{num_labels}; continue with num_labels={config.num_labels} or start from a plain encoder"
        )
    if fresh_head:
        config.num_labels = num_labels or 1
        config.id2label = {0: "relevance"} if config.num_labels == 1 else {0: "non-relevant", 1: "relevant"}
        config.label2id = {v: k for k, v in config.id2label.items()}
    set_dropout(config, dropout)
    torch.manual_seed(seed)
    from evirank.score.fingerprint import reading_model

    with quiet_transformers(), reading_model(path if os.path.isdir(path) else None):
        model = transformers.AutoModelForSequenceClassification.from_pretrained(path, config=config)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return model, tokenizer, fresh_head


def encode(tokenizer: Any, queries: Sequence[str], texts: Sequence[str], max_length: int, device: str) -> Any:
    """Tokenise (query, text) pairs into padded tensors on ``device``.

    Truncation is ``longest_first``: with a short query it cuts only the text, and a query
    longer than ``max_length`` does not raise.
    """
    batch = tokenizer(
        list(queries),
        list(texts),
        padding=True,
        truncation="longest_first",
        max_length=max_length,
        return_tensors="pt",
    )
    return {k: v.to(device) for k, v in batch.items()}


def autocast(device: str, bf16: bool) -> Any:
    """bf16 autocast on a CUDA device that supports it, else a no-op context."""
    torch = require("torch", "torch")
    enabled = (
        bf16 and device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    )
    return torch.autocast(
        device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=enabled
    )


def adopted_scorer(
    cls: Any,
    model: Any,
    tokenizer: Any,
    max_length: int,
    batch_size: int,
    device: str,
    bf16: bool,
    query_share: int = 2,
) -> Any:
    """A scorer of family class ``cls`` over a model in memory, with training's length caps.

    Tokenisation, truncation and read-out are inference's own; the query keeps at most
    ``min(64, max_length // query_share)`` tokens, batches hold about ``batch_size`` inputs of
    ``max_length`` tokens, and bf16/fp16 autocast runs where inference would use it (``bf16``).

    Example:
        >>> from evirank.score import CrossEncoder  # doctest: +SKIP
        >>> scorer = adopted_scorer(CrossEncoder, model, tokenizer, 128, 32, "cpu", False)  # doctest: +SKIP
    """
    from evirank.config import Runtime

    runtime = Runtime(
        device=device,
        dtype="auto" if bf16 else "fp32",
        batch_tokens=max(1, batch_size) * max_length,
        max_length=max_length,
    )
    scorer = cls(
        str(getattr(model.config, "_name_or_path", "") or "in-memory model"),
        runtime,
        query_max_tokens=min(64, max(1, max_length // query_share)),
    )
    scorer.adopt(model, tokenizer)
    return scorer


def predict_relevance(
    model: Any,
    tokenizer: Any,
    queries: Sequence[str],
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_length: int = 256,
    device: str = "cpu",
    bf16: bool = True,
    desc: str = "score",
) -> np.ndarray:
    """Relevance scores of (query, text) pairs, in input order (float64), as inference computes them.

    The pairs go through :class:`evirank.score.CrossEncoder` with ``model`` in memory (eval mode
    while scoring, its mode restored after): the query capped at ``min(64, max_length // 2)``
    tokens as in inference, the text cut to the rest, batches of about ``batch_size`` pairs of
    ``max_length`` tokens, bf16/fp16 autocast where inference would use it (``bf16``).
    """
    from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT
    from evirank.score import CrossEncoder

    scorer = adopted_scorer(CrossEncoder, model, tokenizer, max_length, batch_size, device, bf16)
    ids = [str(i) for i in range(len(queries))]
    frame = pd.DataFrame({QID: ids, QUERY: list(queries), DOCNO: ids, PID: 0, TEXT: list(texts)})
    was_training = model.training
    model.eval()
    try:
        logger.debug("%s: %d pairs through the cross-encoder", desc, len(frame))
        scored = scorer(frame)
    finally:
        model.train(was_training)
    return scored[SCORE].to_numpy(dtype=np.float64)


def speed(
    model: Any,
    tokenizer: Any,
    queries: Sequence[str],
    texts: Sequence[str],
    *,
    batch_size: int,
    max_length: int,
    device: str,
    bf16: bool = True,
) -> float:
    """Pairs per second of :func:`predict_relevance` on these pairs (after one warm-up batch)."""
    import time

    predict_relevance(
        model,
        tokenizer,
        queries[:batch_size],
        texts[:batch_size],
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        bf16=bf16,
        desc="warm-up",
    )
    start = time.perf_counter()
    predict_relevance(
        model,
        tokenizer,
        queries,
        texts,
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        bf16=bf16,
        desc="speed",
    )
    return len(queries) / max(time.perf_counter() - start, 1e-9)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' own progress bars (weight loading, shard writing) inside the block.

    Ours (evirank.progress) report the training; theirs would print at every checkpoint.
    """
    logging_utils = require("transformers.utils.logging", "torch")
    enabled = logging_utils.is_progress_bar_enabled()
    logging_utils.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging_utils.enable_progress_bar()


def tensor_labels(values: np.ndarray, device: str) -> torch.Tensor:
    """A float tensor of labels/targets on ``device``."""
    torch = require("torch", "torch")
    return torch.as_tensor(np.array(values, dtype=np.float32), device=device)
