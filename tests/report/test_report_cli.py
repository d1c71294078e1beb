"""``evirank report`` end to end: table with marks, plots embedded in the HTML, length and pruned sections."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from report_cases import write_inputs

from evirank.cli import main


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("report")
    paths = write_inputs(folder)
    tuned = folder / "birch-cv"
    assert (
        main(
            [
                "-q",
                "tune",
                "--passages",
                str(paths["passages"]),
                "--run",
                str(paths["run"]),
                "--qrels",
                str(paths["qrels"]),
                "--aggregate",
                "birch:2",
                "--grid",
                "alpha=0:1:0.25",
                "w2=0,0.5",
                "--k-folds",
                "3",
                "--seed",
                "1",
                "--output",
                str(tuned),
            ]
        )
        == 0
    )
    return {**paths, "tuned": tuned, "folder": folder}


def test_report_with_plots_length_and_pruned_sections(tuned: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    status = main(
        [
            "-q",
            "report",
            "--qrels",
            str(tuned["qrels"]),
            "--run",
            f"bm25={tuned['run']}",
            "--run",
            f"birch={tuned['tuned']}",
            "--baseline",
            "bm25",
            "--topics",
            str(tuned["topics"]),
            "--pruned",
            f"birch={tuned['tuned']}",
            "--metrics",
            "AP",
            "P@5",
            "nDCG@10",
            "--title",
            "Tiny report",
            "--output",
            str(out),
        ]
    )
    assert status == 0
    files = sorted(p.name for p in out.iterdir())
    assert files == ["by-length.png", "diff-birch-AP.png", "report.html", "report.json", "report.md"]
    markdown = (out / "report.md").read_text()
    assert markdown.startswith("# Tiny report")
    assert "| run | queries | AP | P@5 | nDCG@10 |" in markdown
    assert re.search(r"\| birch \| 24 \| 0\.\d{4}†? \|", markdown)
    assert (
        "better on" in markdown
        and "![Per-query difference in AP: birch vs bm25](diff-birch-AP.png)" in markdown
    )
    # Query lengths 1..4 words ("the" is a stopword), 6 queries each.
    assert "| run | 1 (6) | 2 (6) | 3 (6) | 4 (6) |" in markdown
    assert "| birch (pruned) | 24 |" in markdown

    html = (out / "report.html").read_text()
    assert "<table>" in html and "<th>run</th>" in html and "Tiny report" in html
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(embedded) == 2
    assert base64.b64decode(embedded[0]) == (out / "diff-birch-AP.png").read_bytes()
    assert 'src="diff-' not in html  # nothing left to fetch: the page is self-contained

    png = (out / "diff-birch-AP.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000

    record = json.loads((out / "report.json").read_text())
    means = {r["name"]: r["means"]["AP"] for r in record["comparison"]["runs"]}
    pruned = {r["name"]: r["means"]["AP"] for r in record["pruned"]["comparison"]["runs"]}
    # The evidence passages hold the query words: without them Birch loses what it had gained.
    assert means["birch"] > means["bm25"]
    assert pruned["birch (pruned)"] < means["birch"]
    assert record["pruned"]["systems"][0]["dropped"] == pytest.approx(2 / 40)  # 1 passage in 2 of 10 docs
    assert record["by_length"]["counts"] == {"1": 6, "2": 6, "3": 6, "4": 6}


def test_report_without_plots_or_optional_inputs(tuned: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "plain"
    assert (
        main(
            [
                "-q",
                "report",
                "--qrels",
                str(tuned["qrels"]),
                "--run",
                f"bm25={tuned['run']}",
                "--run",
                f"birch={tuned['tuned']}",
                "--baseline",
                "bm25",
                "--no-plots",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "report.md"]
    markdown = (out / "report.md").read_text()
    assert "give --topics" in markdown and "--pruned NAME=DIR" in markdown
    assert "<img" not in (out / "report.html").read_text()


def test_report_errors_are_one_line(
    tuned: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = [
        "report",
        "--qrels",
        str(tuned["qrels"]),
        "--run",
        f"bm25={tuned['run']}",
        "--output",
        str(tmp_path / "x"),
    ]
    assert main([*base, "--baseline", "nope"]) == 2
    assert "not one of the runs" in caplog.text
    assert main([*base, "--baseline", "bm25", "--pruned", "birch"]) == 2
    assert "NAME=TUNE_DIR" in caplog.text
    assert main([*base, "--topics", str(tuned["topics"]), "--length-buckets", "3,1"]) == 2
    assert "overlap or are out of order" in caplog.text
    assert not (tmp_path / "x").exists()
