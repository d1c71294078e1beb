"""Scoring on a local Ray (logical resources, tiny random models) gives the single-process results.

One Ray session serves the module (starting Ray costs seconds); the driver-kill test runs its
own Ray in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scale_cases import random_passages

from evirank.cli import main
from evirank.config import Runtime
from evirank.scale import RayOptions
from evirank.score import BiEncoder, CrossEncoder, open_store


def scorer_pair(cls: type, model: Path, chunk_items: int, **kwargs: Any) -> tuple[Any, Any]:
    """The same scorer twice: single-process, and on Ray with two one-GPU workers (``kwargs``: the
    runtime's other settings)."""
    plain = cls(model, Runtime(device="cpu", **kwargs))
    on_ray = cls(
        model,
        Runtime(device="cpu", ray=RayOptions(workers=2, gpus_per_worker=1, cpus_per_worker=1), **kwargs),
    )
    for scorer in (plain, on_ray):
        scorer.chunk_items = chunk_items  # several blocks, so both workers get some
    return plain, on_ray


# onnx-int8 and onnx on Ray with -m slow: each backend is checked in one process by tests/score
@pytest.mark.parametrize(
    "backend",
    [
        "torch",
        pytest.param("onnx-int8", marks=pytest.mark.slow),
        pytest.param("onnx", marks=pytest.mark.slow),
    ],
)
def test_a_cross_encoder_on_ray_gives_the_single_process_scores_bit_for_bit(
    ray_session: Any, one_thread: None, tiny_cross_encoder_path: Path, tmp_path: Path, backend: str
) -> None:
    passages = random_passages(3, 6, 3)
    plain, on_ray = scorer_pair(
        CrossEncoder, tiny_cross_encoder_path, 8, backend=backend, store=tmp_path / "shards"
    )
    expected = plain.transform(passages)["score"].to_numpy()
    store = open_store(tmp_path / "ray-shards")
    on_ray.store = store
    got = on_ray.transform(passages)["score"].to_numpy()
    np.testing.assert_array_equal(got, expected)
    assert on_ray.stats_.computed == on_ray.stats_.distinct == len(passages)
    assert store.count_scores(on_ray.fingerprint) == len(passages)
    assert len(store.shards(f"scores/{on_ray.fingerprint}")) == -(-len(passages) // 8)  # one per block


def test_a_bi_encoder_on_ray_gives_the_single_process_scores_and_stores_its_vectors(
    ray_session: Any, one_thread: None, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    passages = random_passages(2, 5, 3, seed=3)
    plain, on_ray = scorer_pair(BiEncoder, tiny_bi_encoder_path, 8)
    expected = plain.transform(passages)["score"].to_numpy()
    store = open_store(tmp_path / "shards")
    on_ray.store = store
    got = on_ray.transform(passages)["score"].to_numpy()
    np.testing.assert_array_equal(got, expected)
    texts = set(passages["query"]) | set(passages["text"])
    assert on_ray.stats_.computed == len(texts)
    assert len(store.embedding_table(on_ray.fingerprint)) == len(texts)


def _map_workers(ray: Any) -> list[int]:
    """Process ids of this session's Ray Data map actors (children of its raylet)."""
    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process.pid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == raylet and "MapWorker" in command:
            found.append(int(entry.name))
    return found


@pytest.mark.slow  # a Ray actor killed and restarted: 45 s on 2 cores
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the actor processes in /proc")
def test_a_worker_killed_mid_job_is_restarted_and_nothing_is_lost_or_counted_twice(
    ray_session: Any, one_thread: None, tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    passages = random_passages(4, 40, 4, seed=5)
    plain, on_ray = scorer_pair(CrossEncoder, tiny_cross_encoder_path, 4)
    expected = plain.transform(passages)["score"].to_numpy()
    location = tmp_path / "shards"
    on_ray.store = location
    killed: list[tuple[int, int]] = []  # (pid, shards written when it was killed)
    done = threading.Event()

    def kill_one_worker() -> None:
        while not done.is_set():
            folder = location / "scores"
            shards = list(folder.rglob("*.parquet")) if folder.exists() else []
            workers = _map_workers(ray_session)
            if shards and workers:
                os.kill(workers[0], signal.SIGKILL)
                killed.append((workers[0], len(shards)))
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    try:
        got = on_ray.transform(passages)["score"].to_numpy()
    finally:
        done.set()
        killer.join(timeout=5)
    blocks = -(-len(passages) // 4)
    assert killed and killed[0][1] < blocks, "the worker was not killed while the job ran"
    np.testing.assert_array_equal(got, expected)
    assert on_ray.stats_.computed == len(passages)
    store = open_store(location, readonly=True)
    assert store.count_scores(on_ray.fingerprint) == len(passages)
    assert len(store.shards(f"scores/{on_ray.fingerprint}")) == blocks


def rerank_args(files: dict[str, Path], model: Path, out: Path, *extra: str) -> list[str]:
    return [
        "-q",
        "rerank",
        "--run",
        str(files["run"]),
        "--corpus",
        str(files["corpus"]),
        "--topics",
        str(files["topics"]),
        "--model",
        str(model),
        "--device",
        "cpu",
        "--depth",
        "6",
        "--output",
        str(out),
        *extra,
    ]


def test_rerank_with_ray_writes_the_same_run_as_without(
    ray_session: Any,
    one_thread: None,
    small_collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
) -> None:
    plain, on_ray = tmp_path / "plain.txt", tmp_path / "ray.txt"
    common = ["--query-block", "2"]
    assert main(rerank_args(small_collection, tiny_cross_encoder_path, plain, *common)) == 0
    scores = tmp_path / "shared-scores"
    ray_flags = ["--ray", "local", "--ray-workers", "2", "--scores", str(scores)]
    assert main(rerank_args(small_collection, tiny_cross_encoder_path, on_ray, *common, *ray_flags)) == 0
    assert on_ray.read_bytes() == plain.read_bytes()
    record = json.loads(on_ray.with_name("ray.txt.json").read_text())
    config = record["config"]
    ray = config["pipeline"]["ray"]
    assert ray["address"] == "local" and ray["workers"] == 2 and config["query_block"] == 2
    assert record["counts"]["scorer_cached"] == 0
    assert record["counts"]["scorer_computed"] == record["counts"]["scorer_distinct"] > 0
    # tune and explain read the shared store
    assert main(["explain", "--scores", str(scores), "--qid", "1", "--docno", "d0", "--format", "tsv"]) == 0


DRIVER = """
import sys
from evirank.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # two Ray clusters started one after the other: nearly two minutes on 2 cores
def test_a_killed_driver_rerun_scores_only_what_is_missing_and_writes_the_same_run(
    one_thread: None, small_collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    reference = tmp_path / "reference.txt"
    assert main(rerank_args(small_collection, tiny_cross_encoder_path, reference, "--query-block", "1")) == 0
    scores = tmp_path / "scores"
    out = tmp_path / "ray.txt"
    args = rerank_args(small_collection, tiny_cross_encoder_path, out, "--query-block", "1")
    args += ["--ray", "local", "--ray-workers", "1", "--scores", str(scores)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *args], env=env, start_new_session=True, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            folder = scores / "scores"
            if folder.exists() and any(folder.rglob("*.parquet")):
                break
            time.sleep(0.05)
        assert driver.poll() is None, "the driver ended before it could be killed"
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and the Ray it started
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert not out.exists()
    stored = open_store(scores, readonly=True)
    done = sum(stored.count_scores(f) for f in stored.fingerprints()["fingerprint"])
    assert done > 0

    rerun = subprocess.run(
        [sys.executable, "-c", DRIVER, *args], env=env, start_new_session=True, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    record = json.loads(out.with_name("ray.txt.json").read_text())
    counts = record["counts"]
    assert counts["scorer_cached"] >= done > 0
    assert counts["scorer_computed"] == counts["scorer_distinct"] - counts["scorer_cached"] > 0
    assert out.read_bytes() == reference.read_bytes()
    assert pd.read_csv(out, sep=" ", header=None).shape[0] == 4 * 8


@pytest.mark.slow  # the default suite checks the same through the command line (test_embed_with_ray_...)
def test_a_vector_folder_built_on_ray_equals_the_single_process_build(
    ray_session: Any, one_thread: None, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    vectors = pytest.importorskip("evirank.vectors")
    from evirank.frames import Document
    from evirank.scale.embed import embed_on_ray

    rng = np.random.default_rng(1)
    words = [
        "the",
        "cat",
        "sat",
        "on",
        "mat",
        "dog",
        "is",
        "not",
        "a",
        "rank",
        "passage",
        "evidence",
        "query",
    ]
    docs = [
        Document(f"d{i}", "T", ". ".join(" ".join(rng.choice(words, 6)) for _ in range(3)) + ".")
        for i in range(23)
    ]

    def builder(name: str) -> Any:
        return vectors.VectorBuilder(
            tmp_path / name, BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")), "sentences", block_size=4
        )

    single = builder("single").build(docs)
    on_ray = embed_on_ray(builder("ray"), docs, RayOptions(workers=2))
    rows = np.arange(len(single))
    assert len(on_ray) == len(single) > 0
    np.testing.assert_array_equal(on_ray.vectors(rows), single.vectors(rows))
    pd.testing.assert_frame_equal(on_ray.frame(), single.frame())


def test_embed_with_ray_writes_the_same_vector_folder(
    ray_session: Any,
    one_thread: None,
    small_collection: dict[str, Path],
    tiny_bi_encoder_path: Path,
    tmp_path: Path,
) -> None:
    vectors = pytest.importorskip("evirank.vectors")
    common = [
        "-q",
        "embed",
        "--corpus",
        str(small_collection["corpus"]),
        "--model",
        str(tiny_bi_encoder_path),
    ]
    common += ["--device", "cpu", "--segment", "sentences", "--block-size", "2"]
    assert main([*common, "--output", str(tmp_path / "plain")]) == 0
    assert main([*common, "--output", str(tmp_path / "ray"), "--ray", "local", "--ray-workers", "2"]) == 0
    plain, on_ray = (vectors.PassageVectors.open(tmp_path / name) for name in ("plain", "ray"))
    rows = np.arange(len(plain))
    assert len(on_ray) == len(plain) > 0
    np.testing.assert_array_equal(on_ray.vectors(rows), plain.vectors(rows))
    pd.testing.assert_frame_equal(on_ray.frame(), plain.frame())
