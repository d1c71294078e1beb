"""Cached exports (ONNX, OpenVINO int8) are checked against their checksums at every load: a damaged
or cut one is removed, named in a warning and made again, and the scores are the undamaged ones."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.frames import QID, QUERY, SCORE, make_passages
from evirank.score import CrossEncoder

pytest.importorskip("onnxruntime")

QUERIES = {"1": "where did the cat sit", "2": "bm25 document ranking"}
TEXTS = ["The cat sat on the mat.", "BM25 ranks documents by term evidence.", "Dogs.", "retrieval " * 20]


def passages() -> pd.DataFrame:
    frame = make_passages([(qid, f"d{j}", 0, text) for qid in QUERIES for j, text in enumerate(TEXTS)])
    frame[QUERY] = frame[QID].map(QUERIES)
    return frame


def _flip(path: Path) -> None:
    """Change bytes in the middle of ``path``, keeping its size."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0x5A for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(("backend", "folder", "file", "damage"), [
    ("onnx", "onnx", "model.onnx", _flip),
    ("onnx", "onnx", "model.onnx", _cut),
    ("openvino-int8", "openvino", "model.bin", _flip),  # quantises twice: ~13 s
    pytest.param("openvino-int8", "openvino", "model.bin", _cut, marks=pytest.mark.slow),
])  # fmt: skip
def test_a_damaged_cached_export_is_named_and_made_again(
    backend: str,
    folder: str,
    file: str,
    damage: object,
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if backend.startswith("openvino"):
        pytest.importorskip("openvino")
        pytest.importorskip("nncf")
    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    frame = passages()
    first = CrossEncoder(tiny_cross_encoder_path, Runtime(backend=backend))(frame)[SCORE].to_numpy()
    [cached] = (tmp_path / "cache" / folder).glob(f"*/{file}")
    assert (cached.parent / "checksums.json").is_file()
    damage(cached)  # type: ignore[operator]
    with caplog.at_level(logging.WARNING):
        again = CrossEncoder(tiny_cross_encoder_path, Runtime(backend=backend))(frame)[SCORE].to_numpy()
    assert f"{cached.parent}: this cached" in caplog.text and file in caplog.text
    assert "made again" in caplog.text
    np.testing.assert_array_equal(again, first)
    assert "model.safetensors" not in caplog.text  # the user's weights are not blamed
    # the cache was made again, whole: the next load reads it without a word
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        CrossEncoder(tiny_cross_encoder_path, Runtime(backend=backend))(frame)
    assert "damaged" not in caplog.text


def test_a_cached_export_without_checksums_is_made_again(
    tiny_cross_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    frame = passages()
    first = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))(frame)[SCORE].to_numpy()
    [checksums] = (tmp_path / "cache" / "onnx").glob("*/checksums.json")
    checksums.unlink()  # as an older evirank left it: it cannot be checked, so it is not used
    again = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))(frame)[SCORE].to_numpy()
    np.testing.assert_array_equal(again, first)
    assert checksums.is_file()
