"""The record written next to every output: what made it (command, configuration) and with what (versions).

Every command that writes an output writes a JSON record beside it with :func:`write_record`:
``RUN.json`` next to a run (``search``, ``rerank``), ``evirank-index.json`` in an index,
``tune.json`` / ``report.json`` / ``evirank-train.json`` in the folders of ``tune``, ``report``
and ``train``. Every record holds ``command``, ``config`` and ``versions``; commands add their
own facts (counts, timings, inputs).

Example:
    >>> import tempfile, json, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt.json"
    >>> _ = write_record(path, "search", {"k": 10, "bm25": (1.2, 0.75)}, queries=3)
    >>> record = json.loads(path.read_text())
    >>> record["command"], record["config"], record["queries"], "evirank" in record["versions"]
    ('search', {'k': 10, 'bm25': [1.2, 0.75]}, 3, True)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path, PurePath
from typing import Any

from evirank.outputs import atomic_output

#: The libraries whose versions a record lists (those installed).
LIBRARIES = (
    "numpy",
    "pandas",
    "pyarrow",
    "ir_measures",
    "torch",
    "transformers",
    "tokenizers",
    "onnxruntime",
    "pyserini",
)


def versions(*extra: str) -> dict[str, str]:
    """Versions of evirank, Python, the platform and the installed libraries (plus ``extra`` packages).

    Reads package metadata only: nothing is imported.

    Example:
        >>> sorted(set(versions()) & {"evirank", "python", "numpy"})
        ['evirank', 'numpy', 'python']
    """
    from evirank.version import __version__

    out = {"evirank": __version__, "python": platform.python_version(), "platform": platform.platform()}
    for name in (*LIBRARIES, *extra):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: dataclasses and mappings to dicts, sequences to lists,
    numpy scalars and arrays to Python numbers, paths to text, NaN and infinities to ``None``.

    Anything else JSON cannot hold becomes its ``str``.

    Example:
        >>> import numpy as np
        >>> plain({"a": np.float32(0.5), "b": (1, float("nan")), 3: Path("x")})
        {'a': 0.5, 'b': [1, None], '3': 'x'}
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy scalars and arrays
        return plain(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def compact_json(value: Any, indent: int = 2, level: int = 0) -> str:
    """JSON with one key per line, but lists of plain values (numbers, strings) on one line.

    Example:
        >>> print(compact_json({"alpha": [0.0, 0.5], "name": "birch"}))
        {
          "alpha": [0.0, 0.5],
          "name": "birch"
        }
    """
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(value, dict) and value:
        items = [
            f"{inner}{json.dumps(str(k))}: {compact_json(v, indent, level + 1)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        items = [f"{inner}{compact_json(v, indent, level + 1)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def sidecar(output: str | os.PathLike[str]) -> Path:
    """Where the record of a file output goes: ``OUT.json`` next to ``OUT``.

    Example:
        >>> sidecar("runs/bm25.txt").as_posix()
        'runs/bm25.txt.json'
    """
    path = Path(output)
    return path.with_name(path.name + ".json")


def make_record(command: str, config: Any, **facts: Any) -> dict[str, Any]:
    """The record of an output: ``command``, ``config``, the command's own ``facts``, then ``versions``.

    A ``versions`` fact (such as the Java runtime of an index) is added to :func:`versions`.

    Example:
        >>> make_record("index", {"threads": 2}, versions={"java": "21"})["versions"]["java"]
        '21'
    """
    more = facts.pop("versions", None) or {}
    return plain({"command": command, "config": config, **facts, "versions": {**versions(), **more}})


def write_record(
    path: str | os.PathLike[str], command: str, config: Any, *, overwrite: bool = True, **facts: Any
) -> dict[str, Any]:
    """Write :func:`make_record` as JSON to ``path`` (atomically); return the record.

    Args:
        path: the record file (see :func:`sidecar` for a file output's).
        command: the command that made the output (``"search"``, ``"tune"``, ...).
        config: its configuration (a dataclass or a mapping).
        overwrite: replace an existing record (the output it describes was just replaced).
        facts: more to record (inputs, counts, timings).
    """
    record = make_record(command, config, **facts)
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(compact_json(record) + "\n", encoding="utf-8")
    return record
