"""Shared helpers of the readers: opening plain or gzipped files, decoding lines with exact errors.

Every reader goes through :func:`iter_lines`, so a non-UTF-8 byte anywhere is reported the
same way: the file, the 1-based line, and the byte offset.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_bytes(b"one\\ntwo\\n")
    >>> [(n, line) for n, line in iter_lines(path)]
    [(1, 'one'), (2, 'two')]
"""

from __future__ import annotations

import gzip
import logging
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal, cast

from evirank.errors import InputFormatError, InputPathError

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


def input_file(path: PathLike, what: str = "a file") -> Path:
    """``path`` as a Path, after checking that it is a readable file (not missing, not a folder).

    Raises:
        InputPathError: (a FileNotFoundError) naming the path, ``what`` was expected and what
            is there instead.

    Example:
        >>> import tempfile
        >>> input_file(tempfile.mkdtemp(), "a qrels file")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        evirank.errors.InputPathError: /tmp/...: expected a qrels file, found a folder
    """
    p = Path(path)
    if p.is_dir():
        raise InputPathError(p, what, "a folder")
    if not p.exists():
        raise InputPathError(p, what, "nothing there (no such file)")
    if not os.access(p, os.R_OK):
        raise InputPathError(p, what, "a file this process may not read")
    return p


def open_binary(path: PathLike, what: str = "a file") -> BinaryIO:
    """Open ``path`` for reading bytes, transparently decompressing ``.gz`` files.

    Raises:
        InputPathError: (a FileNotFoundError) when ``path`` does not exist or is a folder.
    """
    p = input_file(path, what)
    if p.suffix == ".gz":
        return cast(BinaryIO, gzip.open(p, "rb"))
    return p.open("rb")


def decode_line(raw: bytes, path: PathLike, line_no: int, line_start: int) -> str:
    """Decode one line as UTF-8 or raise :class:`InputFormatError` naming the bad byte.

    Args:
        raw: the line's bytes (with or without its newline).
        path: the file, for the message.
        line_no: the 1-based line number.
        line_start: the byte offset of the line's first byte in the (decompressed) file.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        raise InputFormatError(
            path,
            line_no,
            "UTF-8 text",
            f"the byte 0x{bad} at column {exc.start + 1} (byte offset {line_start + exc.start} "
            "in the file), which is not valid UTF-8",
            hint="re-encode the file as UTF-8, e.g. iconv -f latin1 -t utf-8",
        ) from None


GZIP_ERRORS = (OSError, EOFError, zlib.error)
"""What reading a damaged or truncated ``.gz`` file raises (gzip.BadGzipFile is an OSError)."""


def gzip_error(path: PathLike, line_no: int | None, exc: BaseException) -> InputFormatError:
    """The error for a ``.gz`` file that cannot be decompressed (not gzip, truncated, corrupt)."""
    return InputFormatError(
        path,
        line_no,
        "complete gzip-compressed data (the name ends in .gz)",
        f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__,
        hint="re-create the file, or drop .gz from its name if it is not compressed",
    )


def _raw_lines(handle: BinaryIO, path: PathLike) -> Iterator[bytes]:
    line_no = 0
    while True:
        try:
            raw = handle.readline()
        except GZIP_ERRORS as exc:
            raise gzip_error(path, line_no + 1, exc) from None
        if not raw:
            return
        line_no += 1
        yield raw


def iter_lines(path: PathLike, errors: Literal["strict", "replace"] = "strict") -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each line of ``path`` (1-based, newline stripped).

    Decodes as UTF-8 line by line. With ``errors="strict"`` a bad byte is an error naming its
    line and byte offset; with ``"replace"`` it becomes U+FFFD (what Java readers do with the
    TREC disks and web pages, whose bytes are not all UTF-8) and one warning per file names
    the first such line. ``.gz`` files are decompressed on the fly (a damaged one is reported
    with the line where decompression failed).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "latin1.txt"
        >>> _ = path.write_bytes(b"caf\\xe9\\n")
        >>> [text == "caf\\ufffd" for _, text in iter_lines(path, errors="replace")]
        [True]
    """
    offset = 0
    replaced: list[int] = []
    with open_binary(path) as handle:
        for line_no, raw in enumerate(_raw_lines(handle, path), start=1):
            if errors == "strict":
                text = decode_line(raw, path, line_no, offset)
            else:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    text = raw.decode("utf-8", errors="replace")
                    replaced.append(line_no)
            if line_no == 1:
                text = text.lstrip("\ufeff")  # a byte-order mark is not content
            offset += len(raw)
            yield line_no, text.rstrip("\r\n")
    if replaced:
        logger.warning(
            "%s:%d: bytes that are not UTF-8 were read as U+FFFD (on %d line(s) of this file)",
            path, replaced[0], len(replaced),
        )  # fmt: skip


def read_text(path: PathLike) -> str:
    """The whole (possibly gzipped) file as text; a non-UTF-8 byte is reported with its line."""
    with open_binary(path) as handle:
        try:
            data = handle.read()
        except GZIP_ERRORS as exc:
            raise gzip_error(path, None, exc) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line_no = data.count(b"\n", 0, exc.start) + 1
        line_end = data.find(b"\n", exc.start)
        raw = data[line_start : len(data) if line_end < 0 else line_end]
        decode_line(raw, path, line_no, line_start)
        raise  # pragma: no cover - decode_line always raises for this line
    return text.lstrip("\ufeff")


def json_error(exc: Exception) -> str:
    """A JSON decoding error as "malformed JSON (... at column N)", worded for any message.

    Example:
        >>> import json
        >>> try:
        ...     json.loads('{"a": "b')
        ... except json.JSONDecodeError as exc:
        ...     print(json_error(exc))
        malformed JSON (Unterminated string starting at column 7)
    """
    if isinstance(exc, RecursionError):
        return "malformed JSON (nested too deeply)"
    msg = getattr(exc, "msg", str(exc))
    column = getattr(exc, "colno", None)
    if column is None:
        return f"malformed JSON ({msg})"
    joiner = " column" if msg.endswith(" at") else " at column"
    return f"malformed JSON ({msg}{joiner} {column})"


def shorten(value: object, limit: int = 60) -> str:
    """A short printable form of ``value`` for error messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(value: object) -> str:
    """The JSON-ish name of a value's type, for messages about wrong types."""
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def check_docno(docno: str, path: PathLike, line_no: int | None) -> str:
    """``docno`` when it can be a TREC run's document id (non-empty, no whitespace), else an error.

    Example:
        >>> check_docno("LA010189-0001", "la.txt", 3)
        'LA010189-0001'
        >>> check_docno("a b", "c.jsonl", 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        evirank.errors.InputFormatError: c.jsonl:2: expected a non-empty document id without whitespace ...
    """
    if not docno.strip() or docno != docno.strip() or any(c.isspace() for c in docno):
        raise InputFormatError(
            path,
            line_no,
            "a non-empty document id without whitespace (TREC runs separate columns by whitespace)",
            f"id {shorten(docno)}",
        )
    return docno
