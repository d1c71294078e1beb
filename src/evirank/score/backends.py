"""The seam between scorers and the engine that runs the model.

A scorer tokenises, batches and caches; a :class:`Backend` only turns one padded
:class:`TokenBatch` into numbers: classification logits (task ``"classify"``) or mean-pooled,
L2-normalised embeddings (task ``"embed"``). The ``"torch"`` backend is built in; another engine
plugs in with :func:`register_backend` and is chosen by name. Built in: ``"torch"`` (CPU, CUDA,
MPS); ``"onnx"`` / ``"onnx-int8"`` (ONNX Runtime on CPU, fp32 or int8 weights; see
:mod:`evirank.score.onnx_backend`); ``"openvino"`` / ``"openvino-int8"`` (OpenVINO on CPU, fp32 or
bf16, or static int8; see :mod:`evirank.score.openvino_backend`). The last four register on first
use, so their engines load only then.

Example:
    >>> sorted(available_backends())
    ['onnx', 'onnx-int8', 'openvino', 'openvino-int8', 'torch']
"""

from __future__ import annotations

import hashlib
import importlib
import logging
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np

from evirank.extras import require
from evirank.score.devices import resolve_device, resolve_precision
from evirank.score.token_batch import PinnedBatch, TokenBatch, mean_pooled

logger = logging.getLogger(__name__)

Task = Literal["classify", "embed"]


@runtime_checkable
class ModelHead(Protocol):
    """How a model family builds the torch module its scorer runs (the task of a family whose
    output is neither a classifier's logits nor mean-pooled embeddings).

    ``load_torch(model_dir)`` returns ``(module, newly_initialised)``: a module whose
    ``forward(input_ids, attention_mask[, token_type_ids])`` returns one float tensor whose first
    dimension is the batch (scores, logits, or per-token vectors), and the names of parameters
    that were not in the checkpoint. ``name`` goes into the scorer's fingerprint.
    """

    name: str

    def load_torch(self, model_dir: Path) -> tuple[Any, tuple[str, ...]]: ...


class Backend(ABC):
    """Runs a loaded model on token batches.

    Subclasses set ``name``, implement :meth:`resolve`, :meth:`load` and :meth:`forward`, and
    fill ``device``, ``precision``, ``pad_multiple`` and ``newly_initialised`` when loaded.
    """

    name: ClassVar[str]
    device: str = "cpu"
    precision: str = "fp32"
    #: batches are padded to a multiple of this many tokens (8 helps GPU tensor cores).
    pad_multiple: int = 1
    #: parameter names that were not in the checkpoint and were randomly initialised.
    newly_initialised: tuple[str, ...] = ()

    @classmethod
    @abstractmethod
    def resolve(cls, device: str, dtype: str) -> tuple[str, str]:
        """The (device, precision) that :meth:`load` will use for these requests, without loading."""

    @classmethod
    @abstractmethod
    def load(
        cls,
        model_dir: Path,
        task: Task | ModelHead,
        device: str,
        precision: str,
        *,
        threads: int | None = None,
    ) -> Backend:
        """Load the model in ``model_dir`` for ``task`` on a resolved device and precision, with
        ``threads`` CPU threads (None: the engine's own choice; :class:`evirank.config.Runtime`'s
        ``model_threads``).

        A backend that cannot run a family's :class:`ModelHead` raises ``ValueError`` saying so.
        """

    def use_layout(self, layout: str) -> None:
        """Lay batches out as ``layout`` asks (the runtime's ``batch_layout``: ``auto``, ``padded``,
        ``unpadded``). Backends run padded batches unless they say otherwise.

        Raises:
            ValueError: ``unpadded`` asked of a backend or model that cannot run it.
        """
        if layout == "unpadded":
            raise ValueError(
                f"batch_layout='unpadded' (--batch-layout): the {self.name!r} backend runs padded batches "
                "only; use the torch backend, or --batch-layout auto"
            )

    @classmethod
    def default_threads(cls) -> int:
        """The CPU threads :meth:`load` uses when given none: the cores this process may run on
        (``$EVIRANK_NUM_THREADS`` when set)."""
        from evirank.score.devices import default_threads

        return default_threads()

    def prepare(self, batch: TokenBatch) -> TokenBatch:
        """Get a batch ready for :meth:`forward` (e.g. a copy in pinned memory), as a TokenBatch.

        Called in the scorer's background thread while the model runs the previous batch; the
        default returns ``batch`` unchanged.
        """
        return batch

    @abstractmethod
    def forward(self, batch: TokenBatch) -> np.ndarray:
        """float32 array: logits (rows x labels) for ``classify``, unit vectors (rows x dim) for ``embed``.

        ``batch`` is what :meth:`prepare` returned.
        """

    def call_scope(self) -> AbstractContextManager[object]:
        """A context the scorer holds around all the batches of one call (the default: nothing).

        Example:
            >>> with Backend.call_scope(None):  # type: ignore[arg-type]
            ...     pass
        """
        return nullcontext()

    def launch(self, batch: TokenBatch) -> Pending:
        """Start :meth:`forward` on ``batch`` and return at once where the engine runs asynchronously
        (a GPU), so the caller can hand over the next batch before it reads this one's output.

        The default runs :meth:`forward` now.

        Example:
            >>> Pending.ready(np.zeros((2, 1), np.float32)).result().shape
            (2, 1)
        """
        return Pending.ready(self.forward(batch))

    def parameters_digest(self) -> str:
        """A hash of the parameters in memory (used when some were initialised at random)."""
        raise NotImplementedError(f"backend {self.name!r} cannot hash its parameters")


