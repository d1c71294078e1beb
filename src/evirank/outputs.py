"""Writing outputs safely: never overwrite without asking, never leave half-written files.

The rules every command follows:

* An output is written under a temporary sibling name (``.tmp-NAME-PID``) and renamed into
  place when complete, so an interrupted command never leaves a partial file or folder at
  the output path. Temporaries left by a process that died (its PID no longer runs) are
  removed the next time the same output is written.
* ``overwrite`` replaces only what the command itself would write: a file by a file, and
  a folder output (an index, a tune or report folder, a trained model) by a folder of the
  same kind, recognised by its marker file (``evirank-index.json``, ``tune.json``, ...).
  An empty folder may be replaced too (nothing is lost). Anything else is refused with
  :class:`~evirank.errors.UnsafeOverwriteError` and nothing is touched.
* :func:`check_output` also checks, before any work starts, that the output's folder can
  be written (:class:`~evirank.errors.OutputNotWritableError` otherwise), so a long command
  does not fail at its very end.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> with atomic_output(path) as tmp:
    ...     _ = tmp.write_text("1 Q0 d1 1 2.0 demo\\n")
    >>> path.read_text()
    '1 Q0 d1 1 2.0 demo\\n'
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

from evirank.errors import OutputExistsError, OutputNotWritableError, UnsafeOverwriteError

logger = logging.getLogger(__name__)

TMP_PREFIX = ".tmp-"
"""Temporaries are named ``.tmp-NAME-PID`` beside their output (``.tmp-NAME-PID.SUFFIX`` for helpers)."""

Markers = str | Iterable[str] | None


def _marker_names(marker: Markers) -> tuple[str, ...]:
    if marker is None:
        return ()
    return (marker,) if isinstance(marker, str) else tuple(marker)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (a zombie counts as dead).

    Example:
        >>> pid_alive(os.getpid())
        True
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    with suppress(OSError):
        status = Path(f"/proc/{pid}/stat").read_text()
        if status.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
    return True


def _check_replaceable(out: Path, marker: Markers) -> None:
    """Raise unless the existing ``out`` is what this command writes (see the module docstring)."""
    names = _marker_names(marker)
    if not names:
        if out.is_dir() and not out.is_symlink():
            raise UnsafeOverwriteError(out, "a file", "a folder")
        if out.exists() and not out.is_file():
            raise UnsafeOverwriteError(out, "a file", "something that is not a regular file")
        return
    kind = f"a folder this command wrote (holding {' or '.join(names)})"
    if out.is_symlink() or not out.is_dir():
        raise UnsafeOverwriteError(out, kind, "a file")
    if any((out / name).exists() for name in names):
        return
    if not any(out.iterdir()):
        return  # an empty folder: nothing to lose
    raise UnsafeOverwriteError(out, kind, f"a folder without {' or '.join(names)}")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows): the probe below decides
        return False


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Raise :class:`OutputNotWritableError` unless ``path`` could be created (its folder writable).

    The nearest existing ancestor (the output's folder, or the folder it will be created in)
    must be a folder this process may write into: a probe file is created and removed there,
    which also catches read-only file systems and permissions that ``os.access`` misses.

    Example:
        >>> check_writable(tempfile.mkdtemp() + "/sub/run.txt").name
        'run.txt'
    """
    out = Path(path)
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        if ancestor.is_symlink():  # a dangling link
            break
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputNotWritableError(out, f"{ancestor} is not a folder")
    if _read_only(ancestor):
        raise OutputNotWritableError(out, f"{ancestor} is on a read-only file system")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputNotWritableError(out, f"{ancestor} is not writable")
    try:
        fd, probe = tempfile.mkstemp(prefix=f"{TMP_PREFIX}probe-", dir=ancestor)
    except OSError as exc:
        raise OutputNotWritableError(out, f"{ancestor}: {exc.strerror or exc}") from None
    os.close(fd)
    with suppress(OSError):
        os.unlink(probe)
    return out


