"""Contrastive bi-encoder training: the loss's masking, a tiny model learning, the folder it writes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_examples

from evirank.config import Runtime
from evirank.train import TrainConfig, split_by_query, train_bi_encoder, train_cross_encoder
from evirank.train.contrastive import Contrastive
from evirank.train.listwise import NEGATIVES
from evirank.train.trainer import TRAIN_JSON, TRAIN_LOG


def test_config_pairs_the_encoder_with_its_loss() -> None:
    assert TrainConfig(encoder="bi", loss="contrastive").scale == 20.0
    with pytest.raises(ValueError, match="bi-encoder trains with loss 'contrastive'"):
        TrainConfig(encoder="bi")
    with pytest.raises(ValueError, match="cross-encoder trains with loss"):
        TrainConfig(loss="contrastive")
    with pytest.raises(ValueError, match="encoder must be"):
        TrainConfig(encoder="poly")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale"):
        TrainConfig(encoder="bi", loss="contrastive", scale=0)
    with pytest.raises(ValueError, match="train_bi_encoder"):
        train_cross_encoder(toy_examples(), TrainConfig(encoder="bi", loss="contrastive"), "unused")


def test_a_second_positive_of_the_same_query_is_not_a_negative(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    vectors = {"q1": [1.0, 0.0], "q2": [0.0, 1.0], "a": [1.0, 0.0], "b": [1.0, 0.0], "c": [0.0, 1.0]}
    vectors |= {"n1": [0.0, 1.0], "n2": [1.0, 0.0]}

    def fake_embed(
        model: object, tokenizer: object, texts: list[str], max_length: int, device: str
    ) -> object:
        return torch.nn.functional.normalize(torch.tensor([vectors[t] for t in texts]), dim=-1)

    monkeypatch.setattr("evirank.train.contrastive.embed_for_training", fake_embed)
    rows = pd.DataFrame(
        {
            "qid": ["1", "1", "2"],
            "query": ["q1", "q1", "q2"],
            "text": ["a", "b", "c"],  # a and b: both positives of query 1
            NEGATIVES: [("n1",), ("n1",), ("n1",)],
        }
    )
    cfg = TrainConfig(encoder="bi", loss="contrastive", group_size=2, scale=1.0)
    loss = float(Contrastive(group_size=2, scale=1.0).loss(None, None, rows, cfg, "cpu"))
    # row 1 (q1, a): candidates a (1), c (0), n1 x3 (0 each); b is masked out
    # row 2 (q1, b): b (1), c (0), n1 x3 (0); a masked. Row 3 (q2, c): a, b (0), c (1), n1 x3 (1)
    first = -1 + math.log(math.e + 4)
    third = -1 + math.log(2 + 4 * math.e)
    assert loss == pytest.approx((2 * first + third) / 3, rel=1e-5)

    # a hard negative equal to one of the query's positives is masked too
    rows[NEGATIVES] = [("b",), ("n2",), ("n1",)]
    masked = float(Contrastive(group_size=2, scale=1.0).loss(None, None, rows, cfg, "cpu"))
    assert np.isfinite(masked)


def test_a_tiny_bi_encoder_learns_the_toy_order_resumes_exactly_and_loads_as_a_scorer(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    from evirank.frames import make_passages
    from evirank.score import BiEncoder

    train, val = split_by_query(toy_examples(n_queries=8), 0.25, seed=1)
    cfg = TrainConfig(
        model=str(tiny_encoder),
        group_size=3,
        epochs=8,
        batch_size=4,
        learning_rate=5e-3,
        max_length=16,
        save_every_steps=5,
        validate_every_steps=6,
    )
    result = train_bi_encoder(train, cfg, tmp_path / "m", validation=val)
    records = [json.loads(line) for line in (tmp_path / "m" / TRAIN_LOG).read_text().splitlines()]
    assert [r for r in records if r["event"] == "validation"]
    assert result.best is not None and result.best["AP"] == pytest.approx(1.0)
    saved = json.loads((tmp_path / "m" / TRAIN_JSON).read_text())
    assert saved["config"]["encoder"] == "bi" and saved["config"]["loss"] == "contrastive"
    assert saved["kind"] == "bi-encoder" and saved["score"] == "cosine"
    assert json.loads((tmp_path / "m" / "config.json").read_text())["architectures"] == ["BertModel"]
    st = json.loads((tmp_path / "m" / "sentence_bert_config.json").read_text())
    assert st["max_seq_length"] == 16
    assert json.loads((tmp_path / "m" / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"]

    # the folder is a bi-encoder evirank scores with: good texts above bad ones for an unseen query
    passages = make_passages([("1", "d1", 0, "apple good fruit"), ("1", "d2", 0, "apple bad fruit")]).assign(
        query="apple"
    )
    scorer = BiEncoder(str(tmp_path / "m"), Runtime(device="cpu"))
    scores = scorer(passages)["score"].tolist()
    assert scorer.max_length_ == 16
    assert scores[0] > scores[1]

    def interrupt(step: int) -> None:
        if step == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_bi_encoder(train, cfg, tmp_path / "r", validation=val, step_callback=interrupt)
    train_bi_encoder(train, cfg, tmp_path / "r", validation=val, resume=True)
    a = safetensors_torch.load_file(tmp_path / "m" / "model.safetensors")
    b = safetensors_torch.load_file(tmp_path / "r" / "model.safetensors")
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_hardest_negatives_keeps_what_the_initial_model_rates_highest(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    from evirank.train.contrastive import keep_hardest, load_encoder, predict_similarity

    with pytest.raises(ValueError, match="hardest_negatives applies"):
        TrainConfig(hardest_negatives=2)
    with pytest.raises(ValueError, match="positive integer"):
        TrainConfig(encoder="bi", loss="contrastive", hardest_negatives=0)
    train, val = split_by_query(toy_examples(n_queries=6), 0.25, seed=1)
    model, tokenizer = load_encoder(str(tiny_encoder), dropout=0.0)

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        return predict_similarity(model, tokenizer, queries, texts, max_length=16)

    from evirank.train.listwise import listwise_items

    items = listwise_items(train)
    kept = keep_hardest(items, 2, score)
    for pool, chosen, query in zip(items[NEGATIVES], kept[NEGATIVES], items["query"], strict=True):
        assert len(chosen) == 2 and set(chosen) <= set(pool)
        rated = score([query] * len(pool), list(pool))
        assert min(score([query] * 2, list(chosen))) >= sorted(rated)[-2] - 1e-6

    cfg = TrainConfig(
        encoder="bi",
        loss="contrastive",
        model=str(tiny_encoder),
        hardest_negatives=2,
        group_size=2,
        epochs=1,
        batch_size=4,
        max_length=16,
    )
    train_bi_encoder(train, cfg, tmp_path / "m", validation=val)
    saved = json.loads((tmp_path / "m" / TRAIN_JSON).read_text())
    assert saved["config"]["hardest_negatives"] == 2
