"""Texts are tokenised once and inputs joined from token ids: the ids a model reads are those of
tokenising each pair whole (BERT, RoBERTa, T5 / monoT5, Qwen / yes-no LLM), truncation included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_score_llm import QUERIES as LLM_QUERIES
from test_score_llm import TEXTS as LLM_TEXTS
from test_score_llm import build_tiny_llm
from test_score_tokenize import word_level_tokenizer

from evirank.config import Runtime
from evirank.frames import QUERY, TEXT
from evirank.score import BiEncoder, CrossEncoder
from evirank.score.backends import TokenBatch, TorchBackend
from evirank.score.default_model import default_bi_encoder
from evirank.score.families.llm import PROMPTS, YesNoReranker
from evirank.score.families.seq2seq import MonoT5
from evirank.score.token_cache import ENTRY_OVERHEAD, MAX_MB_VARIABLE, TokenCache, default_max_bytes
from evirank.score.tokenize import TokenTable, assemble
from evirank.score.transformer import DistinctPairs, ScoringStats
from seq2seq_helpers import build_tiny_t5


class Recording(TorchBackend):
    """A backend that keeps each row it is given (ids and token types, padding dropped) and
    answers each row's index, so the caller can tell which input each pair got."""

    def __init__(self, pad_multiple: int = 1) -> None:
        super().__init__(None, "classify", "cpu", "fp32")
        self.pad_multiple = pad_multiple
        self.rows: list[tuple[list[int], list[int] | None]] = []

    def forward(self, batch: TokenBatch) -> np.ndarray:
        start = len(self.rows)
        for k, n in enumerate(batch.attention_mask.sum(axis=1).tolist()):
            assert batch.attention_mask[k, :n].all() and not batch.attention_mask[k, n:].any()
            types = None if batch.token_type_ids is None else batch.token_type_ids[k, :n].tolist()
            self.rows.append((batch.input_ids[k, :n].tolist(), types))
        return np.arange(start, len(self.rows), dtype=np.float64)[:, None]


def scored_inputs(
    scorer: Any, queries: list[str], texts: list[str]
) -> list[tuple[list[int], list[int] | None]]:
    """The input row scoring gives each (query, text) pair, through the scorer's own batched path."""
    scorer.prepare()
    backend = Recording(pad_multiple=8)
    scorer.backend_ = backend
    pairs = DistinctPairs.of(pd.DataFrame({QUERY: queries, TEXT: texts}))
    got: list[Any] = [None] * len(pairs.scores)

    def consume(items: np.ndarray, output: np.ndarray) -> None:
        for item, row in zip(items.tolist(), output[:, 0].tolist(), strict=True):
            got[item] = backend.rows[int(row)]

    scorer._run_pairs(pairs, np.arange(len(pairs.scores)), consume, ScoringStats())
    return [got[p] for p in pairs.row_pair]


def cut_text(tokenizer: Any, text: str, n: int) -> str:
    """``text`` up to the end of its ``n``-th token (all of it when it has no more)."""
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoding["offset_mapping"]
    return text if len(offsets) <= n else text[: offsets[n - 1][1]] if n > 0 else ""


LONG = " ".join(["the cats sit on the mats and the dogs bark at night"] * 8)
QUERIES = ["cats?", "where do the dogs bark at night and why do cats sit on mats all day long", "dogs"]
TEXTS = ["the cats sit on the mats.", LONG, "dogs bark"]


def pair_grid() -> tuple[list[str], list[str]]:
    return [q for q in QUERIES for _ in TEXTS], [t for _ in QUERIES for t in TEXTS]


def roberta_folder(folder: Path) -> Path:
    from transformers import RobertaConfig

    tokenizer = word_level_tokenizer("roberta")
    tokenizer.save_pretrained(str(folder))
    RobertaConfig(vocab_size=64, max_position_embeddings=130, pad_token_id=1).save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("style", ["bert", "roberta"])
