"""Does a model folder's ``config.json`` describe its weights? Checked before transformers reads them.

A folder whose config claims another size (``hidden_size`` 768 over weights of 384), another
vocabulary or another number of layers would otherwise end in transformers' own errors, which name
neither the folder nor ``config.json``, or, for extra layers, in layers initialised at random
without a word. :func:`check_config` compares the config with the shapes in the weights' headers
(safetensors files are read for their header only, a few kilobytes) and raises an
:class:`~evirank.errors.InputFormatError` naming ``config.json`` and the weight file.

Example:
    >>> import json, struct, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text(json.dumps({"hidden_size": 768, "vocab_size": 10}))
    >>> header = json.dumps({"embeddings.word_embeddings.weight":
    ...     {"dtype": "F32", "shape": [10, 384], "data_offsets": [0, 15360]}}).encode()
    >>> _ = (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    >>> check_config(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    evirank.errors.InputFormatError: .../config.json: expected a config.json that describes the weights ...
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from evirank.errors import InputFormatError
from evirank.io.files import json_error

#: The main weight files of a Hugging Face folder (one file, or shards); other safetensors files
#: (a PARADE head beside its encoder) hold other modules.
_MAIN_WEIGHTS = re.compile(r"model(?:-\d+-of-\d+)?\.safetensors")
_EMBEDDINGS = ("word_embeddings.weight", "embed_tokens.weight", "shared.weight", "wte.weight")
_BERT_LAYER = re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\.")
_HINT = "the config belongs to another model: put the model's own config.json beside its weights"


def header_shapes(path: Path) -> dict[str, list[int]]:
    """The tensor shapes a safetensors file declares, read from its header; empty when unreadable.

    Example:
        >>> header_shapes(Path("/nonexistent.safetensors"))
        {}
    """
    try:
        with path.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            if size > 100 * 2**20:
                return {}
            header = json.loads(handle.read(size))
    except (OSError, struct.error, ValueError):
        return {}  # damaged: the weights' reader names the file
    if not isinstance(header, dict):
        return {}
    return {
        name: list(entry["shape"])
        for name, entry in header.items()
        if isinstance(entry, dict) and isinstance(entry.get("shape"), list)
    }


def read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a dict.

    Raises:
        InputFormatError: naming ``config.json`` when it is not a JSON object.
    """
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputFormatError(path, exc.lineno, "a JSON model configuration", json_error(exc)) from None
    except UnicodeDecodeError:
        raise InputFormatError(path, None, "a JSON model configuration", "bytes that are not UTF-8") from None
    if not isinstance(config, dict):
        raise InputFormatError(path, None, "a JSON object (a model configuration)", type(config).__name__)
    return config


def check_config(folder: Path) -> None:
    """Raise unless ``folder/config.json`` agrees with the shapes of the folder's main weights.

    Checked: the hidden size and vocabulary size against the word embeddings, and (for BERT-like
    encoders) the number of layers against the layers present. A folder without safetensors
    weights, or without these tensors, is not checked here (transformers checks what it loads).

    Raises:
        InputFormatError: naming ``config.json``, what it claims and what the weights hold.
    """
    if not (folder / "config.json").is_file():
        return
    config = read_config(folder)
    for weights in sorted(folder.glob("*.safetensors")):
        if not _MAIN_WEIGHTS.fullmatch(weights.name):
            continue
        shapes = header_shapes(weights)
        problems = _disagreements(config, shapes)
        if problems:
            raise InputFormatError(
                folder / "config.json",
                None,
                f"a config.json that describes the weights in {weights.name}",
                "; ".join(problems),
                hint=_HINT,
            )


def _disagreements(config: dict[str, Any], shapes: dict[str, list[int]]) -> list[str]:
    """What ``config`` claims that the tensor ``shapes`` contradict."""
    problems = []
    hidden = config.get("hidden_size", config.get("d_model", config.get("n_embd")))
    vocab = config.get("vocab_size")
    for name, shape in sorted(shapes.items()):
        if name.endswith(_EMBEDDINGS) and len(shape) == 2:
            rows, width = shape
            if isinstance(hidden, int) and hidden != width:
                problems.append(
                    f"hidden size {hidden} in config.json, {width} in the weights ({name} {shape})"
                )
            if isinstance(vocab, int) and vocab != rows:
                problems.append(
                    f"vocabulary of {vocab} in config.json, {rows} in the weights ({name} {shape})"
                )
            break
    layers = {int(m.group(1)) for name in shapes if (m := _BERT_LAYER.search(name))}
    claimed = config.get("num_hidden_layers")
    if layers and isinstance(claimed, int) and claimed != max(layers) + 1:
        problems.append(f"{claimed} layers in config.json, {max(layers) + 1} in the weights")
    return problems
