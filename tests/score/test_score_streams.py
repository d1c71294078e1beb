"""Splitting a batch among concurrent requests: row order kept, each group cut to its own longest row;
stream and thread counts from the environment; ONNX Runtime's scores unchanged by streams."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evirank.config import Runtime
from evirank.score.backends import TokenBatch
from evirank.score.streams import default_streams, default_threads, feeds, mean_pooled_numpy, split_batch


def batch(lengths: list[int], width: int | None = None, types: bool = True) -> TokenBatch:
    width = width or max(lengths)
    ids = np.zeros((len(lengths), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = np.arange(1, n + 1) + 100 * row
        mask[row, :n] = 1
    return TokenBatch(ids, mask, np.zeros_like(ids) if types else None)


def test_split_keeps_rows_in_order_and_trims_each_group_to_its_longest_row() -> None:
    whole = batch([9, 8, 5, 4, 2], width=10)
    parts = split_batch(whole, 2)
    assert [p.shape for p in parts] == [(3, 9), (2, 4)]
    rows = np.concatenate([np.pad(p.input_ids, ((0, 0), (0, 10 - p.shape[1]))) for p in parts])
    np.testing.assert_array_equal(rows, whole.input_ids)
    assert all(p.token_type_ids is not None and p.token_type_ids.shape == p.shape for p in parts)


def test_split_never_makes_more_groups_than_rows_and_one_group_is_the_batch() -> None:
    whole = batch([3, 2], types=False)
    assert len(split_batch(whole, 5)) == 2
    assert split_batch(whole, 1) == [whole]
    assert all(p.token_type_ids is None for p in split_batch(whole, 2))


def test_feeds_add_zero_token_types_only_when_the_graph_asks() -> None:
    plain = batch([3, 2], types=False)
    assert set(feeds(plain, ["input_ids", "attention_mask"])) == {"input_ids", "attention_mask"}
    fed = feeds(plain, ["input_ids", "attention_mask", "token_type_ids"])
    np.testing.assert_array_equal(fed["token_type_ids"], np.zeros_like(plain.input_ids))


def test_mean_pooling_ignores_padding_and_gives_unit_vectors() -> None:
    hidden = np.array([[[1.0, 0.0], [0.0, 1.0], [50.0, 50.0]], [[0.0, 2.0], [7.0, 7.0], [7.0, 7.0]]])
    pooled = mean_pooled_numpy(hidden, np.array([[1, 1, 0], [1, 0, 0]]))
    np.testing.assert_allclose(pooled, [[2**-0.5, 2**-0.5], [0.0, 1.0]], atol=1e-6)


def test_threads_and_streams_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVIRANK_NUM_THREADS", "4")
    monkeypatch.delenv("EVIRANK_STREAMS", raising=False)
    assert default_threads() == 4
    assert default_streams() == 2
    monkeypatch.setenv("EVIRANK_STREAMS", "9")
    assert default_streams() == 4  # never more streams than threads
    assert default_streams(1) == 1


def test_onnx_scores_do_not_depend_on_streams(
    tiny_cross_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnxruntime")
    from evirank.frames import SCORE, make_passages
    from evirank.score import CrossEncoder

    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path))
    monkeypatch.setenv("EVIRANK_NUM_THREADS", "2")
    frame = make_passages([("1", f"d{i}", 0, "word " * (i + 1)) for i in range(12)]).assign(query="a query")
    scores = {}
    for streams in ("1", "2"):
        monkeypatch.setenv("EVIRANK_STREAMS", streams)
        scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(backend="onnx"))
        scores[streams] = scorer(frame)[SCORE].to_numpy()
        assert scorer.backend_ is not None and scorer.backend_.streams == int(streams)
    np.testing.assert_allclose(scores["2"], scores["1"], atol=1e-5, rtol=0)
