"""Outputs still on their way from the device: each batch is read back after the next is launched,
in order, and scores equal the blocking path's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT
from evirank.score import CrossEncoder
from evirank.score.backends import Backend, Pending
from evirank.score.token_batch import TokenBatch


class Event:
    """Stands in for a CUDA event: records when it was waited for."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def synchronize(self) -> None:
        self.log.append(f"read {self.name}")


class Tensor:
    """Stands in for a page-locked host tensor."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def numpy(self) -> np.ndarray:
        return self.array


def deferring(backend: Backend, log: list[str]) -> Backend:
    """``backend`` whose launch() returns outputs still 'on the way', as on a GPU."""
    forward = backend.forward

    def launch(batch: TokenBatch) -> Pending:
        name = str(len([e for e in log if e.startswith("launch")]))
        log.append(f"launch {name}")
        return Pending(Tensor(forward(batch)), Event(log, name))

    backend.launch = launch  # type: ignore[method-assign]
    return backend


def pairs(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    words = ["cats", "sit", "on", "mats", "dogs", "bark", "at", "night", "birds", "sing"]
    return pd.DataFrame(
        {
            QID: [str(i % 7) for i in range(n)],
            DOCNO: [f"d{i}" for i in range(n)],
            PID: [f"d{i}-0" for i in range(n)],
            QUERY: [f"query {i % 7}" for i in range(n)],
            TEXT: [" ".join(rng.choice(words, size=int(rng.integers(2, 30)))) for _ in range(n)],
        }
    )


def test_a_batch_is_read_back_after_the_next_is_launched_and_scores_are_unchanged(
    tiny_cross_encoder_path: Path,
) -> None:
    frame = pairs(120)
    blocking = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=512))(frame)
    log: list[str] = []
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=512))
    deferring(scorer.load(), log)
    deferred = scorer(frame)
    np.testing.assert_array_equal(deferred[SCORE].to_numpy(), blocking[SCORE].to_numpy())
    launches = [e for e in log if e.startswith("launch")]
    assert len(launches) > 3
    # batch k is read only once batch k + 1 is launched; the last one after the loop
    expected: list[str] = ["launch 0"]
    for k in range(1, len(launches)):
        expected += [f"launch {k}", f"read {k - 1}"]
    expected.append(f"read {len(launches) - 1}")
    assert log == expected
    assert scorer.stats_.computed == len(frame)


def test_an_output_already_here_is_returned_as_float32() -> None:
    pending = Pending.ready(np.arange(3, dtype=np.float64)[:, None])
    assert not pending.on_the_way
    out = pending.result()
    assert out.dtype == np.float32 and out[:, 0].tolist() == [0.0, 1.0, 2.0]


def test_an_output_on_the_way_is_waited_for_once_and_copied_out_of_the_host_buffer() -> None:
    log: list[str] = []
    buffer = np.ones((2, 1), dtype=np.float32)
    pending = Pending(Tensor(buffer), Event(log, "0"))
    assert pending.on_the_way
    first: Any = pending.result()
    buffer[:] = 7.0  # the page-locked buffer is reused: the result must not change
    assert first[:, 0].tolist() == [1.0, 1.0] and log == ["read 0"]
    assert pending.result()[:, 0].tolist() == [1.0, 1.0] and log == ["read 0"] and not pending.on_the_way


def casts(scorer: CrossEncoder, frame: pd.DataFrame) -> tuple[np.ndarray, int]:
    """The scores of ``frame`` and how many dtype casts (``aten::_to_copy``) computing them took."""
    from torch.profiler import profile

    with profile() as prof:
        scores = scorer(frame)[SCORE].to_numpy()
    return scores, sum(e.count for e in prof.key_averages() if e.key == "aten::_to_copy")


def test_in_bf16_the_weights_are_cast_once_per_call_not_once_per_batch(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import nullcontext

    frame = pairs(120)
    runtime = Runtime(device="cpu", dtype="bf16", batch_tokens=512, batch_layout="padded")
    shared, shared_casts = casts(CrossEncoder(tiny_cross_encoder_path, runtime), frame)
    each = CrossEncoder(tiny_cross_encoder_path, runtime)
    monkeypatch.setattr(type(each.load()), "call_scope", lambda self: nullcontext())
    per_batch, per_batch_casts = casts(each, frame)
    assert each.stats_.batches > 3
    np.testing.assert_array_equal(shared, per_batch)  # the same casts, so the same scores
    backend: Any = each.load()
    model = backend.model
    weights = len([name for name, _ in model.named_parameters() if name.endswith("weight")])
    assert per_batch_casts - shared_casts >= (each.stats_.batches - 1) * weights // 2


def test_on_cuda_a_small_model_gets_a_larger_default_token_budget(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evirank.score.backends import TorchBackend
    from evirank.score.devices import default_batch_tokens

    monkeypatch.setattr(TorchBackend, "resolve", classmethod(lambda cls, device, dtype: ("cuda:0", "bf16")))
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    scorer.prepare()
    hidden = scorer.config_.hidden_size
    assert scorer.batch_tokens_ == default_batch_tokens("cuda", hidden) == 262_144
    chosen = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=4096))
    chosen.prepare()
    assert chosen.batch_tokens_ == 4096  # a budget asked for is kept
    on_cpu = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    monkeypatch.undo()
    on_cpu.prepare()
    assert on_cpu.batch_tokens_ == max(2048, on_cpu.max_length_)


def test_a_batch_finished_before_an_error_is_still_consumed(tiny_cross_encoder_path: Path) -> None:
    log: list[str] = []
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=512))
    backend = deferring(scorer.load(), log)
    launch = backend.launch

    def failing(batch: TokenBatch) -> Pending:
        if len([e for e in log if e.startswith("launch")]) == 2:
            raise KeyboardInterrupt  # stopped while launching the third batch
        return launch(batch)

    backend.launch = failing  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        scorer(pairs(120))
    assert log == ["launch 0", "launch 1", "read 0", "read 1"]  # the second batch was read back too
