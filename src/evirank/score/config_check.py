"""Does a model folder's ``config.json`` describe its weights? Checked before transformers reads them.

A folder whose config claims another size (``hidden_size`` 768 over weights of 384), another
vocabulary or another number of layers would otherwise end in transformers' own errors, which name
neither the folder nor ``config.json``, or, for extra layers, in layers initialised at random
without a word. :func:`check_config` compares the config with the shapes of the weights (safetensors
files are read for their header only, a few kilobytes; ``pytorch_model.bin`` files are mapped into
memory with torch's safe loader, ``weights_only``, so only the tensors' shapes are read) and raises
an :class:`~evirank.errors.InputFormatError` naming ``config.json`` and the weight files. The layer
count is checked for the layouts of the families' architectures: BERT-like encoders (BERT,
RoBERTa, ELECTRA, DeBERTa), DistilBERT, T5's encoder and decoder, BART's, decoder-only models
(Llama, Qwen, Mistral, ModernBERT) and GPT-2.

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
#: (a PARADE head beside its encoder) hold other modules. transformers reads the safetensors files
#: when there are any, else the pickled ones.
_MAIN_WEIGHTS = re.compile(r"model(?:-\d+-of-\d+)?\.safetensors")
_MAIN_PICKLED = re.compile(r"pytorch_model(?:-\d+-of-\d+)?\.bin")
_EMBEDDINGS = ("word_embeddings.weight", "embed_tokens.weight", "shared.weight", "wte.weight")
#: (where a layer's number stands in its tensors' names, the config keys that count those layers,
#: what they are called): the first key the config has is compared.
_LAYERS = (
    (re.compile(r"(?:^|\.)encoder\.layer\.(\d+)\."), ("num_hidden_layers",), "layers"),  # BERT-like
    (re.compile(r"(?:^|\.)transformer\.layer\.(\d+)\."), ("n_layers",), "layers"),  # DistilBERT
    (re.compile(r"(?:^|\.)encoder\.block\.(\d+)\."), ("num_layers",), "encoder layers"),  # T5
    (re.compile(r"(?:^|\.)decoder\.block\.(\d+)\."), ("num_decoder_layers", "num_layers"), "decoder layers"),
    (re.compile(r"(?:^|\.)encoder\.layers\.(\d+)\."), ("encoder_layers",), "encoder layers"),  # BART
    (re.compile(r"(?:^|\.)decoder\.layers\.(\d+)\."), ("decoder_layers",), "decoder layers"),
    (re.compile(r"^(?:model\.)?layers\.(\d+)\."), ("num_hidden_layers",), "layers"),  # Llama, Qwen
    (re.compile(r"^(?:transformer\.)?h\.(\d+)\."), ("n_layer", "num_hidden_layers"), "layers"),  # GPT-2
)
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


def pickled_shapes(path: Path) -> dict[str, list[int]]:
    """The tensor shapes in a ``pytorch_model.bin``, mapped into memory by torch's safe loader
    (``weights_only``: no code in the file runs; the tensors' bytes are not read); empty when
    torch is missing or the file cannot be read that way (the weights' reader names it).

    Example:
        >>> pickled_shapes(Path("/nonexistent.bin"))
        {}
    """
    if not path.is_file():
        return {}
    try:
        import torch
    except ImportError:
        return {}
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # a damaged file, or the legacy format that cannot be mapped
        return {}
    if not isinstance(state, dict):
        return {}
    return {str(name): list(value.shape) for name, value in state.items() if isinstance(value, torch.Tensor)}


def weight_shapes(folder: Path) -> tuple[list[str], dict[str, list[int]]]:
    """(the main weight files transformers would read, the shapes of all their tensors together).

    Example:
        >>> weight_shapes(Path("/nonexistent"))
        ([], {})
    """
    names = sorted(p.name for p in folder.glob("*.safetensors") if _MAIN_WEIGHTS.fullmatch(p.name))
    read = header_shapes
    if not names:
        names = sorted(p.name for p in folder.glob("*.bin") if _MAIN_PICKLED.fullmatch(p.name))
        read = pickled_shapes
    shapes: dict[str, list[int]] = {}
    for name in names:  # shards hold some layers each: compared together
        shapes.update(read(folder / name))
    return names, shapes


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

    Checked: the hidden size and vocabulary size against the word embeddings, and the number of
    layers against the layers present (for the layouts named in the module). Weights that cannot
    be read, or without these tensors, are not checked here (transformers checks what it loads).

    Raises:
        InputFormatError: naming ``config.json``, what it claims and what the weights hold.
    """
    if not (folder / "config.json").is_file():
        return
    config = read_config(folder)
    names, shapes = weight_shapes(folder)
    problems = _disagreements(config, shapes)
    if problems:
        shown = names[0] if len(names) == 1 else f"{names[0]} ... {names[-1]} ({len(names)} files)"
        raise InputFormatError(
            folder / "config.json",
            None,
            f"a config.json that describes the weights in {shown}",
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
    for pattern, keys, what in _LAYERS:
        layers = {int(m.group(1)) for name in shapes if (m := pattern.search(name))}
        claimed = next((config[key] for key in keys if key in config), None)
        if layers and isinstance(claimed, int) and claimed != max(layers) + 1:
            problems.append(f"{claimed} {what} in config.json, {max(layers) + 1} in the weights")
    return problems
