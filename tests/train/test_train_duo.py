"""Training duoBERT through its recipe: (relevant, non-relevant) pairs in both orders from the usual
examples; the saved classifier prefers the relevant text first and ranks through the Duo stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_examples

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import SCORE
from evirank.score.document_pairs import Duo, join_pair, split_pair
from evirank.train import TrainConfig, split_by_query, train_model
from evirank.train.examples import write_examples
from evirank.train.pairwise import pair_items, validation_texts
from evirank.train.trainer import TRAIN_JSON

pytest.importorskip("torch")


def test_pairs_hold_each_relevant_text_against_others_of_its_query_in_both_orders() -> None:
    examples = toy_examples(n_queries=3, per_query=6)
    items = pair_items(examples, 2, seed=0, same_source=False)
    positives = examples[examples["label"] == 1].groupby("qid")["text"].apply(set)
    negatives = examples[examples["label"] == 0].groupby("qid")["text"].apply(set)
    assert len(items) == 3 * 3 * 2 * 2  # 3 queries x 3 relevant texts x 2 others x both orders
    for qid, text, label in zip(items["qid"], items["text"], items["label"], strict=True):
        first, second = split_pair(text)
        relevant, other = (first, second) if label == 1 else (second, first)
        assert relevant in positives[qid] and other in negatives[qid]
    flipped = {join_pair(*reversed(split_pair(t))) for t in items.loc[items["label"] == 1, "text"]}
    assert flipped == set(items.loc[items["label"] == 0, "text"])
    assert pair_items(examples, 2, seed=0, same_source=False).equals(items)  # seeded
    shown = validation_texts(examples, per_query=4)
    assert shown.groupby("qid").size().tolist() == [4, 4, 4]
    assert (shown.groupby("qid")["label"].apply(list).map(lambda labels: labels[:3]) == [[1, 1, 1]] * 3).all()


def test_a_trained_duo_prefers_the_relevant_text_first_and_reranks_through_duo(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    train, val = split_by_query(toy_examples(n_queries=8, per_query=6), 0.25, seed=1)
    config = TrainConfig(
        encoder="duo",
        loss="pairwise",
        model=str(tiny_encoder),
        group_size=3,
        epochs=4,
        batch_size=8,
        learning_rate=3e-3,
        max_length=32,
        validation_measures=("AP",),
    )
    out = tmp_path / "duo"
    result = train_model(train, config, out, validation=val)
    meta = json.loads((out / TRAIN_JSON).read_text())
    assert meta["kind"] == "duo (pairwise cross-encoder)" and meta["objective"] == "duo-bce"
    assert meta["init"]["fresh_head"] is True
    history = [r["val_loss"] for r in result.history]
    assert history[-1] < history[0] and result.best is not None and result.best["AP"] == 1.0
    good, bad = "apple banana good fruit", "apple banana bad fruit"
    pairs = pd.DataFrame({"qid": "1", "query": "apple", "docno": "", "pid": 0,
                          "text": [join_pair(good, bad), join_pair(bad, good)]})  # fmt: skip
    from evirank.score.families.duo import DuoBERT

    p = DuoBERT(out, Runtime(device="cpu", max_length=32), query_max_tokens=8)(pairs)[SCORE].to_numpy()
    assert p[0] > p[1]  # the relevant text first is the likelier order
    run = pd.DataFrame({"qid": "1", "query": "apple", "docno": ["x", "y", "z"], "score": [3.0, 2.0, 1.0],
                        "text": [bad, "banana bad fruit", good]})  # fmt: skip
    reranked = Duo(
        DuoBERT(out, Runtime(device="cpu", max_length=32), query_max_tokens=8), k=3, aggregate="sum"
    )(run)
    assert reranked["docno"].iloc[0] == "z"
    assert np.isfinite(reranked["duo_score"]).all()


def test_train_cli_scorer_duo_trains_pairwise(tiny_encoder: Path, tmp_path: Path) -> None:
    pairs = write_examples(toy_examples(n_queries=4, per_query=4), tmp_path / "pairs.jsonl")
    out = tmp_path / "m"
    base = ["-q", "train", "--model", str(tiny_encoder), "--pairs", str(pairs), "--epochs", "1",
            "--batch-size", "8", "--max-length", "24", "--validation-fraction", "0.25"]  # fmt: skip
    assert main([*base, "--scorer", "duo", "--output", str(out), "--group-size", "2"]) == 0
    assert json.loads((out / TRAIN_JSON).read_text())["config"]["loss"] == "pairwise"
    assert main([*base, "--scorer", "duo", "--loss", "pointwise", "--output", str(tmp_path / "x")]) == 2
    assert main([*base, "--scorer", "colbert", "--output", str(tmp_path / "y")]) == 2
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_an_untrainable_family_is_refused_with_the_trainable_ones(
    tiny_encoder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pairs = write_examples(toy_examples(n_queries=2), tmp_path / "pairs.jsonl")
    assert (
        main(["-q", "train", "--scorer", "llm", "--output", str(tmp_path / "m"), "--pairs", str(pairs)]) == 2
    )
    message = caplog.messages[-1]
    assert "llm family has no training recipe" in message
    for name in ("bi", "cross", "duo", "parade", "seq2seq"):
        assert name in message
