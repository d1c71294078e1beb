"""Fine-tuning as a pipeline stage: an :class:`~evirank.stage.Estimator` that trains, then scores.

``fit(examples)`` fine-tunes a cross-encoder into ``output_dir`` (:func:`train_cross_encoder`);
``transform(passages)`` scores passages with it through :class:`evirank.score.CrossEncoder`, so a
trained model drops into a pipeline like any scorer.

Example:
    >>> from evirank.train import TrainConfig
    >>> stage = FineTunedCrossEncoder("models/mb", TrainConfig(epochs=1))
    >>> stage.fit(train_examples, validation=val_examples)  # doctest: +SKIP
    >>> pipeline = Sentences() >> stage >> Birch()  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from evirank.config import Runtime
from evirank.stage import Estimator
from evirank.train.classifier import train_cross_encoder
from evirank.train.config import TrainConfig
from evirank.train.trainer import TrainResult


class FineTunedCrossEncoder(Estimator):
    """Fine-tune a cross-encoder on Examples, then score Passages with it.

    Args:
        output_dir: the model folder ``fit`` creates (or resumes, or reuses when complete).
        config: the training hyper-parameters; ``config.seed`` is the source of randomness.
        overwrite: replace an existing ``output_dir`` when fitting.
        resume: continue an interrupted fit (or reuse a completed one) in ``output_dir``.
        runtime: where the fitted model scores (:class:`evirank.config.Runtime`: device, input cap,
            score store, ...).
        query_max_tokens: the query's token cap when it scores.

    Attributes:
        result_: the :class:`TrainResult` of ``fit``.
        model_path_: the trained model folder.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        config: TrainConfig | None = None,
        *,
        overwrite: bool = False,
        resume: bool = False,
        runtime: Runtime | None = None,
        query_max_tokens: int = 64,
    ) -> None:
        self.output_dir = output_dir
        self.config = config
        self.overwrite = overwrite
        self.resume = resume
        self.runtime = runtime
        self.query_max_tokens = query_max_tokens

    def fit(self, examples: pd.DataFrame, validation: pd.DataFrame | None = None) -> FineTunedCrossEncoder:
        """Train on ``examples`` (validated on ``validation``) and keep the model's path."""
        self.result_: TrainResult = train_cross_encoder(
            examples,
            self.config,
            self.output_dir,
            validation=validation,
            overwrite=self.overwrite,
            resume=self.resume,
        )
        self.model_path_ = Path(self.result_.output_dir)
        return self

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Score Passages [qid, query, docno, pid, text] with the fitted model (adds ``score``)."""
        if not hasattr(self, "model_path_"):
            raise RuntimeError("FineTunedCrossEncoder: call fit(examples) before transform")
        from evirank.score import CrossEncoder

        return CrossEncoder(self.model_path_, self.runtime, query_max_tokens=self.query_max_tokens).transform(
            frame
        )
