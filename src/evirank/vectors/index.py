"""Passage vectors kept beside a Lucene index: ``INDEX/vectors``, recorded in ``INDEX/evirank-index.json``.

The index's marker gets a ``vectors`` entry (the folder, relative to the index, and what made it), so
``evirank serve --index`` and ``evirank rerank --index`` find the vectors and know their model and
segmenter without opening them.

Example:
    >>> default_vectors_path("indexes/scifact").as_posix()
    'indexes/scifact/vectors'
    >>> vectors_of_index("indexes/scifact")  # doctest: +SKIP
    PassageVectors('indexes/scifact/vectors', 45123 passages, model ... segmenter sentences:prepend)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evirank.outputs import write_atomically
from evirank.vectors.reader import PassageVectors

#: The marker file of an evirank index (written by :func:`evirank.lucene.build_index`).
INDEX_MARKER = "evirank-index.json"
#: The vector folder's name inside an index.
VECTORS_DIR = "vectors"


def default_vectors_path(index: str | os.PathLike[str]) -> Path:
    """Where ``evirank index --embed`` and ``evirank embed --index`` put an index's vectors."""
    return Path(index) / VECTORS_DIR


def _marker(index: str | os.PathLike[str]) -> Path:
    return Path(index) / INDEX_MARKER


def record_vectors(index: str | os.PathLike[str], vectors: PassageVectors) -> None:
    """Record ``vectors`` (a folder inside ``index``) in the index's marker, atomically.

    Raises:
        FileNotFoundError: ``index`` has no marker (it was not built by ``evirank index``).
        ValueError: the vectors are not inside the index.
    """
    marker = _marker(index)
    if not marker.is_file():
        raise FileNotFoundError(f"{marker}: no such file; is {index} an index built by `evirank index`?")
    data: dict[str, Any] = json.loads(marker.read_text(encoding="utf-8"))
    try:
        relative = vectors.path.resolve().relative_to(Path(index).resolve())
    except ValueError:
        raise ValueError(f"{vectors.path} is not inside the index {index}") from None
    manifest = vectors.manifest
    data["vectors"] = {
        "path": relative.as_posix(),
        "fingerprint": manifest["fingerprint"],
        "model": manifest.get("model"),
        "segment": manifest["segment"],
        "passages": manifest.get("passages"),
        "documents": manifest.get("documents"),
        "dim": manifest.get("dim"),
        "dtype": manifest.get("dtype"),
    }
    write_atomically(marker, json.dumps(data, indent=2) + "\n")


def vectors_entry(index: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``vectors`` entry of an index's marker, or None (no marker, or no vectors recorded)."""
    marker = _marker(index)
    if not marker.is_file():
        return None
    data = json.loads(marker.read_text(encoding="utf-8"))
    entry = data.get("vectors") if isinstance(data, dict) else None
    return entry if isinstance(entry, dict) else None


def vectors_of_index(index: str | os.PathLike[str]) -> PassageVectors | None:
    """The passage vectors recorded in ``index``'s marker, opened; None when it records none."""
    entry = vectors_entry(index)
    if entry is None:
        return None
    return PassageVectors.open(Path(index) / str(entry.get("path", VECTORS_DIR)))


def resolve_vectors(spec: str | None, index: str | os.PathLike[str] | None) -> PassageVectors | None:
    """The passage vectors a run asks for: a folder, ``none``, or (``None``) the index's own if it has some.

    Example:
        >>> resolve_vectors("none", "indexes/scifact") is None
        True
    """
    if spec is not None and spec.strip().lower() == "none":
        return None
    if spec is not None:
        return PassageVectors.open(spec)
    return vectors_of_index(index) if index is not None else None
