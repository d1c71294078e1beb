"""The kinds of value a setting takes: each one parses text (a flag, a query string) and checks a
value that came typed (a conditions file, a Python call, a JSON request), with one message.

Every function here raises :class:`ValueError` with what was expected and what was found; the
settings table (:mod:`evirank.config.table`) puts the setting's flag in front of it.

Example:
    >>> positive_int("3"), positive_int(3)
    (3, 3)
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    ValueError: expected a positive integer up to 2147483647, found '0'
    >>> unit_float(0.25), finite_float("1e3")
    (0.25, 1000.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The largest integer a setting takes: a Java ``int`` (Lucene's depth); any count is far below.
INT_LIMIT = 2**31 - 1


def _integer(value: Any) -> int | None:
    """``value`` as an int (text or a number without a fraction), else None; a bool is no integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    """``value`` as a float (text or a number), else None; a bool is no number."""
    if isinstance(value, bool):
        return None
    try:
        return float(value if isinstance(value, int | float) else str(value).strip())
    except ValueError:
        return None


def positive_int(value: Any) -> int:
    """An integer from 1 to :data:`INT_LIMIT`.

    Example:
        >>> positive_int("1000")
        1000
    """
    number = _integer(value)
    if number is None or not 1 <= number <= INT_LIMIT:
        raise ValueError(f"expected a positive integer up to {INT_LIMIT}, found {value!r}")
    return number


def integer(value: Any) -> int:
    """Any integer within +-:data:`INT_LIMIT` (negative ones count from the end, as layers do).

    Example:
        >>> integer("-1")
        -1
    """
    number = _integer(value)
    if number is None or not -INT_LIMIT - 1 <= number <= INT_LIMIT:
        raise ValueError(f"expected an integer, found {value!r}")
    return number


def non_negative_int(value: Any) -> int:
    """An integer from 0 to :data:`INT_LIMIT`.

    Example:
        >>> non_negative_int("0")
        0
    """
    number = _integer(value)
    if number is None or not 0 <= number <= INT_LIMIT:
        raise ValueError(f"expected an integer from 0 to {INT_LIMIT}, found {value!r}")
    return number


def finite_float(value: Any) -> float:
    """A finite number (no nan, no inf).

    Example:
        >>> finite_float("0.4")
        0.4
    """
    number = _number(value)
    if number is None or not math.isfinite(number):
        raise ValueError(f"expected a finite number, found {value!r}")
    return number


def non_negative_float(value: Any) -> float:
    """A finite number >= 0.

    Example:
        >>> non_negative_float("1.5")
        1.5
    """
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise ValueError(f"expected a number >= 0, found {value!r}")
    return number


def positive_float(value: Any) -> float:
    """A finite number > 0.

    Example:
        >>> positive_float("30")
        30.0
    """
    number = _number(value)
    if number is None or not math.isfinite(number) or number <= 0:
        raise ValueError(f"expected a number > 0, found {value!r}")
    return number


def unit_float(value: Any) -> float:
    """A number in [0, 1].

    Example:
        >>> unit_float("0.25")
        0.25
    """
    number = _number(value)
    if number is None or not 0.0 <= number <= 1.0:  # NaN fails this too
        raise ValueError(f"expected a number in [0, 1], found {value!r}")
    return number


def open_unit_float(value: Any) -> float:
    """A number strictly between 0 and 1 (a significance level).

    Example:
        >>> open_unit_float("0.05")
        0.05
    """
    number = _number(value)
    if number is None or not 0.0 < number < 1.0:
        raise ValueError(f"expected a number between 0 and 1, found {value!r}")
    return number


def text(value: Any) -> str:
    """Any text; surrounding blanks kept (a spec or a path). A number is written as text.

    Example:
        >>> text(3)
        '3'
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected text, found {value!r}")
    return str(value)


def non_empty_text(value: Any) -> str:
    """Text with something besides blanks.

    Example:
        >>> non_empty_text(" ")
        Traceback (most recent call last):
        ...
        ValueError: expected some text, found ' '
    """
    checked = text(value)
    if not checked.strip():
        raise ValueError(f"expected some text, found {value!r}")
    return checked


def lone_surrogate(value: str) -> int | None:
    """The position of the first lone surrogate in ``value`` (a character UTF-8 cannot hold: an
    escape such as ``\\udc00`` in JSON, or a byte that was not UTF-8 in a command line), else None.

    Example:
        >>> lone_surrogate("caf\\udce9"), lone_surrogate("café")
        (3, None)
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return None


def surrogate_message(value: str, at: int) -> str:
    """What a text holding a lone surrogate at ``at`` is, in the words every check uses.

    Example:
        >>> print(surrogate_message("ab\\ud800", 2))  # doctest: +ELLIPSIS
        a lone surrogate '\\ud800' at character 2 (an escape such as \\ud800 in JSON, or ...)
    """
    char = value[at]
    escape = ascii(char)[1:-1]
    return (
        f"a lone surrogate {char!a} at character {at} (an escape such as {escape} in JSON, or bytes "
        "that are not UTF-8)"
    )


