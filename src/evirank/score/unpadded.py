"""Run a BERT-like encoder on a batch's real tokens only: no compute spent on padding.

A padded batch of ``rows x width`` tokens runs every linear layer and layer norm on every slot,
padding included. Here the batch is *packed*: its real tokens are one ``[tokens, hidden]`` matrix,
with the sequences' boundaries as cumulative lengths (``cu_seqlens``), so the embeddings, the
query/key/value, attention-output and feed-forward layers and the layer norms (nearly all the work
on short sequences) see the real tokens alone. Attention is computed within each sequence: with
torch's variable-length (flash) attention on CUDA in bf16/fp16 where this torch has it
(``torch.nn.attention.varlen``), otherwise by scattering keys and values into a padded
``[rows, heads, length, head_dim]`` layout for ``scaled_dot_product_attention`` with a key mask,
and gathering the real positions back. A classifier's last layer is computed for the [CLS]
positions only (as :mod:`evirank.score.cls_only` does for padded batches); an embedding model's
output is mean-pooled per sequence.

The model's own modules run (its embeddings, linear layers, layer norms, heads), so no weight is
copied; the result is the same function as the padded model, equal up to float rounding, which
:func:`unpadded_model` checks on a probe batch before it is used. Supported: BERT (MiniLM),
ELECTRA, RoBERTa, XLM-RoBERTa and CamemBERT sequence classifiers and bare encoders with absolute
positions.

The host side (:func:`pack`) turns a right-padded :class:`~evirank.score.backends.TokenBatch` into
the packed layout with a few numpy index operations; the torch backend does it in the scorer's
background thread, while the model runs the batch before.

Example:
    >>> import numpy as np
    >>> from evirank.score.token_batch import TokenBatch
    >>> packed = pack(TokenBatch(np.array([[7, 8, 9], [5, 6, 0]]), np.array([[1, 1, 1], [1, 1, 0]])))
    >>> packed.input_ids.tolist(), packed.cu_seqlens.tolist(), packed.max_len
    ([7, 8, 9, 5, 6], [0, 3, 5], 3)
    >>> packed.positions.tolist(), packed.slots.tolist(), round(packed.padding_fraction, 3)
    ([0, 1, 2, 0, 1], [0, 1, 2, 3, 4], 0.167)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evirank.extras import require
from evirank.score.token_batch import TokenBatch

logger = logging.getLogger(__name__)

#: Model types whose encoder layers have BERT's layout, and the first position id of a sequence
#: (RoBERTa-style models count positions from ``pad_token_id + 1``).
POSITION_START = {
    "bert": "zero",
    "electra": "zero",
    "roberta": "pad",
    "xlm-roberta": "pad",
    "camembert": "pad",
}
#: With ``batch_layout="auto"`` on a CPU, a batch runs unpadded when at least this share of its
#: slots is padding, padded otherwise (on CUDA every batch runs unpadded, where the model is
#: supported; None: every CPU batch runs padded). Small batches (a rerank request's 20 sentences)
#: are a third or more padding and run 1.45x faster unpadded; the length-sorted batches of a large job have
#: under 1% padding, where packing saves nothing. Measured on 2 CPU cores, MiniLM-L6
#: cross-encoder, SciFact claim/sentence pairs: see docs/speed.md.
CPU_PACK_FROM: float | None = 0.05
#: Largest |difference| from the padded model accepted on the probe batch (fp32).
TOLERANCE = 1e-4
#: Largest |difference| between variable-length and padded attention accepted in bf16/fp16, as a
#: share of the largest |output|.
HALF_TOLERANCE = 2e-2


@dataclass(frozen=True)
class PackedLayout:
    """A right-padded batch's real tokens, one after another (numpy arrays on the host).

    Attributes:
        input_ids / token_type_ids: the real tokens' ids and types (``[tokens]``).
        positions: each token's position in its sequence.
        rows: each token's sequence (row of the padded batch).
        slots: each token's place in a ``rows x max_len`` padded layout (``row * max_len + position``).
        first: each sequence's first token ([CLS]) in the packed order.
        cu_seqlens: cumulative lengths, ``[rows + 1]`` int32, starting at 0.
        max_len: the longest sequence. padded_tokens: rows x width of the padded batch.
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    positions: np.ndarray
    rows: np.ndarray
    slots: np.ndarray
    first: np.ndarray
    cu_seqlens: np.ndarray
    max_len: int
    padded_tokens: int

    @property
    def n_rows(self) -> int:
        """Sequences in the batch."""
        return len(self.cu_seqlens) - 1

    @property
    def tokens(self) -> int:
        """Real tokens in the batch."""
        return len(self.input_ids)

    @property
    def padding_fraction(self) -> float:
        """The share of the padded batch's slots that were padding."""
        return 1.0 - self.tokens / self.padded_tokens if self.padded_tokens else 0.0

    def arrays(self) -> dict[str, np.ndarray]:
        """The index arrays the model reads, by name."""
        return {
            "input_ids": self.input_ids,
            "token_type_ids": self.token_type_ids,
            "positions": self.positions,
            "rows": self.rows,
            "slots": self.slots,
            "first": self.first,
            "cu_seqlens": self.cu_seqlens,
        }


