"""Training's derived files are checked before use: a damaged checkpoint is named, never resumed
from; cached teacher scores of another teacher or other examples, or damaged, are computed again."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_examples

from evirank.checksums import DamagedArtefactError
from evirank.train import TrainConfig, train_cross_encoder
from evirank.train.trainer import CHECKPOINT_DIR

pytest.importorskip("torch")
distill_module = importlib.import_module("evirank.train.distillation")


def test_a_damaged_checkpoint_is_named_and_never_resumed_from(tiny_encoder: Path, tmp_path: Path) -> None:
    cfg = TrainConfig(
        model=str(tiny_encoder), epochs=2, batch_size=8, learning_rate=5e-3, max_length=16, save_every_steps=2
    )

    def interrupt(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_cross_encoder(toy_examples(), cfg, tmp_path / "m", step_callback=interrupt)
    last = tmp_path / "m" / CHECKPOINT_DIR / "last"
    assert (last / "checksums.json").is_file()
    state = last / "optimizer.pt"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    state.write_bytes(bytes(data))
    with pytest.raises(DamagedArtefactError, match=r"checkpoint/last: this training checkpoint is damaged "
                       r"\(optimizer.pt: other bytes"):  # fmt: skip
        train_cross_encoder(toy_examples(), cfg, tmp_path / "m", resume=True)


@pytest.fixture
def teacher_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The teacher's scoring replaced by a count of its calls (the scores: 0, 1, 2, ...)."""
    calls: list[int] = []

    def predict(teacher: Any, tokenizer: Any, queries: list[str], texts: list[str], **_: Any) -> np.ndarray:
        calls.append(len(queries))
        return np.arange(len(queries), dtype=np.float32) + len(calls)

    monkeypatch.setattr(distill_module._model, "predict_relevance", predict)
    return calls


def _scores(frames: dict[str, pd.DataFrame], cache: Path, teacher: str = "teacher") -> dict[str, np.ndarray]:
    cfg = TrainConfig(max_length=16)
    return distill_module._teacher_scores(
        SimpleNamespace(name_or_path=teacher), None, frames, cfg, "cpu", cache
    )


def test_cached_teacher_scores_are_used_only_for_the_same_teacher_and_examples(
    tmp_path: Path, teacher_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    frames = {"train": toy_examples()}
    cache = tmp_path / "teacher.npz"
    first = _scores(frames, cache)
    np.testing.assert_array_equal(_scores(frames, cache)["train"], first["train"])
    assert len(teacher_calls) == 1  # read from the cache
    other = {"train": frames["train"].assign(text=frames["train"]["text"].str.upper())}  # same length
    with caplog.at_level(logging.WARNING):
        _scores(other, cache)
    assert len(teacher_calls) == 2 and "of another teacher or other examples" in caplog.text
    _scores(other, cache, teacher="another-teacher")
    assert len(teacher_calls) == 3


def test_damaged_teacher_scores_are_named_and_computed_again(
    tmp_path: Path, teacher_calls: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    frames = {"train": toy_examples()}
    cache = tmp_path / "teacher.npz"
    _scores(frames, cache)
    cache.write_bytes(cache.read_bytes()[: cache.stat().st_size // 2])  # cut short
    with caplog.at_level(logging.WARNING):
        _scores(frames, cache)
    assert len(teacher_calls) == 2
    assert f"{cache}: the cached teacher scores cannot be read" in caplog.text
