"""Whitespace-separated tables (TREC qrels and runs): a fast pandas path and an exact slow path.

The fast path reads with pandas' C parser. When anything looks wrong (a parse error, a
missing field, a value of the wrong type, a duplicate key), the slow path re-reads the file
line by line to name the first bad line exactly. Reading a million-line run stays quick, and
errors still say where.
"""

from __future__ import annotations

import csv
import gzip
import logging
import math
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from evirank.errors import InputFormatError
from evirank.io.files import GZIP_ERRORS, PathLike, iter_lines, shorten

logger = logging.getLogger(__name__)

ASCII_WHITESPACE = " \t\n\r\x0b\x0c"
_SPLIT = re.compile(f"[{re.escape(ASCII_WHITESPACE)}]+")


def split_fields(line: str) -> list[str]:
    """Split a line on runs of ASCII whitespace, as trec_eval and pandas' C parser do.

    Example:
        >>> split_fields(" 1 Q0\\td1  1 2.5 run\\r")
        ['1', 'Q0', 'd1', '1', '2.5', 'run']
    """
    stripped = line.strip(ASCII_WHITESPACE)
    return _SPLIT.split(stripped) if stripped else []


def first_content_line(path: PathLike) -> tuple[int, str] | None:
    """The first non-blank line of ``path`` and its number, or ``None`` for an empty file."""
    for line_no, line in iter_lines(path):
        if split_fields(line):
            return line_no, line
    return None


def fast_read(
    path: Path, ncols: int, skip_first: int = 0, dtypes: dict[int, Any] | None = None
) -> pd.DataFrame | None:
    """Read ``path`` as ``ncols`` whitespace-separated columns, or ``None`` if it looks wrong.

    Columns are Python strings unless ``dtypes`` maps a column index to another dtype (a
    number column that does not parse makes this return ``None``). ``skip_first`` skips that
    many leading lines (a header). Returns ``None`` rather than raising, so the caller can
    fall back to :func:`slow_read` for an exact message.
    """
    types: dict[int, Any] = {i: object for i in range(ncols)}
    types.update(dtypes or {})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numbers out of a dtype's range: the slow path names the line
            frame = pd.read_csv(
                path,
                sep=r"\s+",
                header=None,
                dtype=types,
                quoting=csv.QUOTE_NONE,
                keep_default_na=False,
                na_values=[""],  # only a missing field is missing; "NA" or "null" are ids
                skiprows=skip_first,
                engine="c",
                encoding="utf-8",
                compression="gzip" if path.suffix == ".gz" else None,
            )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OverflowError, *GZIP_ERRORS) as exc:
        logger.debug("fast read of %s failed (%s); re-reading line by line", path, exc)
        return None
    if frame.shape[1] != ncols or frame.empty or frame.isna().to_numpy().any():
        return None
    return frame


def slow_read(
    path: Path,
    names: Sequence[str],
    expected: str,
    converters: dict[int, Callable[[str, int], object]],
    skip_first: int = 0,
) -> list[tuple[int, list[object]]]:
    """Read ``path`` line by line, checking the column count and converting columns.

    Args:
        path: the file.
        names: column names (their number is the expected column count).
        expected: a description of a valid line, for messages.
        converters: column index -> ``f(token, line_no)`` that converts or raises
            :class:`InputFormatError`.
        skip_first: leading lines to skip (a header).

    Returns:
        ``(line_no, values)`` for each non-blank line.
    """
    rows: list[tuple[int, list[object]]] = []
    for line_no, line in iter_lines(path):
        tokens = split_fields(line)
        if line_no <= skip_first or not tokens:
            continue
        if len(tokens) != len(names):
            raise InputFormatError(
                path, line_no, expected, f"{len(tokens)} column(s): {shorten(line.strip())}"
            )
        values: list[object] = list(tokens)
        for index, convert in converters.items():
            values[index] = convert(tokens[index], line_no)
        rows.append((line_no, values))
    if not rows:
        raise InputFormatError(path, None, expected, "no lines")
    return rows


def int_converter(
    path: Path, what: str, bounds: tuple[int, int] | None = None
) -> Callable[[str, int], object]:
    """A converter that parses an integer (within ``bounds``, inclusive) or raises an error
    naming ``what``."""
    expected = f"an integer {what}" + (f" from {bounds[0]} to {bounds[1]}" if bounds else "")

    def convert(token: str, line_no: int) -> object:
        try:
            value = int(token)
        except ValueError:
            raise InputFormatError(path, line_no, expected, shorten(token)) from None
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise InputFormatError(path, line_no, expected, shorten(token))
        return value

    return convert


def float_converter(path: Path, what: str, *, finite: bool = False) -> Callable[[str, int], object]:
    """A converter that parses a number (not NaN; with ``finite``, not infinite either) or raises
    an error naming ``what``."""

    def convert(token: str, line_no: int) -> object:
        try:
            value = float(token)
        except ValueError:
            value = math.nan
        if math.isnan(value):
            raise InputFormatError(path, line_no, f"a number as {what}", shorten(token))
        if finite and math.isinf(value):
            raise InputFormatError(path, line_no, f"a finite number as {what}", shorten(token))
        return value

    return convert


def open_text_for_write(path: Path, compress: bool) -> IO[str]:
    """Open ``path`` for writing UTF-8 text (gzipped when ``compress``)."""
    if compress:
        return gzip.open(path, "wt", encoding="utf-8", newline="\n")
    return path.open("w", encoding="utf-8", newline="\n")


def has_whitespace(values: pd.Series) -> pd.Series:
    """Which values are empty or contain ASCII whitespace (they would break a TREC line).

    Literal substring tests, which pandas runs in C (a regex would run in Python, one value
    at a time), checked once per distinct value.
    """
    distinct = pd.Series(pd.unique(values.astype(str)), dtype=str)
    bad = distinct == ""
    for char in ASCII_WHITESPACE:
        bad |= distinct.str.contains(char, regex=False)
    return values.astype(str).isin(set(distinct[bad].tolist()))
