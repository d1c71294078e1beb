"""Markdown tables: the one writer behind every table evirank and its benchmarks print.

Example:
    >>> print(table(["run", "AP"], [["bm25", "0.3750"], ["a|b", "0.7500"]]))
    | run | AP |
    | --- | ---: |
    | bm25 | 0.3750 |
    | a\\|b | 0.7500 |
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_RULES = {"l": "---", "r": "---:", "c": ":---:"}


def table(header: Sequence[object], rows: Iterable[Sequence[object]], *, align: str | None = None) -> str:
    """A Markdown table (no trailing newline); cells are ``str`` of the values, ``|`` escaped.

    Args:
        header: the column names.
        rows: the rows, each with one value per column (``None`` prints as an empty cell).
        align: one letter per column, ``l`` (left), ``r`` (right) or ``c`` (centre); the
            default puts the first column left and the others right (names, then numbers).

    Raises:
        ValueError: a row or ``align`` whose length differs from the header's, or an unknown letter.
    """
    width = len(header)
    align = align if align is not None else "l" + "r" * (width - 1)
    if len(align) != width or set(align) - set(_RULES):
        raise ValueError(f"align needs one of l, r, c per column ({width}), found {align!r}")
    lines = [row(header), row([_RULES[a] for a in align], escape=False)]
    for number, cells in enumerate(rows, start=1):
        if len(cells) != width:
            raise ValueError(f"row {number} has {len(cells)} cells, the header {width}")
        lines.append(row(cells))
    return "\n".join(lines)


def row(cells: Iterable[object], *, escape: bool = True) -> str:
    """One Markdown table row.

    Example:
        >>> row(["a", 1, None])
        '| a | 1 |  |'
    """
    texts = ("" if c is None else str(c) for c in cells)
    return "| " + " | ".join(t.replace("|", "\\|") if escape else t for t in texts) + " |"
