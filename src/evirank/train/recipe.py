"""Training recipes that model families provide: what ``evirank train`` asks a family for.

A family that can be fine-tuned names its objective in its registry record
(:attr:`evirank.score.family.Family.objective`) and registers a :class:`Recipe` factory under
that name with :func:`register_recipe`. The trainer then asks the recipe how to load the model,
which (items, loss) to train on, how to score validation pairs and how to reload a checkpoint,
instead of branching on the family. The cross-encoder and the bi-encoder keep the trainer's own
built-in paths (``objective`` ``pointwise`` / ``contrastive``, no recipe registered).

Example:
    >>> recipe_for("seq2seq").losses
    ('pointwise',)
    >>> recipe_for("cross") is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from evirank.train.config import TrainConfig


class Recipe(Protocol):
    """How one family's models are fine-tuned (see the module).

    Attributes:
        kind: the model kind in words, written into ``evirank-train.json``.
        losses: the ``TrainConfig.loss`` values it trains with (the first is the default).
        score: how the saved model's relevance score reads, for ``evirank-train.json``.
    """

    kind: str
    losses: tuple[str, ...]
    score: str

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any]:
        """(model, tokenizer) of the initial weights ``source`` (a Hub id or folder)."""
        ...

    def reload(self, folder: Path) -> Any:
        """The model of a checkpoint folder this recipe saved (``save_pretrained``)."""
        ...

    def objective(self, examples: pd.DataFrame, config: TrainConfig) -> tuple[pd.DataFrame, Any]:
        """(item rows, the loss over them: a :class:`evirank.train.trainer.Objective`)."""
        ...

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
        ...


_RECIPES: dict[str, Callable[[], Recipe]] = {}


def register_recipe(objective: str, factory: Callable[[], Recipe]) -> None:
    """Make ``factory()`` the recipe of the families whose ``objective`` is ``objective``."""
    _RECIPES[objective] = factory


def recipe_for(kind: str) -> Recipe | None:
    """The recipe of the family named ``kind`` (None: the trainer's built-in cross/bi paths).

    Raises:
        UnknownFamilyError: ``kind`` names no family.
        ValueError: the family has no training objective.
    """
    from evirank.score.family import get_family

    family = get_family(kind)
    if family.objective is None:
        raise ValueError(f"the {family.name} family has no training objective")
    factory = _RECIPES.get(family.objective)
    return None if factory is None else factory()
