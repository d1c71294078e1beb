"""Training runs in ``evirank report``: logs read back, bad lines named, the section and its plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.errors import InputFormatError
from evirank.report import ReportConfig, ReportError, build_report
from evirank.report.training import auto_window, read_training_log, training_summary


def write_log(folder: Path, losses: list[float], *, validations: dict[int, float] | None = None) -> Path:
    """A model folder holding only ``train-log.jsonl``: a step record per loss, validations after."""
    folder.mkdir(parents=True)
    lines = []
    for step, loss in enumerate(losses, start=1):
        lines.append(
            {"event": "step", "step": step, "epoch": 0, "loss": loss, "lr": 1e-5, "elapsed_s": 2.0 * step}
        )
        if validations and step in validations:
            lines.append(
                {
                    "event": "validation",
                    "step": step,
                    "epoch": 0,
                    "val_loss": 0.4,
                    "nDCG@10": validations[step],
                }
            )
    (folder / "train-log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return folder


def test_a_log_is_read_back_with_its_validations_and_summed_up(tmp_path: Path) -> None:
    folder = write_log(tmp_path / "m", [4.0, 3.0, 2.0, 1.0], validations={2: 0.5, 4: 0.7})
    log = read_training_log(folder)
    assert list(log.steps["step"]) == [1, 2, 3, 4] and not log.complete
    assert list(log.validations["nDCG@10"]) == [0.5, 0.7]
    summary = training_summary(log, window=2)
    assert summary["first_loss"] == 3.5 and summary["last_loss"] == 1.5
    assert (summary["steps"], summary["seconds"]) == (4, 8.0)
    assert (summary["measure"], summary["best"], summary["best_step"]) == ("nDCG@10", 0.7, 4)


def test_a_repeated_step_keeps_its_last_record(tmp_path: Path) -> None:
    folder = write_log(tmp_path / "m", [4.0, 3.0])
    with (folder / "train-log.jsonl").open("a", encoding="utf-8") as log:
        log.write(
            json.dumps({"event": "step", "step": 2, "epoch": 0, "loss": 9.0, "lr": 0, "elapsed_s": 5}) + "\n"
        )
    steps = read_training_log(folder).steps
    assert list(steps["step"]) == [1, 2] and list(steps["loss"]) == [4.0, 9.0]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"event": "step", "step": 3', "malformed JSON"),
        ("[1, 2]", "expected a JSON object, found a list"),
        ('{"event": "epoch", "step": 3}', '"step" or "validation"'),
        ('{"event": "step", "step": 3, "epoch": 0, "loss": "x", "lr": 0, "elapsed_s": 1}', '"loss"'),
    ],
)
def test_a_bad_line_is_named_with_its_file_and_line(tmp_path: Path, line: str, expected: str) -> None:
    folder = write_log(tmp_path / "m", [1.0, 0.5])
    with (folder / "train-log.jsonl").open("a", encoding="utf-8") as log:
        log.write(line + "\n")
    with pytest.raises(InputFormatError, match=r"train-log\.jsonl:3: ") as caught:
        read_training_log(folder)
    assert expected in str(caught.value)


def test_a_folder_without_a_log_or_without_steps_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no training log"):
        read_training_log(tmp_path / "empty")
    (tmp_path / "empty" / "train-log.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match="at least one step record"):
        read_training_log(tmp_path / "empty")


def test_the_moving_mean_spans_a_fiftieth_of_a_run() -> None:
    assert [auto_window(n) for n in (1, 30, 324, 1000)] == [1, 1, 6, 20]


def test_a_report_of_training_runs_alone_has_their_table_and_loss_curves(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    a = write_log(tmp_path / "a", [1.0 - i / 200 for i in range(100)])
    b = write_log(tmp_path / "b", [9.0 - i / 50 for i in range(60)], validations={30: 0.61})
    report = build_report(ReportConfig(training=(("crop", a), ("tsdae", b)), loss_window=10))
    assert (
        report.images["training-loss.png"][:4] == report.images["training-validation.png"][:4] == b"\x89PNG"
    )
    assert "## Effectiveness" not in report.markdown
    rows = [
        line
        for line in report.markdown.splitlines()
        if line.startswith("| crop") or line.startswith("| tsdae")
    ]
    assert rows[0].startswith("| crop (unfinished) | 100 | 200 | 0.9775 | 0.5275 |")
    assert "nDCG@10 0.6100 | 30 |" in rows[1]
    assert report.record["training"]["tsdae"]["best_step"] == 30


def test_the_cli_reports_training_runs_without_qrels_and_refuses_half_a_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    folder = write_log(tmp_path / "m", [1.0, 0.8, 0.7])
    out = tmp_path / "report"
    assert main(["-q", "report", "--training", f"crop={folder}", "--no-plots", "--output", str(out)]) == 0
    assert "| crop (unfinished) | 3 |" in capsys.readouterr().out
    assert json.loads((out / "report.json").read_text())["training"]["crop"]["steps"] == 3
    refused = {
        "--run and --qrels go together": ["--run", "r.txt", "--training", f"crop={folder}"],
        "or --training": [],
        "expected NAME=MODEL_DIR": ["--training", str(folder)],
        "several have the same name": ["--training", f"a={folder}", "--training", f"a={folder}"],
    }
    for message, flags in refused.items():
        caplog.clear()
        assert main(["-q", "report", *flags, "--output", str(tmp_path / "refused")]) == 2
        assert message in caplog.text
        assert not (tmp_path / "refused").exists()


def test_a_config_needs_something_to_report() -> None:
    with pytest.raises(ReportError, match="nothing to report"):
        ReportConfig()
    with pytest.raises(ReportError, match="need qrels"):
        ReportConfig(runs=(("bm25", "bm25.txt"),))


def test_the_commands_print_no_loss_and_warn_when_the_log_is_unreadable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from evirank.cli._training import loss_at_both_ends

    assert loss_at_both_ends(tmp_path) is None
    assert "no loss to show" in caplog.text and "no training log" in caplog.text
    assert loss_at_both_ends(write_log(tmp_path / "m", [2.0, 1.0])) == {
        "first": 2.0,
        "last": 1.0,
        "steps_averaged": 1,
    }
