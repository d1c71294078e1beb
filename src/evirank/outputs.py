"""Writing outputs safely: never overwrite without asking, never leave half-written files.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> with atomic_output(path) as tmp:
    ...     _ = tmp.write_text("1 Q0 d1 1 2.0 demo\\n")
    >>> path.read_text()
    '1 Q0 d1 1 2.0 demo\\n'
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evirank.errors import OutputExistsError


def check_output(path: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """Raise :class:`OutputExistsError` if ``path`` exists and ``overwrite`` is false."""
    out = Path(path)
    if out.exists() and not overwrite:
        raise OutputExistsError(out)
    return out


@contextmanager
def atomic_output(path: str | os.PathLike[str], overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling path; on success it replaces ``path`` in one rename.

    Works for files and directories. If the body raises (or the process is killed), the
    temporary is removed (or left under a ``.tmp-`` name that never looks complete), and
    an existing ``path`` is untouched.
    """
    out = check_output(path, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".tmp-{out.name}-{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
        if out.exists():
            if not overwrite:  # appeared while we worked
                raise OutputExistsError(out)
            _remove(out)
        os.replace(tmp, out)
    finally:
        _remove(tmp)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