def check_output(path: str | os.PathLike[str], overwrite: bool = False, *, marker: Markers = None) -> Path:
    """Check, before any work, that ``path`` may be written; return it as a Path.

    Args:
        path: the output (a file, or a folder when ``marker`` is given).
        overwrite: whether an existing output of the same kind may be replaced.
        marker: for a folder output, the file name(s) that mark a folder this command wrote
            (``evirank-index.json`` for an index). ``None`` for a file output.

    Raises:
        OutputExistsError: ``path`` exists and ``overwrite`` is false.
        UnsafeOverwriteError: ``path`` exists, ``overwrite`` is true, but it is not what this
            command writes (a folder given for a file output, a folder without the marker).
        OutputNotWritableError: the output's folder cannot be written.

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> check_output(folder / "new.txt").name
        'new.txt'
    """
    out = Path(path)
    if out.exists() or out.is_symlink():
        if not overwrite:
            raise OutputExistsError(out)
        _check_replaceable(out, marker)
    check_writable(out)
    return out


def clean_stale(out: Path) -> list[Path]:
    """Remove the temporaries of ``out`` left by processes that died (``.tmp-NAME-PID[.x]``).

    A temporary whose process still runs is left alone. Returns what was removed.

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / ".tmp-run.txt-999999999").write_text("partial")
        7
        >>> [p.name for p in clean_stale(folder / "run.txt")]
        ['.tmp-run.txt-999999999']
    """
    removed: list[Path] = []
    pattern = re.compile(re.escape(f"{TMP_PREFIX}{out.name}-") + r"(\d+)(\..*)?")
    parent = out.parent
    if not parent.is_dir():
        return removed
    with suppress(OSError):
        for candidate in parent.iterdir():
            match = pattern.fullmatch(candidate.name)
            if match is None or pid_alive(int(match.group(1))):
                continue
            with suppress(OSError):
                _remove(candidate)
                removed.append(candidate)
                logger.info("removed %s, left by an interrupted run (process %s)", candidate, match.group(1))
    return removed


def temporary_path(out: Path, suffix: str = "") -> Path:
    """The temporary sibling of ``out`` used by this process: ``.tmp-NAME-PID[suffix]``."""
    return out.with_name(f"{TMP_PREFIX}{out.name}-{os.getpid()}{suffix}")


@contextmanager
def atomic_output(
    path: str | os.PathLike[str], overwrite: bool = False, *, marker: Markers = None
) -> Iterator[Path]:
    """Yield a temporary sibling path; on success it replaces ``path`` in one rename.

    Works for files and folders (give ``marker`` for a folder output, see
    :func:`check_output`). If the body raises (or the process is killed), the temporary is
    removed (or left under a ``.tmp-`` name that never looks complete and that the next
    write of ``path`` removes), and an existing ``path`` is untouched.
    """
    out = check_output(path, overwrite, marker=marker)
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    tmp = temporary_path(out)
    _remove(tmp)
    try:
        yield tmp
        _replace(tmp, out, overwrite, marker)
    finally:
        _remove(tmp)


@contextmanager
def atomic_outputs(
    *outputs: tuple[str | os.PathLike[str], Markers], overwrite: bool = False
) -> Iterator[list[Path]]:
    """Several outputs of one command that succeed or fail together.

    Yields one temporary path per output; only when the body succeeded are they renamed into
    place, one after the other (the renames are quick; all checks are made first).

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> with atomic_outputs((folder / "a.txt", None), (folder / "a.txt.json", None)) as (a, b):
        ...     _ = a.write_text("run"); _ = b.write_text("{}")
        >>> sorted(p.name for p in folder.iterdir())
        ['a.txt', 'a.txt.json']
    """
    with ExitStack() as stack:
        paths = [Path(p) for p, _ in outputs]
        for path, marker in outputs:
            check_output(path, overwrite, marker=marker)
        temps: list[Path] = []
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            clean_stale(path)
            tmp = temporary_path(path)
            _remove(tmp)
            stack.callback(_remove, tmp)
            temps.append(tmp)
        yield temps
        for path, (_, marker), tmp in zip(paths, outputs, temps, strict=True):
            if tmp.exists() or tmp.is_symlink():
                _replace(tmp, path, overwrite, marker)


def _replace(tmp: Path, out: Path, overwrite: bool, marker: Markers) -> None:
    if out.exists() or out.is_symlink():
        if not overwrite:  # appeared while we worked
            raise OutputExistsError(out)
        _check_replaceable(out, marker)
        if out.is_dir() and not out.is_symlink():
            old = temporary_path(out, ".old")
            _remove(old)
            os.replace(out, old)
            os.replace(tmp, out)
            _remove(old)
            return
    os.replace(tmp, out)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
