"""Parameter grids: ``alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1`` or explicit lists ``alpha=0.3,0.5``.

A grid is the product of named axes, in the order given, the last axis varying fastest (the
order of ``itertools.product``). That order is also the tie rule of the search: among settings
with the same mean metric, the first in grid order wins, i.e. the smallest value of the first
axis (alpha, when it is written first), then of the second, and so on.

An axis is written ``NAME=START:STOP:STEP`` (both ends included; values are
``START + i * STEP`` rounded to 10 decimals, so ``0:1:0.1`` gives exactly 0.0, 0.1, ..., 1.0),
``NAME=V1,V2,...`` (an explicit list, kept in the order written) or ``NAME=V`` (a fixed value).

Example:
    >>> grid = parse_grid("alpha=0:1:0.5 w2=0.3,0.1")
    >>> grid.names, len(grid)
    (('alpha', 'w2'), 6)
    >>> grid.settings[:3].tolist()
    [[0.0, 0.3], [0.0, 0.1], [0.5, 0.3]]
    >>> grid.setting(2)
    {'alpha': 0.5, 'w2': 0.3}
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from evirank.aggregate.evidence import SIMPLEX_TOLERANCE
from evirank.tune.errors import GridError

_AXIS = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<values>\S+)$")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^(?P<start>{_NUMBER}):(?P<stop>{_NUMBER}):(?P<step>{_NUMBER})$")
#: Grids larger than this are refused (a typo such as a step of 0.0001 would exhaust memory).
MAX_SETTINGS = 10_000_000


@dataclass(frozen=True)
class Grid:
    """Named axes of values; their product is the list of settings.

    Attributes:
        names: axis names in order.
        axes: each axis's values, in order.
        simplex: axes whose values must sum to at most 1 in a setting (the weights of several
            scorers' evidence, :mod:`evirank.aggregate.evidence`); settings beyond are left out.

    Example:
        >>> len(Grid(("bi", "ce2"), ((0.0, 0.5, 1.0), (0.0, 0.5, 1.0)), simplex=("bi", "ce2")))
        6
    """

    names: tuple[str, ...]
    axes: tuple[tuple[float, ...], ...]
    simplex: tuple[str, ...] = ()

    def __len__(self) -> int:
        if self.simplex:
            return len(self.settings)
        return math.prod(len(a) for a in self.axes) if self.axes else 1

    @property
    def settings(self) -> np.ndarray:
        """``[G, P]``: every setting, in grid order (last axis fastest)."""
        if not self.axes:
            return np.zeros((1, 0))
        mesh = np.meshgrid(*[np.asarray(a, dtype=np.float64) for a in self.axes], indexing="ij")
        settings = np.stack([m.reshape(-1) for m in mesh], axis=1)
        if self.simplex:
            columns = [self.names.index(n) for n in self.simplex if n in self.names]
            keep = settings[:, columns].sum(axis=1) <= 1 + SIMPLEX_TOLERANCE
            settings = settings[keep]
        return settings

    def setting(self, index: int) -> dict[str, float]:
        """Setting number ``index`` as ``{name: value}``."""
        row = self.settings[index]
        return {name: float(v) for name, v in zip(self.names, row, strict=True)}

    def spec(self) -> list[str]:
        """The grid written back as ``NAME=V1,V2,...`` tokens (parses to the same grid)."""
        return [
            f"{n}=" + ",".join(_fmt(v) for v in axis) for n, axis in zip(self.names, self.axes, strict=True)
        ]

    def to_record(self) -> dict[str, list[float]]:
        """``{name: [values]}`` for JSON records."""
        return {n: list(a) for n, a in zip(self.names, self.axes, strict=True)}

    def with_defaults(self, defaults: Mapping[str, float]) -> Grid:
        """This grid plus a fixed axis for each name of ``defaults`` it does not set."""
        extra = [(n, (float(v),)) for n, v in defaults.items() if n not in self.names]
        return Grid(
            self.names + tuple(n for n, _ in extra), self.axes + tuple(a for _, a in extra), self.simplex
        )

    def on_simplex(self, names: Iterable[str]) -> Grid:
        """This grid keeping only the settings where the axes ``names`` sum to at most 1.

        Raises:
            GridError: a value outside [0, 1], or no setting left.

        Example:
            >>> parse_grid("alpha=0,1 bi=0:1:0.5 ce2=0:1:0.5").on_simplex(["bi", "ce2"]).settings[:3].tolist()
            [[0.0, 0.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 1.0]]
        """
        grid = Grid(self.names, self.axes, tuple(names))
        for name in grid.simplex:
            if name in self.names:
                bad = [v for v in self.axes[self.names.index(name)] if not 0.0 <= v <= 1.0]
                if bad:
                    raise GridError(
                        f"grid axis {name}: a scorer's weight must be in [0, 1], found {bad[0]:g}"
                    )
        if not len(grid):
            raise GridError(
                f"no setting of the grid has weights of {', '.join(grid.simplex)} summing to 1 or less"
            )
        return grid


def parse_grid(spec: str | Iterable[str]) -> Grid:
    """Parse axes written as ``NAME=START:STOP:STEP``, ``NAME=V1,V2`` or ``NAME=V``.

    Args:
        spec: one string of whitespace-separated axes, or several strings (as argparse gives).

    Raises:
        GridError: bad syntax, an empty or inverted range, a step <= 0, a repeated name or value,
            non-finite numbers, or more than :data:`MAX_SETTINGS` settings.

    Example:
        >>> parse_grid(["alpha=0.3,0.5", "w2=1"]).axes
        ((0.3, 0.5), (1.0,))
    """
    tokens = spec.split() if isinstance(spec, str) else [t for part in spec for t in str(part).split()]
    if not tokens:
        raise GridError("empty grid: expected axes such as alpha=0:1:0.1 w2=0:1:0.1")
    names: list[str] = []
    axes: list[tuple[float, ...]] = []
    for token in tokens:
        match = _AXIS.match(token)
        if match is None:
            raise GridError(
                f"grid axis {token!r}: expected NAME=START:STOP:STEP, NAME=V1,V2,... or NAME=V "
                "(e.g. alpha=0:1:0.1)"
            )
        name, values = match["name"], match["values"]
        if name in names:
            raise GridError(f"grid axis {name!r} is given twice")
        names.append(name)
        axes.append(_parse_values(name, values))
    grid = Grid(tuple(names), tuple(axes))
    if len(grid) > MAX_SETTINGS:
        raise GridError(f"the grid has {len(grid):,} settings, more than the limit of {MAX_SETTINGS:,}")
    return grid


def _parse_values(name: str, text: str) -> tuple[float, ...]:
    if ":" in text:
        match = _RANGE.match(text)
        if match is None:
            raise GridError(f"grid axis {name}={text}: expected START:STOP:STEP with three numbers")
        start, stop, step = (float(match[k]) for k in ("start", "stop", "step"))
        if not all(math.isfinite(v) for v in (start, stop, step)):
            raise GridError(f"grid axis {name}={text}: numbers must be finite")
        if step <= 0:
            raise GridError(f"grid axis {name}={text}: the step must be > 0, found {step}")
        if stop < start:
            raise GridError(f"grid axis {name}={text}: STOP ({stop}) is below START ({start})")
        count = math.floor((stop - start) / step + 1e-9) + 1
        if count > MAX_SETTINGS:
            raise GridError(f"grid axis {name}={text}: {count:,} values is too many")
        return tuple(round(start + i * step, 10) for i in range(count))
    values: list[float] = []
    for part in text.split(","):
        if not re.fullmatch(_NUMBER, part):
            raise GridError(f"grid axis {name}={text}: {part!r} is not a number")
        value = float(part)
        if not math.isfinite(value):
            raise GridError(f"grid axis {name}={text}: numbers must be finite")
        if value in values:
            raise GridError(f"grid axis {name}={text}: the value {part} is repeated")
        values.append(value)
    return tuple(values)


def _fmt(value: float) -> str:
    return repr(float(value))
