"""One batch of model inputs as numpy arrays: what scorers hand to a backend, and how a bi-encoder
pools a model's output (the same in inference, unpadded batches and training).

Example:
    >>> import numpy as np
    >>> TokenBatch(np.array([[7, 8, 9], [5, 6, 0]]), np.array([[1, 1, 1], [1, 1, 0]])).shape
    (2, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from evirank.extras import require


@dataclass(frozen=True)
class TokenBatch:
    """One padded batch of model inputs (numpy int64 arrays of shape rows x length).

    ``token_type_ids`` is ``None`` for models that take none (RoBERTa, DistilBERT).
    """

    input_ids: np.ndarray
    attention_mask: np.ndarray
    token_type_ids: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, padded length)."""
        rows, width = self.input_ids.shape
        return int(rows), int(width)


@dataclass(frozen=True)
class PinnedBatch(TokenBatch):
    """A :class:`TokenBatch` whose arrays are also held as torch tensors in pinned host memory."""

    tensors: Any = None


def mean_pooled(hidden: Any, attention_mask: Any) -> Any:
    """Unit-length means of ``hidden`` (batch x tokens x dim) over the real tokens of ``attention_mask``.

    The bi-encoder's embedding, shared by inference and training so both pool alike.

    Example:
        >>> import torch
        >>> hidden = torch.tensor([[[3.0, 0.0], [0.0, 4.0], [9.0, 9.0]]])
        >>> [round(v, 3) for v in mean_pooled(hidden, torch.tensor([[1, 1, 0]]))[0].tolist()]
        [0.6, 0.8]
    """
    torch = require("torch", "torch")
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return torch.nn.functional.normalize(pooled, p=2.0, dim=-1)
