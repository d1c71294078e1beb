"""CrossEncoder on tiny random BERTs: input assembly, invariance, heads, caps, dedup, budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.errors import ColumnsError
from evirank.frames import QID, QUERY, SCORE, TEXT, make_passages
from evirank.score import CrossEncoder, relevance_from_logits
from evirank.score.backends import TokenBatch, TorchBackend

QUERIES = {"1": "where did the cat sit", "2": "bm25 document ranking", "3": "vaccine virus cells"}
TEXTS = [
    "The cat sat on the mat.",
    "BM25 ranks documents by term evidence.",
    "A vaccine trains cells to fight a virus, or so the model says; 42 dogs agree.",
    "",
    "Dogs.",
    "retrieval " * 40,
    "Search is not the same as ranking, and a passage is not a document.",
]


def passages() -> pd.DataFrame:
    rows = [(qid, f"d{j % 3}", j, text) for qid in QUERIES for j, text in enumerate(TEXTS)]
    frame = make_passages(rows)
    frame[QUERY] = frame[QID].map(QUERIES)
    return frame


def hf_scores(path: Path, queries: list[str], texts: list[str], max_length: int = 128) -> np.ndarray:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    enc = tokenizer(
        queries, texts, truncation="only_second", max_length=max_length, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        return model(**enc).logits.numpy()


def test_scores_equal_transformers_on_cls_query_sep_passage_sep(tiny_cross_encoder_path: Path) -> None:
    frame = passages()
    scored = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)
    expected = hf_scores(tiny_cross_encoder_path, frame[QUERY].tolist(), frame[TEXT].tolist())[:, 0]
    np.testing.assert_allclose(scored[SCORE].to_numpy(), expected, atol=1e-5)
    assert scored[SCORE].std() > 0.1  # the random model tells inputs apart


def test_scores_do_not_depend_on_batch_size_or_order(tiny_cross_encoder_path: Path) -> None:
    frame = passages()
    small = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=128))(frame)
    large = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=100_000))(frame)
    shuffled = frame.sample(frac=1.0, random_state=3)
    reordered = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=300))(shuffled)
    np.testing.assert_allclose(small[SCORE], large[SCORE], atol=1e-5, rtol=0)
    np.testing.assert_allclose(reordered.loc[frame.index, SCORE], large[SCORE], atol=1e-5, rtol=0)


def test_output_keeps_input_rows_and_columns_and_leaves_input_untouched(
    tiny_cross_encoder_path: Path,
) -> None:
    frame = passages().assign(first_stage_score=1.0, score=-5.0)
    before = frame.copy()
    scored = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)
    pd.testing.assert_frame_equal(frame, before)
    assert list(scored.columns) == list(frame.columns)
    assert (scored.index == frame.index).all()
    assert not np.isclose(scored[SCORE], -5.0).any()


def test_two_logit_head_scores_log_odds_that_rank_like_the_relevant_probability(
    tiny_two_logit_path: Path,
) -> None:
    frame = passages()
    scored = CrossEncoder(tiny_two_logit_path, Runtime(device="cpu"))(frame)
    logits = hf_scores(tiny_two_logit_path, frame[QUERY].tolist(), frame[TEXT].tolist())
    np.testing.assert_allclose(scored[SCORE], logits[:, 1] - logits[:, 0], atol=1e-5)
    prob = np.exp(logits[:, 1]) / np.exp(logits).sum(axis=1)
    assert (np.argsort(-scored[SCORE].to_numpy(), kind="stable") == np.argsort(-prob, kind="stable")).all()
    flipped = CrossEncoder(tiny_two_logit_path, Runtime(device="cpu"), relevant_class=0)(frame)
    np.testing.assert_allclose(flipped[SCORE], -scored[SCORE], atol=1e-5)


def test_log_odds_do_not_saturate_for_confident_pairs() -> None:
    scores = relevance_from_logits(np.array([[-20.0, 20.0], [-30.0, 30.0]]))
    assert scores[1] > scores[0]  # log-softmax would give 0.0 for both in float32
    three = relevance_from_logits(np.array([[0.0, 1.0, 2.0]]), relevant_class=2)
    assert three[0] == pytest.approx(2.0 - np.log(np.exp(0.0) + np.exp(1.0)))


@pytest.fixture
def recorded_batches(monkeypatch: pytest.MonkeyPatch) -> list[TokenBatch]:
    """Every TokenBatch the torch backend receives during the test."""
    seen: list[TokenBatch] = []
    forward = TorchBackend.forward

    def recording(self: TorchBackend, batch: TokenBatch) -> np.ndarray:
        seen.append(batch)
        return forward(self, batch)

    monkeypatch.setattr(TorchBackend, "forward", recording)
    return seen


def test_batches_never_exceed_the_token_budget(tiny_cross_encoder_path: Path, recorded_batches: list) -> None:
    frame = passages()
    CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_tokens=200))(frame)
    assert len(recorded_batches) > 1
    for batch in recorded_batches:
        rows, width = batch.shape
        assert rows * width <= 200
        # dynamic padding: the longest row of each batch fills it
        assert batch.attention_mask.sum(axis=1).max() == width


def test_query_is_capped_and_passage_takes_the_rest(
    tiny_cross_encoder_path: Path, recorded_batches: list
) -> None:
    words = ["cat", "dog", "mat", "virus", "cell", "model", "score", "query", "rank", "search", "passage"]
    long_query = " ".join(words * 4)  # 44 one-token words
    frame = make_passages([("1", "d1", 0, "retrieval " * 100)]).assign(query=long_query)
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", max_length=40), query_max_tokens=6)
    capped = scorer(frame)
    (batch,) = recorded_batches
    assert batch.shape == (1, 40)  # the passage fills max_length
    assert (batch.token_type_ids[0] == 0).sum() == 6 + 2  # [CLS] + 6 query tokens + [SEP]
    short = scorer(frame.assign(query=" ".join(words[:6])))
    assert capped[SCORE].iloc[0] == pytest.approx(short[SCORE].iloc[0], abs=1e-6)


def test_identical_pairs_are_scored_once(tiny_cross_encoder_path: Path, recorded_batches: list) -> None:
    frame = make_passages(
        [
            ("1", "d1", 0, "The cat sat."),
            ("1", "d2", 3, "The cat sat."),
            ("2", "d9", 0, "The cat sat."),
            ("1", "d1", 1, "Dogs."),
        ]
    )
    frame[QUERY] = ["cats", "cats", "cats", "cats"]  # qid 2 asks the same question
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    scored = scorer(frame)
    assert scorer.stats_.distinct == 2 and scorer.stats_.computed == 2
    assert sum(b.shape[0] for b in recorded_batches) == 2
    assert scored[SCORE].iloc[0] == scored[SCORE].iloc[1] == scored[SCORE].iloc[2]


def test_empty_input_gives_an_empty_score_column(tiny_cross_encoder_path: Path) -> None:
    empty = passages().iloc[:0]
    scored = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(empty)
    assert scored.empty and SCORE in scored.columns


def test_missing_columns_are_named(tiny_cross_encoder_path: Path) -> None:
    with pytest.raises(ColumnsError, match="query"):
        CrossEncoder(tiny_cross_encoder_path)(passages().drop(columns=[QUERY]))


def test_settings_are_checked(tiny_cross_encoder_path: Path) -> None:
    with pytest.raises(ValueError, match="room for the passage"):
        CrossEncoder(tiny_cross_encoder_path, Runtime(max_length=16), query_max_tokens=14)(passages())
    with pytest.raises(ValueError, match="backend"):
        CrossEncoder(tiny_cross_encoder_path, Runtime(backend="no-such-engine"))
    with pytest.raises(FileNotFoundError):
        CrossEncoder("./no/such/model")(passages())


def test_max_length_is_lowered_to_the_model_limit(tiny_cross_encoder_path: Path) -> None:
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", max_length=512))
    scorer(passages().head(1))
    assert scorer.max_length_ == 128  # the tiny model has 128 positions
