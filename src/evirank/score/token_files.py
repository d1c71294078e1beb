"""Token ids kept on disk beside a score store, so a later run does not tokenise its passages again.

A scorer with a score store at ``scores.sqlite`` (or a folder ``scores/``) keeps the token ids it
computed in ``scores.sqlite.tokens/`` (``scores.tokens/``), one folder per tokenizer: the folder's
name is the start of the tokenizer's fingerprint (:attr:`TextEncoder.fingerprint
<evirank.score.tokenize.TextEncoder.fingerprint>`, a sha256 of its whole ``tokenizer.json`` and of
how texts are presented to it), and each segment's ``manifest.json`` records the whole
fingerprint. Ids of another tokenizer are never read: a segment whose fingerprint differs is
skipped. Each call that tokenised new texts adds one segment (its new texts only): ``keys.npy``
(16-byte text digests), ``lengths.npy`` and ``ids.npy`` (int32), with a ``checksums.json``
written last; a segment that no longer matches its checksums (cut short, changed) is skipped
with a warning and its texts are tokenised again. Segments are read into the scorer's
memory-bounded :class:`~evirank.score.token_cache.TokenCache` when scoring starts.

Example:
    >>> import tempfile
    >>> from evirank.score.token_cache import TokenCache
    >>> folder = Path(tempfile.mkdtemp()) / "ab12"
    >>> cache = TokenCache()
    >>> cache.keep_unsaved = True
    >>> cache.add([b"k" * 16], [np.array([7, 8])])
    >>> save_new_ids(cache, folder, "ab12" * 16) is not None
    True
    >>> again = TokenCache()
    >>> load_ids(again, folder, "ab12" * 16), load_ids(TokenCache(), folder, "cd34" * 16)
    (1, 0)
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np

from evirank.checksums import checksum_problems, write_checksums
from evirank.score.token_cache import TokenCache

logger = logging.getLogger(__name__)

#: What a segment's manifest says it is.
FORMAT = "evirank-token-ids"
#: The segment files.
FILES = ("keys.npy", "lengths.npy", "ids.npy")


def token_folder(store: str | os.PathLike[str], fingerprint: str) -> Path:
    """Where the token ids of a tokenizer with ``fingerprint`` are kept beside the store ``store``.

    Example:
        >>> token_folder("runs/scores.sqlite", "ab" * 32).as_posix()
        'runs/scores.sqlite.tokens/abababababababab'
    """
    base = os.fspath(store).rstrip("/\\")
    return Path(f"{base}.tokens") / fingerprint[:16]


def load_ids(cache: TokenCache, folder: Path, fingerprint: str) -> int:
    """Read every sound segment of ``folder`` made by the tokenizer ``fingerprint`` into ``cache``;
    the number of texts read. Damaged segments and other tokenizers' are skipped."""
    if not folder.is_dir():
        return 0
    read = 0
    for segment in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        problems = checksum_problems(segment)
        if problems:
            logger.warning(
                "%s: token ids skipped, they will be tokenised again (%s)", segment, "; ".join(problems)
            )
            continue
        try:
            manifest = json.loads((segment / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("%s: token ids skipped, unreadable manifest (%s)", segment, exc)
            continue
        if manifest.get("format") != FORMAT or manifest.get("tokenizer") != fingerprint:
            continue  # another tokenizer's ids are never used
        keys = np.load(segment / "keys.npy")
        lengths = np.load(segment / "lengths.npy")
        ids = np.load(segment / "ids.npy")
        starts = np.cumsum(lengths) - lengths
        cache.add(
            [k.tobytes() for k in keys],
            [ids[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)],
            saved=True,
        )
        read += len(keys)
    return read


def save_new_ids(cache: TokenCache, folder: Path, fingerprint: str) -> Path | None:
    """Write the texts ``cache`` holds that were not saved yet as one new segment of ``folder``
    (written apart, then moved into place); its path, or None when there was nothing new."""
    keys, rows = cache.take_unsaved()
    if not keys:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}"  # in the order they were written
    tmp = folder / f".{name}"
    tmp.mkdir()
    try:
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        np.save(tmp / "keys.npy", np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), -1))
        np.save(tmp / "lengths.npy", lengths)
        np.save(tmp / "ids.npy", np.concatenate(rows).astype(np.int32))
        manifest = {"format": FORMAT, "tokenizer": fingerprint, "texts": len(keys)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        write_checksums(tmp)
        os.replace(tmp, folder / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder / name
