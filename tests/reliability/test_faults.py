"""Fault injection: SIGKILL, Ctrl-C and SIGTERM at random moments of index, rerank, train and tune.

Each case runs the command once without interruption (the reference), then again in a separate
process that is interrupted after a random delay within the reference's duration, and then the
same command once more. Checked every time:

* nothing partial is ever left at an output path: after the interruption an output is either
  absent or complete and equal to the reference's (a training folder may hold its checkpoint,
  but never the ``evirank-train.json`` that marks a finished model);
* no process survives: every process the command started (a JVM, workers) is gone;
* after the rerun, the outputs equal the reference's.

The moments come from ``random.Random(EVIRANK_FAULT_SEED)`` (default 0): set the variable to
explore other moments; a failure message names the seed and the delay. The full matrix is
marked ``slow``; the cheapest case (tune) runs in the default suite, and
``tests/lucene/test_lucene_orphans.py`` kills an indexing run in it too.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import evirank
from process_tree import alive, descendants

SRC = Path(evirank.__file__).resolve().parents[1]
SEED = int(os.environ.get("EVIRANK_FAULT_SEED", "0"))


# --- processes ---------------------------------------------------------------------------------


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


def evirank_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "evirank", "-q", *args]


def run_to_end(args: list[str], timeout: float = 300) -> float:
    started = time.monotonic()
    done = subprocess.run(evirank_cmd(*args), env=env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return time.monotonic() - started


def interrupt(args: list[str], delay: float, how: str) -> tuple[int, set[int]]:
    """Start the command, interrupt it after ``delay`` s; return its exit status and every process it started.

    ``how`` is ``"kill"`` (SIGKILL to evirank alone, as ``kill -9 PID``), ``"ctrl-c"`` (SIGINT to
    its process group, as a terminal's Ctrl-C) or ``"term"`` (SIGTERM to evirank alone, as ``kill PID``
    or a batch system's time limit).
    """
    proc = subprocess.Popen(
        evirank_cmd(*args),
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    seen: set[int] = set()
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and proc.poll() is None:
        seen |= descendants(proc.pid)
        time.sleep(0.02)
    seen |= descendants(proc.pid)
    if proc.poll() is None:
        if how == "kill":
            proc.send_signal(signal.SIGKILL)
        elif how == "term":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
    try:
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return code, seen


def assert_none_survive(pids: set[int], what: str) -> None:
    deadline = time.monotonic() + 15
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = sorted(p for p in pids if alive(p))
    assert not survivors, f"{what}: processes left behind: {survivors}"


# --- the commands ------------------------------------------------------------------------------


@dataclass
class Case:
    """One command: its arguments, its rerun's, how to read its outputs, and what may be left."""

    name: str
    args: list[str]
    rerun: list[str]
    paths: list[Path]  # its outputs: never partial
    outputs: Callable[[], object]
    complete: Callable[[], bool]
    partial_ok: Callable[[], bool] = lambda: False
    state: tuple[Path, ...] = ()  # what it keeps to resume (removed before each fresh attempt)


def _files(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(skip)
    }


def tune_case(tmp: Path) -> Case:
    from evirank.tune.synthetic import write_case

    data = write_case("random", tmp / "case", seed=1)
    out = tmp / "tuned"
    args = ["tune", "--passages", str(data / "passages.parquet"), "--run", str(data / "run.txt")]
    args += ["--qrels", str(data / "qrels.txt"), "--aggregate", "birch:2", "--k-folds", "3", "--seed", "1"]
    args += ["--output", str(out)]

    def outputs() -> object:
        record = json.loads((out / "tune.json").read_text())
        return _files(out, skip=("tune.json",)), record["choices"], record["evaluation"]

    return Case("tune", args, [*args, "--overwrite"], [out], outputs, lambda: (out / "tune.json").exists())


def rerank_case(tmp: Path, model: Path, docs_per_query: int = 60, queries: int = 8) -> Case:
    data = tmp / "data"
    data.mkdir()
    words = ["cat", "mat", "dog", "query", "evidence", "vaccine", "virus", "rank", "document", "model"]
    rng = random.Random(1)
    docs = []
    for i in range(docs_per_query):
        sentences = [" ".join(rng.choices(words, k=6)).capitalize() + "." for _ in range(4)]
        docs.append(json.dumps({"_id": f"d{i}", "title": rng.choice(words), "text": " ".join(sentences)}))
    (data / "corpus.jsonl").write_text("\n".join(docs) + "\n")
    (data / "topics.tsv").write_text(
        "".join(f"{q}\t{' '.join(rng.choices(words, k=3))}\n" for q in range(1, queries + 1))
    )
    (data / "run.txt").write_text(
        "".join(
            f"{q} Q0 d{i} {i + 1} {100 - i - q} bm25\n"
            for q in range(1, queries + 1)
            for i in range(docs_per_query)
        )
    )
    out = tmp / "reranked.txt"
    args = ["rerank", "--run", str(data / "run.txt"), "--topics", str(data / "topics.tsv")]
    args += ["--corpus", str(data / "corpus.jsonl"), "--scorer", "cross", "--model", str(model)]
    args += [
        "--device",
        "cpu",
        "--depth",
        str(min(40, docs_per_query)),
        "--batch-tokens",
        "256",
        "--output",
        str(out),
    ]
    args += ["--save-passages", str(tmp / "passages.parquet")]

    def outputs() -> object:
        record = json.loads(out.with_name(out.name + ".json").read_text())
        assert record["run"] == str(out)
        import pandas as pd

        passages = pd.read_parquet(tmp / "passages.parquet")
        return out.read_bytes(), passages.drop(columns=["score"]).to_dict("list")

    def complete() -> bool:
        found = [
            out.exists(),
            out.with_name(out.name + ".json").exists(),
            (tmp / "passages.parquet").exists(),
        ]
        assert all(found) or not any(found), f"outputs of one rerank are partly there: {found}"
        return all(found)

    paths = [out, out.with_name(out.name + ".json"), tmp / "passages.parquet"]
    store = out.with_name(out.name + ".scores.sqlite")
    state = (store, Path(f"{store}-wal"), Path(f"{store}-shm"))
    return Case("rerank", args, [*args, "--overwrite"], paths, outputs, complete, state=state)


def train_case(tmp: Path, model: Path) -> Case:
    from evirank.train import write_examples
    from evirank.train.examples import make_examples

    rng = random.Random(0)
    fruits = ["apple", "banana", "cherry", "grape", "lemon", "mango"]
    rows = []
    for q in range(8):
        for i in range(8):
            label = i % 2
            text = " ".join([*rng.sample(fruits, 2), "good" if label else "bad", "fruit"])
            rows.append((str(q + 1), fruits[q % 6], f"d{q}-{i}", 0, text, label, "toy"))
    pairs = write_examples(make_examples(rows), tmp / "pairs.jsonl")
    out = tmp / "model"
    args = ["train", "--model", str(model), "--output", str(out), "--pairs", str(pairs)]
    args += ["--epochs", "3", "--batch-size", "8", "--lr", "5e-3", "--max-length", "16", "--save-every", "2"]

    def outputs() -> object:
        record = json.loads((out / "evirank-train.json").read_text())
        return (out / "model.safetensors").read_bytes(), record["steps"], record["history"]

    def partial_ok() -> bool:  # an interrupted training keeps its checkpoint to resume from
        return out.is_dir() and not (out / "evirank-train.json").exists()

    def complete() -> bool:
        return (out / "evirank-train.json").exists()

    return Case("train", args, [*args, "--resume"], [out], outputs, complete, partial_ok)


def index_case(tmp: Path) -> Case:
    corpus = tmp / "corpus.jsonl"
    with corpus.open("w") as handle:
        for i in range(30_000):
            handle.write(json.dumps({"_id": f"d{i}", "text": f"word{i % 997} other words here " * 8}) + "\n")
    out = tmp / "idx"
    args = ["index", "--corpus", str(corpus), "--index", str(out)]

    def outputs() -> object:
        info = json.loads((out / "evirank-index.json").read_text())
        names = sorted(p.name for p in out.iterdir() if p.name != "write.lock")
        return info["documents"], info["config"], bool([n for n in names if n.startswith("segments_")])

    def complete() -> bool:
        return (out / "evirank-index.json").exists()

    return Case("index", args, [*args, "--overwrite"], [out], outputs, complete)


def check_case(case: Case, tmp: Path, delays: list[tuple[float, str]]) -> None:
    """The reference run, then for each (fraction of its duration, how): interrupt, check, rerun, compare."""
    duration = run_to_end(case.args)
    reference = case.outputs()
    for fraction, how in delays:
        # the outputs of the reference go, so the interrupted run writes them from scratch
        for path in [*case.paths, *case.state]:
            _remove(path)
        delay = fraction * duration
        where = f"{case.name}: {how} after {delay:.2f} s (EVIRANK_FAULT_SEED={SEED})"
        code, started = interrupt(case.args, delay, how)
        assert_none_survive(started, where)
        if case.complete():
            assert case.outputs() == reference, f"{where}: the finished outputs differ"
        else:
            assert code != 0, where
            _assert_nothing_partial(case, where)
        run_to_end(case.rerun)
        assert case.outputs() == reference, f"{where}: the rerun's outputs differ from an uninterrupted run's"
        leftovers = [p.name for p in tmp.rglob(".tmp-*")]
        assert not leftovers, f"{where}: temporaries left after the rerun: {leftovers}"


def _assert_nothing_partial(case: Case, where: str) -> None:
    for path in case.paths:
        if path.exists() and not case.partial_ok():
            raise AssertionError(
                f"{where}: {path} exists after the interruption but the command did not finish"
            )


def _remove(path: Path) -> None:
    import shutil

    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def _moments(n: int, hows: tuple[str, ...] = ("kill", "ctrl-c", "term")) -> list[tuple[float, str]]:
    rng = random.Random(SEED)
    return [(rng.uniform(0.05, 1.0), hows[i % len(hows)]) for i in range(n)]


LINUX = sys.platform.startswith("linux") and Path("/proc/self/stat").exists()
pytestmark = pytest.mark.skipif(not LINUX, reason="process checks read Linux /proc")


# --- the default suite: one cheap interruption ------------------------------------------------


def test_tune_killed_at_a_random_moment_leaves_nothing_and_reruns_to_the_same_result(tmp_path: Path) -> None:
    check_case(tune_case(tmp_path), tmp_path, _moments(1, ("kill",)))


@pytest.mark.slow  # three processes that import torch: about a minute on a busy machine
def test_rerank_interrupted_at_a_random_moment_resumes_to_the_same_run(
    tmp_path: Path, tiny_cross_encoder_path: Path
) -> None:
    pytest.importorskip("torch")
    case = rerank_case(tmp_path, tiny_cross_encoder_path, docs_per_query=12, queries=3)
    check_case(case, tmp_path, _moments(1, ("ctrl-c",)))


# --- the full matrix ----------------------------------------------------------------------------


@pytest.mark.slow
def test_tune_survives_kills_ctrl_c_and_sigterm(tmp_path: Path) -> None:
    check_case(tune_case(tmp_path), tmp_path, _moments(6))


@pytest.mark.slow
def test_rerank_survives_kills_ctrl_c_and_sigterm(tmp_path: Path, tiny_cross_encoder_path: Path) -> None:
    pytest.importorskip("torch")
    check_case(rerank_case(tmp_path, tiny_cross_encoder_path), tmp_path, _moments(6))


@pytest.mark.slow
def test_train_survives_kills_ctrl_c_and_sigterm(tmp_path: Path, tiny_cross_encoder_path: Path) -> None:
    pytest.importorskip("torch")
    check_case(train_case(tmp_path, tiny_cross_encoder_path), tmp_path, _moments(6))


@pytest.mark.slow
@pytest.mark.lucene
def test_index_survives_kills_ctrl_c_and_sigterm(tmp_path: Path) -> None:
    pytest.importorskip("pyserini")
    check_case(index_case(tmp_path), tmp_path, _moments(6))
