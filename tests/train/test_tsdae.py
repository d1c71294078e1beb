"""``evirank adapt --method tsdae``: the collection's own sentences, rebuilt by a tied decoder; the
loss equals sentence-transformers' ``DenoisingAutoEncoderLoss``; a run completes and resumes into an
ordinary bi-encoder folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_adapt import tiny_training, toy_corpus, write_corpus

from evirank.frames import Document
from evirank.train.adaptation import AdaptConfig, adapt, examples_from
from evirank.train.tsdae import DECODER_FILE, TsdaeRecipe, delete_words, reconstruction_loss

torch = pytest.importorskip("torch")


def test_the_sentences_are_the_corpus_own_and_nothing_else() -> None:
    docs = toy_corpus(10)
    rows = examples_from(docs, AdaptConfig(method="tsdae"))
    by_id = {d.docno: d for d in docs}
    assert set(rows["label"]) == {1}  # no negatives
    for row in rows.itertuples():
        own = by_id[row.docno]
        assert row.query == row.text
        assert row.text == own.title or row.text in own.text
    assert len(rows) == 10 * 4  # the four sentences; titles of two words are too short
    titled = examples_from([Document("d0", "all about the apple", "Short.")], AdaptConfig(method="tsdae"))
    assert titled[["qid", "text"]].values.tolist() == [["d0#t", "all about the apple"]]


def test_deleting_words_keeps_their_order_and_at_least_one() -> None:
    generator = torch.Generator().manual_seed(3)
    text = " ".join(f"w{i}" for i in range(200))
    noisy = delete_words(text, 0.6, generator).split()
    assert 50 < len(noisy) < 110  # about 40% kept
    assert noisy == sorted(noisy, key=lambda w: int(w[1:]))
    assert len(delete_words("only", 0.99, generator).split()) == 1
    assert delete_words("a b c", 0.0, generator) == "a b c"


def test_the_encoder_and_decoder_share_every_weight_but_the_decoders_own(tiny_encoder: Path) -> None:
    recipe = TsdaeRecipe()
    model, _, _ = recipe.load(str(tiny_encoder), tiny_training(tiny_encoder))
    own = model.own_decoder_weights()
    assert own and all("crossattention" in n or n.startswith("cls.") for n in own)
    embeddings = model.encoder.embeddings.word_embeddings.weight
    assert embeddings is model.decoder.bert.embeddings.word_embeddings.weight
    assert model.encoder.encoder.layer[0].attention.self.query.weight is (
        model.decoder.bert.encoder.layer[0].attention.self.query.weight
    )
    names = [n for n, _ in model.named_parameters()]
    assert len(names) == len(set(names)) == len(list(model.encoder.parameters())) + len(own)


def test_the_loss_is_sentence_transformers_denoising_auto_encoder_loss(tiny_encoder: Path) -> None:
    """Same tied weights, same inputs: the same loss as ``DenoisingAutoEncoderLoss``."""
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    from evirank.train.contrastive import write_sentence_transformers_files

    folder = tiny_encoder.parent / "tsdae-st"
    if not folder.exists():
        import shutil

        shutil.copytree(tiny_encoder, folder)
        write_sentence_transformers_files(folder, dim=32, max_length=24)
    st_model = st.SentenceTransformer(str(folder), device="cpu")
    st_loss = DenoisingAutoEncoderLoss(st_model, tie_encoder_decoder=True)
    ours, tokenizer, _ = TsdaeRecipe().load(str(folder), tiny_training(folder))
    ours.decoder.load_state_dict(st_loss.decoder.state_dict())
    st_model.eval(), st_loss.eval(), ours.eval()
    sentences = ["the apple is good fruit", "grape is bad fruit 3 1", "apple"]
    noisy = ["apple good", "grape fruit", "apple"]
    features = [st_model.tokenize(noisy), st_model.tokenize(sentences)]
    with torch.no_grad():
        expected = st_loss(features, None)
        got = reconstruction_loss(ours, tokenizer, noisy, sentences, 24, "cpu")
    assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_a_tiny_tsdae_run_completes_resumes_exactly_into_a_plain_bi_encoder(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    safetensors_torch = pytest.importorskip("safetensors.torch")
    corpus = write_corpus(tmp_path, toy_corpus(4))
    config = AdaptConfig(method="tsdae", train=tiny_training(tiny_encoder, max_steps=None))
    result = adapt(corpus, output_dir=tmp_path / "m", config=config)
    assert result.steps == 4  # 16 sentences in batches of 4 (the two-word titles are too short)
    out = tmp_path / "m"
    record = json.loads((out / "evirank-train.json").read_text())
    assert record["adaptation"]["method"] == "tsdae" and record["objective"] == "tsdae-denoising"
    assert record["kind"] == "bi-encoder" and not (out / DECODER_FILE).exists()
    assert (out / "modules.json").exists()
    weights = safetensors_torch.load_file(out / "model.safetensors")
    assert not any("crossattention" in k or k.startswith("cls.") for k in weights)
    initial = safetensors_torch.load_file(tiny_encoder / "model.safetensors")
    assert any(not torch.equal(weights[k], initial[k]) for k in weights if k in initial)

    def interrupt(step: int) -> None:
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        adapt(corpus, output_dir=tmp_path / "r", config=config, step_callback=interrupt)
    assert (tmp_path / "r" / "checkpoint" / "last" / DECODER_FILE).exists()
    adapt(corpus, output_dir=tmp_path / "r", config=config, resume=True)
    resumed = safetensors_torch.load_file(tmp_path / "r" / "model.safetensors")
    assert all(torch.equal(weights[k], resumed[k]) for k in weights)

    import evirank

    ranked = evirank.rank("apple good", ["the apple is good fruit.", "grape"], str(out), scorer="bi")
    assert sorted(d.id for d in ranked) == ["0", "1"]
