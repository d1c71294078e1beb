"""Model fingerprints: what a cached score depends on, as one hex string.

A fingerprint hashes the model's files (weights, config, tokenizer) by content, not by path, with
the scoring settings that change a score (scorer kind, max length, query cap, head rule,
backend, precision). Moving a model folder keeps its fingerprint; retraining it (new weights)
changes it. File hashes are cached by (path, size, modification time), so a 1 GB checkpoint is
read once, not at every run.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "config.json").write_text("{}")
    >>> _ = (folder / "model.safetensors").write_bytes(b"weights")
    >>> a = model_fingerprint(folder, {"kind": "cross"})
    >>> a == model_fingerprint(folder, {"kind": "bi"})
    False
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evirank._extras import require

logger = logging.getLogger(__name__)

#: Bump when the meaning of a stored score changes for the same model and settings.
FINGERPRINT_FORMAT = 1

_TOKENIZER_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "added_tokens.json",
)

#: A persistent cache of file hashes: (path, size, mtime_ns) -> sha256 hex, or None if unknown.
HashCacheGet = Callable[[str, int, int], "str | None"]
HashCachePut = Callable[[str, int, int, str], None]

_memory_cache: dict[tuple[str, int, int], str] = {}


def resolve_model_dir(model: str | os.PathLike[str]) -> Path:
    """A local folder holding ``model``: the path itself, or a Hugging Face Hub snapshot of an id.

    Hub ids are fetched once (weights in one format: safetensors when the repository has them)
    into the Hugging Face cache and reused offline afterwards (``HF_HUB_OFFLINE=1``).

    Raises:
        FileNotFoundError: a local-looking path that does not exist.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            from evirank.errors import InputPathError

            found = sorted(p.name for p in path.iterdir())
            shown = ", ".join(found[:6]) + (", ..." if len(found) > 6 else "")
            raise InputPathError(
                path,
                "a model folder with config.json (a Hugging Face model)",
                f"a folder without one ({shown or 'empty'})",
            )
        return path.resolve()
    if path.exists() or str(model).startswith((".", "/", "~")) or str(model).count("/") > 1:
        raise FileNotFoundError(f"{model}: no such model folder (expected a folder with config.json)")
    hub = require("huggingface_hub", "torch")
    patterns = ["*.json", "*.txt", "*.model"]
    try:
        folder = Path(hub.snapshot_download(str(model), allow_patterns=[*patterns, "*.safetensors"]))
        if not any(folder.glob("*.safetensors")):
            folder = Path(hub.snapshot_download(str(model), allow_patterns=[*patterns, "*.bin"]))
    except Exception as exc:  # offline, unknown repository, gated model, ...
        raise FileNotFoundError(
            f"{model}: not a local model folder, and the Hugging Face Hub could not provide it ({exc})"
        ) from exc
    return folder


def weight_files(model_dir: Path) -> list[Path]:
    """The weight files transformers loads from ``model_dir``: safetensors if any, else ``.bin``.

    Raises:
        FileNotFoundError: when the folder has no weights.
    """
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        files = sorted(p for p in model_dir.glob("*.bin") if p.name != "training_args.bin")
    if not files:
        raise FileNotFoundError(f"{model_dir}: no model weights (*.safetensors or *.bin) in this folder")
    return files


def file_sha256(
    path: Path, cache_get: HashCacheGet | None = None, cache_put: HashCachePut | None = None
) -> str:
    """sha256 of a file's bytes, cached in memory (and in ``cache_*`` when given) by size and mtime."""
    stat = path.stat()
    key = (str(path.resolve()), int(stat.st_size), int(stat.st_mtime_ns))
    if key in _memory_cache:
        return _memory_cache[key]
    known = cache_get(*key) if cache_get is not None else None
    if known is None:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
        known = digest.hexdigest()
        logger.debug("hashed %s (%d bytes)", path, stat.st_size)
        if cache_put is not None:
            cache_put(*key, known)
    _memory_cache[key] = known
    return known


def model_fingerprint(
    model_dir: Path,
    settings: Mapping[str, Any],
    cache_get: HashCacheGet | None = None,
    cache_put: HashCachePut | None = None,
) -> str:
    """sha256 hex of the model's files (weights, config, tokenizer) and ``settings``.

    Args:
        model_dir: a local model folder (see :func:`resolve_model_dir`).
        settings: JSON-serialisable scoring settings that change a score.
        cache_get: optional persistent file-hash cache lookup (the score store provides one).
        cache_put: optional persistent file-hash cache writer.
    """
    files = weight_files(model_dir) + [model_dir / n for n in _TOKENIZER_FILES if (model_dir / n).is_file()]
    payload = {
        "format": FINGERPRINT_FORMAT,
        "files": {p.name: file_sha256(p, cache_get, cache_put) for p in files},
        "settings": dict(settings),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