class Pending:
    """A batch's model output that may still be on its way back from the device.

    :meth:`result` waits for it (on CUDA: for the copy into page-locked host memory that
    :meth:`TorchBackend.launch` queued behind the batch's kernels) and returns it as float32 numpy.
    """

    def __init__(self, host: Any, done: Any = None) -> None:
        self._host = host
        self._done = done

    @classmethod
    def ready(cls, output: np.ndarray) -> Pending:
        """An output that is already here."""
        return cls(output)

    @property
    def on_the_way(self) -> bool:
        """Whether :meth:`result` may still wait for the device."""
        return self._done is not None

    def result(self) -> np.ndarray:
        if self._done is not None:
            self._done.synchronize()
            self._done = None
            # a copy: the page-locked buffer goes back to torch's host allocator
            self._host = self._host.numpy().astype(np.float32, copy=True)
        return np.asarray(self._host, dtype=np.float32)


_BACKENDS: dict[str, type[Backend]] = {}
#: Built-in backends defined in other modules, imported (and so registered) when first asked for.
_BUILTIN = {
    "onnx": "evirank.score.onnx_backend",
    "onnx-int8": "evirank.score.onnx_backend",
    "openvino": "evirank.score.openvino_backend",
    "openvino-int8": "evirank.score.openvino_backend",
}


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Make a backend class selectable by its ``name`` (usable as a class decorator)."""
    _BACKENDS[cls.name] = cls
    return cls


def available_backends() -> list[str]:
    """Names of the registered and built-in backends."""
    return list(dict.fromkeys([*_BACKENDS, *_BUILTIN]))


def get_backend(name: str) -> type[Backend]:
    """The backend class registered under ``name``.

    Raises:
        ValueError: naming the registered backends when ``name`` is unknown.
    """
    if name not in _BACKENDS and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])  # registers it; imports no heavy dependency
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; expected one of {sorted(available_backends())}"
        ) from None


@register_backend
class TorchBackend(Backend):
    """PyTorch through ``transformers``: eval mode, ``torch.inference_mode``, SDPA attention, and
    bf16/fp16 autocast when the precision asks for it (weights stay fp32). On CUDA, batches are
    copied to pinned host memory in the scorer's background thread and sent with non-blocking
    copies, and padded to multiples of 8 tokens (tensor cores). With an unpadded layout
    (:meth:`use_layout`), BERT-like encoders run on the batch's real tokens only
    (:mod:`evirank.score.unpadded`), packed in that same background thread."""

    name = "torch"

    def __init__(
        self, model: Any, task: Task | ModelHead, device: str, precision: str, cls_only: Any = None
    ) -> None:
        self.model = model
        self.task = task
        self.device = device
        self.precision = precision
        self.pad_multiple = 8 if device.startswith("cuda") else 1
        #: the model with its last layer computed for [CLS] only (see evirank.score.cls_only), or None
        self.cls_only = cls_only
        #: the model's forward over packed batches (see evirank.score.unpadded), or None: padded
        self.unpadded: Any = None
        #: with ``unpadded``, the smallest share of padding at which a batch is packed (0: every batch)
        self.pack_from = 0.0

    @classmethod
    def resolve(cls, device: str, dtype: str) -> tuple[str, str]:
        resolved = resolve_device(device)
        return resolved, resolve_precision(resolved, dtype)

    @classmethod
    def default_threads(cls) -> int:
        """torch's intra-op threads in this process (what a model loaded without ``threads`` runs with)."""
        return int(require("torch", "torch").get_num_threads())

    @classmethod
    def adopting(cls, model: Any, task: Task | ModelHead, device: str, precision: str) -> TorchBackend:
        """A backend over a model already in memory (one being trained), used as it is."""
        return cls(model, task, device, precision)

    @classmethod
    def load(
        cls,
        model_dir: Path,
        task: Task | ModelHead,
        device: str,
        precision: str,
        *,
        threads: int | None = None,
    ) -> TorchBackend:
        torch = require("torch", "torch")
        transformers = require("transformers", "torch")
        if threads is not None:  # torch's intra-op threads are the process's, not the model's
            torch.set_num_threads(threads)
        if not isinstance(task, str):  # a family's own module
            module, missing_keys = task.load_torch(model_dir)
            module.to(device=device, dtype=torch.float32)
            module.eval()
            backend = cls(module, task, device, precision)
            backend.newly_initialised = tuple(missing_keys)
            return backend
        auto = (
            transformers.AutoModelForSequenceClassification if task == "classify" else transformers.AutoModel
        )
        try:  # fused attention (FlashAttention / memory-efficient kernels on GPUs)
            model, info = auto.from_pretrained(
                str(model_dir), output_loading_info=True, attn_implementation="sdpa"
            )
        except (ValueError, TypeError, ImportError):  # an architecture without an SDPA path
            model, info = auto.from_pretrained(str(model_dir), output_loading_info=True)
        # fp32 weights whatever the checkpoint holds; lower precision comes from autocast
        model.to(device=device, dtype=torch.float32)
        model.eval()
        fast = None
        if task == "classify":
            from evirank.score.cls_only import cls_only_model

            fast = cls_only_model(model)
        backend = cls(model, task, device, precision, cls_only=fast)
        missing = sorted(info.get("missing_keys", ()))
        if task == "embed":  # mean pooling never uses BERT's pooler head
            missing = [k for k in missing if not k.startswith("pooler.")]
        backend.newly_initialised = tuple(missing)
        return backend

    def use_layout(self, layout: str) -> None:
        from evirank.score import unpadded

        self.unpadded = None
        self.pack_from = 0.0
        self.pad_multiple = 8 if self.device.startswith("cuda") else 1
        if layout == "padded":
            return
        explicit = layout == "unpadded"
        on_cpu = not self.device.startswith("cuda")
        if not explicit and on_cpu:
            if unpadded.CPU_PACK_FROM is None:
                logger.debug("batch layout auto: padded on %s", self.device)
                return
            self.pack_from = unpadded.CPU_PACK_FROM
        try:
            self.unpadded = unpadded.unpadded_model(
                self.model, self.task, device=self.device, precision=self.precision
            )
        except ValueError as exc:
            if explicit:
                raise ValueError(
                    f"batch_layout='unpadded' (--batch-layout): {type(self.model).__name__} cannot run "
                    f"unpadded: {exc}; use --batch-layout padded (or auto)"
                ) from None
            logger.debug("batch layout auto: padded, %s", exc)
            return
        self.pad_multiple = 1  # packing drops the padding, so there is none worth aligning
        logger.debug(
            "batch layout: unpadded from %.0f%% padding (variable-length attention: %s)",
            100 * self.pack_from,
            self.unpadded.varlen,
        )

    def packs(self, batch: TokenBatch) -> bool:
        """Whether ``batch`` runs unpadded: an unpadded layout is in use and at least ``pack_from``
        of the batch's slots are padding."""
        if self.unpadded is None:
            return False
        if self.pack_from <= 0:
            return True
        mask = batch.attention_mask
        return mask.size > 0 and 1.0 - float(np.count_nonzero(mask)) / mask.size >= self.pack_from

    def prepare(self, batch: TokenBatch) -> TokenBatch:
        if self.packs(batch):
            from evirank.score.unpadded import packed_batch

            # packed (and pinned on CUDA) here, in the background thread, while the model runs
            return packed_batch(batch, pin=self.device.startswith("cuda"))
        if not self.device.startswith("cuda"):
            return batch
        # page-locked host memory, so the copy to the GPU runs asynchronously
        return PinnedBatch(
            batch.input_ids,
            batch.attention_mask,
            batch.token_type_ids,
            tensors=self._tensors(batch, pin=True),
        )

    @staticmethod
    def _tensors(batch: TokenBatch, pin: bool = False) -> dict[str, Any]:
        torch = require("torch", "torch")
        arrays = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if batch.token_type_ids is not None:
            arrays["token_type_ids"] = batch.token_type_ids
        tensors = {name: torch.from_numpy(array) for name, array in arrays.items()}
        return {name: t.pin_memory() for name, t in tensors.items()} if pin else tensors

    def forward(self, batch: TokenBatch) -> np.ndarray:
        return self._run(batch).float().cpu().numpy().astype(np.float32, copy=False)

    def launch(self, batch: TokenBatch) -> Pending:
        """On CUDA, queue the batch's kernels and the copy of its output into page-locked host
        memory, and return without waiting: the GPU then has this batch to run while the host
        hands over the next (no device-wide wait per batch). Elsewhere, :meth:`forward`."""
        if not self.device.startswith("cuda") or type(self).forward is not TorchBackend.forward:
            return Pending.ready(self.forward(batch))
        torch = require("torch", "torch")
        with torch.no_grad():  # not inference mode, which would stop autocast keeping its casts
            out = self._run(batch).float()
            host = torch.empty(out.shape, dtype=torch.float32, pin_memory=True)
            host.copy_(out, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
        return Pending(host, done)

    def call_scope(self) -> AbstractContextManager[object]:
        """In bf16/fp16, one autocast context around all the batches of a call: the weights are cast
        to the lower precision once per call instead of once per batch (autocast keeps its casts
        until its outermost context ends; the same casts, so the same scores). fp32: nothing."""
        torch = require("torch", "torch")
        half = self._autocast_dtype()
        return nullcontext() if half is None else torch.autocast(torch.device(self.device).type, dtype=half)

    def _autocast_dtype(self) -> Any:
        torch = require("torch", "torch")
        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)

    def _run(self, batch: TokenBatch) -> Any:
        """The batch's output tensor, on the device."""
        torch = require("torch", "torch")
        device = torch.device(self.device)
        autocast_dtype = self._autocast_dtype()
        with (
            # autocast keeps no casts under inference mode, so lower precision runs under no_grad
            torch.inference_mode() if autocast_dtype is None else torch.no_grad(),
            torch.autocast(
                device_type=device.type,
                dtype=autocast_dtype or torch.float32,
                enabled=autocast_dtype is not None,
            ),
        ):
            return self._unpadded(batch, device) if self._runs_packed(batch) else self._padded(batch, device)

    def _padded(self, batch: TokenBatch, device: Any) -> Any:
        host = batch.tensors if isinstance(batch, PinnedBatch) else self._tensors(batch)
        inputs = {name: tensor.to(device, non_blocking=True) for name, tensor in host.items()}
        if not isinstance(self.task, str):
            return self.model(**inputs)
        if self.task == "classify" and self.cls_only is not None:
            return self.cls_only(**inputs)
        if self.task == "classify":
            return self.model(**inputs).logits
        return mean_pooled(self.model(**inputs).last_hidden_state.float(), inputs["attention_mask"])

    def _runs_packed(self, batch: TokenBatch) -> bool:
        from evirank.score.unpadded import PackedBatch

        return isinstance(batch, PackedBatch) or self.packs(batch)

    def _unpadded(self, batch: TokenBatch, device: Any) -> Any:
        from evirank.score.unpadded import PackedBatch, packed_batch

        packed = batch if isinstance(batch, PackedBatch) else packed_batch(batch)
        assert packed.layout is not None
        inputs = {name: tensor.to(device, non_blocking=True) for name, tensor in packed.tensors.items()}
        return self.unpadded(inputs, packed.layout)

    def parameters_digest(self) -> str:
        digest = hashlib.sha256()
        for name, tensor in sorted(self.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()
