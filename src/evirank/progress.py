"""One progress helper over tqdm whose default follows the log level.

Bars show when the ``evirank`` logger is at INFO or more verbose, and hide otherwise,
so library code never prints unless a user asked for progress.

Example:
    >>> total = sum(1 for _ in progress(range(3), desc="demo", enabled=False))
    >>> total
    3
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def progress_enabled() -> bool:
    """Whether progress bars show by default (the ``evirank`` logger's level is INFO or lower)."""
    return logging.getLogger("evirank").getEffectiveLevel() <= logging.INFO


def progress(
    iterable: Iterable[T],
    *,
    desc: str,
    total: int | None = None,
    unit: str = "it",
    enabled: bool | None = None,
) -> Iterator[T]:
    """Wrap ``iterable`` in a tqdm bar (on stderr) when progress is enabled."""
    show = progress_enabled() if enabled is None else enabled
    if not show:
        yield from iterable
        return
    yield from tqdm(iterable, desc=desc, total=total, unit=unit, dynamic_ncols=True, leave=False)


def progress_bar(
    *, desc: str, total: int | None, unit: str = "it", enabled: bool | None = None, unit_scale: bool = False
) -> tqdm:
    """A manual tqdm bar (call ``update``/``close``); disabled when progress is off.

    ``unit_scale`` shows counts with k/M/G prefixes (bytes: ``unit="B"``, in steps of 1024).
    """
    show = progress_enabled() if enabled is None else enabled
    return tqdm(
        desc=desc,
        total=total,
        unit=unit,
        unit_scale=unit_scale,
        unit_divisor=1024 if unit_scale and unit == "B" else 1000,
        disable=not show,
        dynamic_ncols=True,
        leave=False,
    )
