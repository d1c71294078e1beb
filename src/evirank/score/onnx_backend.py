"""ONNX Runtime backends on CPU: ``"onnx"`` (fp32) and ``"onnx-int8"`` (dynamic int8 quantisation).

The Hugging Face model is exported once with ``torch.onnx.export`` (opset 17, dynamic batch and
sequence axes, eager attention so that ONNX Runtime's transformer optimiser recognises the
pattern), then fused by :mod:`onnxruntime.transformers.optimizer` into its BERT kernels
(EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu) — on a small model this
fused graph is where most of the CPU speed comes from. The fused graph is checked against the
PyTorch model on a probe batch; if it disagrees (a model family the fuser mishandles) the plain
export is used instead. ``"onnx-int8"`` quantises the fused graph's weights to int8
(``quantize_dynamic``; activations are quantised on the fly), which uses the CPU's VNNI/AMX
integer units.

Exports are cached under ``cache_dir()/onnx/<key>/model.onnx`` (``$EVIRANK_CACHE``, else
``$XDG_CACHE_HOME/evirank``, else ``~/.cache/evirank``), keyed by the model files' content, the
task, the quantisation and the torch / onnxruntime versions, and written atomically (a folder
renamed into place), so a second load skips the export. Each cached export holds the size and sha256
of its files (``checksums.json``), checked at every load: a damaged or incomplete one is removed,
with a warning naming it, and made again. A checkpoint with randomly initialised parameters (a
missing head) is exported afresh each time and never cached.

Example:
    >>> from evirank.score import CrossEncoder
    >>> fast = CrossEncoder("models/minilm-scifact", Runtime(backend="onnx-int8"))  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from evirank.checksums import checksum_problems, has_checksums, write_checksums
from evirank.extras import require
from evirank.score import cls_only
from evirank.score.backends import Backend, ModelHead, Task, TokenBatch, register_backend
from evirank.score.devices import default_threads
from evirank.score.fingerprint import file_sha256, weight_files
from evirank.score.streams import default_streams, feeds, mean_pooled_numpy, split_batch

logger = logging.getLogger(__name__)

#: Bump when the export recipe changes (invalidates cached exports, not stored scores).
EXPORT_FORMAT = 3
#: The precision name of int8 scores (in the fingerprint): name a new recipe differently, so the
#: score store never mixes its scores with an older recipe's.
INT8 = "int8-dynamic-per-channel"
OPSET = 17
#: Largest |difference| allowed between the fused graph and PyTorch on the probe batch.
FUSION_TOLERANCE = 1e-3
#: Model families whose graphs ONNX Runtime's BERT fuser handles.
_BERT_LIKE = {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "camembert", "mpnet"}


def cache_dir() -> Path:
    """Where evirank caches derived files: ``$EVIRANK_CACHE``, ``$XDG_CACHE_HOME/evirank`` or
    ``~/.cache/evirank``.

    Example:
        >>> cache_dir().name in {"evirank", os.environ.get("EVIRANK_CACHE", "evirank").split(os.sep)[-1]}
        True
    """
    env = os.environ.get("EVIRANK_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "evirank"


@dataclass(frozen=True)
class OnnxExport:
    """One exported model on disk.

    Attributes:
        path: the ``.onnx`` file. fused: whether ONNX Runtime's BERT fusion was applied.
        quantized: int8 weights. newly_initialised: parameters missing from the checkpoint.
        parameters_digest: sha256 of the exported parameters (set when some were random).
        cached: whether ``path`` lives in the persistent cache (else in a temporary folder).
    """

    path: Path
    fused: bool
    quantized: bool
    newly_initialised: tuple[str, ...] = ()
    parameters_digest: str = ""
    cached: bool = True


def export_key(model_dir: Path, task: Task, quantize: bool, fuse: bool = True) -> str:
    """The cache key of an export: model files by content, task, quantisation, fusion, tool versions."""
    torch = require("torch", "torch")
    ort = require("onnxruntime", "onnx")
    files = [*weight_files(model_dir), model_dir / "config.json"]
    payload = {
        "format": EXPORT_FORMAT,
        "opset": OPSET,
        "task": task,
        "quantize": quantize,
        "fuse": fuse,
        "files": {p.name: file_sha256(p) for p in files if p.is_file()},
        "torch": torch.__version__,
        "onnxruntime": ort.__version__,
        "cls_only": cls_only.ENABLED and task == "classify",
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def onnx_export(
    model_dir: Path, task: Task, quantize: bool = False, cache: Path | None = None, fuse: bool = True
) -> OnnxExport:
    """The ONNX file of ``model_dir`` for ``task``: from the cache, or exported (and cached) now.

    Args:
        model_dir: a local Hugging Face model folder.
        task: ``"classify"`` (logits) or ``"embed"`` (last hidden states).
        quantize: int8 dynamic quantisation of the weights.
        fuse: apply ONNX Runtime's BERT fusions (its own operators); ``False`` keeps the plain
            standard-operator graph, which other engines (OpenVINO) read and optimise themselves.
        cache: the cache root (default :func:`cache_dir`).

    Returns:
        An :class:`OnnxExport`; when ``cached`` is false its folder is temporary and the caller
        deletes it (see :func:`discard`).
    """
    root = (cache or cache_dir()) / "onnx"
    if quantize and not fuse:
        raise ValueError("int8 ONNX exports are made from the fused graph")
    key = export_key(model_dir, task, quantize, fuse)
    folder = root / key[:40]
    found = _read_cached(folder)
    if found is not None:
        logger.info("ONNX export of %s from the cache (%s)", model_dir, folder)
        return found
    root.mkdir(parents=True, exist_ok=True)
    if quantize:
        source = onnx_export(model_dir, task, quantize=False, cache=cache)
        work = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=root))
        try:
            _quantize(source.path, work / "model.onnx")
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        finally:
            discard(source)
        made = OnnxExport(
            work / "model.onnx",
            fused=source.fused,
            quantized=True,
            newly_initialised=source.newly_initialised,
            parameters_digest=source.parameters_digest,
            cached=False,
        )
    else:
        work = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:12]}-", dir=root))
        try:
            made = _export(model_dir, task, work, fuse=fuse)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    if made.newly_initialised:
        logger.warning(
            "%s has %d randomly initialised parameters: its ONNX export is not cached",
            model_dir,
            len(made.newly_initialised),
        )
        return made
    (work / "export.json").write_text(
        json.dumps(
            {"model": str(model_dir), "task": task, "fused": made.fused, "quantized": made.quantized},
            indent=1,
        )
    )
    write_checksums(work)  # checked at every load: a damaged export is made again, never used
    try:
        os.replace(work, folder)  # atomic: the folder appears complete or not at all
    except OSError:  # another process finished the same export first
        shutil.rmtree(work, ignore_errors=True)
    cached = _read_cached(folder)
    if cached is None:
        raise RuntimeError(f"{folder}: the ONNX export vanished from the cache while loading it")
    return cached


def discard(export: OnnxExport) -> None:
    """Delete a temporary (uncached) export's folder; cached exports are kept."""
    if not export.cached:
        shutil.rmtree(export.path.parent, ignore_errors=True)


