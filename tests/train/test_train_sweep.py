"""``evirank train --sweep``: the grid, the table, the best run, resume after an interruption, no mixing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from train_helpers import toy_collection, toy_examples

from evirank.cli import main
from evirank.errors import UsageError
from evirank.train import write_examples
from evirank.train.sweep import SWEEP_JSON, plan_sweep, sweep_axes
from evirank.train.trainer import TRAIN_JSON

pytest.importorskip("torch")

QUICK = ["--epochs", "1", "--batch-size", "8", "--max-length", "16", "--save-every", "1"]


@pytest.fixture()
def pairs(tmp_path: Path) -> Path:
    return write_examples(toy_examples(n_queries=8, per_query=12), tmp_path / "pairs.jsonl")


def command(model: Path, pairs: Path, out: Path, *lrs: str) -> list[str]:
    return [
        "-q",
        "train",
        "--model",
        str(model),
        "--output",
        str(out),
        "--pairs",
        str(pairs),
        *QUICK,
        "--sweep-lr",
        *lrs,
    ]


def test_the_grid_is_the_product_of_the_axes_in_a_fixed_order() -> None:
    axes = sweep_axes({"negatives": ["given", "run:mined.txt"], "epochs": [1, 2], "lr": [1e-3, 5e-3]})
    assert list(axes) == ["lr", "epochs", "negatives"]
    names = [p.name for p in plan_sweep(axes)]
    assert (
        len(names) == 8
        and names[0] == "01-lr0.001-epochs1-neg-given"
        and names[-1] == "08-lr0.005-epochs2-neg1"
    )
    assert plan_sweep(axes)[-1].negatives == "run:mined.txt" and plan_sweep(axes)[0].negatives is None
    for bad, message in (
        ({"speed": [1]}, "unknown sweep axes"),
        ({"lr": None}, "at least one axis"),
        ({"lr": [0.0]}, "must be positive"),
        ({"epochs": [1, 1]}, "given twice"),
        ({"negatives": ["model:x"]}, "run:FILE"),
    ):
        with pytest.raises(UsageError, match=message):
            sweep_axes(bad)


def test_a_sweep_writes_the_table_and_names_the_best_run_by_the_validation_measure(
    tiny_encoder: Path, pairs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    assert main(command(tiny_encoder, pairs, out, "1e-4", "5e-3")) == 0
    printed = capsys.readouterr().out
    record = json.loads((out / SWEEP_JSON).read_text())
    runs = record["runs"]
    assert list(runs) == ["01-lr0.0001", "02-lr0.005"] and record["measure"] == "AP"
    scores = {name: run["best"]["AP"] for name, run in runs.items()}
    assert record["best"] == max(scores, key=lambda n: scores[n])
    assert f"Best by validation AP: {record['best']}" in printed
    assert printed == (out / "sweep.md").read_text()
    tsv = (out / "sweep.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["run", "lr", "steps", "best step", "AP", "nDCG@10", "val loss", "minutes"]
    assert len(tsv) == 3 and all(cell for line in tsv for cell in line.split("\t"))  # no empty cell
    validation = set()
    for name in runs:
        meta = json.loads((out / "runs" / name / TRAIN_JSON).read_text())
        assert meta["config"]["learning_rate"] == runs[name]["values"]["lr"]
        assert meta["best"]["AP"] == pytest.approx(scores[name])
        validation.add(tuple(meta["data"]["provenance"]["validation_split"]["validation_qids"]))
    assert len(validation) == 1  # every run validated on the same held-out queries


def test_an_interrupted_sweep_skips_finished_runs_and_resumes_the_unfinished_one_exactly(
    tiny_encoder: Path, pairs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evirank.train import trainer

    reference = tmp_path / "reference"
    assert main(command(tiny_encoder, pairs, reference, "1e-3", "5e-3")) == 0
    out = tmp_path / "sweep"
    real = trainer.train_model

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        folder = Path(args[2])

        def stop(step: int) -> None:
            if folder.name.startswith("02") and step == 2:
                raise KeyboardInterrupt

        return real(*args, **kwargs, step_callback=stop)

    monkeypatch.setattr(trainer, "train_model", interrupted)
    assert main(command(tiny_encoder, pairs, out, "1e-3", "5e-3")) == 130
    assert (out / "runs" / "01-lr0.001" / TRAIN_JSON).is_file()
    assert not (out / "runs" / "02-lr0.005" / TRAIN_JSON).exists()
    assert (out / "runs" / "02-lr0.005" / "checkpoint" / "last").is_dir()
    first = (out / "runs" / "01-lr0.001" / TRAIN_JSON).stat().st_mtime_ns
    steps: list[tuple[str, int]] = []

    called: list[str] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        name = Path(args[2]).name
        called.append(name)
        return real(*args, **kwargs, step_callback=lambda step: steps.append((name, step)))

    monkeypatch.setattr(trainer, "train_model", watched)
    assert main(command(tiny_encoder, pairs, out, "1e-3", "5e-3")) == 0
    assert (out / "runs" / "01-lr0.001" / TRAIN_JSON).stat().st_mtime_ns == first  # not trained again
    assert steps[0] == ("02-lr0.005", 3)  # resumed after the checkpoint of step 2
    assert {name for name, _ in steps} == {"02-lr0.005"}
    assert called == ["02-lr0.005"]  # a finished run is read back, its data not even prepared
    for name in ("01-lr0.001", "02-lr0.005"):
        got = (out / "runs" / name / "model.safetensors").read_bytes()
        assert got == (reference / "runs" / name / "model.safetensors").read_bytes(), name
    assert (
        json.loads((out / SWEEP_JSON).read_text())["best"]
        == json.loads((reference / SWEEP_JSON).read_text())["best"]
    )


def test_another_sweep_is_not_mixed_into_an_existing_folder_without_overwrite(
    tiny_encoder: Path, pairs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "sweep"
    assert main(command(tiny_encoder, pairs, out, "5e-3")) == 0
    before = (out / SWEEP_JSON).read_text()
    assert main(command(tiny_encoder, pairs, out, "5e-3", "1e-3")) == 2
    assert "holds another sweep (differing: axes)" in caplog.text
    assert (out / SWEEP_JSON).read_text() == before
    assert main([*command(tiny_encoder, pairs, out, "5e-3"), "--max-length", "24"]) == 2
    assert "differing: config, flags" in caplog.text
    assert main([*command(tiny_encoder, pairs, out, "5e-3", "1e-3"), "--overwrite"]) == 0
    assert list(json.loads((out / SWEEP_JSON).read_text())["runs"]) == ["01-lr0.005", "02-lr0.001"]
    model = tmp_path / "model"
    model.mkdir()
    (model / "notes.txt").write_text("mine")
    assert main([*command(tiny_encoder, pairs, model, "5e-3"), "--overwrite"]) == 2
    assert (model / "notes.txt").read_text() == "mine"


def test_a_sweep_over_the_negatives_source_mines_for_training_and_validates_alike(
    tiny_encoder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = toy_collection(tmp_path)
    out = tmp_path / "sweep"
    documents = [str(files[k]) for k in ("topics", "qrels", "given", "corpus")]
    args = ["-q", "train", "--model", str(tiny_encoder), "--output", str(out), "--documents", *documents]
    args += [*QUICK, "--negatives-per-query", "3", "--loss", "listwise", "--batch-size", "2"]
    args += ["--sweep-group", "2", "4", "--sweep-negatives", "given", f"run:{files['mined']}"]
    assert main(args) == 0
    assert "neg1" in capsys.readouterr().out
    record = json.loads((out / SWEEP_JSON).read_text())
    assert len(record["runs"]) == 4
    metas = {name: json.loads((out / "runs" / name / TRAIN_JSON).read_text()) for name in record["runs"]}
    given = metas["01-group2-neg-given"]["data"]
    mined = metas["02-group2-neg1"]["data"]
    assert "hard_negatives" not in given["provenance"]["train_sources"][0]
    chosen = mined["provenance"]["train_sources"][0]["hard_negatives"]["negatives_by_query"]
    assert all(docs == [f"q{q}-d9", f"q{q}-d8", f"q{q}-d7"] for q, docs in chosen.items())
    assert given["validation"] == mined["validation"]  # the same validation examples
    assert metas["04-group4-neg1"]["config"]["group_size"] == 4


def test_a_sweep_without_validation_or_with_two_negatives_settings_is_refused(
    tiny_encoder: Path, pairs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "sweep"
    assert main([*command(tiny_encoder, pairs, out, "5e-3"), "--validation-fraction", "0"]) == 2
    assert "compares its runs on validation queries" in caplog.text
    both = [*command(tiny_encoder, pairs, out, "5e-3"), "--hard-negatives", "run:x.txt"]
    assert main([*both, "--sweep-negatives", "given", "run:y.txt"]) == 2
    assert "either by --hard-negatives or by --sweep-negatives" in caplog.text
    assert main([*command(tiny_encoder, pairs, out, "5e-3"), "--negative-skip", "2"]) == 2
    assert "apply to --hard-negatives" in caplog.text
    assert not out.exists()


def test_mining_options_apply_to_the_mined_points_of_a_negatives_axis(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    files = toy_collection(tmp_path)
    out = tmp_path / "sweep"
    documents = [str(files[k]) for k in ("topics", "qrels", "given", "corpus")]
    args = ["-q", "train", "--model", str(tiny_encoder), "--output", str(out), "--documents", *documents]
    args += [*QUICK, "--negatives-per-query", "2", "--negative-skip", "1", "--max-steps", "1"]
    assert main([*args, "--sweep-negatives", "given", f"run:{files['mined']}"]) == 0
    meta = json.loads((out / "runs" / "02-neg1" / TRAIN_JSON).read_text())
    chosen = meta["data"]["provenance"]["train_sources"][0]["hard_negatives"]["negatives_by_query"]
    assert chosen["1"] == ["q1-d8", "q1-d7"]  # d9 skipped
    assert main([*args, "--sweep-negatives", "given", f"run:{tmp_path / 'nothing.txt'}", "--overwrite"]) == 2
    assert (out / SWEEP_JSON).is_file()  # refused before the folder was replaced
