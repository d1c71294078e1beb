"""The score store: round trips, resumption after interruption, fingerprints, segments."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.errors import InputFormatError
from evirank.frames import PID, QID, QUERY, SCORE, TEXT, make_passages
from evirank.score import CrossEncoder, FingerprintError, ScoreStore
from evirank.score.backends import TokenBatch, TorchBackend

QUERIES = {"1": "where did the cat sit", "2": "bm25 document ranking"}


def passages(n: int = 24) -> pd.DataFrame:
    rows = [
        (qid, f"d{j // 4}", j % 4, f"passage {j} about the cat and {'dogs ' * (j % 7)}")
        for qid in QUERIES
        for j in range(n)
    ]
    frame = make_passages(rows)
    frame[QUERY] = frame[QID].map(QUERIES)
    return frame


def test_scores_round_trip_and_missing_pairs_are_nan(tmp_path: Path) -> None:
    with ScoreStore(tmp_path / "s.sqlite") as store:
        fp = store.register("f" * 64, kind="cross", description={"model": "m"})
        store.put_scores(fp, ["q", "q"], ["a", "b"], [1.5, -2.25])
        got = store.get_scores(fp, ["q", "q", "q"], ["b", "a", "c"])
        np.testing.assert_array_equal(got[:2], [-2.25, 1.5])
        assert np.isnan(got[2])
        assert np.isnan(store.get_scores("0" * 64, ["q"], ["a"])[0])  # other fingerprint
    with ScoreStore(tmp_path / "s.sqlite", readonly=True) as again:
        assert again.count_scores() == 2
        assert again.get_scores("f" * 64, ["q"], ["a"])[0] == 1.5
        with pytest.raises(PermissionError):
            again.put_scores("f" * 64, ["q"], ["z"], [0.0])


def test_opening_something_else_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no score store"):
        ScoreStore(tmp_path / "absent.sqlite", readonly=True)
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database at all, just text" * 50)
    with pytest.raises(InputFormatError, match="score store"):
        ScoreStore(junk)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(InputFormatError):
        ScoreStore(other)


def test_second_run_reads_everything_from_the_store(tiny_cross_encoder_path: Path, tmp_path: Path) -> None:
    frame = passages()
    first = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=tmp_path / "s.sqlite"))
    scored = first(frame)
    second = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=tmp_path / "s.sqlite"))
    again = second(frame)
    assert first.stats_.computed == len(frame) and second.stats_.computed == 0
    assert getattr(second, "backend_", None) is None  # the model was never loaded
    np.testing.assert_array_equal(scored[SCORE], again[SCORE])


def test_an_interrupted_run_resumes_and_scores_only_what_is_missing(
    tiny_cross_encoder_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = passages()
    reference = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)
    forward = TorchBackend.forward
    calls = {"n": 0}

    def interrupted(self: TorchBackend, batch: TokenBatch) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt  # Ctrl-C after three batches
        return forward(self, batch)

    store_path = tmp_path / "s.sqlite"
    monkeypatch.setattr(TorchBackend, "forward", interrupted)
    with pytest.raises(KeyboardInterrupt):
        CrossEncoder(
            tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=128, commit_every=2, store=store_path)
        )(frame)
    monkeypatch.setattr(TorchBackend, "forward", forward)
    with ScoreStore(store_path) as store:
        kept = store.count_scores()
    assert 0 < kept < len(frame)  # the three finished batches were kept, even though 3 % 2 != 0
    resumed = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=128, store=store_path))
    out = resumed(frame)
    assert resumed.stats_.cached == kept
    assert resumed.stats_.computed == len(frame) - kept
    np.testing.assert_allclose(out[SCORE], reference[SCORE], atol=1e-5, rtol=0)


_KILLED_CHILD = """
import os, signal, sys
import pandas as pd
from evirank.config import Runtime
from evirank.score import CrossEncoder
from evirank.score.backends import TorchBackend
model, store, frame_path = sys.argv[1:4]
forward = TorchBackend.forward
calls = [0]
def dying(self, batch):
    calls[0] += 1
    if calls[0] > 4:
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no flush: like kill -9 or the OOM killer
    return forward(self, batch)
