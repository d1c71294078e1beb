"""Fixtures of the evaluation tests: a trec_eval binary to compare with (skip when absent)."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest


def find_trec_eval(tmp_dir: Path) -> Path | None:
    """A trec_eval binary: $TREC_EVAL, one on PATH, or the one Anserini's jar ships (pyserini)."""
    explicit = os.environ.get("TREC_EVAL")
    if explicit and Path(explicit).is_file():
        return Path(explicit)
    on_path = shutil.which("trec_eval")
    if on_path:
        return Path(on_path)
    try:
        import importlib.resources

        jars = importlib.resources.files("pyserini.resources.jars")
        jar = next(p for p in jars.iterdir() if str(p).endswith(".jar"))
    except (ImportError, StopIteration, ModuleNotFoundError, FileNotFoundError):
        return None
    target = tmp_dir / "trec_eval"
    try:
        with zipfile.ZipFile(str(jar)) as archive:
            target.write_bytes(archive.read("trec_eval/trec_eval-linux-amd64"))
    except (KeyError, OSError, zipfile.BadZipFile):
        return None
    target.chmod(0o755)
    return target


TrecEval = Callable[[list[str], Path, Path], dict[tuple[str, str], float]]


@pytest.fixture(scope="session")
def trec_eval(tmp_path_factory: pytest.TempPathFactory) -> TrecEval:
    """Runs the trec_eval binary with ``-q``: (args, qrels, run) -> {(qid or "all", measure): value}."""
    binary = find_trec_eval(tmp_path_factory.mktemp("trec_eval"))
    if binary is None:
        pytest.skip("no trec_eval binary (set $TREC_EVAL, or install pyserini)")
    try:
        subprocess.run([str(binary), "-v"], capture_output=True, check=False, timeout=30)
    except OSError:
        pytest.skip("the trec_eval binary does not run on this platform")

    def run(args: list[str], qrels: Path, run_file: Path) -> dict[tuple[str, str], float]:
        out = subprocess.run(
            [str(binary), "-q", *args, str(qrels), str(run_file)], capture_output=True, text=True, check=True
        ).stdout
        result = {}
        for line in out.splitlines():
            name, qid, value = line.split()
            result[(qid, name)] = float(value)
        return result

    return run