def pack(batch: TokenBatch) -> PackedLayout:
    """The packed layout of a right-padded batch (each row's real tokens first, then padding).

    Raises:
        ValueError: a row whose mask is not a prefix of ones (left padding, holes), or an empty row.
    """
    mask = np.asarray(batch.attention_mask).astype(bool, copy=False)
    rows_n, width = mask.shape
    lengths = mask.sum(axis=1)
    if rows_n == 0 or int(lengths.min()) < 1:
        raise ValueError("a packed batch needs at least one row, and at least one real token in each")
    columns = np.arange(width)
    if not np.array_equal(mask, columns[None, :] < lengths[:, None]):
        raise ValueError("a packed batch must be right-padded: each row's real tokens first, then padding")
    flat = np.flatnonzero(mask)
    rows, positions = np.divmod(flat, width)
    max_len = int(lengths.max())
    cu = np.zeros(rows_n + 1, dtype=np.int32)
    np.cumsum(lengths, out=cu[1:])
    types = (
        np.zeros(len(flat), dtype=np.int64)
        if batch.token_type_ids is None
        else np.asarray(batch.token_type_ids, dtype=np.int64).reshape(-1)[flat]
    )
    return PackedLayout(
        input_ids=np.asarray(batch.input_ids, dtype=np.int64).reshape(-1)[flat],
        token_type_ids=types,
        positions=positions,
        rows=rows,
        slots=rows * max_len + positions,
        first=cu[:-1].astype(np.int64),
        cu_seqlens=cu,
        max_len=max_len,
        padded_tokens=int(rows_n * width),
    )


@dataclass(frozen=True)
class PackedBatch(TokenBatch):
    """A :class:`TokenBatch` with its packed layout, and that layout's arrays as torch tensors
    (in pinned memory when it is bound for a GPU)."""

    layout: PackedLayout | None = None
    tensors: Any = None


def packed_batch(batch: TokenBatch, *, pin: bool = False) -> PackedBatch:
    """``batch`` with its packed layout as torch tensors (pinned when ``pin``), for
    :meth:`UnpaddedModel.__call__`."""
    torch = require("torch", "torch")
    layout = pack(batch)
    tensors = {name: torch.from_numpy(array) for name, array in layout.arrays().items()}
    if pin:
        tensors = {name: tensor.pin_memory() for name, tensor in tensors.items()}
    return PackedBatch(
        batch.input_ids, batch.attention_mask, batch.token_type_ids, layout=layout, tensors=tensors
    )


def varlen_attention_function() -> Callable[..., Any] | None:
    """torch's variable-length attention (``torch.nn.attention.varlen.varlen_attn``), or None when
    this torch has none."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def why_not(model: Any, task: Any) -> str | None:
    """Why ``model`` cannot run unpadded for ``task`` (``"classify"`` or ``"embed"``), or None when
    it can.

    Example:
        >>> why_not(object(), "classify")
        'the model has no transformers config'
    """
    if not isinstance(task, str):
        return f"the {getattr(task, 'name', type(task).__name__)} head runs its own module"
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no transformers config"
    model_type = getattr(config, "model_type", None)
    if model_type not in POSITION_START:
        return (
            f"its architecture ({model_type}) is not one of the encoders that run unpadded "
            f"({', '.join(sorted(POSITION_START))})"
        )
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return "it is configured as a decoder"
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return f"its positions are {config.position_embedding_type}, not absolute"
    try:
        _parts(model, task)
    except (AttributeError, TypeError, ValueError) as exc:
        return f"its modules are not laid out as expected ({exc})"
    return None


@dataclass
class _Parts:
    """The modules an unpadded forward runs, all the model's own."""

    embeddings: Any
    project: Any
    layers: list[Any]
    heads: int
    head_dim: int
    scaling: float
    position_start: int
    #: ``[rows, 1, hidden] -> logits``; None for an embedding model (mean pooling).
    head: Callable[[Any], Any] | None


