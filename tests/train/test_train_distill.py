"""Distillation with a tiny random 4-layer teacher: the student's shape, its copied weights, training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_examples

from evirank.train import DistillConfig, TrainConfig, distill, make_student, split_by_query
from evirank.train.distillation import margin_pairs, student_layers
from evirank.train.trainer import TRAIN_JSON

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def quick(**overrides: object) -> TrainConfig:
    base = {"epochs": 3, "batch_size": 8, "learning_rate": 2e-3, "max_length": 16, "save_every_steps": 4}
    base.update(overrides)
    return TrainConfig(**base)  # type: ignore[arg-type]


def test_student_keeps_the_chosen_teacher_layers(tiny_encoder_4: Path) -> None:
    teacher = transformers.AutoModelForSequenceClassification.from_pretrained(tiny_encoder_4)
    student = make_student(teacher, [0, 2])
    assert student.config.num_hidden_layers == 2 and len(student.bert.encoder.layer) == 2
    t, s = teacher.state_dict(), student.state_dict()
    assert torch.equal(
        s["bert.encoder.layer.1.output.dense.weight"], t["bert.encoder.layer.2.output.dense.weight"]
    )
    assert torch.equal(
        s["bert.embeddings.word_embeddings.weight"], t["bert.embeddings.word_embeddings.weight"]
    )
    assert torch.equal(s["classifier.weight"], t["classifier.weight"])
    inputs = {"input_ids": torch.tensor([[2, 7, 3, 5, 3]])}
    assert student(**inputs).logits.shape == (1, 1)


def test_default_student_is_the_first_half() -> None:
    assert student_layers(4, DistillConfig()) == [0, 1]
    assert student_layers(6, DistillConfig(num_layers=2)) == [0, 1]
    with pytest.raises(ValueError, match="distinct indices"):
        student_layers(4, DistillConfig(layers=(0, 4)))


def test_distilled_student_has_n_layers_runs_and_approaches_the_teacher(
    tiny_encoder_4: Path, tmp_path: Path
) -> None:
    train, val = split_by_query(toy_examples(n_queries=8), 0.25, seed=0)
    result = distill(
        tiny_encoder_4,
        train,
        DistillConfig(num_layers=1, train=quick(epochs=4)),
        tmp_path / "student",
        validation=val,
        speed_pairs=32,
    )
    student = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "student")
    assert student.config.num_hidden_layers == 1
    report = result.report
    assert report["teacher"]["layers"] == 4 and report["student"]["layers"] == 1
    assert report["student"]["parameters"] < report["teacher"]["parameters"]
    assert report["teacher"]["pairs_per_s"] > 0 and report["speedup"] > 0
    assert {"AP", "nDCG@10", "mse_to_teacher"} <= set(report["student"])
    history = result.train.history
    assert history[-1]["val_loss"] < history[0]["val_loss"]  # closer to the teacher's logits
    meta = json.loads((tmp_path / "student" / TRAIN_JSON).read_text())
    assert meta["objective"] == "distill-mse" and meta["distillation"]["student"]["teacher_layers"] == [0]


def test_margin_mse_distillation_trains_on_pairs(tiny_encoder_4: Path, tmp_path: Path) -> None:
    result = distill(
        tiny_encoder_4,
        toy_examples(),
        DistillConfig(layers=(1, 3), loss="margin-mse", pairs_per_positive=2, train=quick(epochs=1)),
        tmp_path / "student",
        speed_pairs=0,
    )
    meta = json.loads((tmp_path / "student" / TRAIN_JSON).read_text())
    assert meta["objective"] == "distill-margin-mse"
    assert meta["data"]["items"] == 6 * 4 * 2  # 4 positives per query, 2 negatives each
    assert result.report["student"]["teacher_layers"] == [1, 3]


def test_margin_pairs_pair_positives_with_negatives_of_the_same_query() -> None:
    rows = pd.DataFrame(
        {
            "qid": ["1", "1", "1", "2", "2"],
            "query": ["a"] * 3 + ["b"] * 2,
            "text": list("xyzuv"),
            "label": [1, 0, 0, 0, 0],
            "target": [3.0, 1.0, 0.0, 2.0, 5.0],
        }
    )
    pairs = margin_pairs(rows, 5, seed=0)
    q1 = pairs[pairs.qid == "1"]
    assert set(q1.text) == {"x"} and sorted(q1.text_b) == ["y", "z"]
    assert sorted(q1.target) == [2.0, 3.0]
    q2 = pairs[pairs.qid == "2"]  # no positive: every row paired with the others
    assert sorted(q2.target) == [-3.0, 3.0]
    assert np.isfinite(pairs.target).all()
