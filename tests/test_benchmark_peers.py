"""benchmarks/peers.py refuses, before any model loads, what it could not finish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _peers(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "benchmarks/peers.py", "--device", "cpu", "--work", str(tmp_path / "w"), *args]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


def test_a_calibrated_peer_over_given_pairs_needs_a_calibration_set(tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "text": "t"}) + "\n")
    done = _peers(tmp_path, "--pairs-from", str(pairs), "--configs", "st-openvino-int8")
    assert done.returncode == 2
    assert "give --calibration-from JSONL too" in done.stderr


def test_calibration_from_goes_with_given_pairs(tmp_path: Path) -> None:
    done = _peers(tmp_path, "--calibration-from", "x.jsonl")
    assert done.returncode == 2
    assert "--calibration-from goes with --pairs-from" in done.stderr
    assert not (tmp_path / "w").exists()