def _parts(model: Any, task: str) -> _Parts:
    config = model.config
    head: Callable[[Any], Any] | None
    if task == "classify":
        if not type(model).__name__.endswith("ForSequenceClassification"):
            raise TypeError(f"{type(model).__name__} is not a sequence classifier")
        base = model.base_model
        classifier = model.classifier
        if config.model_type == "bert":
            pooler, dropout = base.pooler, model.dropout
            if pooler is None:
                raise ValueError("a BERT classifier without its pooler")

            def bert_head(hidden: Any) -> Any:
                return classifier(dropout(pooler(hidden)))

            head = bert_head

        else:  # RoBERTa / ELECTRA heads read position 0 of what they are given

            def own_head(hidden: Any) -> Any:
                return classifier(hidden)

            head = own_head

    elif task == "embed":
        base, head = model, None
    else:
        raise ValueError(f"unknown task {task!r}")
    layers = list(base.encoder.layer)
    if not layers:
        raise ValueError("an encoder without layers")
    for layer in layers:
        _ = (
            layer.attention.self.query,
            layer.attention.self.key,
            layer.attention.self.value,
            layer.attention.output,
            layer.intermediate,
            layer.output,
        )
    heads = int(config.num_attention_heads)
    hidden = int(config.hidden_size)
    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
    head_dim = hidden // heads
    scaling = float(getattr(layers[0].attention.self, "scaling", head_dim**-0.5))
    start = 0 if POSITION_START[config.model_type] == "zero" else int(config.pad_token_id) + 1
    return _Parts(
        embeddings=base.embeddings,
        project=getattr(base, "embeddings_project", None),
        layers=layers,
        heads=heads,
        head_dim=head_dim,
        scaling=scaling,
        position_start=start,
        head=head,
    )


class UnpaddedModel:
    """A model's forward over a :class:`PackedBatch`'s tensors (see the module).

    Calling it returns logits (a classifier) or unit-length mean-pooled embeddings (an encoder),
    one row per sequence. ``varlen`` says whether attention may use torch's variable-length
    kernel (CUDA, bf16/fp16); otherwise it runs through a padded layout.
    """

    def __init__(self, model: Any, task: str, *, varlen: bool = False) -> None:
        self.model = model
        self.task = task
        self.parts = _parts(model, task)
        self.varlen = varlen
        self._varlen_attn = varlen_attention_function() if varlen else None

    def __call__(self, tensors: dict[str, Any], layout: PackedLayout) -> Any:
        """Logits or embeddings of the packed batch (tensors on the model's device)."""
        torch = require("torch", "torch")
        parts = self.parts
        hidden = parts.embeddings(
            input_ids=tensors["input_ids"][None],
            token_type_ids=tensors["token_type_ids"][None],
            position_ids=(tensors["positions"] + parts.position_start)[None],
        )[0]
        if parts.project is not None:
            hidden = parts.project(hidden)
        context = _Context(self, tensors, layout)
        full_layers = parts.layers if parts.head is None else parts.layers[:-1]
        for layer in full_layers:
            hidden = self._layer(layer, hidden, hidden, context.all_tokens)
        if parts.head is None:
            pooled = hidden.float().new_zeros(layout.n_rows, hidden.shape[-1])
            pooled.index_add_(0, tensors["rows"], hidden.float())
            counts = (tensors["cu_seqlens"][1:] - tensors["cu_seqlens"][:-1]).to(pooled.dtype)
            pooled = pooled / counts.clamp(min=1.0)[:, None]
            return torch.nn.functional.normalize(pooled, p=2.0, dim=-1)
        cls = hidden.index_select(0, tensors["first"])
        out = self._layer(parts.layers[-1], cls, hidden, context.first_tokens)
        return parts.head(out[:, None, :])

    def _layer(self, layer: Any, queries: Any, keys: Any, attend: Callable[[Any, Any, Any], Any]) -> Any:
        """One encoder layer; ``queries`` are the positions it outputs, ``keys`` every position."""
        parts = self.parts
        own = layer.attention.self
        shape = (-1, parts.heads, parts.head_dim)
        q = own.query(queries).view(shape)
        k = own.key(keys).view(shape)
        v = own.value(keys).view(shape)
        context = attend(q, k, v).reshape(queries.shape[0], -1)
        attended = layer.attention.output(context, queries)
        return layer.output(layer.intermediate(attended), attended)


