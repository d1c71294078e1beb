"""Exceptions that say what was expected, what was found, and where.

Each subclasses the built-in a caller would naturally catch (``ValueError``,
``FileExistsError``, ``ImportError``), so generic handlers keep working.

Example:
    >>> err = InputFormatError("run.txt", 3, "6 columns: qid Q0 docno rank score tag", "4 columns")
    >>> str(err)
    'run.txt:3: expected 6 columns: qid Q0 docno rank score tag, found 4 columns'
"""

from __future__ import annotations

from collections.abc import Iterable
from os import PathLike


class EvirankError(Exception):
    """Base class of evirank's own errors."""


class InputFormatError(EvirankError, ValueError):
    """A file a user gave us does not have the expected format.

    Args:
        path: the file.
        line: 1-based line number, or ``None`` when the problem is not on one line.
        expected: what a valid line or file looks like.
        found: what was there instead.
        hint: what to do about it (optional).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        line: int | None,
        expected: str,
        found: str,
        hint: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.expected = expected
        self.found = found
        self.hint = hint
        where = self.path if line is None else f"{self.path}:{line}"
        message = f"{where}: expected {expected}, found {found}"
        if hint:
            message += f" ({hint})"
        super().__init__(message)


class InputPathError(EvirankError, FileNotFoundError):
    """An input path names no file of the expected kind (missing, or a folder where a file is read).

    Example:
        >>> str(InputPathError("runs", "a TREC run file", "a folder"))
        'runs: expected a TREC run file, found a folder'
    """

    def __init__(self, path: str | PathLike[str], expected: str, found: str) -> None:
        self.path = str(path)
        self.expected = expected
        self.found = found
        super().__init__(f"{self.path}: expected {expected}, found {found}")


class ColumnsError(EvirankError, ValueError):
    """A frame handed to a stage lacks columns the stage needs."""

    def __init__(self, where: str, expected: Iterable[str], found: Iterable[str]) -> None:
        self.expected = sorted(expected)
        self.found = sorted(found)
        missing = sorted(set(self.expected) - set(self.found))
        super().__init__(f"{where}: expected columns {self.expected}, found {self.found} (missing {missing})")


class OutputExistsError(EvirankError, FileExistsError):
    """An output path already exists and ``overwrite`` was not asked for."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = str(path)
        super().__init__(
            f"{self.path} already exists; pass --overwrite (overwrite=True) to replace it, "
            "or choose another output path"
        )


class UnsafeOverwriteError(OutputExistsError):
    """``overwrite`` was asked for, but the existing path is not what the command writes.

    ``--overwrite`` replaces a file by a file, and a folder output (an index, a tune or report
    folder, a trained model) by one of the same kind; anything else is left untouched.
    """

    def __init__(self, path: str | PathLike[str], expected: str, found: str) -> None:
        self.path = str(path)
        FileExistsError.__init__(
            self,
            f"{self.path}: --overwrite replaces only {expected}, found {found}; "
            "nothing was changed (remove it yourself, or choose another output path)",
        )


class OutputNotWritableError(EvirankError, PermissionError):
    """An output cannot be written (read-only file system, no permission, a file in the way)."""

    def __init__(self, path: str | PathLike[str], reason: str) -> None:
        self.path = str(path)
        super().__init__(f"{self.path}: cannot write this output ({reason}); choose another output path")


class OutputWriteError(EvirankError, OSError):
    """Writing an output failed on the way (a full disk, a quota, a file system turned read-only).

    Args:
        path: the output (never its temporary name).
        reason: what the system said (``No space left on device``).
        kept: what is left (default: nothing at this path).
        hint: what to do (default: free some space or choose another output path).

    Example:
        >>> for part in str(OutputWriteError("runs/r.txt", "No space left on device")).split("; "):
        ...     print(part)
        runs/r.txt: could not be written (No space left on device)
        nothing was left at this path
        free some space or choose another output path, then run the command again
    """

    def __init__(
        self, path: str | PathLike[str], reason: str, *, kept: str | None = None, hint: str | None = None
    ) -> None:
        self.path = str(path)
        self.reason = reason
        kept = kept or "nothing was left at this path"
        hint = hint or "free some space or choose another output path, then run the command again"
        OSError.__init__(self, f"{self.path}: could not be written ({reason}); {kept}; {hint}")

    def __str__(self) -> str:  # OSError would format (errno, strerror)
        return str(self.args[0])


class MissingExtraError(EvirankError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            f"this feature needs the optional dependency '{module}'; "
            f"install it with: pip install 'evirank[{extra}]'"
        )


class UsageError(EvirankError, ValueError):
    """The command line asks for something that cannot be done: flags missing, conflicting or out of range.

    The ``evirank`` command prints it the way argparse prints its own usage errors,
    ``evirank COMMAND: error: MESSAGE``, and exits with status 2.

    Example:
        >>> str(UsageError("give --run RUN or --index DIR"))
        'give --run RUN or --index DIR'
    """


class ArgumentError(UsageError):
    """An argument of a public function or class (the Python API) that cannot be used; the message
    names it, says what was expected and what was found.

    Example:
        >>> str(ArgumentError("top: expected an integer from 0, found -1"))
        'top: expected an integer from 0, found -1'
    """
