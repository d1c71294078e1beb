"""Training PARADE end to end on a tiny random BERT: documents from passage examples, each
aggregation learns a separable toy set, the saved folder scores through the Parade scorer as
training validated it, and an interrupted run resumes to the same weights."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import WORDS

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import DOCUMENT_SCORE
from evirank.train import TrainConfig, make_examples, split_by_query, train_model
from evirank.train.parade import PASSAGES, document_items
from evirank.train.trainer import TRAIN_JSON

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")


def toy_documents(n_queries: int = 8, per_query: int = 4, seed: int = 0) -> pd.DataFrame:
    """Documents of 3 passages; a relevant one has 'good' in one passage (any), the others 'bad'."""
    rng = random.Random(seed)
    fruits = WORDS[2:8]
    rows = []
    for q in range(n_queries):
        query = fruits[q % len(fruits)]
        for d in range(per_query):
            label = int(d == 0)
            where = rng.randrange(3)
            for pid in range(3):
                word = ("good" if label else "bad") if pid == where else rng.choice(["the", "is", "about"])
                text = " ".join([*rng.sample(fruits, 2), word, "fruit"])
                rows.append((str(q + 1), query, f"q{q}-d{d}", pid, text, label, "toy"))
    return make_examples(rows)


def config(model: Path, **overrides: object) -> TrainConfig:
    base: dict[str, object] = {
        "encoder": "parade",
        "model": str(model),
        "epochs": 4,
        "batch_size": 4,
        "learning_rate": 3e-3,
        "max_length": 16,
        "save_every_steps": 3,
        "max_passages": 3,
        "validation_measures": ("AP",),
    }
    base.update(overrides)
    return TrainConfig(**base)  # type: ignore[arg-type]


def test_documents_are_grouped_in_passage_order_and_bounded() -> None:
    items = document_items(toy_documents(n_queries=1, per_query=2).sample(frac=1.0, random_state=1), 2)
    assert items[PASSAGES].map(len).tolist() == [2, 2] and items["label"].tolist() == [1, 0]
    full = toy_documents(n_queries=1, per_query=1)
    assert items[PASSAGES].iloc[0] == tuple(full["text"][:2])


@pytest.mark.parametrize("aggregation", ["avg", "max", "attn", "transformer"])
def test_each_aggregation_learns_a_separable_toy_set_and_scores_as_validated(
    tiny_encoder: Path, tmp_path: Path, aggregation: str
) -> None:
    from evirank.score.families.parade import Parade

    train, val = split_by_query(toy_documents(n_queries=10), 0.3, seed=1)
    out = tmp_path / aggregation
    cfg = config(tiny_encoder, aggregation=aggregation, epochs=8, validate_every_steps=7)
    result = train_model(train, cfg, out, validation=val)
    meta = json.loads((out / TRAIN_JSON).read_text())
    assert meta["kind"] == "PARADE" and meta["init"]["aggregation"] == aggregation
    assert meta["config"]["aggregation"] == aggregation and meta["objective"] == "parade-bce"
    history = [record["val_loss"] for record in result.history]
    assert history[-1] < history[0]  # it learns
    assert result.best is not None and result.best["AP"] == 1.0  # every relevant document first
    # the saved folder, through the scorer, gives the validation documents the scores training saw
    scored = Parade(out, Runtime(device="cpu"))(val)
    per_doc = scored.drop_duplicates(["qid", "docno"])
    relevant = per_doc.groupby("qid").apply(
        lambda g: g.sort_values(DOCUMENT_SCORE, ascending=False)["label"].iloc[0], include_groups=False
    )
    assert relevant.eq(1).all()
    assert (out / "parade.json").is_file() and json.loads((out / "parade.json").read_text())[
        "max_length"
    ] == 16


def test_an_interrupted_parade_run_resumes_to_the_same_weights(tiny_encoder: Path, tmp_path: Path) -> None:
    train, val = split_by_query(toy_documents(), 0.25, seed=1)
    cfg = config(tiny_encoder, epochs=2, aggregation="transformer", dropout=0.1)
    train_model(train, cfg, tmp_path / "straight", validation=val)

    def interrupt(step: int) -> None:
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(train, cfg, tmp_path / "resumed", validation=val, step_callback=interrupt)
    train_model(train, cfg, tmp_path / "resumed", validation=val, resume=True)
    for name in ("model.safetensors", "parade_head.safetensors"):
        a = safetensors_torch.load_file(tmp_path / "straight" / name)
        b = safetensors_torch.load_file(tmp_path / "resumed" / name)
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (name, key)


def test_parade_options_belong_to_parade(tiny_encoder: Path) -> None:
    with pytest.raises(ValueError, match="aggregation must be one of"):
        config(tiny_encoder, aggregation="mean")
    with pytest.raises(ValueError, match="document-level family's options"):
        TrainConfig(aggregation="avg")
    with pytest.raises(ValueError, match="max_passages"):
        config(tiny_encoder, max_passages=0)


def test_train_cli_trains_parade_from_segmented_documents(tiny_encoder: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    topics = tmp_path / "topics.tsv"
    qrels = tmp_path / "qrels.txt"
    run = tmp_path / "run.txt"
    rows, runs, judged = [], [], []
    for q in range(1, 7):
        judged.append(f"{q} 0 q{q}-d0 1\n")
        for d in range(4):
            word = "good" if d == 0 else "bad"
            text = f"the apple is about fruit. the {word} fruit is {word}. the banana is fruit."
            rows.append(json.dumps({"_id": f"q{q}-d{d}", "title": "", "text": text}) + "\n")
            runs.append(f"{q} Q0 q{q}-d{d} {d + 1} {10 - d} bm25\n")
    corpus.write_text("".join(rows))
    topics.write_text("".join(f"{q}\tapple fruit\n" for q in range(1, 7)))
    qrels.write_text("".join(judged))
    run.write_text("".join(runs))
    out = tmp_path / "parade"
    args = ["-q", "train", "--scorer", "parade", "--model", str(tiny_encoder), "--output", str(out),
            "--documents", str(topics), str(qrels), str(run), str(corpus), "--segment", "sentences:skip",
            "--max-passages", "0", "--aggregation", "attn", "--passages-per-document", "2",
            "--epochs", "1", "--batch-size", "4", "--grad-accum", "2", "--max-length", "24",
            "--validation-fraction", "0.34"]  # fmt: skip
    assert main(args) == 0
    meta = json.loads((out / TRAIN_JSON).read_text())
    assert meta["config"]["max_passages"] == 2 and meta["config"]["gradient_accumulation"] == 2
    head = json.loads((out / "parade.json").read_text())
    assert head["aggregation"] == "attn" and head["max_passages"] == 2
    assert meta["data"]["train"]["rows"] > 0 and np.isfinite(meta["history"][-1]["val_loss"])
    refused = ["-q", "train", "--scorer", "cross", "--aggregation", "avg", "--output", str(tmp_path / "x"),
               "--pairs", str(tmp_path / "none.tsv")]  # fmt: skip
    assert main(refused) == 2 and not (tmp_path / "x").exists()