class _Context:
    """The attention of one packed batch: every token to its sequence, or [CLS] to its sequence.
    Index tensors shared by the layers are built once per batch."""

    def __init__(self, model: UnpaddedModel, tensors: dict[str, Any], layout: PackedLayout) -> None:
        self.model = model
        self.tensors = tensors
        self.layout = layout
        self._mask: Any = None
        self._first_cu: Any = None
        self._lengths_list: list[int] | None = None

    def _use_varlen(self, q: Any) -> bool:
        torch = require("torch", "torch")
        return (
            self.model._varlen_attn is not None and q.is_cuda and q.dtype in (torch.bfloat16, torch.float16)
        )

    def key_mask(self) -> Any:
        """``[rows, 1, 1, max_len]`` booleans: True where a key is a real token."""
        if self._mask is None:
            torch = require("torch", "torch")
            layout = self.layout
            slots = self.tensors["slots"]
            mask = torch.zeros(layout.n_rows * layout.max_len, dtype=torch.bool, device=slots.device)
            mask[slots] = True
            self._mask = mask.view(layout.n_rows, 1, 1, layout.max_len)
        return self._mask

    def _padded(self, x: Any) -> Any:
        """``[tokens, heads, dim]`` scattered into ``[rows, heads, max_len, dim]`` (zeros elsewhere)."""
        layout = self.layout
        out = x.new_zeros(layout.n_rows * layout.max_len, x.shape[1], x.shape[2])
        out[self.tensors["slots"]] = x
        return out.view(layout.n_rows, layout.max_len, x.shape[1], x.shape[2]).transpose(1, 2)

    def _sdpa(self, q: Any, k: Any, v: Any) -> Any:
        torch = require("torch", "torch")
        return torch.nn.functional.scaled_dot_product_attention(
            q, self._padded(k), self._padded(v), attn_mask=self.key_mask(), scale=self.model.parts.scaling
        )

    def _lengths(self) -> list[int]:
        """Each sequence's token count, in packed order."""
        if self._lengths_list is None:
            self._lengths_list = np.diff(self.layout.cu_seqlens).tolist()
        return self._lengths_list

    def _each_sequence(self, q: Any, k: Any, v: Any, q_lengths: list[int]) -> Any:
        """Attention one sequence at a time (``q`` holds ``q_lengths[i]`` rows of sequence ``i``).

        On a CPU this is faster than a padded layout: each call is a small dense product with no
        mask, and no scatter or gather around it (measured in docs/speed.md, "Unpadded batches").
        Its kernels are the same scaled dot-product attention, so it agrees with the padded layout
        within fp32 rounding.
        """
        torch = require("torch", "torch")
        sdpa = torch.nn.functional.scaled_dot_product_attention
        scale = self.model.parts.scaling
        outs = []
        q_at = k_at = 0
        for q_len, k_len in zip(q_lengths, self._lengths(), strict=True):
            one = sdpa(
                q[q_at : q_at + q_len].transpose(0, 1)[None],
                k[k_at : k_at + k_len].transpose(0, 1)[None],
                v[k_at : k_at + k_len].transpose(0, 1)[None],
                scale=scale,
            )
            outs.append(one[0].transpose(0, 1))
            q_at += q_len
            k_at += k_len
        return torch.cat(outs)

    def all_tokens(self, q: Any, k: Any, v: Any) -> Any:
        """Every token attends to the tokens of its sequence: ``[tokens, heads, dim]``."""
        layout = self.layout
        if self._use_varlen(q):
            cu = self.tensors["cu_seqlens"]
            return self.model._varlen_attn(  # type: ignore[misc]
                q, k, v, cu, cu, layout.max_len, layout.max_len, scale=self.model.parts.scaling
            )
        if q.device.type == "cpu":
            return self._each_sequence(q, k, v, self._lengths())
        out = self._sdpa(self._padded(q), k, v)  # [rows, heads, max_len, dim]
        out = out.transpose(1, 2).reshape(layout.n_rows * layout.max_len, q.shape[1], q.shape[2])
        return out[self.tensors["slots"]]

    def first_tokens(self, q: Any, k: Any, v: Any) -> Any:
        """Each sequence's first token ([CLS], one query per row) attends to its sequence."""
        layout = self.layout
        if self._use_varlen(q):
            torch = require("torch", "torch")
            if self._first_cu is None:
                self._first_cu = torch.arange(layout.n_rows + 1, dtype=torch.int32, device=q.device)
            cu = self.tensors["cu_seqlens"]
            return self.model._varlen_attn(  # type: ignore[misc]
                q, k, v, self._first_cu, cu, 1, layout.max_len, scale=self.model.parts.scaling
            )
        if q.device.type == "cpu":
            return self._each_sequence(q, k, v, [1] * layout.n_rows)
        out = self._sdpa(q[:, :, None, :], k, v)  # [rows, heads, 1, dim]
        return out[:, :, 0, :]


