"""OpenVINO backends on tiny random BERTs: fp32 equal to torch, bf16 where the CPU has it, static int8
close and cached, streams that do not change scores, and the errors for what they cannot do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.frames import QID, QUERY, SCORE, make_passages
from evirank.score import BiEncoder, CrossEncoder, ScoreStore, available_backends

pytest.importorskip("openvino")
pytest.importorskip("onnxruntime")

QUERIES = {"1": "where did the cat sit", "2": "bm25 document ranking", "3": "vaccine virus cells"}
TEXTS = [
    "The cat sat on the mat.",
    "BM25 ranks documents by term evidence.",
    "A vaccine trains cells to fight a virus, or so the model says; 42 dogs agree.",
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
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export cache for the module (exports and quantisation take seconds)."""
    return tmp_path_factory.mktemp("evirank-cache")


@pytest.fixture(autouse=True)
def use_cache(model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIRANK_CACHE", str(model_cache))


def test_openvino_backends_are_listed_and_the_cross_family_offers_them() -> None:
    from evirank.score.family import get_family

    assert {"openvino", "openvino-int8"} <= set(available_backends())
    assert {"openvino", "openvino-int8"} <= set(get_family("cross").backends)


def test_fp32_scores_equal_torch_within_1e_4(tiny_cross_encoder_path: Path) -> None:
    frame = passages()
    expected = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)[SCORE].to_numpy()
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino"))
    got = scorer(frame)[SCORE].to_numpy()
    assert scorer.precision_ == "fp32"
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)
    assert expected.std() > 0.1  # the random model tells inputs apart


def test_two_logit_head_gives_the_same_log_odds(tiny_two_logit_path: Path) -> None:
    frame = passages()
    expected = CrossEncoder(tiny_two_logit_path, Runtime(device="cpu"))(frame)[SCORE].to_numpy()
    got = CrossEncoder(tiny_two_logit_path, Runtime(backend="openvino"))(frame)[SCORE].to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=0)


def test_scores_do_not_depend_on_the_number_of_streams(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = passages()
    by_streams = {}
    for streams in ("1", "2", "3"):
        monkeypatch.setenv("EVIRANK_NUM_THREADS", "3")
        monkeypatch.setenv("EVIRANK_STREAMS", streams)
        scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino"))
        by_streams[streams] = scorer(frame)[SCORE].to_numpy()
        assert scorer.backend_ is not None and len(scorer.backend_.requests) == int(streams)
    # each group is padded to its own longest row, so only float rounding may differ
    np.testing.assert_allclose(by_streams["2"], by_streams["1"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(by_streams["3"], by_streams["1"], atol=1e-5, rtol=0)


def test_bi_encoder_embeddings_equal_torch(tiny_bi_encoder_path: Path) -> None:
    texts = [t for t in TEXTS if t] + list(QUERIES.values())
    expected = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")).embed(texts)
    got = BiEncoder(tiny_bi_encoder_path, Runtime(backend="openvino")).embed(texts)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_bf16_runs_where_the_cpu_has_it_and_is_refused_elsewhere(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evirank.score import openvino_backend

    frame = passages()
    if openvino_backend.native_bf16():
        fp32 = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino"))(frame)[SCORE].to_numpy()
        scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino", dtype="bf16"))
        bf16 = scorer(frame)[SCORE].to_numpy()
        assert scorer.precision_ == "bf16"
        assert not np.allclose(bf16, fp32, atol=1e-7)  # really bf16
        ranks = pd.DataFrame({"fp32": fp32, "bf16": bf16}).rank()
        assert ranks["fp32"].corr(ranks["bf16"]) > 0.9  # Spearman
    monkeypatch.setattr(openvino_backend, "native_bf16", lambda: False)
    with pytest.raises(ValueError, match="does not compute bf16 natively"):
        _ = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino", dtype="bf16")).fingerprint


def test_int8_is_static_ranks_like_fp32_and_is_cached(
    tiny_cross_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    frame = passages()
    fp32 = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino"))(frame)[SCORE].to_numpy()
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino-int8"))
    int8 = scorer(frame)[SCORE].to_numpy()
    assert scorer.precision_.startswith("int8-static-")
    assert scorer.describe()["precision"] == scorer.precision_  # in the fingerprint
    assert not np.allclose(int8, fp32, atol=1e-6)  # really quantised
    ranks = pd.DataFrame({"fp32": fp32, "int8": int8}).rank()
    assert ranks["fp32"].corr(ranks["int8"]) > 0.9  # Spearman
    # static activation ranges: a pair's score does not depend on the batch it is in
    alone = scorer(frame.head(1))[SCORE].to_numpy()
    np.testing.assert_allclose(alone, int8[:1], atol=1e-5, rtol=0)
    assert len(list((tmp_path / "cache" / "openvino").glob("*/model.xml"))) == 1

    import nncf

    def no_quantize(*args: object, **kwargs: object) -> None:
        raise AssertionError("quantised again instead of reading the cache")

    monkeypatch.setattr(nncf, "quantize", no_quantize)
    again = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino-int8"))(frame)[SCORE].to_numpy()
    np.testing.assert_array_equal(again, int8)


def test_int8_keeps_the_cls_only_last_layer_and_head_in_floating_point(
    tiny_cross_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openvino

    from evirank.score import cls_only

    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino-int8")).load()
    (xml,) = (tmp_path / "cache" / "openvino").glob("*/model.xml")
    ops = openvino.Core().read_model(str(xml)).get_ops()
    quantised = [op.get_friendly_name() for op in ops if op.get_type_name() == "FakeQuantize"]
    products = [op.get_friendly_name() for op in ops if op.get_type_name() == "MatMul"]
    trunk = cls_only.EXPORT_TRUNK_PREFIX
    assert quantised and all(name.startswith(trunk) for name in quantised)
    assert any(not name.startswith(trunk) for name in products)  # the tail is there, in float


def test_fingerprints_differ_from_the_other_backends_and_stores_never_mix_them(
    tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    prints = {
        name: CrossEncoder(
            tiny_cross_encoder_path, Runtime(device="auto" if name != "torch" else "cpu", backend=name)
        )
        for name in ("torch", "onnx", "openvino", "openvino-int8")
    }
    assert len({scorer.fingerprint for scorer in prints.values()}) == 4
    store = tmp_path / "scores.sqlite"
    frame = passages()
    CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino", store=store))(frame)
    other = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx", store=store))
    other(frame)
    assert other.stats_.cached == 0 and other.stats_.computed == len(frame)
    with ScoreStore(store) as opened:
        assert len(opened.fingerprints()) == 2


def test_openvino_refuses_a_gpu_device_and_an_unknown_dtype(tiny_cross_encoder_path: Path) -> None:
    with pytest.raises(ValueError, match="runs on the CPU"):
        _ = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino", device="cuda")).fingerprint
    with pytest.raises(ValueError, match="fp32 or bf16"):
        _ = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino", dtype="fp16")).fingerprint
    with pytest.raises(ValueError, match="computes in int8"):
        _ = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="openvino-int8", dtype="fp32")).fingerprint
