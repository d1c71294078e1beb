"""Weight-space averages of models of one architecture: WiSE-FT and model soups.

A model fine-tuned on one collection often gains there and gives a little back elsewhere.
Averaging its weights with the model it started from (WiSE-FT, Wortsman et al. 2022, "Robust
fine-tuning of zero-shot models") keeps most of the gain and much of the starting model's
behaviour on other data; averaging several fine-tuned runs (model soups, Wortsman et al. 2022)
is the same operation. :func:`merge_models` writes ``sum_k w_k * theta_k`` as a new model folder
that every command loads like any other (``embed``, ``rerank``, ``serve``, ``train --model``).

The rules:

* the weights are a weighted average: each ``w_k`` is positive and they sum to 1;
* every model has the same floating-point tensors, by name and shape (otherwise the error names
  the model and the first tensor that differs); integer buffers (position ids) are the first
  model's, and a buffer only another model has is left out;
* configuration, tokenizer and sentence-transformers files come from the **first** model (list
  the fine-tuned one first to keep the length it was trained with); training logs, checkpoints
  and ONNX exports are not copied, since they describe other weights;
* the folder is written under a temporary name and renamed when complete, with
  ``evirank-merge.json`` recording the models (and their weight files' sha256) and the weights.

Example:
    >>> parse_weighted_model("models/bi-scifact=0.5")
    ('models/bi-scifact', 0.5)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evirank.errors import UsageError
from evirank.extras import require
from evirank.outputs import atomic_output
from evirank.score.fingerprint import file_sha256, resolve_model_dir, weight_files

logger = logging.getLogger(__name__)

MERGE_MARKER = "evirank-merge.json"
"""The provenance file that marks a folder ``evirank merge`` wrote."""

#: Files and folders of a model folder that describe its weights or its training, not copied.
_NOT_COPIED = (
    "evirank-train.json",
    MERGE_MARKER,
    "train-log.jsonl",
    "checkpoints",
    "onnx",
)


def parse_weighted_model(item: str) -> tuple[str, float]:
    """``MODEL=WEIGHT`` as (model, weight); the weight follows the last ``=``.

    Raises:
        UsageError: no ``=``, or a weight that is not a number.

    Example:
        >>> parse_weighted_model("sentence-transformers/all-MiniLM-L6-v2=0.25")
        ('sentence-transformers/all-MiniLM-L6-v2', 0.25)
    """
    model, sep, weight = item.rpartition("=")
    if not sep or not model:
        raise UsageError(f"--model {item!r}: expected MODEL=WEIGHT, e.g. models/bi-scifact=0.5")
    try:
        value = float(weight)
    except ValueError:
        raise UsageError(f"--model {item!r}: the weight {weight!r} is not a number") from None
    return model, value


def check_weights(weights: Sequence[float]) -> None:
    """Refuse weights that are not a weighted average (fewer than two, non-positive, sum not 1).

    Example:
        >>> check_weights([0.5, 0.5])
        >>> check_weights([0.5, 0.6])
        Traceback (most recent call last):
        ...
        evirank.errors.UsageError: the weights sum to 1.1; they must sum to 1 (e.g. 0.5 and 0.5)
    """
    if len(weights) < 2:
        raise UsageError("give at least two models to average")
    if any(not (w > 0) for w in weights):
        raise UsageError(f"every weight must be positive (got {', '.join(f'{w:g}' for w in weights)})")
    total = sum(weights)
    if abs(total - 1.0) > 1e-6:
        raise UsageError(f"the weights sum to {total:g}; they must sum to 1 (e.g. 0.5 and 0.5)")


def load_state(model_dir: Path) -> dict[str, Any]:
    """All tensors of a model folder's weight files (safetensors, else PyTorch ``.bin``), by name."""
    torch = require("torch", "torch")
    state: dict[str, Any] = {}
    for path in weight_files(model_dir):
        if path.suffix == ".safetensors":
            safetensors_torch = require("safetensors.torch", "torch")
            state.update(safetensors_torch.load_file(str(path)))
        else:
            state.update(torch.load(str(path), map_location="cpu", weights_only=True))
    return state


