"""A recipe search: one training run per point of a grid, validated alike, the best named.

Steensland's Table 4.1 compared fine-tuning recipes by hand; a sweep does it from one command.
The grid is the product of the given axes (:data:`AXES`): learning rate, epochs, group size,
batch size and the source of the negatives (``given``: the data's own runs, or a
:class:`~evirank.train.mine.NegativeSource` such as ``vectors:indexes/scifact``). Every run is
validated on the same held-out queries, and the best by the first validation measure is named.

The sweep folder::

    evirank-sweep.json   the plan (axes, what the runs share), each run's result, the best run
    sweep.md, sweep.tsv  the results table
    runs/NN-.../         one model folder per point (``evirank train``'s output)

It is resumable: running the same sweep again skips the finished runs and resumes an
unfinished one from its last checkpoint. A different sweep (other axes, data or options) is
refused in an existing folder unless ``overwrite``, which replaces the whole folder.

Example:
    >>> axes = sweep_axes({"lr": [2e-5, 4e-5], "group": [8]})
    >>> [p.name for p in plan_sweep(axes)]
    ['01-lr2e-05-group8', '02-lr4e-05-group8']
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evirank.errors import OutputExistsError, UsageError
from evirank.markdown import table
from evirank.outputs import atomic_output, check_output
from evirank.record import compact_json, plain, versions
from evirank.train.config import TrainConfig
from evirank.train.trainer import TRAIN_JSON, result_from_json

logger = logging.getLogger(__name__)

SWEEP_JSON = "evirank-sweep.json"
SWEEP_FORMAT = "evirank-sweep/1"
RUNS_DIR = "runs"
GIVEN = "given"
"""The ``negatives`` value that keeps the data's own runs (no mining)."""

AXES: dict[str, tuple[str, type]] = {
    "lr": ("learning_rate", float),
    "epochs": ("epochs", int),
    "group": ("group_size", int),
    "batch": ("batch_size", int),
    "negatives": ("negatives", str),
}
"""Sweep axis -> (:class:`TrainConfig` field, or ``negatives``; value type)."""


class SweepMismatchError(OutputExistsError):
    """The sweep folder holds another sweep: its runs are not mixed with this one's."""

    def __init__(self, path: str | os.PathLike[str], differing: Sequence[str]) -> None:
        self.path = str(path)
        self.differing = list(differing)
        FileExistsError.__init__(
            self,
            f"{self.path} holds another sweep (differing: {', '.join(differing) or 'its format'}); "
            "its runs are not mixed with this one's: pass --overwrite to replace the whole folder, "
            "or choose another output path",
        )


