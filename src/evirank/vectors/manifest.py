"""What made a passage-vector folder: its manifest, its identity, and the error when two disagree.

A folder's *identity* is what a vector depends on: the bi-encoder's fingerprint (model files and every
setting that changes a vector) and the canonical segmenter spec. Two folders, or a folder and a query,
with different identities are never mixed.

Example:
    >>> segment_spec("sentences")
    'sentences:segment'
    >>> segment_spec("windows:100")
    'windows:100:50'
    >>> identity = VectorsIdentity("ab" * 32, "windows:100:50", {"model": "minilm"})
    >>> identity.matches(VectorsIdentity("ab" * 32, "windows:100:50", {"model": "elsewhere"}))
    True
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evirank.errors import EvirankError, InputFormatError
from evirank.version import __version__

FORMAT = "evirank-passage-vectors"
VERSION = 1
MANIFEST = "manifest.json"
PASSAGES = "passages.parquet"
VECTORS = "vectors.npy"
SHARDS = "shards"
#: Suffix of the folder a build writes into until it is complete.
PARTIAL_SUFFIX = ".partial"


class VectorsMismatchError(EvirankError, ValueError):
    """Stored passage vectors were made by another model or segmenter than the one asked for."""


def segment_spec(segmenter: Any) -> str:
    """The canonical spec of a segmenter (or of a spec string): equal specs segment alike.

    The spec grammar's canonical strings (:mod:`evirank.segment.segment_spec`): ``sentences`` is
    ``sentences:segment``, ``windows`` is ``windows:150:75``, ``whole`` is ``whole:prepend``.

    Example:
        >>> segment_spec("Windows")
        'windows:150:75'
        >>> from evirank.segment import Whole
        >>> segment_spec(Whole(title="skip"))
        'whole:skip'
    """
    from evirank.segment.segment_spec import SegmentSpec, spec_of

    if isinstance(segmenter, str):
        return SegmentSpec.parse(segmenter).spec
    spec = spec_of(getattr(segmenter, "fallback", segmenter))
    if spec is None:
        raise ValueError(f"no canonical spec for the segmenter {segmenter!r}")
    return spec


def _short(fingerprint: str) -> str:
    return fingerprint[:12]


@dataclass(frozen=True, slots=True)
class VectorsIdentity:
    """What a stored vector depends on.

    Attributes:
        fingerprint: the bi-encoder's fingerprint (:attr:`evirank.score.BiEncoder.fingerprint`).
        segment: the canonical segmenter spec (:func:`segment_spec`).
        model: the bi-encoder's description (model path or id, max length, prefixes, backend), for people.
    """

    fingerprint: str
    segment: str
    model: dict[str, Any] = field(default_factory=dict, compare=False)

    def matches(self, other: VectorsIdentity) -> bool:
        """Same fingerprint and same segmenter (the descriptions may differ, e.g. a moved model folder)."""
        return self.fingerprint == other.fingerprint and self.segment == other.segment

    def name(self) -> str:
        """A short human description: model, fingerprint prefix and segmenter."""
        model = self.model.get("model", "?")
        return f"model {model} (fingerprint {_short(self.fingerprint)}), segmenter {self.segment}"

    @classmethod
    def of(cls, scorer: Any, segment: Any) -> VectorsIdentity:
        """The identity of vectors made by ``scorer`` (a bi-encoder) over passages of ``segment``.

        Loads the scorer's tokenizer (to fingerprint it), not its weights.
        """
        describe = getattr(scorer, "describe", None)
        model = dict(describe()) if describe is not None else {"model": repr(scorer)}
        return cls(str(scorer.fingerprint), segment_spec(segment), model)


def mismatch(
    path: str | os.PathLike[str], stored: VectorsIdentity, wanted: VectorsIdentity
) -> VectorsMismatchError:
    """The error for vectors at ``path`` made otherwise than ``wanted``; names both sides."""
    what = []
    if stored.fingerprint != wanted.fingerprint:
        what.append("model")
    if stored.segment != wanted.segment:
        what.append("segmenter")
    settings = [
        f"{key} {stored.model.get(key)!r} in the vectors, {wanted.model.get(key)!r} here"
        for key in sorted(set(stored.model) | set(wanted.model))
        if key not in ("model", "random_init") and stored.model.get(key) != wanted.model.get(key)
    ]
    shown = f"; {', '.join(settings[:4])}" if settings and stored.fingerprint != wanted.fingerprint else ""
    return VectorsMismatchError(
        f"{path}: the passage vectors were made with {stored.name()}, but this run uses {wanted.name()} "
        f"(the {' and '.join(what)} differ{'s' if len(what) == 1 else ''}{shown}); vectors are never "
        "mixed: run with the same model, settings and segmenter, or embed again with `evirank embed`"
    )


def versions() -> dict[str, str]:
    """The versions that matter for a build (evirank, Python, numpy, pyarrow, torch, transformers)."""
    import sys
    from importlib import metadata

    found = {"evirank": __version__, "python": platform.python_version()}
    for name in ("numpy", "pyarrow", "torch", "transformers"):
        module = sys.modules.get(name)
        if module is not None:
            found[name] = str(getattr(module, "__version__", "?"))
        else:
            try:
                found[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
    return found


def now() -> str:
    """The current UTC time, to the second, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a vector folder (complete or partial).

    Raises:
        FileNotFoundError: no manifest (not a vector folder, or one whose build never started).
        InputFormatError: a manifest of another format or version.
    """
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"{folder}: no {MANIFEST}; not a passage-vector folder (build one with `evirank embed` "
            "or `evirank index --embed`)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputFormatError(path, exc.lineno, "a JSON manifest", f"invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise InputFormatError(path, None, f'"format": "{FORMAT}"', repr(found))
    if data.get("version") != VERSION:
        raise InputFormatError(
            path, None, f'"version": {VERSION}', repr(data.get("version")), "rebuild it with this evirank"
        )
    for key in ("fingerprint", "segment"):
        if not isinstance(data.get(key), str):
            raise InputFormatError(path, None, f'a string "{key}"', repr(data.get(key)))
    return data


def identity_of(manifest: dict[str, Any]) -> VectorsIdentity:
    """The identity recorded in a manifest."""
    return VectorsIdentity(manifest["fingerprint"], manifest["segment"], dict(manifest.get("model") or {}))


def write_manifest(folder: Path, data: dict[str, Any]) -> None:
    """Write ``folder/manifest.json`` through a temporary name (never half-written)."""
    from evirank.outputs import write_atomically

    write_atomically(folder / MANIFEST, json.dumps(data, indent=2, sort_keys=False) + "\n")
