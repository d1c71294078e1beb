"""Training scores and evaluates as inference does: one scorer, one relevance read-out, one device rule,
one evaluator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.evaluate import evaluate
from evirank.frames import DOCNO, LABEL, PID, QID, QUERY, SCORE, TEXT, make_qrels
from evirank.score import CrossEncoder, relevance_from_logits
from evirank.score.devices import resolve_device
from evirank.train import _model
from evirank.train.trainer import _validation_measures

torch = pytest.importorskip("torch")

# The long query is cut to the scorer's query cap (24 of 48 tokens), as inference cuts it; a plain
# longest-first truncation of the pair would keep more of it and score something else.
QUERIES = ["cats purr", " ".join(["dogs bark loudly at night"] * 8), "ocean currents"]
LONG = " ".join(["the cat sat on the mat and purred"] * 60)  # longer than max_length: truncated
TEXTS = ["Cats purr when content.", LONG, "Currents move heat across the ocean."]


@pytest.mark.parametrize("num_labels", [1, 2])
def test_validation_scores_are_the_cross_encoders_scores_of_the_saved_model(
    tiny_bert_builder, tmp_path: Path, num_labels: int
) -> None:
    folder = tiny_bert_builder(tmp_path / "model", head="classify", num_labels=num_labels)
    model, tokenizer, _ = _model.load_classifier(str(folder), num_labels=None, dropout=None, seed=0)
    model.train()  # as during training: scoring must switch dropout off, and switch back
    queries = [q for q in QUERIES for _ in TEXTS]
    texts = [t for _ in QUERIES for t in TEXTS]
    in_memory = _model.predict_relevance(
        model, tokenizer, queries, texts, batch_size=4, max_length=48, device="cpu", bf16=False
    )
    assert model.training
    frame = pd.DataFrame(
        {QID: [str(i) for i in range(len(queries))], QUERY: queries, DOCNO: "d", PID: 0, TEXT: texts}
    )
    saved = CrossEncoder(folder, Runtime(max_length=48, device="cpu"), query_max_tokens=24)(frame)[SCORE]
    np.testing.assert_allclose(in_memory, saved.to_numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("labels", [1, 2, 3])
def test_one_relevance_read_out_for_arrays_and_tensors(labels: int) -> None:
    logits = np.random.default_rng(labels).normal(size=(5, labels))
    tensor = torch.tensor(logits, requires_grad=True)
    from_tensor = relevance_from_logits(tensor)
    assert from_tensor.requires_grad  # training's losses differentiate through it
    np.testing.assert_allclose(from_tensor.detach().numpy(), relevance_from_logits(logits), atol=1e-12)
    if labels == 2:  # the log-odds of class 1, exactly
        np.testing.assert_array_equal(from_tensor.detach().numpy(), logits[:, 1] - logits[:, 0])


def test_one_device_rule() -> None:
    expected = resolve_device("auto")
    assert resolve_device(None) == expected  # training's "no device given" is scoring's "auto"
    assert resolve_device("cpu") == "cpu"


def test_validation_measures_are_evirank_evaluate_with_its_tie_rule() -> None:
    rows = pd.DataFrame(
        {QID: ["1", "1", "1", "2", "2", "3"], LABEL: [0, 1, 0, 1, 0, 0]}  # query 3: no relevant row
    )
    scores = np.array([0.5, 0.5, 0.1, 0.2, 0.9, 0.3])  # a tie in query 1
    measures = ("RR", "ndcg_cut.3", "P@1")
    got = _validation_measures(scores, rows, measures)
    assert list(got) == list(measures)  # keyed by the names given
    run = pd.DataFrame({QID: rows[QID], DOCNO: [str(i) for i in range(6)], SCORE: scores})[rows[QID] != "3"]
    labels = zip(rows[QID], rows[LABEL], strict=True)
    qrels = make_qrels([(q, str(i), int(label)) for i, (q, label) in enumerate(labels)])
    expected = evaluate(run, qrels[qrels[QID] != "3"], measures)
    assert list(got.values()) == pytest.approx(list(expected.values()))
    # docno descending breaks the tie in query 1: row "1" (relevant) before row "0"
    assert got["RR"] == pytest.approx((1.0 + 0.5) / 2)
