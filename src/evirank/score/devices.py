"""Device and precision choice: cuda, then mps, then cpu; bf16/fp16 autocast on GPUs, fp32 on CPU.

Example:
    >>> normalise_precision("bfloat16")
    'bf16'
"""

from __future__ import annotations

import logging

from evirank._extras import require

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


def default_batch_tokens(device: str) -> int:
    """The default token budget of one batch on ``device``.

    Example:
        >>> default_batch_tokens("cpu")
        2048
    """
    return DEFAULT_BATCH_TOKENS.get(device.split(":")[0], DEFAULT_BATCH_TOKENS["cpu"])
