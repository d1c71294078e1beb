"""Model fingerprints: what a cached score depends on, as one hex string.

A fingerprint hashes the model's files (weights, config, tokenizer) by content, not by path, with
the scoring settings that change a score (scorer kind, max length, query cap, head rule,
backend, precision). Moving a model folder keeps its fingerprint; retraining it (new weights)
changes it. File hashes are cached by the file's identity (path, device and inode, size,
modification and status-change times; see :func:`file_identity` for why these), so a 1 GB
checkpoint is read once, not at every run, and weights replaced by others of the same size with
their time put back are read again.

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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from evirank.checksums import file_digest
from evirank.extras import require

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

#: A persistent cache of file hashes: (identity, size, mtime_ns) -> sha256 hex, or None if unknown
#: (the identity is the path with the file's device, inode and ctime, see :func:`file_identity`).
HashCacheGet = Callable[[str, int, int], "str | None"]
HashCachePut = Callable[[str, int, int, str], None]

_memory_cache: dict[tuple[str, int, int], str] = {}
"""Hashes of this process, by :func:`file_identity`."""


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
    from evirank.score.default_model import offline_copy

    local = offline_copy(str(model))
    if local is not None:
        return local
    hub = require("huggingface_hub", "torch")
    patterns = ["*.json", "*.txt", "*.model"]
    try:
        folder = Path(hub.snapshot_download(str(model), allow_patterns=[*patterns, "*.safetensors"]))
        if not any(folder.glob("*.safetensors")):
            folder = Path(hub.snapshot_download(str(model), allow_patterns=[*patterns, "*.bin"]))
    except Exception as exc:  # offline, unknown repository, gated model, ...
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line (the Hub's run over several)
        raise FileNotFoundError(
            f"{model}: not a local model folder, and the Hugging Face Hub could not provide it ({reason})"
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


def file_identity(stat: os.stat_result, path: Path) -> tuple[str, int, int]:
    """The key a file's hash is cached under: (path and inode, size, modification time).

    Which checks are cheap and which are exact: a hash of the bytes is exact but reads the whole
    file (seconds for a 1 GB checkpoint), so it is cached; the cache key must change whenever the
    bytes may have. Size and modification time alone do not: a file rewritten in place to the
    same size with its time put back (``touch -d``, ``cp -p``, ``rsync -t``) keeps both. The key
    also holds the device and inode (a file replaced by a rename is a new inode) and the status
    change time ``ctime``, which the system sets to "now" on every write and on every change of
    the modification time, and which no program can set back. So a key matches only a file whose
    bytes have not been touched since it was hashed; anything else is read and hashed again.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "w.bin"
        >>> _ = path.write_bytes(b"weights")
        >>> key = file_identity(path.stat(), path)
        >>> os.utime(path, ns=(0, 0)); file_identity(path.stat(), path) == key
        False
    """
    where = f"{path.resolve()}\0dev={stat.st_dev}\0ino={stat.st_ino}\0ctime_ns={stat.st_ctime_ns}"
    return where, int(stat.st_size), int(stat.st_mtime_ns)


def file_sha256(
    path: Path, cache_get: HashCacheGet | None = None, cache_put: HashCachePut | None = None
) -> str:
    """sha256 of a file's bytes, cached in memory (and in ``cache_*`` when given) by :func:`file_identity`.

    A file that changes while it is read is read again, and only a hash of bytes that did not
    change under it is cached.

    Raises:
        InputFormatError: the file kept changing while it was read.
    """
    for _attempt in range(3):
        stat = path.stat()
        key = file_identity(stat, path)
        if key in _memory_cache:
            return _memory_cache[key]
        known = cache_get(*key) if cache_get is not None else None
        if known is not None:
            _memory_cache[key] = known
            return known
        known = file_digest(path)
        if file_identity(path.stat(), path) != key:
            logger.info("%s changed while it was read; reading it again", path)
            continue
        logger.debug("hashed %s (%d bytes)", path, stat.st_size)
        if cache_put is not None:
            cache_put(*key, known)
        _memory_cache[key] = known
        return known
    from evirank.errors import InputFormatError

    raise InputFormatError(
        path, None, "a model file that stays the same while it is read", "one that kept changing"
    )


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


#: What the libraries that read weights say when a file is damaged or cut short.
_DAMAGED = (
    "deserializ",  # safetensors: Error while deserializing header ...
    "file not fully covered",
    "HeaderTooLarge",
    "PytorchStreamReader",
    "invalid load key",
    "Unable to load weights",
    "unexpected EOF",
    "Ran out of input",
    "size mismatch",
)


#: What transformers says when config.json does not describe the weights, or cannot be read as
#: the model type it names.
_CONFIG = (
    "ignore_mismatched_sizes",
    "StrictDataclassFieldValidationError",
    "Unrecognized model",
    "model_type",
)


@contextmanager
def reading_model(model: str | os.PathLike[str] | None) -> Iterator[None]:
    """Name the model's files when its weights cannot be read (damaged, cut short, mismatched).

    Errors of safetensors, torch and transformers about the bytes of a checkpoint do not say
    which file they read; inside this block they become an :class:`~evirank.errors.InputFormatError`
    naming the weight file (or the folder) and what to do. A ``config.json`` that does not describe
    the weights (another size, vocabulary, number of layers or model type) is named before the
    block runs (:func:`evirank.score.config_check.check_config`), or when transformers refuses it.

    Example:
        >>> with reading_model("models/m"):  # doctest: +IGNORE_EXCEPTION_DETAIL
        ...     raise RuntimeError("Error while deserializing header: HeaderTooLarge")
        Traceback (most recent call last):
        evirank.errors.InputFormatError: models/m: expected model weights that can be read, ...
    """
    from evirank.errors import EvirankError, InputFormatError
    from evirank.score.config_check import check_config, read_config

    folder = Path(model) if model is not None and Path(model).is_dir() else None
    if folder is not None:
        check_config(folder)  # a config.json that lies about the weights, named before transformers reads it
    try:
        yield
    except EvirankError:
        raise
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if folder is not None and any(needle in text for needle in _CONFIG):
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            claimed = read_config(folder).get("model_type")
            raise InputFormatError(
                folder / "config.json",
                None,
                "a configuration that describes this model's weights"
                + (f" (it names model_type {claimed!r})" if isinstance(claimed, str) else ""),
                f"{type(exc).__name__}: {first[:300]}",
                hint="the config belongs to another model, or is damaged: put the model's own config.json "
                "beside its weights",
            ) from exc
        if model is None or not any(needle in text for needle in _DAMAGED):
            raise
        where = Path(model)
        try:
            files = weight_files(where) if where.is_dir() else []
        except FileNotFoundError:
            files = []
        if len(files) == 1:
            where = files[0]
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputFormatError(
            where,
            None,
            "model weights that can be read",
            f"{type(exc).__name__}: {first[:300]}",
            hint="the file is damaged, cut short or of another model; copy or download the model again",
        ) from exc
