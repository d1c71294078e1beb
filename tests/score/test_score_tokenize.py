"""Input assembly follows each tokenizer's own special-token template (BERT and RoBERTa styles)."""

from __future__ import annotations

import pytest

from evirank.score.tokenize import Template, TextEncoder

WORDS = [
    "<s>",
    "<pad>",
    "</s>",
    "<unk>",
    "[CLS]",
    "[SEP]",
    "cats",
    "sit",
    "on",
    "mats",
    "dogs",
    "bark",
    "?",
    ".",
]


def word_level_tokenizer(style: str):  # -> transformers.PreTrainedTokenizerFast
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    if style == "roberta":
        tok.post_processor = tokenizers.processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
        names = ["input_ids", "attention_mask"]
    else:
        tok.post_processor = tokenizers.processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", 4), ("[SEP]", 5)],
        )
        names = ["input_ids", "token_type_ids", "attention_mask"]
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", model_input_names=names
    )


@pytest.mark.parametrize("style", ["bert", "roberta"])
def test_pairs_and_singles_match_the_tokenizers_own_encoding(style: str) -> None:
    tokenizer = word_level_tokenizer(style)
    encoder = TextEncoder(tokenizer)
    query, passage = "cats sit ?", "dogs bark on mats ."
    q_ids, p_ids = encoder.token_ids([query, passage], max_tokens=100)
    batch = encoder.pair_batch([q_ids], [p_ids])
    expected = tokenizer(query, passage)
    assert batch.input_ids[0].tolist() == expected["input_ids"]
    if style == "bert":
        assert batch.token_type_ids is not None
        assert batch.token_type_ids[0].tolist() == expected["token_type_ids"]
    else:
        assert batch.token_type_ids is None
    single = encoder.single_batch([p_ids])
    assert single.input_ids[0].tolist() == tokenizer(passage)["input_ids"]


def test_token_ids_are_cut_and_batches_padded_with_a_mask() -> None:
    encoder = TextEncoder(word_level_tokenizer("bert"))
    short, long = encoder.token_ids(["cats", "dogs bark on mats ."], max_tokens=3)
    assert len(long) == 3
    batch = encoder.single_batch([short, long], pad_multiple=8)
    assert batch.shape == (2, 8)
    assert batch.attention_mask.sum(axis=1).tolist() == [3, 5]
    assert batch.input_ids[0, 3:].tolist() == [encoder.pad_id] * 5


@pytest.mark.parametrize("style", ["bert", "roberta"])
def test_a_batch_of_ragged_pairs_matches_the_tokenizers_padded_encoding(style: str) -> None:
    tokenizer = word_level_tokenizer(style)
    encoder = TextEncoder(tokenizer)
    queries = ["cats", "dogs bark ?", "cats sit on mats", "?", "dogs"]
    passages = ["mats .", "cats", "dogs bark on mats . cats sit", "sit on", "bark bark bark bark ."]
    q_ids = encoder.token_ids(queries, 100)
    p_ids = encoder.token_ids(passages, 100)
    batch = encoder.pair_batch(q_ids, p_ids, pad_multiple=4)
    expected = tokenizer(queries, passages, padding="longest", pad_to_multiple_of=4)
    assert batch.input_ids.tolist() == expected["input_ids"]
    assert batch.attention_mask.tolist() == expected["attention_mask"]
    if style == "bert":
        assert batch.token_type_ids is not None
        assert batch.token_type_ids.tolist() == expected["token_type_ids"]
    singles = encoder.single_batch(p_ids)
    assert singles.input_ids.tolist() == tokenizer(passages, padding="longest")["input_ids"]


def test_a_template_with_an_empty_text_keeps_each_segments_token_type() -> None:
    encoder = TextEncoder(word_level_tokenizer("bert"))
    template = Template(prefix=(4,), middle=(5, 5), suffix=(5,), types=(0, 1, 2, 3, 4))
    batch = encoder.pair_batch([[], [6, 7]], [[8], []], template=template)
    pad = encoder.pad_id
    assert batch.input_ids.tolist() == [[4, 5, 5, 8, 5, pad], [4, 6, 7, 5, 5, 5]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]]
    assert batch.token_type_ids is not None
    assert batch.token_type_ids.tolist() == [[0, 2, 2, 3, 4, 0], [0, 1, 1, 2, 2, 4]]