def _read_cached(folder: Path) -> OnnxExport | None:
    """The export cached in ``folder``, or ``None`` when there is none or it is damaged (then removed)."""
    if not folder.is_dir() or not usable_cache(folder, "ONNX export"):
        return None
    info = json.loads((folder / "export.json").read_text())
    return OnnxExport(folder / "model.onnx", fused=bool(info["fused"]), quantized=bool(info["quantized"]))


def usable_cache(folder: Path, what: str) -> bool:
    """Whether the cached ``folder`` (a ``what``) holds what its checksums say; if not, it is removed
    with a warning naming it and what differs, so that the caller makes it again.

    Example:
        >>> usable_cache(cache_dir() / "onnx" / "no-such-key", "ONNX export")  # doctest: +SKIP
        False
    """
    problems = checksum_problems(folder)
    if not problems:
        return True
    if not has_checksums(folder):
        logger.info("%s: a cached %s without checksums (an older evirank made it); made again", folder, what)
        shutil.rmtree(folder, ignore_errors=True)
        return False
    logger.warning(
        "%s: this cached %s is damaged or incomplete (%s); it is removed and made again",
        folder, what, "; ".join(problems[:3]),
    )  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)
    return False


class _Wrapper:
    """Builds a torch module with a fixed (input_ids, attention_mask[, token_type_ids]) signature."""

    @staticmethod
    def build(model: Any, task: Task, with_types: bool) -> Any:
        torch = require("torch", "torch")

        class Wrapped(torch.nn.Module):  # type: ignore[name-defined]
            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
                inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
                if with_types:
                    inputs["token_type_ids"] = token_type_ids
                out = self.inner(**inputs)
                return out.logits if task == "classify" else out.last_hidden_state

        return Wrapped().eval()


def _probe(vocab_size: int, with_types: bool) -> dict[str, np.ndarray]:
    """A small padded batch of pseudo-random token ids to compare graphs on."""
    inputs = cls_only.probe_batch(vocab_size)
    if not with_types:
        del inputs["token_type_ids"]
    return inputs


