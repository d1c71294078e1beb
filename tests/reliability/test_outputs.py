"""--overwrite replaces only what a command writes; outputs are checked first; dead runs' temporaries go."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.errors import OutputExistsError, OutputNotWritableError, UnsafeOverwriteError
from evirank.outputs import atomic_output, atomic_outputs, check_output, clean_stale, pid_alive

QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 1\n"
RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n2 Q0 d3 1 3.0 r\n"


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("precious")
    return folder


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_overwrite_never_replaces_a_folder_by_a_file(tmp_path: Path) -> None:
    folder = _user_folder(tmp_path)
    with (
        pytest.raises(UnsafeOverwriteError, match="replaces only a file, found a folder"),
        atomic_output(folder, overwrite=True) as tmp,
    ):
        tmp.write_text("a run")
    assert (folder / "notes.txt").read_text() == "precious"


def test_overwrite_replaces_a_folder_only_when_it_holds_the_marker(tmp_path: Path) -> None:
    folder = _user_folder(tmp_path)
    with pytest.raises(UnsafeOverwriteError, match=r"without evirank-index\.json"):
        check_output(folder, True, marker="evirank-index.json")
    (folder / "evirank-index.json").write_text("{}")
    with atomic_output(folder, True, marker="evirank-index.json") as tmp:
        tmp.mkdir()
        (tmp / "evirank-index.json").write_text('{"new": 1}')
    assert sorted(p.name for p in folder.iterdir()) == ["evirank-index.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary left beside it


def test_a_folder_output_never_replaces_a_file_and_an_empty_folder_may_go(tmp_path: Path) -> None:
    file = tmp_path / "f"
    file.write_text("x")
    with pytest.raises(UnsafeOverwriteError, match="found a file"):
        check_output(file, True, marker="tune.json")
    (tmp_path / "empty").mkdir()
    assert check_output(tmp_path / "empty", True, marker="tune.json").name == "empty"
    with pytest.raises(OutputExistsError):
        check_output(tmp_path / "empty", False, marker="tune.json")


def test_an_output_under_a_file_or_on_a_read_only_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputNotWritableError, match="is not a folder"):
        check_output(tmp_path / "afile" / "run.txt")
    # /sys refuses new files even to root on Linux: a real unwritable folder for any user
    read_only = Path("/sys/evirank-reliability-test")
    try:
        read_only.mkdir()
    except OSError:
        pass
    else:  # pragma: no cover - a system where /sys is writable
        read_only.rmdir()
        pytest.skip("/sys is writable here")
    with pytest.raises(OutputNotWritableError):
        check_output(read_only / "run.txt")


def test_outputs_of_one_command_succeed_or_fail_together(tmp_path: Path) -> None:
    run, record = tmp_path / "run.txt", tmp_path / "run.txt.json"
    with pytest.raises(RuntimeError), atomic_outputs((run, None), (record, None)) as (a, _b):
        a.write_text("the run")
        raise RuntimeError("the record failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f".tmp-run.txt-{_dead_pid()}"
    dead.mkdir()
    live = tmp_path / f".tmp-run.txt-{os.getpid()}"
    live.write_text("in progress")
    other = tmp_path / ".tmp-other.txt-1"
    other.write_text("not ours")
    assert clean_stale(tmp_path / "run.txt") == [dead]
    assert live.exists() and other.exists() and not dead.exists()
    assert not pid_alive(_dead_pid()) and pid_alive(os.getpid())


@pytest.mark.parametrize("flag", ["--output"])
def test_evaluate_overwrite_refuses_a_user_folder(tmp_path: Path, flag: str) -> None:
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    folder = _user_folder(tmp_path)
    args = ["-q", "evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt")]
    assert main([*args, flag, str(folder), "--overwrite"]) == 2
    assert (folder / "notes.txt").read_text() == "precious"
    out = tmp_path / "eval.md"
    out.write_text("old")
    assert main([*args, flag, str(out), "--overwrite"]) == 0
    assert "nDCG" in out.read_text()


def test_search_and_index_overwrite_refuse_a_user_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _user_folder(tmp_path)
    (tmp_path / "c.jsonl").write_text('{"_id": "a", "text": "cats"}\n')
    (tmp_path / "t.tsv").write_text("1\tcats\n")
    assert (
        main(["-q", "index", "--corpus", str(tmp_path / "c.jsonl"), "--index", str(folder), "--overwrite"])
        == 2
    )
    index = tmp_path / "idx"
    index.mkdir()
    (index / "segments_1").write_text("")  # enough for the check; the search never starts
    args = ["-q", "search", "--index", str(index), "--topics", str(tmp_path / "t.tsv")]
    assert main([*args, "--output", str(folder), "--overwrite"]) == 2
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "precious"


def test_tune_and_train_overwrite_refuse_a_user_folder(tmp_path: Path) -> None:
    from evirank.train.trainer import check_train_output, prepare_output

    folder = _user_folder(tmp_path)
    (tmp_path / "q.txt").write_text(QRELS)
    tune = ["-q", "tune", "--qrels", str(tmp_path / "q.txt"), "--passages", str(tmp_path / "p.parquet")]
    assert main([*tune, "--output", str(folder), "--overwrite"]) == 2
    with pytest.raises(UnsafeOverwriteError):
        check_train_output(folder, overwrite=True, resume=False)
    with pytest.raises(UnsafeOverwriteError):
        prepare_output(folder, overwrite=False, resume=True)  # used to delete the folder
    assert (folder / "notes.txt").read_text() == "precious"
    model = tmp_path / "model"
    model.mkdir()
    (model / "evirank-train.json").write_text(json.dumps({"status": "complete"}))
    assert prepare_output(model, overwrite=True, resume=False) == "fresh"
    assert not model.exists()
