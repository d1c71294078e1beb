"""Cases a new user tried against the Python API and the commands, each once a failure: a bare
Python error naming nothing, a late failure, or a silently wrong answer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evirank import Ranker
from evirank.aggregate import minmax_by_group
from evirank.cli import main
from evirank.config import Runtime
from evirank.errors import ArgumentError
from evirank.frames import QUERY, make_passages
from evirank.score import BiEncoder, CrossEncoder

DOCS = [{"id": "a", "text": "The cat sat on the mat."}, {"id": "b", "text": "Dogs bark at night."}]


def test_first_stage_scores_further_apart_than_the_largest_float_are_normalised(
    tiny_cross_encoder_path: Path,
) -> None:
    """[1e308, -1e308] overflowed the min-max span: the best first-stage document got NaN, ranked last."""
    ranker = Ranker(str(tiny_cross_encoder_path), device="cpu", alpha=1.0)
    ranked = ranker.rank("cat", DOCS, first_stage_scores=[1e308, -1e308])
    assert [d.id for d in ranked] == ["a", "b"]
    assert [d.score for d in ranked] == [1.0, 0.0]
    groups = np.zeros(3, dtype=np.int64)
    assert minmax_by_group(np.array([1e308, -1e308, 0.0]), groups).tolist() == [1.0, 0.0, 0.5]
    values = np.array([0.1, 0.7, 0.3])
    assert minmax_by_group(values, groups).tolist() == ((values - 0.1) / (0.7 - 0.1)).tolist()  # same bits


def test_ranker_refuses_an_unknown_option_and_a_segment_that_is_no_segmenter_when_made(
    tiny_cross_encoder_path: Path,
) -> None:
    with pytest.raises(ArgumentError, match=r"batchsize: not an option of the cross family \(its options: "):
        Ranker(str(tiny_cross_encoder_path), device="cpu", batchsize=3)  # a TypeError of CrossEncoder
    with pytest.raises(ArgumentError, match=r"segment: expected a segmenter spec .* found int"):
        Ranker(str(tiny_cross_encoder_path), device="cpu", segment=5)  # an AttributeError at rank()


def test_scorers_check_their_arguments_at_the_door(
    tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path
) -> None:
    with pytest.raises(ArgumentError, match=r"^model: expected a Hugging Face id or a model folder"):
        CrossEncoder(None, Runtime(device="cpu"))  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match=r"^query_max_tokens: expected a positive integer, found 0"):
        CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"), query_max_tokens=0)
    frame = make_passages([("1", "d1", 0, "the cat sat")])
    frame[QUERY] = None
    with pytest.raises(
        ArgumentError, match=r"the 'query' column: expected text in every row, found a missing"
    ):
        CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)  # an IndexError
    bi = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    with pytest.raises(ArgumentError, match=r"^texts: expected a list of strings, found str"):
        bi.embed("one text")  # type: ignore[arg-type]
    with pytest.raises(
        ArgumentError, match=r"^texts: expected a list of strings, found a list holding NoneType"
    ):
        bi.embed([None])  # type: ignore[list-item]


def test_rank_without_first_stage_scores_ranks_by_the_evidence_alone_as_the_api_does(
    tiny_cross_encoder_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command mixed a first stage that was not there (0.2 x 0) into every score."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    args = ["-q", "rank", "--query", "cat", "--docs", str(docs), "--model", str(tiny_cross_encoder_path)]
    assert main([*args, "--device", "cpu", "--json"]) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = Ranker(str(tiny_cross_encoder_path), device="cpu").rank("cat", DOCS)
    assert [d["score"] for d in shown] == [d.score for d in expected]
    assert all(term["name"] != "first stage" for d in shown for term in d["terms"])


HELD_BY_A_THREAD = """
import sys, threading, time
from evirank.score import open_store

def worker():
    store = open_store(sys.argv[1])  # held by a thread still running at exit, as a service's are
    store.register("f" * 64, kind="cross", description={})
    store.put("f" * 64, [b"q" * 16], [b"p" * 16], [1.0])
    ready.set()
    time.sleep(60)

ready = threading.Event()
threading.Thread(target=worker, daemon=True).start()
ready.wait()
raise KeyboardInterrupt  # Ctrl-C
"""


def test_a_store_held_by_a_running_thread_leaves_no_wal_or_shm_after_ctrl_c(tmp_path: Path) -> None:
    """``serve --scores S`` left ``S-wal`` and ``S-shm`` after Ctrl-C: its threads' connections
    were never closed."""
    import os
    import subprocess
    import sys

    from evirank.score import open_store

    store = tmp_path / "scores.sqlite"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", HELD_BY_A_THREAD, str(store)], env=env, capture_output=True)
    assert done.returncode != 0 and b"KeyboardInterrupt" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.sqlite"]
    assert open_store(store, readonly=True).count_scores("f" * 64) == 1


def test_a_bad_first_stage_value_in_rank_docs_names_the_document_by_its_position(
    tiny_cross_encoder_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "The cat sat.", "s": "1.5"}\n{"id": "b", "text": "Dogs.", "s": 2}\n')
    args = ["-q", "rank", "--query", "cat", "--docs", str(docs), "--first-stage-key", "s"]
    assert main([*args, "--model", str(tiny_cross_encoder_path), "--device", "cpu"]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("found '1.5' in document 'a' (position 0)" in e for e in errors), errors  # was "(the 1th)"


def test_a_model_the_hub_cannot_provide_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    from evirank.score.fingerprint import resolve_model_dir

    def offline(*_: object, **__: object) -> None:
        raise OSError("Cannot reach the Hub.\nAn error happened while trying to locate the files.\n")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(FileNotFoundError) as caught:
        resolve_model_dir("no-such-org/no-model")
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("no-such-org/no-model: not a local model folder")