def test_cross_encoder_inputs_are_the_whole_pairs_tokens_with_long_queries_and_passages_cut(
    style: str, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    folder = Path(default_bi_encoder()) if style == "bert" else roberta_folder(tmp_path / "roberta")
    max_length, query_cap = 40, 6
    scorer = CrossEncoder(folder, Runtime(device="cpu", max_length=max_length), query_max_tokens=query_cap)
    queries, texts = pair_grid()
    got = scored_inputs(scorer, queries, texts)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    for (ids, types), query, text in zip(got, queries, texts, strict=True):
        whole = tokenizer(
            cut_text(tokenizer, query, query_cap), text, truncation="only_second", max_length=max_length
        )
        assert ids == whole["input_ids"], (query, text)
        if types is not None:
            assert types == whole["token_type_ids"]
    assert max(len(ids) for ids, _ in got) == max_length  # the long passage was cut
    # called again, the texts come from the cache and the inputs are the same
    misses = scorer.encoder_.cache.misses
    assert scored_inputs(scorer, queries, texts) == got
    assert scorer.encoder_.cache.misses == misses and scorer.encoder_.cache.hits > 0


def t5_folder(folder: Path) -> Path:
    """A T5 config with a SentencePiece-style (Unigram, metaspace) tokenizer, as T5's is."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config

    # whole words for the prompt, pieces of words (so words of the texts split into several)
    words = ["\u2581Query:", "\u2581Document:", "\u2581Relevant:", "\u2581true", "\u2581false", "\u2581the"]
    pieces = [
        "\u2581ca",
        "ts",
        "\u2581do",
        "gs",
        "\u2581si",
        "t",
        "\u2581ma",
        "\u2581b",
        "ark",
        "\u2581n",
        "ight",
    ]
    letters = [*"abcdefghijklmnopqrstuvwxyz?.,", *("\u2581" + c for c in "abcdefghijklmnopqrstuvwxyz?.,")]
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(w, -1.0) for w in words] + [(p, -2.0) for p in pieces] + [(c, -5.0) for c in letters]
    backend = Tokenizer(models.Unigram(vocab, unk_id=2))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=512
    )
    folder.mkdir(parents=True)
    tokenizer.save_pretrained(str(folder))
    T5Config(vocab_size=128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1).save_pretrained(
        str(folder)
    )
    return folder


def test_monot5_inputs_are_its_whole_prompts_tokens_with_long_queries_and_passages_cut(
    tmp_path: Path,
) -> None:
    from transformers import AutoTokenizer

    folder = t5_folder(tmp_path / "t5")
    max_length, query_cap = 48, 6
    scorer = MonoT5(folder, Runtime(device="cpu", max_length=max_length), query_max_tokens=query_cap)
    queries, texts = pair_grid()
    got = scored_inputs(scorer, queries, texts)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    room = max_length - scorer.pair_template().n_special
    for (ids, _), query, text in zip(got, queries, texts, strict=True):
        q = cut_text(tokenizer, query, query_cap)
        n_query = len(tokenizer(q, add_special_tokens=False)["input_ids"])
        d = cut_text(tokenizer, text, room - n_query)
        assert ids == tokenizer(f"Query: {q} Document: {d} Relevant:")["input_ids"], (query, text)
    assert max(len(ids) for ids, _ in got) == max_length


def test_a_tiny_t5_word_level_prompt_is_joined_like_the_whole_prompt(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = build_tiny_t5(tmp_path / "t5w")
    scorer = MonoT5(folder, Runtime(device="cpu"))
    queries, texts = ["what is bm25", "the cat"], ["bm25 ranks documents", "the cat sat on the mat"]
    got = scored_inputs(scorer, queries, texts)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    for (ids, _), q, d in zip(got, queries, texts, strict=True):
        assert ids == tokenizer(f"Query: {q} Document: {d} Relevant:")["input_ids"]


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    questions = tuple(PROMPTS["qwen3"].text(q, t) for q in ("is it?", "where?") for t in LLM_TEXTS)
    return build_tiny_llm(tmp_path_factory.mktemp("tiny-llm-joined"), seed=5, extra=questions * 5)


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_llm_prompts_are_joined_from_ids_and_equal_the_whole_prompts_tokens(
    tiny_llm: Path, prompt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llm))
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu"), prompt=prompt, query_max_tokens=5)
    queries = [*LLM_QUERIES, "is it?", "where?", "where did the cat sit on the mat at night and why"]
    texts = [*LLM_TEXTS, "(1999) a date first", "ends with a newline\n"]
    grid_q, grid_t = [q for q in queries for _ in texts], [t for _ in queries for t in texts]
    whole_calls: list[int] = []
    original = scorer._whole_prompt_ids

    def counting(qs: Any, ps: Any) -> list[list[int]]:
        whole_calls.append(len(qs))
        return original(qs, ps)

    monkeypatch.setattr(scorer, "_whole_prompt_ids", counting)
    got = scored_inputs(scorer, grid_q, grid_t)
    chosen = PROMPTS[prompt]
    bos = [tokenizer.bos_token_id] if chosen.bos else []
    for (ids, _), query, text in zip(got, grid_q, grid_t, strict=True):
        expected = bos + tokenizer.encode(
            chosen.text(scorer.cut_query(query), text), add_special_tokens=False
        )
        assert ids == expected, (query, text)
    assert scorer.prompt_ids(grid_q, grid_t) == [ids for ids, _ in got]
    assert sum(whole_calls) < len(grid_q) // 4  # almost every prompt was joined from ids


def test_llm_passages_too_long_are_cut_as_before(tiny_llm: Path) -> None:
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu", max_length=200), query_max_tokens=8)
    long = " ".join(["the cat sat on the mat"] * 40)
    queries, texts = ["where did the cat sit", "bm25"], [long, "cat"]
    got = scored_inputs(scorer, queries, texts)
    assert [ids for ids, _ in got] == scorer._whole_prompt_ids(queries, texts)
    assert 190 <= max(len(ids) for ids, _ in got) <= 200  # the long passage was cut


def test_the_bi_encoder_embeds_passages_from_the_cache(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    folder = Path(default_bi_encoder())
    scorer = BiEncoder(folder, Runtime(device="cpu", max_length=16))
    scorer.prepare()
    texts = ["the cats sit on the mats.", LONG, "dogs bark"]

    class Rows(TorchBackend):
        def __init__(self) -> None:
            super().__init__(None, "embed", "cpu", "fp32")
            self.rows: dict[int, list[int]] = {}

        def forward(self, batch: TokenBatch) -> np.ndarray:
            # each row's vector: its length and its ids' sum, to find the row again
            n = batch.attention_mask.sum(axis=1)
            return np.stack([n, (batch.input_ids * batch.attention_mask).sum(axis=1)], axis=1).astype(
                np.float32
            )

    scorer.backend_ = Rows()
    first = scorer.compute_block({TEXT: texts}, scorer.new_stats())
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    for vector, text in zip(first, texts, strict=True):
        ids = tokenizer(text, truncation=True, max_length=16)["input_ids"]
        assert vector.tolist() == [len(ids), sum(ids)]
    misses = scorer.encoder_.cache.misses
    again = scorer.compute_block({TEXT: texts}, scorer.new_stats())
    assert np.array_equal(again, first) and scorer.encoder_.cache.misses == misses


def test_the_cache_keeps_the_most_recently_used_texts_within_its_bound() -> None:
    ids = np.arange(10)
    cache = TokenCache(max_bytes=2 * (40 + ENTRY_OVERHEAD))  # two entries of 10 int32 ids
    cache.add([b"a", b"b"], [ids, ids])
    assert cache.find([b"a"], 512)[0] is not None  # "a" used last: "b" goes first
    cache.add([b"c"], [ids])
    assert [x is not None for x in cache.find([b"a", b"b", b"c"], 512)] == [True, False, True]
    assert len(cache) == 2 and cache.nbytes <= cache.max_bytes and cache.evicted == 1
    off = TokenCache(max_bytes=0)
    off.add([b"a"], [ids])
    assert len(off) == 0


def test_texts_longer_than_kept_are_tokenised_again_for_longer_requests() -> None:
    cache = TokenCache()
    cache.add([b"long"], [np.arange(600)])
    assert len(cache.find([b"long"], 512)[0]) == 512  # type: ignore[arg-type]
    assert cache.find([b"long"], 600) == [None]


def test_the_bound_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_MB_VARIABLE, "1.5")
    assert default_max_bytes() == int(1.5 * 2**20)
    monkeypatch.setenv(MAX_MB_VARIABLE, "lots")
    with pytest.raises(ValueError, match=MAX_MB_VARIABLE):
        default_max_bytes()


def test_assembly_places_every_row_at_once_with_token_types_per_part() -> None:
    table = TokenTable.of([[7, 8, 9], [5], []])
    batch = assemble(
        [(1,), table.take([0, 1, 2], [2, 1, 0]), (2,), table.take([1, 0, 0], [1, 3, 0]), (2,)],
        (0, 0, 0, 1, 1),
        pad_id=0,
        pad_multiple=4,
    )
    assert batch.input_ids.tolist() == [
        [1, 7, 8, 2, 5, 2, 0, 0],
        [1, 5, 2, 7, 8, 9, 2, 0],
        [1, 2, 2, 0, 0, 0, 0, 0],
    ]
    assert batch.token_type_ids is not None
    assert batch.token_type_ids.tolist() == [
        [0, 0, 0, 0, 1, 1, 0, 0],
        [0, 0, 0, 1, 1, 1, 1, 0],
        [0, 0, 1, 0, 0, 0, 0, 0],
    ]


def passages_frame(queries: list[str], texts: list[str]) -> pd.DataFrame:
    from evirank.frames import make_passages

    rows = [(str(q), f"d{t}", 0, text) for q in range(len(queries)) for t, text in enumerate(texts)]
    frame = make_passages(rows)
    frame[QUERY] = frame["qid"].map({str(i): q for i, q in enumerate(queries)})
    return frame


def test_token_ids_are_kept_beside_the_store_for_the_next_run_of_the_same_tokenizer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from evirank.score.token_files import token_folder

    store = tmp_path / "scores.sqlite"
    folder = Path(default_bi_encoder())

    def run(queries: list[str]) -> Any:
        scorer = CrossEncoder(folder, Runtime(device="cpu", store=str(store)))
        scorer.prepare()
        scorer.backend_ = Recording()
        scorer(passages_frame(queries, TEXTS))
        return scorer

    first = run(["cats?"])
    encoder = first.encoder_
    kept = token_folder(store, encoder.fingerprint)
    assert len([p for p in kept.iterdir() if p.is_dir()]) == 1
    second = run(["dogs", "where?"])  # a new scorer: the passages are read, only the queries tokenised
    assert second.encoder_.cache.misses == 2
    assert len([p for p in kept.iterdir() if p.is_dir()]) == 2  # the new queries' segment
    segment = sorted(p for p in kept.iterdir() if p.is_dir())[0]  # the first run's: the passages
    assert json.loads((segment / "manifest.json").read_text())["texts"] == 1 + len(TEXTS)
    ids = segment / "ids.npy"
    ids.write_bytes(ids.read_bytes()[:-4])  # cut short: skipped, its texts tokenised again
    third = run(["bark"])
    assert third.encoder_.cache.misses == 1 + len(TEXTS)  # "bark", and the passages again
    assert "tokenised again" in caplog.text
    roberta = CrossEncoder(roberta_folder(tmp_path / "roberta"), Runtime(device="cpu", store=str(store)))
    roberta.prepare()
    assert roberta.encoder_.fingerprint != encoder.fingerprint  # another tokenizer, another folder
    assert not token_folder(store, roberta.encoder_.fingerprint).exists()
