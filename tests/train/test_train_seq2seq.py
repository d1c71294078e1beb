"""Training a monoT5 through the family's recipe: 'true'/'false' targets from the usual examples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import WORDS, toy_examples

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import SCORE
from evirank.train.examples import write_examples
from seq2seq_helpers import build_tiny_t5

pytest.importorskip("torch")


@pytest.fixture
def tiny_t5(tmp_path: Path) -> Path:
    return build_tiny_t5(tmp_path / "t5", seed=3, words=tuple(WORDS), init_factor=1.0)


def test_evirank_train_kind_seq2seq_lowers_the_loss_and_saves_a_monot5(
    tiny_t5: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = toy_examples(n_queries=6, per_query=8)
    pairs = write_examples(examples, tmp_path / "pairs.jsonl")
    val = write_examples(
        toy_examples(n_queries=2, per_query=8, seed=5).assign(qid=lambda f: "v" + f["qid"]),
        tmp_path / "val.jsonl",
    )
    out = tmp_path / "model"
    args = ["-q", "train", "--scorer", "seq2seq", "--model", str(tiny_t5), "--output", str(out)]
    args += ["--pairs", str(pairs), "--val-pairs", str(val), "--epochs", "8", "--batch-size", "8"]
    args += ["--lr", "3e-3", "--max-length", "32", "--dropout", "0", "--device", "cpu"]
    assert main(args) == 0
    capsys.readouterr()
    meta = json.loads((out / "evirank-train.json").read_text())
    assert meta["kind"] == "seq2seq (monoT5)" and meta["config"]["encoder"] == "seq2seq"
    steps = [json.loads(line) for line in (out / "train-log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in steps if r["event"] == "step"]
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3])
    # the saved folder scores through the family, relevant texts ('good') above the others
    from evirank.score import detect_family, make_scorer

    assert detect_family(out).name == "seq2seq"
    frame = pd.DataFrame(
        {
            "qid": "1",
            "query": "apple",
            "docno": ["g", "b"],
            "pid": 0,
            "text": ["banana good fruit", "banana bad fruit"],
        }
    )
    scores = make_scorer("auto", str(out), Runtime(device="cpu"))(frame)[SCORE].tolist()
    assert scores[0] > scores[1]


def test_a_family_without_a_recipe_or_an_unknown_one_is_refused(tiny_t5: Path, tmp_path: Path) -> None:
    from evirank.train.config import TrainConfig

    with pytest.raises(ValueError, match="unknown model family"):
        TrainConfig(encoder="lstm")
    with pytest.raises(ValueError, match="no training"):
        TrainConfig(encoder="duo-seq2seq")
    with pytest.raises(ValueError, match="trains with loss"):
        TrainConfig(encoder="seq2seq", loss="listwise")
    pairs = write_examples(toy_examples(n_queries=2), tmp_path / "pairs.jsonl")
    args = ["-q", "train", "--scorer", "seq2seq", "--output", str(tmp_path / "m"), "--pairs", str(pairs)]
    assert main([*args, "--loss", "listwise"]) == 2
