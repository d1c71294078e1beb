"""OpenVINO backends on CPU: ``"openvino"`` (fp32, or bf16) and ``"openvino-int8"`` (static int8).

The model comes from the same ONNX export as the ONNX Runtime backends (:func:`onnx_export`:
cached by content, the [CLS]-only last layer, checked against PyTorch on a probe batch), taken
before ONNX Runtime's fusions, whose operators are its own: OpenVINO reads the standard-operator
graph and fuses it itself. It is compiled for the CPU with dynamic shapes, one infer request per
stream (:mod:`evirank.score.streams`), each batch split among the streams.

Precision:

- ``"openvino"`` computes in fp32 by default (``INFERENCE_PRECISION_HINT`` f32: OpenVINO would
  otherwise pick bf16 by itself on CPUs with native bf16, and scores would move by ~1e-3);
  ``dtype="bf16"`` asks for bf16 matrix products, on CPUs that compute bf16 natively (AMX or
  AVX512_BF16), and is refused elsewhere.
- ``"openvino-int8"`` quantises weights and activations to int8 with NNCF's post-training
  quantisation for transformers, calibrated on :data:`evirank.score.calibration.CALIBRATION_PAIRS`
  (activation ranges fixed once, so scores do not depend on batch composition); the operations
  left in floating point run in bf16 where the CPU computes it natively. In the [CLS]-only export
  (:mod:`evirank.score.cls_only`) the last layer and the head stay in floating point: they compute
  one position, so int8 would save almost nothing there, and their rounding reaches the score
  directly (on SciFact, a trained MiniLM's nDCG@10 moved by -0.008 with them quantised and by
  -0.003 without, at the same speed). The quantised model is cached beside the ONNX export, with
  the size and sha256 of its files checked at every load (a damaged one is made again). Needs
  the ``openvino`` extra (openvino, nncf).

Example:
    >>> from evirank.score import CrossEncoder
    >>> fast = CrossEncoder("models/minilm-scifact", Runtime(backend="openvino-int8"))  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evirank.checksums import write_checksums
from evirank.extras import require
from evirank.score import cls_only
from evirank.score.backends import Backend, ModelHead, Task, TokenBatch, register_backend
from evirank.score.calibration import CALIBRATION_PAIRS, calibration_digest
from evirank.score.devices import default_threads
from evirank.score.onnx_backend import OnnxExport, cache_dir, discard, export_key, onnx_export, usable_cache
from evirank.score.streams import default_streams, feeds, mean_pooled_numpy, split_batch

logger = logging.getLogger(__name__)

#: Bump when the quantisation recipe changes (invalidates cached int8 models and renames the precision).
INT8_FORMAT = 2
#: The precision name of int8 scores (the score store's fingerprint): the recipe and its calibration set.
INT8 = f"int8-static-v{INT8_FORMAT}-{calibration_digest()[:8]}"


@cache
def _core() -> Any:
    openvino = require("openvino", "openvino")
    return openvino.Core()


def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (OpenVINO's capability list says BF16).

    Example:
        >>> native_bf16() in (True, False)  # doctest: +SKIP
        True
    """
    return "BF16" in list(_core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


def _compile(model: Any, float_precision: str, threads: int, streams: int) -> Any:
    config = {
        "INFERENCE_PRECISION_HINT": "bf16" if float_precision == "bf16" else "f32",
        "PERFORMANCE_HINT": "THROUGHPUT" if streams > 1 else "LATENCY",
        "NUM_STREAMS": streams,
        "INFERENCE_NUM_THREADS": threads,
    }
    return _core().compile_model(model, "CPU", config)


def _int8_model(model_dir: Path, task: Task, source: OnnxExport) -> Any:
    """The NNCF-quantised OpenVINO model of ``source``: from the cache, or made (and cached) now."""
    openvino = require("openvino", "openvino")
    payload = {
        "format": INT8_FORMAT,
        "onnx": export_key(model_dir, task, quantize=False, fuse=False),
        "openvino": openvino.__version__,
        "nncf": require("nncf", "openvino").__version__,
        "calibration": calibration_digest(),
    }
    key = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    folder = cache_dir() / "openvino" / key[:40]
    if folder.is_dir() and usable_cache(folder, "int8 OpenVINO model"):
        logger.info("int8 OpenVINO model of %s from the cache (%s)", model_dir, folder)
        return _core().read_model(str(folder / "model.xml"))
    quantized = _quantize(model_dir, source)
    if source.newly_initialised:
        return quantized  # random parameters: never cached (as the ONNX export)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=folder.parent))
    try:
        openvino.save_model(quantized, str(work / "model.xml"), compress_to_fp16=False)
        write_checksums(work)  # checked at every load: a damaged model is made again, never used
        os.replace(work, folder)  # atomic: the folder appears complete or not at all
    except OSError:  # another process cached the same model first
        shutil.rmtree(work, ignore_errors=True)
    return quantized


def _quantize(model_dir: Path, source: OnnxExport) -> Any:
    """Post-training static int8 (NNCF, its transformer recipe) over the calibration pairs."""
    nncf = require("nncf", "openvino")
    transformers = require("transformers", "torch")
    from evirank.score.tokenize import TextEncoder

    started = time.perf_counter()
    model = _core().read_model(str(source.path))
    inputs = {port.get_any_name() for port in model.inputs}
    encoder = TextEncoder(transformers.AutoTokenizer.from_pretrained(str(model_dir)))
    config = transformers.AutoConfig.from_pretrained(str(model_dir))
    room = (
        min(512, int(getattr(config, "max_position_embeddings", 512) or 512))
        - encoder.pair_template.n_special
    )
    queries = encoder.token_ids([q for q, _ in CALIBRATION_PAIRS], min(64, room // 2))
    passages = [
        p[: room - len(q)]
        for q, p in zip(queries, encoder.token_ids([p for _, p in CALIBRATION_PAIRS], room), strict=True)
    ]
    items = [
        feeds(encoder.pair_batch([q], [p]), sorted(inputs)) for q, p in zip(queries, passages, strict=True)
    ]
    previous = logging.getLogger("nncf").level
    nncf.set_log_level(logging.ERROR)  # its progress bars and notes
    try:
        quantized = nncf.quantize(
            model,
            nncf.Dataset(items),
            model_type=nncf.ModelType.TRANSFORMER,
            subset_size=len(items),
            ignored_scope=float_tail(model),
        )
    finally:
        nncf.set_log_level(previous or logging.WARNING)
    logger.info(
        "quantised %s to int8 (NNCF, %d calibration pairs) in %.1f s",
        model_dir,
        len(items),
        time.perf_counter() - started,
    )
    return quantized


def float_tail(model: Any) -> Any:
    """NNCF's ignored scope that keeps the [CLS]-only export's last layer and head in floating point.

    Those are the nodes outside the trunk (:data:`evirank.score.cls_only.EXPORT_TRUNK_PREFIX`); a
    graph without a trunk (another architecture, an embedding model) is quantised whole (``None``).

    Example:
        >>> float_tail(_core().read_model("model.onnx"))  # doctest: +SKIP
        IgnoredScope(names=[], patterns=['^(?!/trunk/)/'], ...)
    """
    prefix = cls_only.EXPORT_TRUNK_PREFIX
    if not any(op.get_friendly_name().startswith(prefix) for op in model.get_ops()):
        return None
    nncf = require("nncf", "openvino")
    return nncf.IgnoredScope(patterns=[f"^(?!{re.escape(prefix)})/"], validate=False)


@register_backend
class OpenVinoBackend(Backend):
    """OpenVINO on the CPU, fp32 (or bf16 with ``dtype="bf16"``); see the module docstring."""

    name = "openvino"
    quantize: ClassVar[bool] = False

    def __init__(self, compiled: Any, task: Task, export: OnnxExport, precision: str, streams: int) -> None:
        self.compiled = compiled
        self.task = task
        self.export = export
        self.device = "cpu"
        self.precision = precision
        self.newly_initialised = export.newly_initialised
        self.inputs = sorted(port.get_any_name() for port in compiled.inputs)
        self.requests = [compiled.create_infer_request() for _ in range(max(1, streams))]

    @classmethod
    def resolve(cls, device: str, dtype: str) -> tuple[str, str]:
        if device not in ("auto", "cpu"):
            raise ValueError(
                f"the {cls.name!r} backend runs on the CPU, found device={device!r}; "
                "use backend='torch' on a GPU"
            )
        wanted = dtype.lower()
        if cls.quantize:
            if wanted not in ("auto", "int8", INT8):
                raise ValueError(f"the {cls.name!r} backend computes in int8, found dtype={dtype!r}")
            return "cpu", INT8 + ("+bf16" if native_bf16() else "")
        if wanted in ("auto", "fp32", "float32", "float"):
            return "cpu", "fp32"
        if wanted in ("bf16", "bfloat16"):
            if not native_bf16():
                raise ValueError(
                    f"dtype={dtype!r}: this CPU does not compute bf16 natively (no AMX or AVX512_BF16); "
                    "use the default fp32"
                )
            return "cpu", "bf16"
        raise ValueError(f"the {cls.name!r} backend computes in fp32 or bf16, found dtype={dtype!r}")

    @classmethod
    def load(
        cls,
        model_dir: Path,
        task: Task | ModelHead,
        device: str,
        precision: str,
        *,
        threads: int | None = None,
    ) -> OpenVinoBackend:
        if not isinstance(task, str):
            raise ValueError(
                f"the {cls.name!r} backend exports classifiers and embedding models only; "
                f"{task.name} runs on the torch backend"
            )
        openvino = require("openvino", "openvino")
        started = time.perf_counter()
        export = onnx_export(model_dir, task, fuse=False)
        try:
            model = (
                _int8_model(model_dir, task, export) if cls.quantize else _core().read_model(str(export.path))
            )
        finally:
            discard(export)  # the model is in memory now
        threads = threads or default_threads()
        streams = default_streams(threads)
        float_precision = "bf16" if precision == "bf16" or precision.endswith("+bf16") else "fp32"
        compiled = _compile(model, float_precision, threads, streams)
        logger.info(
            "OpenVINO %s: %s, %d streams, %d threads, ready in %.1f s",
            openvino.__version__.split("-")[0],
            precision,
            streams,
            threads,
            time.perf_counter() - started,
        )
        return cls(compiled, task, export, precision, streams)

    def _read(self, request: Any, part: TokenBatch) -> np.ndarray:
        out = np.array(request.get_output_tensor(0).data, dtype=np.float32)  # a copy: the request reuses it
        return out if self.task == "classify" else mean_pooled_numpy(out, part.attention_mask)

    def forward(self, batch: TokenBatch) -> np.ndarray:
        parts = split_batch(batch, len(self.requests))
        for request, part in zip(self.requests, parts, strict=False):
            request.start_async(feeds(part, self.inputs), share_inputs=True)
        outs = []
        for request, part in zip(self.requests, parts, strict=False):
            request.wait()
            outs.append(self._read(request, part))
        return outs[0] if len(outs) == 1 else np.concatenate(outs)

    def parameters_digest(self) -> str:
        if not self.export.parameters_digest:
            raise NotImplementedError("this model has no randomly initialised parameters to hash")
        return self.export.parameters_digest


@register_backend
class OpenVinoInt8Backend(OpenVinoBackend):
    """OpenVINO on the CPU, static int8 weights and activations (NNCF); see the module docstring."""

    name = "openvino-int8"
    quantize = True
