"""Lucene's failures reach the user as one line naming the index, never as Java stack frames; long
queries are searched; Ctrl-C of a command whose JVM runs says what a rerun does."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.errors import InputFormatError
from evirank.frames import make_topics
from evirank.lucene import Bm25

pytestmark = pytest.mark.lucene


def _error(caplog: pytest.LogCaptureFixture) -> str:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    return errors[0].getMessage()


@pytest.mark.parametrize("damage", ["checksum", "cut", "missing"])
def test_a_damaged_index_is_one_line_naming_it(
    tiny_index: Path, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    index = tmp_path / "index"
    shutil.copytree(tiny_index, index)
    segments = next(index.glob("segments_*"))
    stored = max(index.glob("*.fdt"), key=lambda p: p.stat().st_size)
    if damage == "checksum":
        data = bytearray(segments.read_bytes())
        data[len(data) // 2] ^= 0xFF
        segments.write_bytes(bytes(data))
    elif damage == "cut":
        stored.write_bytes(stored.read_bytes()[:40])
    else:
        next(index.glob("*.si")).unlink()
    with pytest.raises(
        InputFormatError, match=rf"{index}: expected a Lucene index that can be read, found \w+"
    ):
        Bm25(index, k=5)(make_topics([("1", "cats")]))
    (tmp_path / "t.tsv").write_text("1\tcats\n")
    args = ["-q", "search", "--index", str(index), "--topics", str(tmp_path / "t.tsv")]
    assert main([*args, "--output", str(tmp_path / "run.txt")]) == 2
    message = _error(caplog)
    assert "build it again with `evirank index`" in message and "\tat " not in message and "\n" not in message
    assert not (tmp_path / "run.txt").exists()


def test_a_query_of_a_hundred_thousand_characters_is_searched(tiny_index: Path) -> None:
    words = [
        "cats",
        "purr",
        "dogs",
        "bark",
        "parrots",
        "mimic",
        "speech",
        "hamsters",
        "store",
        "food",
        "goldfish",
        "grow",
    ]
    long = " ".join(
        f"{words[i % len(words)]}{i // len(words) if i >= len(words) else ''}" for i in range(14_000)
    )
    assert len(long) > 100_000
    run = Bm25(tiny_index, k=3)(make_topics([("1", long)]))
    assert len(run) == 3 and run["score"].notna().all()


def test_the_largest_depth_a_java_int_holds_is_searched(tiny_index: Path) -> None:
    run = Bm25(tiny_index, k=2**31 - 1)(make_topics([("1", "parrots")]))
    assert sorted(run["docno"]) == ["dup-a", "dup-b"]
    with pytest.raises(ValueError, match="up to 2147483647"):
        Bm25(tiny_index, k=2**31)
    with pytest.raises(ValueError, match="k1 >= 0"):
        Bm25(tiny_index, k1=float("nan"))


@pytest.mark.slow  # a process that imports torch and starts the JVM
def test_ctrl_c_while_the_jvm_runs_says_what_a_rerun_does(
    tiny_index: Path, tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    (tmp_path / "t.tsv").write_text("".join(f"{q}\tcats dogs parrots {q}\n" for q in range(1, 400)))
    command = [sys.executable, "-m", "evirank", "rerank", "--index", str(tiny_index), "--topics"]
    command += [str(tmp_path / "t.tsv"), "--model", str(tiny_cross_encoder_path), "--device", "cpu"]
    command += ["--output", str(tmp_path / "out.txt"), "--scores", str(tmp_path / "s.sqlite")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    log = tmp_path / "stderr.log"
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and "started JVM" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            time.sleep(0.1)
        time.sleep(0.5)  # the JVM is in this process now
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "interrupted; the scores computed so far are kept in the score store" in log.read_text(
        errors="replace"
    )
    assert not (tmp_path / "out.txt").exists()