def _export(model_dir: Path, task: Task, work: Path, fuse: bool = True) -> OnnxExport:
    """Export, fuse (when ``fuse``) and check one model into ``work/model.onnx``."""
    torch = require("torch", "torch")
    transformers = require("transformers", "torch")
    ort = require("onnxruntime", "onnx")
    started = time.perf_counter()
    auto = transformers.AutoModelForSequenceClassification if task == "classify" else transformers.AutoModel
    try:  # eager attention: the pattern ONNX Runtime's fuser knows (SDPA exports do not fuse)
        model, info = auto.from_pretrained(
            str(model_dir), output_loading_info=True, attn_implementation="eager"
        )
    except (ValueError, TypeError):
        model, info = auto.from_pretrained(str(model_dir), output_loading_info=True)
    model.to(dtype=torch.float32).eval()
    missing = sorted(info.get("missing_keys", ()))
    if task == "embed":
        missing = [k for k in missing if not k.startswith("pooler.")]
    digest = ""
    if missing:
        sha = hashlib.sha256()
        for name, tensor in sorted(model.state_dict().items()):
            sha.update(name.encode())
            sha.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        digest = sha.hexdigest()
    with_types = "token_type_ids" in inspect.signature(model.forward).parameters and (
        int(getattr(model.config, "type_vocab_size", 0) or 0) > 0
    )
    wrapped = _Wrapper.build(model, task, with_types)
    fast = cls_only.cls_only_model(model) if task == "classify" and with_types else None
    probe = _probe(int(model.config.vocab_size), with_types)
    names = list(probe)
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    axes["output"] = {0: "batch"} if task == "classify" else {0: "batch", 1: "sequence"}
    raw = work / "raw.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        # the tracer's notes on Python-side shape checks (true for any input whose mask is as
        # long as its ids, as ours always are) and on the exporter's deprecation; the export is
        # checked on a probe batch below
        warnings.simplefilter("ignore")
        expected = wrapped(*(torch.from_numpy(probe[n]) for n in names)).float().numpy()
        torch.onnx.export(
            wrapped if fast is None else fast,
            tuple(torch.from_numpy(probe[n]) for n in names),
            str(raw),
            input_names=names,
            output_names=["output"],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,  # the TorchScript exporter: no onnxscript needed, and its graph fuses
        )
    logger.info("exported %s to ONNX in %.1f s", model_dir, time.perf_counter() - started)
    final, fused = raw, False
    model_type = str(getattr(model.config, "model_type", ""))
    if fuse and model_type in _BERT_LIKE:
        try:
            final = _fuse(raw, work / "fused.onnx", model.config)
            fused = True
        except Exception as exc:  # the fuser is best effort; the plain graph still runs
            logger.warning("ONNX Runtime could not fuse %s (%s); using the plain export", model_dir, exc)
    # The graph that runs must compute the PyTorch model's function: check it on the probe batch
    # (padded positions of hidden states are meaningless, so embeddings compare real tokens only).
    weight = probe["attention_mask"][..., None] if task == "embed" else 1
    gaps: dict[str, float] = {}
    for candidate in [final, raw] if fused else [raw]:
        got = _session(candidate, ort, threads=1).run(None, probe)[0]
        gap = float(np.max(np.abs((got - expected) * weight)))
        gaps[candidate.name] = gap
        if np.isfinite(gap) and gap <= FUSION_TOLERANCE:
            final, fused = candidate, candidate is not raw
            break
        logger.warning(
            "the ONNX graph %s of %s differs from PyTorch by %.2g on a probe batch",
            candidate.name,
            model_dir,
            gap,
        )
    else:
        raise RuntimeError(f"{model_dir}: no exported ONNX graph matches the PyTorch model ({gaps})")
    os.replace(final, work / "model.onnx")
    for leftover in work.glob("*.onnx*"):
        if leftover.name != "model.onnx":
            leftover.unlink()
    logger.info("ONNX model ready (fused=%s) in %.1f s", fused, time.perf_counter() - started)
    return OnnxExport(
        work / "model.onnx",
        fused=fused,
        quantized=False,
        newly_initialised=tuple(missing),
        parameters_digest=digest,
        cached=False,
    )


@contextmanager
def _quiet() -> Iterator[None]:
    """Hide ONNX Runtime's optimiser and quantiser chatter (INFO on dozens of module loggers, and a
    standing WARNING on the root logger that suggests pre-processing for image models). Their
    results are checked instead (the probe batch). ``logging.disable`` is process-wide, so this
    wraps only those calls, which run at load time, for a few seconds."""
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.WARNING))
    try:
        yield
    finally:
        logging.disable(previous)