TorchBackend.forward = dying
runtime = Runtime(device="cpu", batch_tokens=128, commit_every=2, store=store)
CrossEncoder(model, runtime)(pd.read_pickle(frame_path))
"""


def test_a_killed_process_keeps_its_committed_scores(tiny_cross_encoder_path: Path, tmp_path: Path) -> None:
    frame = passages()
    frame.to_pickle(tmp_path / "frame.pkl")
    store_path = tmp_path / "s.sqlite"
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_KILLED_CHILD),
            str(tiny_cross_encoder_path),
            str(store_path),
            str(tmp_path / "frame.pkl"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    with ScoreStore(store_path) as store:
        kept = store.count_scores()
    assert kept > 0  # the two committed chunks (four batches) survived
    resumed = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=128, store=store_path))
    out = resumed(frame)
    assert resumed.stats_.computed == len(frame) - kept
    reference = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)
    np.testing.assert_allclose(out[SCORE], reference[SCORE], atol=1e-5, rtol=0)


def test_fingerprint_follows_weights_and_settings_not_location(
    tiny_cross_encoder_path: Path, tmp_path: Path, tiny_bert_builder: Callable[..., Path]
) -> None:
    base = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu")).fingerprint
    moved = tmp_path / "moved"
    shutil.copytree(tiny_cross_encoder_path, moved)
    assert CrossEncoder(moved, Runtime(device="cpu")).fingerprint == base
    retrained = tiny_bert_builder(tmp_path / "retrained", num_labels=1, seed=99)  # same vocab and config
    assert CrossEncoder(retrained, Runtime(device="cpu")).fingerprint != base
    assert CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", max_length=96)).fingerprint != base
    assert (
        CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"), query_max_tokens=32).fingerprint != base
    )
    assert CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=999)).fingerprint == base
    # weights changed in place (same path): the size/mtime-keyed hash cache notices
    weights = moved / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 1_000_000))
    assert CrossEncoder(moved, Runtime(device="cpu")).fingerprint != base


def test_randomly_initialised_heads_get_their_own_fingerprint(
    tiny_bi_encoder_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    frame = passages(4)
    store_path = tmp_path / "s.sqlite"
    first = CrossEncoder(
        tiny_bi_encoder_path, Runtime(device="cpu", store=store_path)
    )  # no classifier in the files
    first(frame)
    assert "initialised at random" in caplog.text
    second = CrossEncoder(tiny_bi_encoder_path, Runtime(device="cpu", store=store_path))
    second(frame)
    assert first.fingerprint != second.fingerprint  # two different random heads never share scores
    assert second.stats_.computed == len(frame)
    first(frame)  # the same instance reuses its own scores
    assert first.stats_.computed == 0


def test_passages_scores_reads_a_whole_run_back(tiny_cross_encoder_path: Path, tmp_path: Path) -> None:
    frame = passages()
    store_path = tmp_path / "s.sqlite"
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store_path))
    scored = scorer(frame)
    with ScoreStore(store_path, readonly=True) as store:
        back = store.passages_scores(scorer.fingerprint[:10])
        assert len(back) == len(frame)
        merged = scored.merge(back, on=[QID, "docno", PID], suffixes=("", "_stored"))
        np.testing.assert_array_equal(merged[SCORE], merged[f"{SCORE}_stored"])
        assert (merged[TEXT] == merged[f"{TEXT}_stored"]).all()
        assert (merged[QUERY] == merged[f"{QUERY}_stored"]).all()
        table = store.fingerprints()
        assert table["description"].iloc[0]["model"] == str(tiny_cross_encoder_path)
        with pytest.raises(FingerprintError):
            store.passages_scores("zzzz")


def test_resegmenting_a_document_replaces_its_segments(tiny_cross_encoder_path: Path, tmp_path: Path) -> None:
    store_path = tmp_path / "s.sqlite"
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store_path))
    three = make_passages([("1", "d1", i, t) for i, t in enumerate(["A cat.", "A dog.", "A mat."])]).assign(
        query="cat"
    )
    one = make_passages([("1", "d1", 0, "A cat. A dog. A mat.")]).assign(query="cat")
    scorer(three)
    scorer(one)
    with ScoreStore(store_path) as store:
        back = store.passages_scores(qids=["1"], docnos=["d1"])
    assert back[TEXT].tolist() == ["A cat. A dog. A mat."]


def test_a_pickled_scorer_reloads_and_reuses_the_store(tiny_cross_encoder_path: Path, tmp_path: Path) -> None:
    import pickle

    frame = passages(8)
    scorer = CrossEncoder(
        tiny_cross_encoder_path, Runtime(device="cpu", store=ScoreStore(tmp_path / "s.sqlite"))
    )
    scored = scorer(frame)
    clone = pickle.loads(pickle.dumps(scorer))
    again = clone(frame)
    assert clone.stats_.computed == 0
    np.testing.assert_array_equal(again[SCORE], scored[SCORE])
