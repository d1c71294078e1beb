"""Listwise (grouped softmax) training: the groups, the validation loss, and a tiny model learning."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_examples

from evirank.train import TrainConfig, split_by_query, train_cross_encoder
from evirank.train.listwise import NEGATIVES, draw_negatives, listwise_items, listwise_validation_loss
from evirank.train.trainer import TRAIN_JSON, TRAIN_LOG


def test_items_pair_each_positive_with_all_negatives_of_its_query() -> None:
    examples = toy_examples(n_queries=3, per_query=6)
    items = listwise_items(examples)
    assert len(items) == int(examples["label"].sum())  # one item per positive
    by_query = examples.groupby("qid")
    for _, row in items.iterrows():
        own = by_query.get_group(row["qid"])
        assert row["text"] in set(own.loc[own["label"] == 1, "text"])
        assert sorted(row[NEGATIVES]) == sorted(own.loc[own["label"] == 0, "text"])


def test_queries_without_negatives_are_left_out_and_none_at_all_is_an_error() -> None:
    rows = pd.DataFrame(
        {"qid": ["1", "1", "2", "2"], "query": ["q"] * 4, "text": ["a", "b", "c", "d"], "label": [1, 0, 1, 1]}
    )
    assert listwise_items(rows)["qid"].tolist() == ["1"]
    with pytest.raises(ValueError, match="positives with a negative"):
        listwise_items(rows[rows["qid"] == "2"])


def test_negatives_are_drawn_from_torch_without_replacement_when_there_are_enough() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    first = draw_negatives(torch, ("a", "b", "c", "d", "e"), 4)
    assert len(set(first)) == 4 and set(first) <= set("abcde")
    draws = {tuple(draw_negatives(torch, ("a", "b", "c", "d", "e"), 4)) for _ in range(20)}
    assert len(draws) > 1  # fresh negatives at every step
    torch.manual_seed(0)
    assert draw_negatives(torch, ("a", "b", "c", "d", "e"), 4) == first  # the generator decides
    assert draw_negatives(torch, ("x",), 3) == ["x", "x", "x"]  # too few: with replacement


def test_validation_loss_is_the_softmax_cross_entropy_of_each_positive() -> None:
    rows = pd.DataFrame({"qid": ["1", "1", "1", "2", "3", "3"], "label": [1, 1, 0, 1, 0, 0]})
    scores = np.array([2.0, 0.0, 1.0, 5.0, 1.0, 1.0])
    # query 1 only (2 has no negative, 3 no positive): positives 2.0 and 0.0 against the negative 1.0
    expected = np.mean([np.log(np.exp(2) + np.e) - 2.0, np.log(1 + np.e) - 0.0])
    assert listwise_validation_loss(scores, rows) == pytest.approx(expected)
    assert np.isnan(listwise_validation_loss(scores[3:], rows.iloc[3:]))


def test_config_rejects_an_unknown_loss_or_a_group_of_one() -> None:
    with pytest.raises(ValueError, match="trains with loss"):
        TrainConfig(loss="pairwise")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="group_size"):
        TrainConfig(loss="listwise", group_size=1)


def test_a_tiny_model_learns_the_toy_order_listwise_and_resumes_exactly(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    train, val = split_by_query(toy_examples(n_queries=8), 0.25, seed=1)
    cfg = TrainConfig(
        model=str(tiny_encoder),
        loss="listwise",
        group_size=4,
        epochs=8,
        batch_size=2,
        learning_rate=5e-3,
        max_length=16,
        save_every_steps=5,
        validate_every_steps=6,
    )
    result = train_cross_encoder(train, cfg, tmp_path / "m", validation=val)
    records = [json.loads(line) for line in (tmp_path / "m" / TRAIN_LOG).read_text().splitlines()]
    losses = [r["loss"] for r in records if r["event"] == "step"]
    assert np.mean(losses[:3]) > np.log(4) - 0.3  # about chance at the start
    assert np.mean(losses[-3:]) < 0.5
    assert result.best is not None and result.best["AP"] == pytest.approx(1.0)
    saved = json.loads((tmp_path / "m" / TRAIN_JSON).read_text())
    assert saved["config"]["loss"] == "listwise"
    seen = saved["timings"]["examples_seen"]
    assert seen == 8 * int(train["label"].sum())  # 8 epochs of one item per positive
    assert saved["timings"]["train_pairs_per_s"] == pytest.approx(
        4 * seen / saved["timings"]["wall_time_s"], rel=0.02
    )

    def interrupt(step: int) -> None:
        if step == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_cross_encoder(train, cfg, tmp_path / "r", validation=val, step_callback=interrupt)
    train_cross_encoder(train, cfg, tmp_path / "r", validation=val, resume=True)
    a = safetensors_torch.load_file(tmp_path / "m" / "model.safetensors")
    b = safetensors_torch.load_file(tmp_path / "r" / "model.safetensors")
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_same_source_keeps_sentences_against_sentences_and_abstracts_against_abstracts() -> None:
    rows = pd.DataFrame(
        {
            "qid": ["1"] * 5,
            "query": ["q"] * 5,
            "text": ["gold sentence", "other sentence", "relevant abstract", "other abstract", "lone"],
            "label": [1, 0, 1, 0, 1],
            "source": [
                "evidence:train.jsonl/gold",
                "evidence:train.jsonl/run-negative",
                "documents:qrels.tsv",
                "documents:qrels.tsv",
                "pairs.tsv",
            ],
        }
    )
    mixed = listwise_items(rows).set_index("text")[NEGATIVES].to_dict()
    assert mixed["gold sentence"] == ("other sentence", "other abstract")
    by_source = listwise_items(rows, same_source=True).set_index("text")[NEGATIVES].to_dict()
    assert by_source == {"gold sentence": ("other sentence",), "relevant abstract": ("other abstract",)}
    with pytest.raises(ValueError, match="source"):
        listwise_items(rows.drop(columns="source"), same_source=True)
    with pytest.raises(ValueError, match="negatives_from"):
        TrainConfig(negatives_from="corpus")  # type: ignore[arg-type]
