"""Numbers on the command line: finite, and within what the code under them can hold.

Every numeric flag of every command goes through :func:`harden_numbers` when the parser is built,
so no command can forget it: a float flag refuses ``nan`` and ``inf`` (``--bm25 nan 0.4`` would
reach Lucene, ``--alpha inf`` would make every score infinite), and an integer flag refuses values
beyond a 32-bit integer (``--k 2147483648`` is no Java ``int``; counts that large are mistakes).
Each is a usage error naming the flag, exit status 2, before any work.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo", exit_on_error=False)
    >>> _ = parser.add_argument("--k", type=int)
    >>> _ = parser.add_argument("--b", type=float)
    >>> harden_numbers(parser)
    >>> parser.parse_args(["--k", "10", "--b", "0.4"])
    Namespace(k=10, b=0.4)
    >>> parser.parse_args(["--b", "nan"])
    Traceback (most recent call last):
    ...
    argparse.ArgumentError: argument --b: expected a finite number, found 'nan'
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

INT_LIMIT = 2**31 - 1
"""The largest integer a flag takes (a Java ``int``; numpy and torch sizes are safe below it)."""


def check_number(value: Any, text: str) -> Any:
    """``value`` if it is finite and, for an integer, within +-:data:`INT_LIMIT`; else a usage error.

    Example:
        >>> check_number(3, "3")
        3
        >>> check_number(float("inf"), "inf")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a finite number, found 'inf'
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, found {text!r}")
    if isinstance(value, int) and not -INT_LIMIT - 1 <= value <= INT_LIMIT:
        raise argparse.ArgumentTypeError(
            f"expected an integer from {-INT_LIMIT - 1} to {INT_LIMIT}, found {text!r}"
        )
    return value


def _checked(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return check_number(convert(text), text)

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names it in "invalid int value"
    parse._evirank_checked = True  # type: ignore[attr-defined]
    return parse


def harden_numbers(parser: argparse.ArgumentParser) -> None:
    """Make every flag of ``parser`` (and of its subcommands) refuse non-finite and huge numbers."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                harden_numbers(sub)
            continue
        convert = action.type
        if callable(convert) and not getattr(convert, "_evirank_checked", False):
            action.type = _checked(convert)


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 to 65535 (0: any free one).

    A larger number is refused, not wrapped: the system's resolver reads 70000 as 4464.

    Example:
        >>> port_number("8080")
        8080
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, found {text!r}")
    return value
