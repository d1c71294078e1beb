"""``evirank evaluate`` end to end on tiny files: output shapes, naming, baseline, safe output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.cli.evaluate import parse_run_spec, run_name

QIDS = [str(q) for q in range(1, 11)]


def write_run(path: Path, position: dict[str, int]) -> Path:
    lines = []
    for q in QIDS:
        for rank in range(1, 6):
            docno = "rel" if rank == position[q] else f"n{rank}"
            lines.append(f"{q} Q0 {docno} {rank} {10 - rank}.5 test\n")
    path.write_text("".join(lines))
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 rel 1\n{q} 0 n1 0\n" for q in QIDS) + "11 0 rel 1\n")
    return {
        "qrels": qrels,
        "base": write_run(tmp_path / "run.base.txt", {q: 2 + int(q) % 3 for q in QIDS}),
        "better": write_run(tmp_path / "run.better.txt", {q: 1 + int(q) % 2 for q in QIDS}),
    }


def test_markdown_table_with_baseline_and_significance_mark(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "evaluate",
            "--qrels",
            str(files["qrels"]),
            "--run",
            str(files["base"]),
            "--run",
            f"new={files['better']}",
            "--baseline",
            "run.base",
            "--metrics",
            "RR",
            "MAP",
        ]
    )
    assert status == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "| run | queries | RR | AP |"
    assert lines[2].startswith("| run.base (baseline) | 10 |")
    assert lines[3].startswith("| new | 10 |") and "†" in lines[3]
    assert "Bonferroni correction over all 2 comparisons" in out


def test_default_measures_and_missing_queries_policy(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", "--qrels", str(files["qrels"]), "--run", str(files["base"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| run | queries | AP | P@20 | nDCG@20 | nDCG@10 | RR@10 | R@1000 |"
    assert lines[2].startswith("| run.base | 10 |")  # query 11 has qrels but no results: skipped
    assert (
        main(["evaluate", "--qrels", str(files["qrels"]), "--run", str(files["base"]), "--missing", "zero"])
        == 0
    )
    assert capsys.readouterr().out.splitlines()[2].startswith("| run.base | 11 |")


def test_json_output_to_a_file_with_per_query_values(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    args = [
        "evaluate",
        "--qrels",
        str(files["qrels"]),
        "--run",
        f"base={files['base']}",
        "--run",
        f"better={files['better']}",
        "--baseline",
        "base",
        "--metrics",
        "RR@10",
        "P@1",
        "--correction",
        "holm",
        "--per-query",
        "--format",
        "json",
        "--output",
        str(out),
    ]
    assert main(args) == 0
    record = json.loads(out.read_text())
    assert record["measures"] == ["RR@10", "P@1"]
    assert record["settings"]["correction"] == "holm"
    assert [(r["name"], Path(r["path"]).name) for r in record["runs"]] == [
        ("base", "run.base.txt"),
        ("better", "run.better.txt"),
    ]
    assert record["runs"][1]["means"]["P@1"] == pytest.approx(0.5)
    assert len(record["significance"]) == 2
    assert len(record["per_query"]) == 2 * 10 * 2
    assert record["qrels"] == str(files["qrels"])
    sidecar = json.loads(out.with_name("report.json.json").read_text())  # what made it, with what
    assert sidecar["command"] == "evaluate" and sidecar["config"]["correction"] == "holm"
    assert sidecar["runs"]["better"] == str(files["better"]) and "ir_measures" in sidecar["versions"]
    # an existing output is never replaced without --overwrite
    out.write_text("keep me")
    assert main(args) == 2
    assert out.read_text() == "keep me"
    assert main([*args, "--overwrite"]) == 0
    assert json.loads(out.read_text())["baseline"] == "base"


def test_baseline_given_as_a_new_path_is_added_first(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["evaluate", "--qrels", str(files["qrels"]), "--run", str(files["better"])]
    assert main([*args, "--baseline", str(files["base"]), "--metrics", "RR"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| run.base (baseline) |") and lines[3].startswith("| run.better |")


def test_errors_exit_2_with_a_message(files: dict[str, Path], caplog: pytest.LogCaptureFixture) -> None:
    base = ["evaluate", "--qrels", str(files["qrels"])]
    assert main([*base, "--run", str(files["base"]), "--metrics", "NDCG10"]) == 2
    assert "unknown measure 'NDCG10'" in caplog.text
    assert main([*base, "--run", str(files["base"]), "--run", f"run.base={files['better']}"]) == 2
    assert "several runs are named run.base" in caplog.text
    assert main([*base, "--run", str(files["base"].with_name("absent.txt"))]) == 2
    assert "absent.txt" in caplog.text


def test_run_names_from_files_and_name_equals_path() -> None:
    assert run_name(Path("runs/run.dl19.bm25.txt")) == "run.dl19.bm25"
    assert run_name(Path("a/b/run.x.txt.gz")) == "run.x"
    assert parse_run_spec("bm25=runs/a.txt") == ("bm25", Path("runs/a.txt"))
    assert parse_run_spec("runs/a.txt") == ("a", Path("runs/a.txt"))


def test_usage_and_input_errors_print_one_line_in_argparse_format(files: dict[str, Path]) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    base = [sys.executable, "-m", "evirank", "evaluate", "--qrels", str(files["qrels"])]
    done = subprocess.run(
        [*base, "--run", str(files["base"]), "--metrics", "NDCG10"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("evirank evaluate: error: ")  # no time stamp
    assert "unknown measure 'NDCG10'" in done.stderr
    done = subprocess.run([*base, "--colour"], capture_output=True, text=True, env=env)
    assert done.returncode == 2 and done.stderr.splitlines()[-1].startswith("evirank evaluate: error: ")


def test_significance_level_flag(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["evaluate", "--qrels", str(files["qrels"]), "--run", str(files["better"])]
    args += ["--baseline", str(files["base"]), "--format", "json"]
    assert main([*args, "--significance", "0.01"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["alpha"] == 0.01
    with pytest.raises(SystemExit):  # --alpha is the first-stage weight; evaluate does not take it
        main([*args, "--alpha", "0.02"])
    assert "unrecognized arguments: --alpha" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--significance", "5"])
    assert "expected a number between 0 and 1" in capsys.readouterr().err
    assert "--alpha" not in _help("evaluate") and "--significance LEVEL" in _help("report")


def _help(command: str) -> str:
    from evirank.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    return str(sub.format_help())
