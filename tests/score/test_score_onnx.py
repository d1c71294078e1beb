"""ONNX Runtime backends on tiny random BERTs: equal to torch, int8 close, cached exports, fingerprints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.frames import QID, QUERY, SCORE, make_passages
from evirank.score import BiEncoder, CrossEncoder, ScoreStore, available_backends
from evirank.score.transformer import prefetch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

QUERIES = {"1": "where did the cat sit", "2": "bm25 document ranking", "3": "vaccine virus cells"}
TEXTS = [
    "The cat sat on the mat.",
    "BM25 ranks documents by term evidence.",
    "A vaccine trains cells to fight a virus, or so the model says; 42 dogs agree.",
    "",
    "Dogs.",
    "retrieval " * 40,
    "Search is not the same as ranking, and a passage is not a document.",
    "cats and dogs are not documents",
    "the relevant passage scores the query",
]


def passages() -> pd.DataFrame:
    rows = [(qid, f"d{j % 3}", j, text) for qid in QUERIES for j, text in enumerate(TEXTS)]
    frame = make_passages(rows)
    frame[QUERY] = frame[QID].map(QUERIES)
    return frame


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export cache for the module (exports take seconds)."""
    return tmp_path_factory.mktemp("evirank-cache")


@pytest.fixture(autouse=True)
def use_cache(onnx_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIRANK_CACHE", str(onnx_cache))


def test_onnx_backends_are_listed() -> None:
    assert {"torch", "onnx", "onnx-int8"} <= set(available_backends())


def test_onnx_scores_equal_torch_within_1e_4(tiny_cross_encoder_path: Path) -> None:
    frame = passages()
    torch_scores = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)[SCORE].to_numpy()
    onnx_scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))
    onnx_scores = onnx_scorer(frame)[SCORE].to_numpy()
    np.testing.assert_allclose(onnx_scores, torch_scores, atol=1e-4, rtol=0)
    assert onnx_scorer.backend_ is not None and onnx_scorer.backend_.export.fused  # the fused BERT graph
    assert torch_scores.std() > 0.1  # the random model tells inputs apart


def test_two_logit_head_through_onnx_gives_the_same_log_odds(tiny_two_logit_path: Path) -> None:
    frame = passages()
    expected = CrossEncoder(tiny_two_logit_path, Runtime(device="cpu"))(frame)[SCORE].to_numpy()
    got = CrossEncoder(tiny_two_logit_path, Runtime(backend="onnx"))(frame)[SCORE].to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_int8_runs_and_ranks_like_fp32(tiny_cross_encoder_path: Path) -> None:
    frame = passages()
    fp32 = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))(frame)[SCORE].to_numpy()
    int8_scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx-int8"))
    int8 = int8_scorer(frame)[SCORE].to_numpy()
    assert int8_scorer.backend_ is not None and int8_scorer.backend_.precision.startswith("int8")
    assert int8_scorer.describe()["precision"] == int8_scorer.backend_.precision  # in the fingerprint
    assert np.isfinite(int8).all()
    assert not np.allclose(int8, fp32, atol=1e-6)  # really quantised
    ranks = pd.DataFrame({"fp32": fp32, "int8": int8}).rank()
    assert ranks["fp32"].corr(ranks["int8"]) > 0.9  # Spearman


def test_fingerprints_differ_between_backends_and_stores_never_mix_them(
    tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    prints = {
        name: CrossEncoder(
            tiny_cross_encoder_path, Runtime(device="auto" if name != "torch" else "cpu", backend=name)
        )
        for name in ("torch", "onnx", "onnx-int8")
    }
    assert len({scorer.fingerprint for scorer in prints.values()}) == 3
    store = tmp_path / "scores.sqlite"
    frame = passages()
    first = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx", store=store))
    first(frame)
    assert first.stats_.computed == len(frame)
    other = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx-int8", store=store))
    other(frame)
    assert other.stats_.cached == 0 and other.stats_.computed == len(frame)
    again = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx", store=store))
    again(frame)
    assert again.stats_.cached == len(frame) and again.stats_.computed == 0
    with ScoreStore(store) as opened:
        assert len(opened.fingerprints()) == 2


def test_export_is_cached_and_reused_on_the_second_load(
    tiny_cross_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    frame = passages()
    first = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))(frame)
    exports = list((tmp_path / "cache" / "onnx").glob("*/model.onnx"))
    assert len(exports) == 1
    assert not list((tmp_path / "cache" / "onnx").glob(".tmp-*"))  # nothing half-written left

    def no_export(*args: object, **kwargs: object) -> None:
        raise AssertionError("exported again instead of reading the cache")

    monkeypatch.setattr(torch.onnx, "export", no_export)
    second = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))(frame)
    np.testing.assert_array_equal(first[SCORE], second[SCORE])
    # int8 quantises the cached fp32 export: still no second export
    CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx-int8"))(frame)
    assert len(list((tmp_path / "cache" / "onnx").glob("*/model.onnx"))) == 2


def test_export_cache_follows_weights_not_location(
    tiny_cross_encoder_path: Path,
    tiny_bert_builder: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shutil

    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    moved = tmp_path / "moved"
    shutil.copytree(tiny_cross_encoder_path, moved)
    CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))(passages())
    CrossEncoder(moved, Runtime(backend="onnx"))(passages())
    assert len(list((tmp_path / "cache" / "onnx").glob("*/model.onnx"))) == 1
    retrained = tiny_bert_builder(tmp_path / "retrained", num_labels=1, seed=99)
    CrossEncoder(retrained, Runtime(backend="onnx"))(passages())
    assert len(list((tmp_path / "cache" / "onnx").glob("*/model.onnx"))) == 2


def test_random_head_is_exported_but_never_cached(
    tiny_bi_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    scorer = CrossEncoder(
        tiny_bi_encoder_path, Runtime(backend="onnx")
    )  # an encoder without a classifier head
    scores = scorer(passages())[SCORE]
    assert np.isfinite(scores).all()
    assert scorer.describe()["random_init"]
    assert not list((tmp_path / "cache").rglob("*.onnx"))


def test_bi_encoder_embeddings_through_onnx_equal_torch(tiny_bi_encoder_path: Path) -> None:
    texts = [t for t in TEXTS if t] + list(QUERIES.values())
    expected = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")).embed(texts)
    got = BiEncoder(tiny_bi_encoder_path, Runtime(backend="onnx")).embed(texts)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_onnx_backend_refuses_a_gpu_device_and_a_half_dtype(tiny_cross_encoder_path: Path) -> None:
    with pytest.raises(ValueError, match="runs on the CPU"):
        _ = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx", device="cuda")).fingerprint
    with pytest.raises(ValueError, match="computes in fp32"):
        _ = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx", dtype="bf16")).fingerprint


def test_prefetch_keeps_order_and_raises_the_producers_error() -> None:
    assert list(prefetch(iter(range(50)), depth=3)) == list(range(50))

    def failing() -> object:
        yield 1
        raise RuntimeError("tokeniser broke")

    got = []
    with pytest.raises(RuntimeError, match="tokeniser broke"):
        for item in prefetch(failing(), depth=2):
            got.append(item)
    assert got == [1]


def test_prefetch_stops_its_producer_when_the_consumer_stops() -> None:
    produced = []

    def endless() -> object:
        n = 0
        while True:
            produced.append(n)
            yield n
            n += 1

    for item in prefetch(endless(), depth=2):
        if item == 5:
            break
    count = len(produced)
    assert count <= 5 + 1 + 3  # at most depth (+ the one in hand) ahead
    import time

    time.sleep(0.3)
    assert len(produced) == count  # the producer stopped
