"""PARADE's learned aggregation of passage representations (Li, Yates, MacAvaney, He & Sun 2020,
"PARADE: Passage Representation Aggregation for Document Reranking"), as a torch module.

A document's passages are read by an encoder with the query (``[CLS] q [SEP] p_k [SEP]``); their
[CLS] vectors T_1 .. T_n (in passage order) become one document vector D, and the score is
``s = W_d . D + b``. How D is made is the aggregation:

- ``avg``: the element-wise mean of the T_k (PARADE-Avg);
- ``max``: the element-wise maximum (PARADE-Max);
- ``attn``: a weighted mean, the weights ``softmax_k(w . T_k)`` with a learned w (PARADE-Attn);
- ``transformer``: a learned [CLS] vector is put before T_1 .. T_n, learned position embeddings
  are added (one per position, the [CLS] first), two transformer encoder layers of the
  encoder's width run over the sequence, and D is the output at the [CLS] position
  (PARADE-Transformer, "PARADE" in the paper).

A passage's own score is the score of a document made of that passage alone (for ``avg``,
``max`` and ``attn``, ``W_d . T_k + b``), so the passages can be shown, or aggregated by
score, too.

The head is saved beside the encoder in the model folder: :data:`HEAD_CONFIG` (what it is) and
:data:`HEAD_WEIGHTS` (its weights). Torch is imported when a head is made.

Example:
    >>> head = make_head(HeadConfig("avg", hidden_size=4, max_passages=3, num_heads=2,
    ...                             intermediate_size=8))
    >>> import torch
    >>> head(torch.zeros(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)).shape
    torch.Size([2])
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from evirank.extras import require

logger = logging.getLogger(__name__)

#: The aggregations of Li et al. (2020).
AGGREGATIONS = ("avg", "max", "attn", "transformer")
#: The head's description in a model folder.
HEAD_CONFIG = "parade.json"
#: The head's weights in a model folder.
HEAD_WEIGHTS = "parade_head.safetensors"


@dataclass(frozen=True)
class HeadConfig:
    """What a PARADE head is.

    Attributes:
        aggregation: one of :data:`AGGREGATIONS`.
        hidden_size: the width of the passage vectors (the encoder's).
        max_passages: passages read per document (its first ones; the positions the
            ``transformer`` aggregation knows).
        num_heads: attention heads of the ``transformer`` layers.
        intermediate_size: feed-forward width of the ``transformer`` layers.
        layers: ``transformer`` layers.
        dropout: dropout of the head (training only).
        max_length: the (query, passage) input length the model was trained with.
    """

    aggregation: str
    hidden_size: int
    max_passages: int
    num_heads: int
    intermediate_size: int
    layers: int = 2
    dropout: float = 0.1
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"aggregation must be one of {', '.join(AGGREGATIONS)}, found {self.aggregation!r}"
            )
        if self.max_passages < 1:
            raise ValueError(f"max_passages must be at least 1, found {self.max_passages}")

    @classmethod
    def read(cls, folder: str | Path) -> HeadConfig:
        """The head description of a model folder.

        Raises:
            InputFormatError: the file is missing or not a head description.
        """
        from evirank.errors import InputFormatError

        path = Path(folder) / HEAD_CONFIG
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
            return cls(**values)
        except (OSError, ValueError, TypeError) as exc:
            raise InputFormatError(
                path, None, "a PARADE head description (written by evirank train --scorer parade)", str(exc)
            ) from exc

    def write(self, folder: str | Path) -> None:
        """Write the description into ``folder``."""
        (Path(folder) / HEAD_CONFIG).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")


@cache
def head_class() -> Any:
    """The torch module class of a PARADE head (made on first use, so torch loads only then)."""
    torch = require("torch", "torch")

    class ParadeHead(torch.nn.Module):  # type: ignore[name-defined]
        """Passage vectors ``[B, P, H]`` (with a ``[B, P]`` mask of real passages) -> document scores ``[B]``.

        See the module for the aggregations.
        """

        def __init__(self, config: HeadConfig) -> None:
            super().__init__()
            self.config = config
            hidden = config.hidden_size
            self.dropout = torch.nn.Dropout(config.dropout)
            self.score = torch.nn.Linear(hidden, 1)
            if config.aggregation == "attn":
                self.attention = torch.nn.Linear(hidden, 1, bias=False)
            if config.aggregation == "transformer":
                self.cls = torch.nn.Parameter(torch.zeros(hidden))
                self.position = torch.nn.Embedding(config.max_passages + 1, hidden)
                self.layers = torch.nn.ModuleList(
                    torch.nn.TransformerEncoderLayer(
                        hidden,
                        config.num_heads,
                        config.intermediate_size,
                        dropout=config.dropout,
                        activation="gelu",
                        batch_first=True,
                    )
                    for _ in range(config.layers)
                )
            self.reset_parameters()

        def reset_parameters(self) -> None:
            """BERT's initialisation of the new weights: normal(0, 0.02), biases 0."""
            for name, param in self.named_parameters():
                if name.endswith("bias"):
                    torch.nn.init.zeros_(param)
                elif "norm" in name:
                    torch.nn.init.ones_(param)
                else:
                    torch.nn.init.normal_(param, std=0.02)

        def document_vectors(self, vectors: Any, mask: Any) -> Any:
            """D ``[B, H]`` of passage vectors ``[B, P, H]`` (``mask`` ``[B, P]``: real passages)."""
            aggregation = self.config.aggregation
            real = mask.unsqueeze(-1)
            if aggregation == "avg":
                count = real.sum(dim=1).clamp(min=1).to(vectors.dtype)
                return (vectors * real).sum(dim=1) / count
            if aggregation == "max":
                return vectors.masked_fill(~real, float("-inf")).amax(dim=1)
            if aggregation == "attn":
                logits = self.attention(vectors).squeeze(-1).masked_fill(~mask, float("-inf"))
                weights = torch.softmax(logits, dim=1)
                return (weights.unsqueeze(-1) * vectors).sum(dim=1)
            batch, passages, hidden = vectors.shape
            if passages > self.config.max_passages:
                raise ValueError(
                    f"PARADE-Transformer reads at most {self.config.max_passages} passages, found {passages}"
                )
            sequence = torch.cat([self.cls.expand(batch, 1, hidden), vectors], dim=1)
            positions = torch.arange(passages + 1, device=vectors.device)
            sequence = sequence + self.position(positions).unsqueeze(0)
            padding = torch.cat([torch.zeros_like(mask[:, :1]), ~mask], dim=1)
            for layer in self.layers:
                sequence = layer(sequence, src_key_padding_mask=padding)
            return sequence[:, 0]

        def forward(self, vectors: Any, mask: Any) -> Any:
            """Document scores ``[B]``."""
            document = self.document_vectors(vectors, mask.bool())
            return self.score(self.dropout(document)).squeeze(-1)

    return ParadeHead


def make_head(config: HeadConfig) -> Any:
    """A new PARADE head of ``config`` (a torch module, BERT's initialisation)."""
    return head_class()(config)


def save_head(head: Any, folder: str | Path) -> None:
    """Write the head's description and weights into ``folder``."""
    from safetensors.torch import save_file

    head.config.write(folder)
    state = {name: tensor.detach().contiguous().cpu() for name, tensor in head.state_dict().items()}
    save_file(state, str(Path(folder) / HEAD_WEIGHTS))


def load_head(folder: str | Path) -> Any:
    """The head saved in ``folder`` (eval mode, on the CPU).

    Raises:
        InputFormatError: no head, or weights that do not fit its description.
    """
    from safetensors.torch import load_file

    from evirank.errors import InputFormatError

    config = HeadConfig.read(folder)
    head = make_head(config)
    path = Path(folder) / HEAD_WEIGHTS
    try:
        head.load_state_dict(load_file(str(path)))
    except (OSError, RuntimeError) as exc:
        raise InputFormatError(
            path, None, f"the weights of a PARADE-{config.aggregation} head", str(exc)
        ) from exc
    return head.eval()


def document_scores(
    head: Any, vectors: np.ndarray, documents: np.ndarray, positions: np.ndarray, chunk: int = 256
) -> np.ndarray:
    """One score per document from its passages' vectors, in float64.

    Args:
        head: the head (used as it is: put it in eval mode for inference).
        vectors: ``[N, H]`` passage vectors.
        documents: ``[N]`` each passage's document, as codes 0 .. D-1.
        positions: ``[N]`` each passage's position within its document, 0 .. P-1 (passages at or
            beyond the head's ``max_passages`` must have been left out).
        chunk: documents per forward pass.

    Example:
        >>> head = make_head(HeadConfig("max", 2, 4, 1, 4))
        >>> document_scores(head, np.ones((3, 2), np.float32), np.array([0, 0, 1]), np.array([0, 1, 0])).shape
        (2,)
    """
    torch = require("torch", "torch")
    n_docs = int(documents.max()) + 1 if len(documents) else 0
    width = int(positions.max()) + 1 if len(positions) else 1
    hidden = vectors.shape[1] if vectors.ndim == 2 else head.config.hidden_size
    out = np.zeros(n_docs, dtype=np.float64)
    device = head_device(head)
    order = np.argsort(documents, kind="stable")
    starts = np.searchsorted(documents[order], np.arange(n_docs + 1))
    with torch.inference_mode():
        for first in range(0, n_docs, chunk):
            last = min(first + chunk, n_docs)
            rows = order[starts[first] : starts[last]]
            block = np.zeros((last - first, width, hidden), dtype=np.float32)
            mask = np.zeros((last - first, width), dtype=bool)
            block[documents[rows] - first, positions[rows]] = vectors[rows]
            mask[documents[rows] - first, positions[rows]] = True
            scores = head(torch.from_numpy(block).to(device), torch.from_numpy(mask).to(device))
            out[first:last] = scores.double().cpu().numpy()
    return out


def passage_scores(head: Any, vectors: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Each passage's own score: that of a document made of it alone, in float64.

    Example:
        >>> head = make_head(HeadConfig("attn", 2, 4, 1, 4))
        >>> passage_scores(head, np.ones((3, 2), np.float32)).shape
        (3,)
    """
    torch = require("torch", "torch")
    out = np.zeros(len(vectors), dtype=np.float64)
    device = head_device(head)
    with torch.inference_mode():
        for start in range(0, len(vectors), chunk):
            block = torch.from_numpy(np.ascontiguousarray(vectors[start : start + chunk], dtype=np.float32))
            mask = torch.ones(len(block), 1, dtype=torch.bool, device=device)
            scores = head(block.to(device).unsqueeze(1), mask)
            out[start : start + len(block)] = scores.double().cpu().numpy()
    return out


def head_device(head: Any) -> Any:
    """Where the head's parameters are (the CPU for a loaded head; the GPU for one being trained there).

    Example:
        >>> str(head_device(make_head(HeadConfig("max", 2, 4, 1, 4))))
        'cpu'
    """
    torch = require("torch", "torch")
    parameter = next(iter(head.parameters()), None)
    return parameter.device if parameter is not None else torch.device("cpu")


def describe(config: HeadConfig) -> dict[str, Any]:
    """The head's settings for a scorer's fingerprint and records."""
    return {
        "aggregation": config.aggregation,
        **{k: v for k, v in asdict(config).items() if k != "aggregation"},
    }