def sweep_axes(given: Mapping[str, Sequence[Any] | None]) -> dict[str, list[Any]]:
    """The axes of a sweep from ``{axis: values}`` (None or empty: not swept), checked, in :data:`AXES` order.

    Raises:
        UsageError: an unknown axis, no axis at all, a repeated value, a number that is not
            positive, or a negatives source that is neither ``given`` nor a valid source.

    Example:
        >>> sweep_axes({"negatives": ["given", "run:x.txt"], "epochs": [1, 2], "lr": None})
        {'epochs': [1, 2], 'negatives': ['given', 'run:x.txt']}
    """
    unknown = sorted(set(given) - set(AXES))
    if unknown:
        raise UsageError(f"unknown sweep axes {unknown}: the axes are {', '.join(AXES)}")
    axes: dict[str, list[Any]] = {}
    for name, (_, kind) in AXES.items():
        raw = given.get(name)
        if not raw:
            continue
        values: list[Any] = []
        for value in raw:
            value = kind(value)
            if kind is not str and (not math.isfinite(value) or value <= 0):
                raise UsageError(f"--sweep-{name}: {value!r} must be positive")
            if value in values:
                raise UsageError(f"--sweep-{name}: {value!r} is given twice")
            values.append(value)
        if name == "negatives":
            from evirank.train.mine import NegativeSource

            for value in values:
                if value != GIVEN:
                    NegativeSource.parse(value)  # fails early on a bad source
        axes[name] = values
    if not axes:
        raise UsageError(f"a sweep needs at least one axis ({', '.join(f'--sweep-{a}' for a in AXES)})")
    return axes


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: its folder name and its value on every axis.

    Example:
        >>> point = plan_sweep(sweep_axes({"lr": [4e-5], "negatives": ["given"]}))[0]
        >>> point.config(TrainConfig()).learning_rate, point.negatives
        (4e-05, None)
    """

    name: str
    values: dict[str, Any]

    @property
    def negatives(self) -> str | None:
        """The negatives source of this run (None: the data's own runs)."""
        value = self.values.get("negatives", GIVEN)
        return None if value == GIVEN else str(value)

    def config(self, base: TrainConfig) -> TrainConfig:
        """``base`` with this point's values."""
        fields = {AXES[a][0]: v for a, v in self.values.items() if a != "negatives"}
        return replace(base, **fields)


def _short(axis: str, value: Any, axes: Mapping[str, list[Any]]) -> str:
    if axis == "negatives":
        return "neg-given" if value == GIVEN else f"neg{axes[axis].index(value)}"
    return f"{axis}{value:g}" if isinstance(value, float) else f"{axis}{value}"


def plan_sweep(axes: Mapping[str, list[Any]]) -> list[SweepPoint]:
    """The grid's points in a fixed order (the last axis varies fastest), named ``NN-axisvalue-...``."""
    points: list[dict[str, Any]] = [{}]
    for axis, values in axes.items():
        points = [{**p, axis: v} for p in points for v in values]
    width = max(2, len(str(len(points))))
    return [
        SweepPoint(
            f"{i:0{width}d}-" + "-".join(_short(a, v, axes) for a, v in p.items()),
            p,
        )
        for i, p in enumerate(points, start=1)
    ]


def fingerprint(identity: Mapping[str, Any]) -> str:
    """SHA-256 of a sweep's identity (its axes and everything its runs share)."""
    text = json.dumps(plain(dict(identity)), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class SweepResult:
    """A finished sweep.

    Attributes:
        folder: the sweep folder.
        rows: one record per run, in plan order (values, steps, validation measures, folder).
        best: the best run's record (by ``measure``).
        measure: the validation measure that chose it.
        table: the Markdown table (also in ``sweep.md``).
    """

    folder: Path
    rows: list[dict[str, Any]]
    best: dict[str, Any]
    measure: str
    table: str


def open_sweep(folder: Path, identity: Mapping[str, Any], *, overwrite: bool) -> dict[str, Any]:
    """The sweep record to continue in ``folder``: a new one, or the one there if it is the same sweep.

    Raises:
        OutputExistsError: ``folder`` holds another sweep, or something else, and not ``overwrite``.
        UnsafeOverwriteError: ``overwrite``, but ``folder`` is not a sweep folder.
    """
    digest = fingerprint(identity)
    marker = folder / SWEEP_JSON
    if marker.is_file():
        try:
            record = json.loads(marker.read_text(encoding="utf-8"))
        except ValueError:
            record = {}
        if record.get("fingerprint") == digest and not overwrite:
            done = sum(1 for r in record.get("runs", {}).values() if r.get("complete"))
            logger.info("%s: continuing the sweep (%d runs finished)", folder, done)
            return record
        if not overwrite:
            changed = sorted(
                k
                for k in set(identity) | set(record.get("identity", {}))
                if plain(identity.get(k)) != record.get("identity", {}).get(k)
            )
            raise SweepMismatchError(folder, changed)
    check_output(folder, overwrite, marker=SWEEP_JSON)  # refuses whatever is not a sweep
    if folder.exists():
        shutil.rmtree(folder)
    return {
        "format": SWEEP_FORMAT,
        "fingerprint": digest,
        "identity": plain(dict(identity)),
        "runs": {},
    }


def _write(folder: Path, name: str, text: str) -> None:
    with atomic_output(folder / name, overwrite=True) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) >= 1e-3 or value == 0 else f"{value:g}"
    return str(value)


def _tables(rows: list[dict[str, Any]], axes: Sequence[str], measures: Sequence[str]) -> tuple[str, str]:
    header = ["run", *axes, "steps", "best step", *measures, "val loss", "minutes"]
    cells: list[list[str]] = []
    for row in rows:
        best = row.get("best") or {}
        cells.append(
            [
                row["name"],
                *(_cell(row["values"][a]) for a in axes),
                _cell(row.get("steps")),
                _cell(row.get("best_step")),
                *(_cell(best.get(m)) for m in measures),
                _cell(best.get("val_loss")),
                f"{row['wall_time_s'] / 60:.1f}" if row.get("wall_time_s") is not None else "",
            ]
        )
    markdown = table(header, cells, align="l" * (1 + len(axes)) + "r" * (len(header) - 1 - len(axes)))
    tsv = "\n".join("\t".join(c.replace("\t", " ") for c in line) for line in [header, *cells]) + "\n"
    return markdown, tsv


def run_sweep(
    folder: str | os.PathLike[str],
    axes: Mapping[str, list[Any]],
    base: TrainConfig,
    train_one: Callable[[SweepPoint, TrainConfig, Path], Any],
    *,
    identity: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> SweepResult:
    """Train every point of the grid into ``folder/runs/NAME``; write the table; name the best run.

    Args:
        folder: the sweep folder.
        axes: from :func:`sweep_axes`.
        base: the configuration the points vary.
        train_one: ``(point, config, run_folder) -> TrainResult``; it must resume an unfinished
            ``run_folder`` and return a finished one's result (``train_cross_encoder(...,
            resume=True)`` does both).
        identity: what the runs share besides ``base`` (data, options), compared on a rerun.
        overwrite: replace an existing folder that holds another sweep.

    Raises:
        OutputExistsError: ``folder`` holds another sweep and not ``overwrite``.
        UsageError: the base configuration has no validation measure to compare runs by.
    """
    out = Path(folder)
    points = plan_sweep(axes)
    if "group" in axes and base.loss != "listwise":
        raise UsageError("--sweep-group needs --loss listwise (the group size is the listwise group's)")
    base_fields = {k: v for k, v in base.to_dict().items() if k not in ("device", "eval_batch_size")}
    full_identity = {"axes": dict(axes), "config": base_fields, **(identity or {})}
    record = open_sweep(out, full_identity, overwrite=overwrite)
    record["points"] = [{"name": p.name, "values": p.values} for p in points]
    measure = base.validation_measures[0]
    record["measure"] = measure
    record["versions"] = versions()
    (out / RUNS_DIR).mkdir(parents=True, exist_ok=True)
    _write(out, SWEEP_JSON, compact_json(plain(record)) + "\n")
    for number, point in enumerate(points, start=1):
        run_folder = out / RUNS_DIR / point.name
        previous = record["runs"].get(point.name, {})
        state = "finished" if previous.get("complete") else "resumed" if run_folder.exists() else "new"
        logger.info("sweep run %d/%d %s (%s)", number, len(points), point.name, state)
        if state == "finished" and (run_folder / TRAIN_JSON).is_file():
            result = result_from_json(run_folder)  # no data to prepare for a finished run
        else:
            result = train_one(point, point.config(base), run_folder)
        if result.best is None:
            raise UsageError("a sweep compares runs by validation: give validation data or a fraction")
        record["runs"][point.name] = {
            "name": point.name,
            "values": point.values,
            "folder": str(run_folder),
            "steps": result.steps,
            "best_step": result.best_step,
            "best": result.best,
            "stopped_early": result.stopped_early,
            "wall_time_s": round(float(result.wall_time_s), 1),
            "complete": True,
        }
        _write(out, SWEEP_JSON, compact_json(plain(record)) + "\n")
    rows = [record["runs"][p.name] for p in points]
    scored = [r for r in rows if r["best"].get(measure) is not None and not math.isnan(r["best"][measure])]
    if not scored:
        raise UsageError(f"no run has a validation {measure}: no validation query has a relevant example")
    best = max(scored, key=lambda r: r["best"][measure])  # ties: the first in plan order
    measures = list(base.validation_measures)
    markdown, tsv = _tables(rows, list(axes), measures)
    values = ", ".join(f"{a}={_cell(v)}" for a, v in best["values"].items())
    summary = (
        f"{markdown}\n\nBest by validation {measure}: {best['name']} ({values}), "
        f"{measure} {best['best'][measure]:.4f}; model: {best['folder']}\n"
    )
    record["best"] = best["name"]
    record["complete"] = True
    _write(out, "sweep.md", summary)
    _write(out, "sweep.tsv", tsv)
    _write(out, SWEEP_JSON, compact_json(plain(record)) + "\n")
    return SweepResult(out, rows, best, measure, summary)
