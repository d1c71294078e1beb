"""A local Ray session shared by the scale-out tests, and a small collection as files."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scale_cases import random_text


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """One local Ray with logical resources (4 CPUs, 2 GPUs that run on the CPU) for the module."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    # Ray's sockets live under its temp folder and a socket path may not exceed 107 bytes: a session
    # folder of pytest's (deeper still on an xdist worker) is too long, so Ray gets a short one of
    # its own, here and in the commands the tests start.
    short = tempfile.mkdtemp(prefix="evirank-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = short
    if not ray.is_initialized():
        from evirank.scale.engine import init_on_loopback, keeping_signal_handlers
        from evirank.scale.reaper import watch_ray_processes

        watch_ray_processes()  # nothing of this Ray outlives the test run, however it ends
        with keeping_signal_handlers():  # a JVM in this process keeps its handlers
            init_on_loopback(ray, num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
    if saved is None:
        os.environ.pop("RAY_TMPDIR", None)
    else:
        os.environ["RAY_TMPDIR"] = saved
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def small_collection(tmp_path: Path) -> dict[str, Path]:
    """Files of a small collection: corpus (JSONL), topics (TSV), a first-stage run (TREC)."""
    rng = np.random.default_rng(7)
    folder = tmp_path / "data"
    folder.mkdir()
    docs = {f"d{d}": ". ".join(random_text(rng, 3, 15) for _ in range(4)) + "." for d in range(8)}
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in docs.items())
    )
    topics = {str(q): random_text(rng, 2, 5) for q in range(1, 5)}
    (folder / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in topics.items()))
    lines = [f"{q} Q0 {d} {r} {20 - r} bm25\n" for q in topics for r, d in enumerate(docs, 1)]
    (folder / "run.txt").write_text("".join(lines))
    return {"corpus": folder / "corpus.jsonl", "topics": folder / "topics.tsv", "run": folder / "run.txt"}


@pytest.fixture
def one_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Single-process scoring with one thread, as the one-core Ray workers run it.

    Float sums in a matrix product may be grouped differently with another thread count, and the
    CPU engines split a batch into one request per thread (streams), which moves dynamic int8
    scales, so bit-for-bit comparisons give both sides the same number of threads: torch's, and
    the engines' (``EVIRANK_NUM_THREADS``, as the Ray workers set it).
    """
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("EVIRANK_NUM_THREADS", "1")
    yield
    torch.set_num_threads(before)