def average_states(
    states: Sequence[dict[str, Any]], weights: Sequence[float], names: Sequence[str]
) -> dict[str, Any]:
    """``sum_k weights[k] * states[k]`` tensor by tensor (float32 sums, the first model's dtypes).

    Raises:
        UsageError: a floating-point tensor missing from a model, or of another shape there.
    """
    first = states[0]
    merged: dict[str, Any] = {}
    for key, tensor in first.items():
        if not tensor.is_floating_point():
            merged[key] = tensor.clone()
            continue
        total = tensor.float() * weights[0]
        for state, weight, name in zip(states[1:], weights[1:], names[1:], strict=True):
            other = state.get(key)
            if other is None:
                raise UsageError(
                    f"{name}: has no tensor {key!r} ({names[0]} has); the models differ in architecture"
                )
            if tuple(other.shape) != tuple(tensor.shape):
                raise UsageError(
                    f"{name}: tensor {key!r} has shape {tuple(other.shape)}, {names[0]} has "
                    f"{tuple(tensor.shape)}; the models differ in architecture"
                )
            total = total + other.float() * weight
        merged[key] = total.to(tensor.dtype).contiguous()
    for state, name in zip(states[1:], names[1:], strict=True):
        extra = [k for k, t in state.items() if k not in first and t.is_floating_point()]
        if extra:
            raise UsageError(
                f"{name}: has tensor {extra[0]!r} that {names[0]} has not; the models differ in architecture"
            )
    return merged


def _copy_model_files(source: Path, target: Path) -> None:
    """Everything of ``source`` but its weights, training records, checkpoints and exports."""
    for item in source.iterdir():
        skipped = item.name in _NOT_COPIED or item.name.startswith((".", "checkpoint"))
        if skipped or item.name.endswith((".safetensors", ".bin", ".index.json")):
            continue
        if item.is_dir():
            shutil.copytree(item, target / item.name)
        else:
            shutil.copy2(item, target / item.name)


def merge_models(
    models: Sequence[tuple[str | os.PathLike[str], float]],
    output: str | os.PathLike[str],
    *,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the weighted average of ``models`` (``(model, weight)`` pairs) as a model folder.

    Args:
        models: folders or Hugging Face ids with their weights; the first gives the configuration,
            tokenizer and sentence-transformers files.
        output: the new model folder (refused if it exists, unless ``overwrite`` and it is a
            folder this function wrote).
        overwrite: replace an earlier merge at ``output``.

    Returns:
        The provenance written to ``evirank-merge.json``.

    Example:
        >>> merge_models([("models/bi-scifact", 0.5), ("sentence-transformers/all-MiniLM-L6-v2", 0.5)],
        ...              "models/bi-scifact-wise")  # doctest: +SKIP
    """
    names = [str(model) for model, _ in models]
    weights = [float(weight) for _, weight in models]
    check_weights(weights)
    folders = [resolve_model_dir(name) for name in names]
    configs = [json.loads((folder / "config.json").read_text(encoding="utf-8")) for folder in folders]
    for name, config in zip(names[1:], configs[1:], strict=True):
        if config.get("model_type") != configs[0].get("model_type"):
            kinds = config.get("model_type"), configs[0].get("model_type")
            raise UsageError(f"{name}: model type {kinds[0]!r}, {names[0]} is {kinds[1]!r}")
    states = [load_state(folder) for folder in folders]
    merged = average_states(states, weights, names)
    provenance = {
        "command": "merge",
        "method": "weighted average of the weights (WiSE-FT, model soups)",
        "models": [
            {
                "model": name,
                "path": str(folder),
                "weight": weight,
                "weights_sha256": {p.name: file_sha256(p) for p in weight_files(folder)},
            }
            for name, folder, weight in zip(names, folders, weights, strict=True)
        ],
        "files_from": names[0],
        "tensors": len(merged),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }
    safetensors_torch = require("safetensors.torch", "torch")
    with atomic_output(output, overwrite, marker=MERGE_MARKER) as tmp:
        tmp.mkdir(parents=True)
        _copy_model_files(folders[0], tmp)
        safetensors_torch.save_file(merged, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        (tmp / MERGE_MARKER).write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
    logger.info(
        "wrote %s: %s", output, " + ".join(f"{w:g} x {n}" for n, w in zip(names, weights, strict=True))
    )
    return provenance
