"""Checksums of derived files: written when an artefact is made, checked before it is used.

An artefact evirank makes for itself (an ONNX or OpenVINO export in the cache, a folder of passage
vectors, a training checkpoint) is a folder with a ``checksums.json`` listing each file's size
and sha256. :func:`write_checksums` writes it last, when the files are complete;
:func:`checksum_problems` says what no longer matches (a file missing, cut short, or with other
bytes of the same size), and :func:`verify_checksums` raises :class:`DamagedArtefactError`
naming the artefact and what to do. Caches rebuild instead of raising.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "model.bin").write_bytes(b"weights")
    >>> _ = write_checksums(folder)
    >>> checksum_problems(folder)
    []
    >>> _ = (folder / "model.bin").write_bytes(b"weighTs")
    >>> checksum_problems(folder)
    ['model.bin: other bytes than when it was made (sha256 differs)']
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evirank.errors import EvirankError

CHECKSUMS = "checksums.json"
FORMAT = "evirank-checksums"


class DamagedArtefactError(EvirankError, ValueError):
    """A file evirank made for itself no longer holds what it wrote (damaged, cut short, missing).

    Example:
        >>> print(DamagedArtefactError("m/checkpoint", "checkpoint", ["rng.pt: missing"], "train again"))
        m/checkpoint: this checkpoint is damaged (rng.pt: missing); train again
    """

    def __init__(self, path: str | os.PathLike[str], what: str, problems: list[str], hint: str) -> None:
        self.path = str(path)
        self.problems = problems
        shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
        super().__init__(f"{self.path}: this {what} is damaged ({shown}); {hint}")


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 hex of a file's bytes, read in blocks of 4 MiB.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "a"
        >>> _ = path.write_bytes(b"")
        >>> file_digest(path)[:12]
        'e3b0c44298fc'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> list[str]:
    """Every regular file under ``folder`` (relative, sorted), the checksum file left out."""
    return sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.name != CHECKSUMS
    )


def write_checksums(folder: str | os.PathLike[str], names: Iterable[str] | None = None) -> dict[str, Any]:
    """Write ``folder/checksums.json`` for ``names`` (paths relative to ``folder``; default: every file).

    Write it when the artefact is complete, before it is moved into place.

    Returns:
        what was written.
    """
    root = Path(folder)
    listed = sorted(names) if names is not None else _files(root)
    entries = {
        name: {"size": (root / name).stat().st_size, "sha256": file_digest(root / name)} for name in listed
    }
    data = {"format": FORMAT, "files": entries}
    tmp = root / f".tmp-{CHECKSUMS}-{os.getpid()}"
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, root / CHECKSUMS)
    return data


def has_checksums(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds a checksum file (artefacts made by older versions may not)."""
    return (Path(folder) / CHECKSUMS).is_file()


def checksum_problems(folder: str | os.PathLike[str]) -> list[str]:
    """What in ``folder`` differs from its ``checksums.json``; empty when everything matches.

    Sizes are compared first (a file cut short is found without reading it), then the bytes.
    """
    root = Path(folder)
    try:
        data = json.loads((root / CHECKSUMS).read_text(encoding="utf-8"))
        entries = data["files"] if data.get("format") == FORMAT else None
    except FileNotFoundError:
        return [f"{CHECKSUMS}: missing"]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        entries = None
    if not isinstance(entries, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("size"), int) and isinstance(v.get("sha256"), str)
        for v in entries.values()
    ):
        return [f"{CHECKSUMS}: not a checksum list"]
    problems = []
    for name, entry in sorted(entries.items()):
        problem = file_problem(root / name, entry["size"], entry["sha256"])
        if problem is not None:
            problems.append(f"{name}: {problem}")
    return problems


def file_problem(path: str | os.PathLike[str], size: int, sha256: str) -> str | None:
    """What is wrong with one file recorded as ``size`` bytes of digest ``sha256``; None when it matches.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "shard"
        >>> _ = path.write_bytes(b"abc")
        >>> file_problem(path, 3, file_digest(path)) is None, file_problem(path, 4, "0" * 64)
        (True, '3 bytes, 4 when it was made (cut short or grown)')
    """
    path = Path(path)
    if not path.is_file():
        return "missing"
    stat = path.stat()
    if stat.st_size != size:
        return f"{stat.st_size:,} bytes, {size:,} when it was made (cut short or grown)"
    # a file checked in this process and untouched since (its ctime moves on any write) is not
    # read again: a large vector matrix is hashed once per process, not at every open
    seen = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if _verified.get(seen) == sha256:
        return None
    if file_digest(path) != sha256:
        return "other bytes than when it was made (sha256 differs)"
    _verified[seen] = sha256
    return None


_verified: dict[tuple[str, int, int, int, int, int], str] = {}
"""Files whose bytes matched their checksum in this process, by identity (see checksum_problems)."""


def verify_checksums(folder: str | os.PathLike[str], what: str, hint: str) -> None:
    """Raise :class:`DamagedArtefactError` naming ``folder`` (a ``what``) unless its files match.

    Example:
        >>> import tempfile
        >>> verify_checksums(tempfile.mkdtemp(), "vector folder", "embed again")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        evirank.checksums.DamagedArtefactError: /tmp/...: this vector folder is damaged (checksums.json: ...
    """
    problems = checksum_problems(folder)
    if problems:
        raise DamagedArtefactError(folder, what, problems, hint)