def find_lone_surrogate(value: Any, name: str = "") -> tuple[str, str, int] | None:
    """(where, text, position) of the first lone surrogate in a string, or in the strings of a
    record read from JSON (mappings, their keys, and lists, at any depth); None when UTF-8 can
    hold them all.

    Example:
        >>> find_lone_surrogate({"id": "a", "meta": {"tags": ["ok", "b\\udc00"]}})
        ('meta.tags[1]', 'b\\udc00', 1)
        >>> find_lone_surrogate({"text": "fine"}) is None
        True
    """
    if isinstance(value, str):
        at = lone_surrogate(value)
        return None if at is None else (name, value, at)
    if isinstance(value, Mapping):
        for key, item in value.items():
            shown = str(key) if lone_surrogate(str(key)) is None else ascii(str(key))
            inner = f"{name}.{shown}" if name else shown
            found = find_lone_surrogate(str(key), f"key {inner}") or find_lone_surrogate(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = find_lone_surrogate(item, f"{name}[{i}]")
            if found is not None:
                return found
    return None


def check_unicode_record(record: Any, path: Any, line_no: int | None) -> None:
    """Refuse a record read from a file (a JSON line) holding a string that UTF-8 cannot hold: it
    could be neither indexed nor written out. The error names the file, the line and the field.

    Raises:
        InputFormatError: ``FILE:LINE: expected text that UTF-8 can hold, found a lone surrogate ...``.

    Example:
        >>> check_unicode_record({"text": "x\\udc00"}, "c.jsonl", 3)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        evirank.errors.InputFormatError: c.jsonl:3: expected text that UTF-8 can hold, found a lone ...
    """
    found = find_lone_surrogate(record)
    if found is not None:
        from evirank.errors import InputFormatError

        where, value, at = found
        raise InputFormatError(
            path, line_no, "text that UTF-8 can hold", f"{surrogate_message(value, at)} in its {where!r}"
        )


def unicode_text(value: Any) -> str:
    """Text that UTF-8 can hold (no lone surrogate), blanks kept.

    Example:
        >>> unicode_text("café")
        'café'
        >>> unicode_text("caf\\udce9")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: expected text that UTF-8 can hold, found a lone surrogate '\\udce9' at character 3 ...
    """
    checked = text(value)
    at = lone_surrogate(checked)
    if at is not None:
        raise ValueError(f"expected text that UTF-8 can hold, found {surrogate_message(checked, at)}")
    return checked


def query_text(value: Any) -> str:
    """A query: a string with something besides blanks, that UTF-8 can hold (a number is no query).

    Example:
        >>> query_text("why do cats purr")
        'why do cats purr'
        >>> query_text(None)
        Traceback (most recent call last):
        ...
        ValueError: expected a query (a string with some text), found None
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a query (a string with some text), found {value!r}")
    return unicode_text(value)


def finite_floats(value: Any, count: int | None = None, noun: str = "numbers") -> tuple[float, ...]:
    """Finite numbers, one per item of a list (``count`` of them when given); ``noun`` says what
    they are in the error.

    Example:
        >>> finite_floats([1, 2.5], 2)
        (1.0, 2.5)
        >>> finite_floats([float("nan"), 1.0], 2)
        Traceback (most recent call last):
        ...
        ValueError: expected 2 finite numbers, found nan at position 0
    """
    what = f"finite {noun}" if count is None else f"{count} finite {noun}"
    if not _sequence(value) and not _array(value):
        raise ValueError(f"expected a list of {what}, found {type(value).__name__} {_short(value)}")
    items = list(value)
    if count is not None and len(items) != count:
        raise ValueError(f"expected {what}, found {len(items)}")
    out = []
    for position, item in enumerate(items):
        number = _number(item) if not isinstance(item, str) else None
        if number is None or not math.isfinite(number):
            raise ValueError(f"expected {what}, found {_short(item)} at position {position}")
        out.append(number)
    return tuple(out)


def port(value: Any) -> int:
    """A TCP port, 0 to 65535 (0: any free one). A larger number is refused, not wrapped.

    Example:
        >>> port("8080")
        8080
    """
    number = _integer(value)
    if number is None or not 0 <= number <= 65535:
        raise ValueError(f"expected a port from 0 to 65535, found {value!r}")
    return number


def one_of(*choices: str) -> Callable[[Any], str]:
    """A value among ``choices`` (compared as written, after stripping blanks).

    Example:
        >>> one_of("error", "keep")("keep")
        'keep'
    """

    def check(value: Any) -> str:
        found = str(value).strip() if isinstance(value, str) else value
        if found not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, found {value!r}")
        return str(found)

    check.__name__ = "choice"
    return check


def pair_of(item: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, Any]]:
    """Two values of ``item``'s kind (a list, a tuple, or text with two words).

    Example:
        >>> pair_of(finite_float)("1.2 0.75")
        (1.2, 0.75)
    """

    def check(value: Any) -> tuple[Any, Any]:
        items = value.split() if isinstance(value, str) else list(value) if _sequence(value) else None
        if items is None or len(items) != 2:
            raise ValueError(f"expected two values, found {value!r}")
        return item(items[0]), item(items[1])

    return check


def list_of(item: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    """One or more values of ``item``'s kind (a list, or text of blank-separated words).

    Example:
        >>> list_of(finite_float)([1, "0.5"])
        (1.0, 0.5)
    """

    def check(value: Any) -> tuple[Any, ...]:
        items = value.split() if isinstance(value, str) else list(value) if _sequence(value) else [value]
        if not items:
            raise ValueError("expected one value or more, found none")
        return tuple(item(v) for v in items)

    return check


def _sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _array(value: Any) -> bool:
    """A one-dimensional array (numpy's, or anything with ``ndim == 1`` that iterates)."""
    return getattr(value, "ndim", None) == 1 and hasattr(value, "__iter__")


def _short(value: Any, limit: int = 40) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
