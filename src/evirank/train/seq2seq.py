"""How ``evirank train --scorer seq2seq`` fine-tunes a T5 as monoT5: the recipe and its objective.

The family (:mod:`evirank.score.families.seq2seq`) names this recipe; training reads each pair
exactly as :class:`~evirank.score.families.seq2seq.MonoT5` scores it (its prompt, its truncation),
and learns the target word ('true' or 'false') at the first decoder step, as Nogueira et al. train it.

Example:
    >>> Seq2SeqRecipe().losses
    ('pointwise',)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import QUERY, SCORE, TEXT
from evirank.score.families.seq2seq import MonoT5, TrueFalseHead
from evirank.train._model import adopted_scorer
from evirank.train.recipe import PairRecipe


def _training_scorer(
    model: Any, tokenizer: Any, max_length: int, batch_size: int, device: str, bf16: bool
) -> MonoT5:
    """A :class:`MonoT5` over a model in memory, with training's length caps."""
    scorer: MonoT5 = adopted_scorer(MonoT5, model, tokenizer, max_length, batch_size, device, bf16)
    return scorer


class TrueFalseTargets:
    """monoT5's objective: cross-entropy of the target word ('true' for a relevant pair, 'false'
    otherwise) over the whole vocabulary at the first decoder step, as Nogueira et al. train it
    (the target word is the decoder's first token); the input is the scorer's own prompt."""

    name = "true-false cross-entropy"
    columns = (QUERY, TEXT, "label")
    pairs_per_item = 1

    def __init__(self) -> None:
        self._scorer: tuple[Any, MonoT5] | None = None

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: Any, device: str) -> Any:
        torch = require("torch", "torch")
        if self._scorer is None or self._scorer[0] is not model:  # tokenises as scoring does
            made = _training_scorer(model, tokenizer, config.max_length, config.batch_size, device, False)
            self._scorer = (model, made)
        scorer = self._scorer[1]
        batch = scorer.pair_inputs(rows[QUERY].astype(str).tolist(), rows[TEXT].astype(str).tolist())
        assert isinstance(scorer.task, TrueFalseHead)
        start, true_id, false_id = scorer.task.ids
        input_ids = torch.from_numpy(batch.input_ids).to(device)
        decoder = torch.full((input_ids.shape[0], 1), start, dtype=torch.long, device=device)
        logits = model(
            input_ids=input_ids,
            attention_mask=torch.from_numpy(batch.attention_mask).to(device),
            decoder_input_ids=decoder,
        ).logits[:, 0, :]
        labels = rows["label"].to_numpy(dtype=np.int64)
        targets = torch.as_tensor(np.where(labels > 0, true_id, false_id), dtype=torch.long, device=device)
        return torch.nn.functional.cross_entropy(logits.float(), targets)

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        """Binary cross-entropy of the labels under P('true') of the two-word read-out."""
        log_p = np.minimum(np.asarray(scores, dtype=np.float64), -1e-12)
        labels = rows["label"].to_numpy(dtype=np.float64)
        return float(-np.mean(labels * log_p + (1 - labels) * np.log(-np.expm1(log_p))))


class Seq2SeqRecipe(PairRecipe):
    """How ``evirank train --scorer seq2seq`` fine-tunes a T5 (see :mod:`evirank.train.recipe`)."""

    kind = "seq2seq (monoT5)"
    losses: tuple[str, ...] = ("pointwise",)
    score = "log P('true') in the softmax over the 'true' and 'false' logits at the first decoder step"

    def default_model(self) -> str | None:
        """None: a T5 must be given (no T5 is bundled)."""
        return None

    def load(self, source: str, config: Any) -> tuple[Any, Any, dict[str, Any]]:
        torch = require("torch", "torch")
        transformers = require("transformers", "torch")
        model_config = transformers.AutoConfig.from_pretrained(source)
        if not getattr(model_config, "is_encoder_decoder", False):
            raise ValueError(
                f"{source} is not an encoder-decoder model; the seq2seq family trains T5-style models"
            )
        if config.dropout is not None and hasattr(model_config, "dropout_rate"):
            model_config.dropout_rate = float(config.dropout)
        torch.manual_seed(config.seed)
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(source, config=model_config)
        return model, transformers.AutoTokenizer.from_pretrained(source), {}

    def reload(self, folder: Path) -> Any:
        return require("transformers", "torch").AutoModelForSeq2SeqLM.from_pretrained(str(folder))

    def objective(self, examples: pd.DataFrame, config: Any, source: str) -> tuple[pd.DataFrame, Any]:
        columns = [c for c in ("qid", QUERY, "docno", "pid", TEXT, "label") if c in examples.columns]
        return examples[columns], TrueFalseTargets()

    def predict(
        self,
        model: Any,
        tokenizer: Any,
        queries: Any,
        texts: Any,
        *,
        batch_size: int,
        max_length: int,
        device: str,
        bf16: bool,
    ) -> np.ndarray:
        scorer = _training_scorer(model, tokenizer, max_length, batch_size, device, bf16)
        ids = [str(i) for i in range(len(queries))]
        frame = pd.DataFrame({"qid": ids, QUERY: list(queries), "docno": ids, "pid": 0, TEXT: list(texts)})
        was_training = model.training
        model.eval()
        try:
            return scorer(frame)[SCORE].to_numpy(dtype=np.float64)
        finally:
            model.train(was_training)
