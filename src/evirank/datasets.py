"""Where the evaluation datasets are: one rule for the demo, the tests, the benchmarks and the conditions.

The datasets folder is ``$EVIRANK_DATASETS``, else ``$DATA``, else ``../shared/datasets`` beside
the folder you work in (a clone of the repository with ``shared/datasets`` next to it).

Example:
    >>> folder = datasets_folder()
    >>> folder is None or folder.is_dir()
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The environment variables naming the datasets folder, first found wins.
ENVIRONMENT = ("EVIRANK_DATASETS", "DATA")
#: Where the folder is looked for otherwise, relative to the working folder.
DEFAULT = Path("..") / "shared" / "datasets"


def datasets_folder(
    start: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The datasets folder, or ``None`` when it is not there.

    Args:
        start: the folder ``../shared/datasets`` is relative to (default: the current folder);
            the tests and benchmarks pass the repository's root.
        environ: the environment to read (default: this process's).
    """
    env = os.environ if environ is None else environ
    for name in ENVIRONMENT:
        value = env.get(name)
        if value:
            path = Path(value).expanduser()
            return path if path.is_dir() else None
    base = Path(start) if start is not None else Path.cwd()
    candidate = (base / DEFAULT).resolve()
    return candidate if candidate.is_dir() else None
