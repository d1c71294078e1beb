"""Training runs in a report: each model folder's ``train-log.jsonl`` as a table and loss curves.

Every ``evirank train``, ``distill`` and ``adapt`` run logs one record per optimizer step (its
loss, learning rate, seconds so far) and one per validation; :func:`read_training_log` reads them
back and :func:`training_summary` sums a log up in a row (the report draws the losses with
:func:`evirank.report.plots.loss_curve_plot`).

Example:
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> lines = [{"event": "step", "step": s, "epoch": 0, "loss": 1.0 / s, "lr": 2e-5, "elapsed_s": s}
    ...          for s in range(1, 5)]
    >>> _ = (folder / "train-log.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in lines))
    >>> log = read_training_log(folder)
    >>> list(log.steps["step"]), round(training_summary(log, window=2)["last_loss"], 3)
    ([1, 2, 3, 4], 0.292)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank import markdown
from evirank.errors import InputFormatError
from evirank.io.files import iter_lines, json_error, shorten, type_name
from evirank.train.trainer import TRAIN_JSON, TRAIN_LOG

#: The columns of a log's step table, in order.
STEP_COLUMNS = ("step", "epoch", "loss", "lr", "elapsed_s")


@dataclass(frozen=True)
class TrainingLog:
    """One run's log: a row per optimizer step, a row per validation, and where it was read.

    Attributes:
        source: the ``train-log.jsonl`` file.
        steps: columns :data:`STEP_COLUMNS`, one row per step, ascending.
        validations: ``step``, ``epoch``, ``val_loss`` and the measures validated, one row per
            validation (empty when the run had none).
        complete: whether the folder holds the record of a finished run (``evirank-train.json``).
    """

    source: Path
    steps: pd.DataFrame
    validations: pd.DataFrame
    complete: bool


def training_log_file(path: str | Path) -> Path:
    """The ``train-log.jsonl`` of a model folder, or ``path`` itself when it is that file."""
    candidate = Path(path)
    if candidate.is_dir():
        candidate = candidate / TRAIN_LOG
    if not candidate.is_file():
        raise FileNotFoundError(
            f"{candidate}: no training log (expected a model folder written by evirank train, "
            f"distill or adapt, or its {TRAIN_LOG})"
        )
    return candidate


def read_training_log(path: str | Path) -> TrainingLog:
    """Read a model folder's (or a file's) training log; a line that is not a step or validation
    record is an error naming its file and line."""
    file = training_log_file(path)
    steps: list[dict[str, Any]] = []
    validations: list[dict[str, Any]] = []
    for line_no, line in iter_lines(file):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InputFormatError(file, line_no, "one JSON record a line", json_error(exc)) from None
        if not isinstance(record, dict):
            raise InputFormatError(file, line_no, "a JSON object", type_name(record))
        event = record.get("event")
        if event == "step":
            steps.append({name: _number(record, name, file, line_no) for name in STEP_COLUMNS})
        elif event == "validation":
            validations.append(
                {k: v for k, v in record.items() if k != "event" and isinstance(v, int | float)}
            )
        else:
            raise InputFormatError(file, line_no, 'an "event" of "step" or "validation"', shorten(event))
    if not steps:
        raise InputFormatError(file, None, "at least one step record", "none (was the run started?)")
    table = pd.DataFrame(steps, columns=list(STEP_COLUMNS)).drop_duplicates("step", keep="last")
    table = table.sort_values("step", kind="stable").reset_index(drop=True)
    table[["step", "epoch"]] = table[["step", "epoch"]].astype(np.int64)
    return TrainingLog(
        source=file,
        steps=table,
        validations=pd.DataFrame(validations),
        complete=(file.parent / TRAIN_JSON).is_file(),
    )


def _number(record: dict[str, Any], name: str, file: Path, line_no: int) -> float:
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputFormatError(file, line_no, f'a number in "{name}" of a step record', type_name(value))
    return value


def auto_window(steps: int) -> int:
    """The moving mean's width for a run of ``steps`` steps: about a fiftieth of it, at least 1.

    Example:
        >>> auto_window(324), auto_window(20)
        (6, 1)
    """
    return max(1, round(steps / 50))


def training_summary(log: TrainingLog, *, window: int | None = None) -> dict[str, Any]:
    """One row about a run: steps, seconds, the mean loss of its first and last
    ``window`` steps, and the best validation (measure and step) when it was validated."""
    steps = log.steps
    width = window or auto_window(len(steps))
    losses = steps["loss"]
    summary: dict[str, Any] = {
        "steps": int(steps["step"].iloc[-1]),
        "seconds": float(steps["elapsed_s"].iloc[-1]),
        "window": width,
        "first_loss": float(losses.iloc[:width].mean()),
        "last_loss": float(losses.iloc[-width:].mean()),
        "complete": log.complete,
    }
    measures = [c for c in log.validations.columns if c not in ("step", "epoch", "val_loss")]
    if measures:
        measure = measures[0]
        best = log.validations.loc[log.validations[measure].idxmax()]
        summary.update(measure=measure, best=float(best[measure]), best_step=int(best["step"]))
    return summary


def training_markdown(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """The summaries as a Markdown table, a run a row."""
    validated = any("measure" in s for s in summaries.values())
    head = ["run", "steps", "seconds", "loss, first steps", "loss, last steps"]
    if validated:
        head += ["best validation", "at step"]
    rows = []
    for name, s in summaries.items():
        cells: list[object] = [
            name + ("" if s["complete"] else " (unfinished)"),
            f"{s['steps']:,}",
            f"{s['seconds']:,.0f}",
            f"{s['first_loss']:.4f}",
            f"{s['last_loss']:.4f}",
        ]
        if validated:
            cells += [f"{s['measure']} {s['best']:.4f}", s["best_step"]] if "measure" in s else [None, None]
        rows.append(cells)
    return markdown.table(head, rows)