def _padded_reference(model: Any, task: str, inputs: dict[str, Any]) -> Any:
    from evirank.score.token_batch import mean_pooled

    if task == "classify":
        return model(**inputs).logits
    return mean_pooled(model(**inputs).last_hidden_state.float(), inputs["attention_mask"])


def unpadded_model(model: Any, task: Any, *, device: str, precision: str) -> UnpaddedModel:
    """An :class:`UnpaddedModel` of ``model`` checked against its padded forward on a probe batch.

    On CUDA in bf16/fp16, variable-length attention is tried too and kept when it runs and agrees
    (otherwise attention goes through the padded layout, logged).

    Raises:
        ValueError: the model cannot run unpadded (:func:`why_not`), or the unpadded forward
            differs from the padded one on the probe batch.
    """
    reason = why_not(model, task)
    if reason is not None:
        raise ValueError(reason)
    torch = require("torch", "torch")
    from evirank.score.cls_only import probe_batch

    arrays = probe_batch(int(model.config.vocab_size))
    types = arrays["token_type_ids"] if int(getattr(model.config, "type_vocab_size", 1)) > 1 else None
    if types is None:
        arrays.pop("token_type_ids")
    arrays["input_ids"] = np.where(
        arrays["attention_mask"] > 0, arrays["input_ids"], int(model.config.pad_token_id or 0)
    )
    batch = TokenBatch(arrays["input_ids"], arrays["attention_mask"], types)
    packed = packed_batch(batch)
    on_device = torch.device(device)
    inputs = {name: torch.from_numpy(a).to(on_device) for name, a in arrays.items()}
    tensors = {name: t.to(on_device) for name, t in packed.tensors.items()}
    assert packed.layout is not None
    unpadded = UnpaddedModel(model, task)
    with torch.inference_mode():
        reference = _padded_reference(model, task, inputs).float()
        gap = float((unpadded(tensors, packed.layout).float() - reference).abs().max())
    if not math.isfinite(gap) or gap > TOLERANCE:
        raise ValueError(f"its unpadded forward differs from the padded one by {gap:.2g} on a probe batch")
    logger.debug("unpadded forward: max |difference| %.2g on the probe batch", gap)
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if on_device.type == "cuda" and half is not None and varlen_attention_function() is not None:
        unpadded = _with_varlen(model, task, unpadded, tensors, packed.layout, half)
    return unpadded


def _with_varlen(
    model: Any,
    task: str,
    padded_attention: UnpaddedModel,
    tensors: dict[str, Any],
    layout: PackedLayout,
    half: Any,
) -> UnpaddedModel:
    """``padded_attention``'s model with variable-length attention, when it runs and agrees."""
    torch = require("torch", "torch")
    varlen = UnpaddedModel(model, task, varlen=True)
    try:
        with torch.inference_mode(), torch.autocast(device_type="cuda", dtype=half):
            reference = padded_attention(tensors, layout).float()
            mine = varlen(tensors, layout).float()
        gap = float((mine - reference).abs().max())
        scale = max(1.0, float(reference.abs().max()))
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
        logger.info("variable-length attention is not available here (%s); attention runs padded", exc)
        return padded_attention
    if not math.isfinite(gap) or gap > HALF_TOLERANCE * scale:
        logger.warning(
            "variable-length attention differs by %.2g on a probe batch; attention runs padded", gap
        )
        return padded_attention
    logger.debug("variable-length attention: max |difference| %.2g on the probe batch", gap)
    return varlen
