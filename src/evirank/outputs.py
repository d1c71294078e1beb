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
* A write that fails on the way (a full disk, a quota, a file system turned read-only) is
  reported as :class:`~evirank.errors.OutputWriteError` naming the output, never its temporary
  name or a bare ``[Errno 28]``.
* Files that are not a command's outputs but must never be seen half-written (manifests,
  shards, caches, checkpoints) go through :func:`atomic_file` or :func:`write_atomically`
  (replace whatever is there), folders built elsewhere through :func:`replace_output`: every
  rename into place in evirank happens here.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> with atomic_output(path) as tmp:
    ...     _ = tmp.write_text("1 Q0 d1 1 2.0 demo\\n")
    >>> path.read_text()
    '1 Q0 d1 1 2.0 demo\\n'
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from pathlib import Path

from evirank.errors import OutputExistsError, OutputNotWritableError, OutputWriteError, UnsafeOverwriteError

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


#: What a write failing on the way says: the disk is full, a quota, a file too big, a read-only file system.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
_WRITE_FAILURES = (
    ("No space left on device", "No space left on device"),
    ("StorageFull", "No space left on device"),
    ("database or disk is full", "No space left on device"),
    ("Disk quota exceeded", "Disk quota exceeded"),
    ("File too large", "File too large"),
    ("Read-only file system", "Read-only file system"),
    ("file write failed", "the file system refused the write (a full disk?)"),
    ("disk I/O error", "SQLite: disk I/O error (a full disk, a file-size limit or a failing disk)"),
)


def write_failure(exc: BaseException) -> str | None:
    """What a write failing on the way says, or ``None`` for any other error.

    OSErrors are recognised by their errno; errors of libraries that write files themselves
    (torch, safetensors, SQLite, pyarrow) by their message.

    Example:
        >>> write_failure(OSError(28, "No space left on device"))
        'No space left on device'
        >>> write_failure(RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"))
        'the file system refused the write (a full disk?)'
        >>> write_failure(ValueError("bad")) is None
        True
    """
    if isinstance(exc, OutputWriteError):
        return None  # already named
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        return exc.strerror or os.strerror(exc.errno)
    text = str(exc)
    for needle, reason in _WRITE_FAILURES:
        if needle in text:
            return reason
    return None


@contextmanager
def naming_write_failures(*paths: str | os.PathLike[str], kept: str | None = None) -> Iterator[None]:
    """Re-raise a write that fails on the way in the body as :class:`OutputWriteError` naming ``paths``.

    Example:
        >>> try:
        ...     with naming_write_failures("runs/r.txt"):
        ...         raise OSError(28, "No space left on device")
        ... except OutputWriteError as exc:
        ...     print(str(exc).split(";")[0])
        runs/r.txt: could not be written (No space left on device)
    """
    try:
        yield
    except Exception as exc:
        reason = write_failure(exc)
        if reason is None:
            raise
        hint = "choose an output path on a writable file system" if "Read-only" in reason else None
        names = ", ".join(str(p) for p in paths)
        if kept is None and len(paths) > 1:
            kept = "nothing was left at these paths"
        raise OutputWriteError(names, reason, kept=kept, hint=hint) from exc


def atomic_output(
    path: str | os.PathLike[str], overwrite: bool = False, *, marker: Markers = None
) -> AbstractContextManager[Path]:
    """Yield a temporary sibling path; on success it replaces ``path`` in one rename.

    Works for files and folders (give ``marker`` for a folder output, see
    :func:`check_output`). If the body raises (or the process is killed), the temporary is
    removed (or left under a ``.tmp-`` name that never looks complete and that the next
    write of ``path`` removes), and an existing ``path`` is untouched. A write that fails on
    the way (a full disk) is reported naming ``path`` (:class:`OutputWriteError`).
    """
    out = check_output(path, overwrite, marker=marker)
    return _into_place(out, lambda tmp: _replace(tmp, out, overwrite, marker))


def atomic_file(path: str | os.PathLike[str]) -> AbstractContextManager[Path]:
    """Yield a temporary sibling of ``path``; on success it replaces ``path`` (whatever is there).

    For files evirank keeps for itself (a manifest, a shard, a cache, a checkpoint folder),
    which must be whole or absent but are not a user's output: no overwrite check, and the
    folder is created. The temporary (``.tmp-NAME-PID``) is removed if the body fails, and a
    write that fails on the way is reported naming ``path``.

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> with atomic_file(folder / "state.json") as tmp:
        ...     _ = tmp.write_text("{}")
        >>> sorted(p.name for p in folder.iterdir())
        ['state.json']
    """
    out = Path(path)

    def place(tmp: Path) -> None:
        if out.is_dir() and not out.is_symlink():
            _swap_folder(tmp, out)
        else:
            os.replace(tmp, out)

    return _into_place(out, place)


@contextmanager
def _into_place(out: Path, place: Callable[[Path], None]) -> Iterator[Path]:
    """A temporary sibling of ``out`` for the body, put in place by ``place`` when it succeeds."""
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(out)
    tmp = temporary_path(out)
    _remove(tmp)
    try:
        with naming_write_failures(out):
            yield tmp
            place(tmp)
    finally:
        _remove(tmp)


def _swap_folder(tmp: Path, out: Path) -> None:
    """Replace the folder ``out`` by ``tmp``: a crash between the two renames leaves the old one at
    ``.old-NAME``, where :func:`recovered` finds it."""
    old = out.with_name(f".old-{out.name}")
    _remove(old)
    os.replace(out, old)
    os.replace(tmp, out)
    _remove(old)


def recovered(path: str | os.PathLike[str]) -> Path | None:
    """``path``, or the ``.old-`` twin a crash in the middle of :func:`atomic_file`'s folder swap left;
    ``None`` when neither is there.

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / ".old-last").mkdir()
        >>> recovered(folder / "last").name, recovered(folder / "best")
        ('.old-last', None)
    """
    out = Path(path)
    if out.exists():
        return out
    old = out.with_name(f".old-{out.name}")
    return old if old.exists() else None


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (UTF-8 text or bytes) to ``path`` through :func:`atomic_file`; return the path.

    Example:
        >>> path = Path(tempfile.mkdtemp()) / "manifest.json"
        >>> write_atomically(path, '{"complete": true}\\n').read_text()
        '{"complete": true}\\n'
    """
    out = Path(path)
    with atomic_file(out) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return out


def replace_output(
    tmp: str | os.PathLike[str],
    path: str | os.PathLike[str],
    overwrite: bool = False,
    *,
    marker: Markers = None,
) -> Path:
    """Rename a finished temporary ``tmp`` (made by :func:`temporary_path`) onto the output ``path``.

    For builds that make their temporary themselves over a long time (compacting vector shards):
    the same checks as :func:`atomic_output` are made again at the rename (``path`` may have
    appeared meanwhile), and ``overwrite`` replaces only what the command itself writes.

    Example:
        >>> folder = Path(tempfile.mkdtemp())
        >>> tmp = temporary_path(folder / "out")
        >>> tmp.mkdir()
        >>> replace_output(tmp, folder / "out", marker="manifest.json").name
        'out'
    """
    out = Path(path)
    with naming_write_failures(out):
        _replace(Path(tmp), out, overwrite, marker)
    return out


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
        with naming_write_failures(*paths):
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
