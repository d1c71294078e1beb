"""Training recipes: what ``evirank train`` asks a model family for, so the trainer never asks which
kind of model it trains.

A family that can be fine-tuned names its recipe in its registry record
(:attr:`evirank.score.family.Family.recipe`, ``"module:factory"``), and :func:`recipe_for` imports
that factory when a training asks for it: the family's module imports nothing of training, so
scoring never loads it. The trainer (:mod:`evirank.train.trainer`) then asks the
recipe how to load the initial model, which item rows and loss to train on, how to score
validation examples, how to reload a checkpoint, how the saved model's score reads, and which
files to write beside the weights. Built in: ``cross`` (:mod:`evirank.train.classifier`),
``bi`` (:mod:`evirank.train.contrastive`), ``seq2seq`` (:mod:`evirank.train.seq2seq`), ``parade``
(:mod:`evirank.train.parade`) and ``duo`` (:mod:`evirank.train.pairwise`).

Example:
    >>> recipe_for("seq2seq").losses
    ('pointwise',)
    >>> recipe_for("cross").kind
    'cross-encoder'
    >>> recipe_for("llm")
    Traceback (most recent call last):
    ...
    evirank.train.recipe.UntrainableFamilyError: the llm family has no training recipe; the families \
evirank train trains: bi, cross, duo, parade, seq2seq
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from evirank.errors import UsageError
from evirank.frames import QUERY, TEXT

if TYPE_CHECKING:
    from evirank.train.config import TrainConfig


class UntrainableFamilyError(UsageError, ValueError):
    """A family that ``evirank train`` has no recipe for (or a name that is no family)."""


class Recipe(Protocol):
    """How one family's models are fine-tuned (see the module).

    Attributes:
        kind: the model kind in words (``"cross-encoder"``), written into ``evirank-train.json``.
        losses: the ``TrainConfig.loss`` values it trains with (the first is the default).
        continues: whether ``init`` (continuing an earlier relevance model, its head included)
            applies; a family that starts from a plain encoder only says False.
    """

    kind: str
    losses: tuple[str, ...]
    continues: bool

    def default_model(self) -> str | None:
        """The initial weights when the config names none (None: a model must be given)."""
        ...

    def check(self, config: TrainConfig) -> None:
        """Raise ``ValueError`` for settings this family cannot train with (before any work)."""
        ...

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any, dict[str, Any]]:
        """(model, tokenizer, facts about the initialisation for ``evirank-train.json``) of ``source``."""
        ...

    def reload(self, folder: Path) -> Any:
        """The model of a checkpoint folder this recipe's model saved (``save_pretrained``)."""
        ...

    def objective(self, examples: pd.DataFrame, config: TrainConfig, source: str) -> tuple[pd.DataFrame, Any]:
        """(item rows, the loss over them: a :class:`evirank.train.trainer.Objective`).

        ``source`` is the initial model (for recipes that rate examples with it first).
        """
        ...

    def validate(
        self, model: Any, tokenizer: Any, examples: pd.DataFrame, config: TrainConfig, device: str
    ) -> tuple[np.ndarray, pd.DataFrame]:
        """(scores, the rows they score [qid, label, ...]) of validation ``examples``, as the family's
        scorer computes them; the rows are ranked per query for the validation measures."""
        ...

    def score_rule(self, config: TrainConfig) -> str:
        """How the saved model's relevance score reads, for ``evirank-train.json``."""
        ...

    def finish(self, folder: Path, model: Any, config: TrainConfig) -> None:
        """Write what the family needs beside the saved weights and tokenizer (may do nothing)."""
        ...

    def head_parameters(self, model: Any) -> set[str]:
        """The names of ``model``'s parameters that are a new head (``head_learning_rate`` applies)."""
        ...


class PairRecipe:
    """A base for recipes whose validation scores each (query, text) example on its own.

    Subclasses set ``kind``, ``losses`` (and ``continues``, ``score``), and implement ``load``,
    ``reload``, ``objective`` and :meth:`predict`.
    """

    kind: str = ""
    losses: tuple[str, ...] = ()
    continues: bool = True
    #: how the saved model's score reads (``score_rule``'s answer unless overridden).
    score: str = ""

    def default_model(self) -> str | None:
        """all-MiniLM-L6-v2 (the offline copy when installed, else its Hub id)."""
        from evirank.score import default_bi_encoder

        return default_bi_encoder()

    def check(self, config: TrainConfig) -> None:
        """Refuse the options of document-level families (``aggregation``, ``max_passages``)."""
        given = [name for name in ("aggregation", "max_passages") if getattr(config, name, None) is not None]
        if given:
            raise ValueError(
                f"{' and '.join(given)} are a document-level family's options (parade); "
                f"a {self.kind} takes none"
            )

    def predict(
        self,
        model: Any,
        tokenizer: Any,
        queries: Sequence[str],
        texts: Sequence[str],
        *,
        batch_size: int,
        max_length: int,
        device: str,
        bf16: bool,
    ) -> np.ndarray:
        """Relevance scores of (query, text) pairs as the family's scorer computes them."""
        raise NotImplementedError

    def validate(
        self, model: Any, tokenizer: Any, examples: pd.DataFrame, config: TrainConfig, device: str
    ) -> tuple[np.ndarray, pd.DataFrame]:
        scores = self.predict(
            model,
            tokenizer,
            examples[QUERY].tolist(),
            examples[TEXT].tolist(),
            batch_size=config.eval_batch_size,
            max_length=config.max_length,
            device=device,
            bf16=config.bf16,
        )
        return scores, examples

    def score_rule(self, config: TrainConfig) -> str:
        return self.score

    def finish(self, folder: Path, model: Any, config: TrainConfig) -> None:
        return None

    def head_parameters(self, model: Any) -> set[str]:
        """None: every parameter trains at ``learning_rate``."""
        return set()


def load_recipe(reference: str) -> Callable[[], Recipe]:
    """The recipe factory a family names (``"module:factory"``), imported now.

    Raises:
        UntrainableFamilyError: a reference that cannot be imported.

    Example:
        >>> load_recipe("evirank.train.classifier:ClassifierRecipe").__name__
        'ClassifierRecipe'
    """
    module_name, _, attribute = reference.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UntrainableFamilyError(f"the training recipe {reference!r} cannot be loaded: {exc}") from None
    if not callable(factory):
        raise UntrainableFamilyError(f"the training recipe {reference!r} is not a factory")
    return factory


def trainable_families() -> list[str]:
    """The names of the families ``evirank train`` can train, sorted.

    Example:
        >>> "cross" in trainable_families() and "llm" not in trainable_families()
        True
    """
    from evirank.score.family import family_names, get_family

    return [name for name in family_names() if get_family(name).recipe is not None]


def recipe_for(kind: str) -> Recipe:
    """The recipe of the family named ``kind``.

    Raises:
        UntrainableFamilyError: ``kind`` names no family, or a family without a training recipe;
            the message lists the trainable families.
    """
    from evirank.score.family import UnknownFamilyError, get_family

    trainable = ", ".join(trainable_families())
    try:
        family = get_family(kind)
    except UnknownFamilyError:
        raise UntrainableFamilyError(
            f"unknown model family {kind!r}; the families evirank train trains: {trainable}"
        ) from None
    if family.recipe is None:
        raise UntrainableFamilyError(
            f"the {family.name} family has no training recipe; the families evirank train trains: {trainable}"
        )
    return load_recipe(family.recipe)()