def _fuse(raw: Path, out: Path, config: Any) -> Path:
    """ONNX Runtime's BERT fusions (attention, layer norms, GELU, embeddings) into ``out``."""
    optimizer = require("onnxruntime.transformers.optimizer", "onnx")
    with _quiet():
        fused = optimizer.optimize_model(
            str(raw),
            model_type="bert",
            num_heads=int(getattr(config, "num_attention_heads", 0) or 0),
            hidden_size=int(getattr(config, "hidden_size", 0) or 0),
            opt_level=0,  # fusions only; the session applies ORT_ENABLE_ALL at load
        )
        stats = fused.get_fused_operator_statistics()
    logger.debug("ONNX Runtime fusions: %s", {k: v for k, v in stats.items() if v})
    if not stats.get("Attention") and not stats.get("MultiHeadAttention"):
        raise RuntimeError("no attention block was fused")
    fused.save_model_to_file(str(out))
    return out


def _quantize(source: Path, out: Path) -> None:
    """int8 dynamic quantisation of the weights of ``source`` (MatMul, fused Attention)."""
    quantization = require("onnxruntime.quantization", "onnx")
    started = time.perf_counter()
    with _quiet():
        quantization.quantize_dynamic(
            str(source),
            str(out),
            weight_type=quantization.QuantType.QInt8,
            # one scale per output channel: on a SciFact-trained MiniLM, Spearman 0.995 with fp32
            # scores (one scale per tensor: 0.974) at the same speed
            per_channel=True,
            extra_options={
                "MatMulConstBOnly": True,  # weights only; activation x activation products stay fp32
                "DefaultTensorType": 1,  # float, for outputs of fused ops that shape inference skips
            },
        )
    logger.info("quantised %s to int8 in %.1f s", source.name, time.perf_counter() - started)


def _session(path: Path, ort: Any, threads: int | None = None) -> Any:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads or default_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@register_backend
class OnnxBackend(Backend):
    """ONNX Runtime, CPU provider, fp32 fused graph (see the module docstring).

    Each batch runs as :func:`~evirank.score.streams.default_streams` concurrent requests of
    ``threads / streams`` intra-op threads each (one session; ONNX Runtime runs concurrent calls).
    """

    name = "onnx"
    quantize: ClassVar[bool] = False

    def __init__(self, session: Any, task: Task, export: OnnxExport, streams: int = 1) -> None:
        self.session = session
        self.task = task
        self.export = export
        self.device = "cpu"
        self.precision = INT8 if self.quantize else "fp32"
        self.inputs = [i.name for i in session.get_inputs()]
        self.newly_initialised = export.newly_initialised
        self.streams = max(1, streams)
        self._pool = ThreadPoolExecutor(self.streams, "evirank-onnx") if self.streams > 1 else None

    @classmethod
    def resolve(cls, device: str, dtype: str) -> tuple[str, str]:
        if device not in ("auto", "cpu"):
            raise ValueError(
                f"the {cls.name!r} backend runs on the CPU, found device={device!r}; "
                "use backend='torch' on a GPU"
            )
        wanted = INT8 if cls.quantize else "fp32"
        if dtype.lower() not in ("auto", wanted, "float32" if wanted == "fp32" else "int8"):
            raise ValueError(f"the {cls.name!r} backend computes in {wanted}, found dtype={dtype!r}")
        return "cpu", wanted

    @classmethod
    def load(
        cls,
        model_dir: Path,
        task: Task | ModelHead,
        device: str,
        precision: str,
        *,
        threads: int | None = None,
    ) -> OnnxBackend:
        if not isinstance(task, str):
            raise ValueError(
                f"the {cls.name!r} backend exports classifiers and embedding models only; "
                f"{task.name} runs on the torch backend"
            )
        ort = require("onnxruntime", "onnx")
        export = onnx_export(model_dir, task, quantize=cls.quantize)
        threads = threads or default_threads()
        streams = default_streams(threads)
        try:
            session = _session(export.path, ort, threads=max(1, threads // streams))
        finally:
            discard(export)  # a session holds its graph in memory
        logger.info(
            "ONNX Runtime %s session: %s, %d streams of %d threads, fused=%s",
            ort.__version__,
            INT8 if cls.quantize else "fp32",
            streams,
            max(1, threads // streams),
            export.fused,
        )
        return cls(session, task, export, streams)

    def _run(self, part: TokenBatch) -> np.ndarray:
        out = np.asarray(self.session.run(None, feeds(part, self.inputs))[0], dtype=np.float32)
        return out if self.task == "classify" else mean_pooled_numpy(out, part.attention_mask)

    def forward(self, batch: TokenBatch) -> np.ndarray:
        parts = split_batch(batch, self.streams)
        if len(parts) == 1 or self._pool is None:
            return self._run(batch)
        return np.concatenate(list(self._pool.map(self._run, parts)))

    def parameters_digest(self) -> str:
        if not self.export.parameters_digest:
            raise NotImplementedError("this ONNX export has no randomly initialised parameters to hash")
        return self.export.parameters_digest


@register_backend
class OnnxInt8Backend(OnnxBackend):
    """ONNX Runtime, CPU provider, int8 dynamically quantised weights."""

    name = "onnx-int8"
    quantize = True
