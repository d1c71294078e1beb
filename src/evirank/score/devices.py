"""Device and precision choice: cuda, then mps, then cpu; bf16/fp16 autocast on GPUs, fp32 on CPU.

Example:
    >>> normalise_precision("bfloat16")
    'bf16'
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import re
import sys

from evirank.errors import UsageError
from evirank.extras import require

logger = logging.getLogger(__name__)

_PRECISIONS = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
}

#: Default batch token budgets (padded rows x padded length) per device type. On CPU small
#: batches stay in cache: MiniLM-L6 on 2 idle cores scored 196 pairs/s at 2048 tokens, 191 at
#: 4096 and 167 at 8192 (benchmarks/scoring.py, docs/speed.md).
DEFAULT_BATCH_TOKENS = {"cpu": 2048, "mps": 16384, "cuda": 65536}
#: On CUDA a model narrower than 1,536 gets a larger budget, up to this many tokens x hidden
#: size: on one H200, a MiniLM-L6 cross-encoder (hidden 384) in bf16 with unpadded batches scored
#: 98,764 pairs/s at 262,144 tokens a batch and 66,358 at 65,536 (benchmarks/gpu_check.sh,
#: docs/speed.md): fewer, larger batches launch fewer kernels per pair. Wider models keep 65,536.
CUDA_BATCH_ELEMENTS = 262_144 * 384
#: The largest default budget on CUDA.
CUDA_MAX_DEFAULT_BATCH_TOKENS = 262_144


class DeviceUnavailableError(UsageError):
    """A device this machine does not have (said when the pipeline is described, before any work)."""


#: How a device is written: ``auto``, ``cpu``, ``mps``, ``cuda`` or ``cuda:N``.
DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(device: str) -> str:
    """``device`` if this machine can run models there, else a clear error; fast (no torch import).

    ``cuda`` needs a CUDA build of torch and a driver that sees a GPU (probed with the driver
    library itself, in milliseconds); ``cuda:N`` needs more than N GPUs; ``mps`` needs Apple
    silicon. ``auto`` and ``cpu`` are always available.

    Raises:
        DeviceUnavailableError: saying what is missing and what to write instead.

    Example:
        >>> check_device("cpu")
        'cpu'
        >>> check_device("gpu")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        evirank.score.devices.DeviceUnavailableError: --device: expected auto, cpu, cuda, ... found 'gpu'
    """
    if not DEVICE.match(str(device)):
        raise DeviceUnavailableError(f"--device: expected auto, cpu, cuda, cuda:N or mps, found {device!r}")
    if device in ("auto", "cpu"):
        return device
    if device == "mps":
        if sys.platform != "darwin" or platform.machine() != "arm64":
            raise DeviceUnavailableError(
                "--device mps: this machine has no Apple GPU; write --device cpu or auto"
            )
        return device
    build = _torch_build()
    if build is None:
        raise DeviceUnavailableError(
            f"--device {device}: torch is not installed (pip install 'evirank[torch]', a CUDA build of torch)"
        )
    if "+cpu" in build:
        raise DeviceUnavailableError(
            f"--device {device}: the installed torch {build} is a CPU-only build; install a CUDA build, or "
            "write --device cpu or auto"
        )
    count = cuda_device_count()
    wanted = int(device.partition(":")[2] or 0)
    if count <= wanted:
        seen = "no CUDA GPU" if count == 0 else f"{count} CUDA GPU{'s' if count > 1 else ''}"
        raise DeviceUnavailableError(
            f"--device {device}: this machine has {seen}; write --device cpu or auto"
        )
    return device


def _torch_build() -> str | None:
    """The installed torch's version (``2.13.0+cpu``), read from its metadata, or None."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def cuda_device_count() -> int:
    """The GPUs the CUDA driver sees (0 without a driver), asked of the driver library directly:
    importing torch to ask would take seconds.

    Example:
        >>> cuda_device_count() >= 0
        True
    """
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return int(count.value)
    return 0


def normalise_precision(dtype: str) -> str:
    """Map a dtype name (``"float16"``, ``"bf16"``, ...) to one of ``fp32``, ``bf16``, ``fp16``.

    Raises:
        ValueError: for an unknown name.
    """
    try:
        return _PRECISIONS[dtype.lower()]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected 'auto' or one of {sorted(set(_PRECISIONS))}"
        ) from None


def resolve_device(device: str | None = "auto") -> str:
    """The torch device to use: ``"auto"`` (or None) picks cuda, then mps, then cpu.

    The one device rule of scoring, serving and training.

    Example:
        >>> resolve_device("cpu")
        'cpu'
    """
    if device is not None and device != "auto":
        return device
    torch = require("torch", "torch")
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def resolve_precision(device: str, dtype: str = "auto") -> str:
    """The compute precision: ``"auto"`` is bf16 on CUDA GPUs that support it (else fp16), fp16 on
    mps, fp32 on CPU.

    Example:
        >>> resolve_precision("cpu")
        'fp32'
    """
    if dtype != "auto":
        return normalise_precision(dtype)
    device_type = device.split(":")[0]
    if device_type == "cuda":
        torch = require("torch", "torch")
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if device_type == "mps":
        return "fp16"
    return "fp32"


def default_batch_tokens(device: str, hidden_size: int | None = None) -> int:
    """The default token budget of one batch on ``device`` for a model of ``hidden_size``
    (when known): on CUDA, ``CUDA_BATCH_ELEMENTS // hidden_size`` tokens, between 65,536 and
    262,144 (in multiples of 8,192); elsewhere the device's fixed budget.

    Example:
        >>> default_batch_tokens("cpu"), default_batch_tokens("cuda:0")
        (2048, 65536)
        >>> [default_batch_tokens("cuda", hidden) for hidden in (384, 768, 1024, 4096)]
        [262144, 131072, 98304, 65536]
    """
    kind = device.split(":")[0]
    fixed = DEFAULT_BATCH_TOKENS.get(kind, DEFAULT_BATCH_TOKENS["cpu"])
    if kind != "cuda" or not hidden_size or hidden_size <= 0:
        return fixed
    sized = min(CUDA_MAX_DEFAULT_BATCH_TOKENS, CUDA_BATCH_ELEMENTS // int(hidden_size)) // 8192 * 8192
    return max(fixed, sized)


def default_threads() -> int:
    """Threads for a CPU engine: ``$EVIRANK_NUM_THREADS``, else the cores this process may run on.

    Example:
        >>> default_threads() >= 1
        True
    """
    env = os.environ.get("EVIRANK_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
