"""``evirank train`` and ``evirank distill`` end to end on pair files with a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_helpers import toy_examples

from evirank.cli import main
from evirank.train import write_examples
from evirank.train.trainer import TRAIN_JSON

pytest.importorskip("torch")


@pytest.fixture()
def pairs(tmp_path: Path) -> Path:
    return write_examples(toy_examples(n_queries=8), tmp_path / "pairs.jsonl")


QUICK = ["--epochs", "2", "--batch-size", "8", "--lr", "5e-3", "--max-length", "16"]


def test_train_cli_writes_a_model_with_provenance_and_refuses_to_overwrite(
    tiny_encoder: Path,
    pairs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    out = tmp_path / "model"
    args = ["-q", "train", "--model", str(tiny_encoder), "--output", str(out), "--pairs", str(pairs), *QUICK]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (
        summary["best_step"] is not None and summary["steps"] == 2 * 6
    )  # 6 of 8 queries: 48 rows, 6 batches
    losses = [r["loss"] for r in map(json.loads, (out / "train-log.jsonl").open()) if r["event"] == "step"]
    assert summary["loss"] == {"first": losses[0], "last": losses[-1], "steps_averaged": 1}  # 12 steps
    meta = json.loads((out / TRAIN_JSON).read_text())
    split = meta["data"]["provenance"]["validation_split"]
    assert split["by"] == "query" and len(split["validation_qids"]) == 2
    assert meta["data"]["provenance"]["train_sources"][0]["files"]["pairs"] == str(pairs)
    assert main(args) == 2  # exists: the CLI reports the error and exits with 2
    assert "--overwrite" in caplog.text


def test_distill_cli_prints_teacher_and_student_side_by_side(
    tiny_encoder_4: Path, pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "student"
    code = main(
        [
            "distill",
            "--teacher",
            str(tiny_encoder_4),
            "--output",
            str(out),
            "--layers",
            "0",
            "3",
            "--pairs",
            str(pairs),
            "--speed-pairs",
            "16",
            *QUICK,
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["student"]["teacher_layers"] == [0, 3] and report["teacher"]["layers"] == 4
    assert report["speedup"] > 0 and "AP" in report["teacher"]
    assert set(report["loss"]) == {"first", "last", "steps_averaged"}


def test_train_cli_without_data_explains_what_to_give(
    tiny_encoder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert main(["-q", "train", "--model", str(tiny_encoder), "--output", str(tmp_path / "m")]) == 2
    assert caplog.messages[-1].startswith("give training data")


def test_train_cli_listwise_flags_reach_the_config(
    tiny_encoder: Path, pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "listwise"
    args = ["-q", "train", "--model", str(tiny_encoder), "--output", str(out), "--pairs", str(pairs), *QUICK]
    args += ["--loss", "listwise", "--group-size", "3", "--negatives-from", "source", "--batch-size", "2"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 2 * 12  # 6 training queries x 4 positives: 24 groups, 12 steps of 2; 2 epochs
    meta = json.loads((out / TRAIN_JSON).read_text())
    assert (meta["config"]["loss"], meta["config"]["group_size"], meta["config"]["negatives_from"]) == (
        "listwise",
        3,
        "source",
    )
    assert meta["objective"] == "listwise-softmax"


def test_train_cli_kind_bi_trains_a_bi_encoder_and_refuses_a_cross_encoder_loss(
    tiny_encoder: Path,
    pairs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    base = ["-q", "train", "--model", str(tiny_encoder), "--pairs", str(pairs), *QUICK]
    out = tmp_path / "bi"
    assert main([*base, "--output", str(out), "--scorer", "bi", "--group-size", "2", "--scale", "10"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] == 2 * 3  # 6 training queries x 4 positives: 24 items, 3 batches of 8; 2 epochs
    meta = json.loads((out / TRAIN_JSON).read_text())
    assert (meta["kind"], meta["objective"], meta["score"]) == ("bi-encoder", "contrastive-infonce", "cosine")
    assert (meta["config"]["encoder"], meta["config"]["scale"]) == ("bi", 10.0)
    assert (out / "modules.json").is_file()

    for extra, message in (
        (["--scorer", "bi", "--loss", "listwise"], "bi-encoder trains with --loss contrastive"),
        (["--loss", "contrastive"], "add --scorer bi"),
        (["--scorer", "bi", "--init", str(tiny_encoder)], "a bi-encoder starts from --model"),
    ):
        args = [a for a in base if a not in ("--model", str(tiny_encoder))] if "--init" in extra else base
        assert main([*args, "--output", str(tmp_path / "refused"), *extra]) == 2
        assert message in caplog.messages[-1]
        assert not (tmp_path / "refused").exists()
