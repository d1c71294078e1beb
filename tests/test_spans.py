"""Locating passages in their documents: the right field and offsets, at a cost linear in the words."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evirank.segment import Sentences, Whole, Windows
from evirank.segment.spans import PassageLocator, locate_passages, passage_span
from test_ranker import long_documents


def sentences_text(characters: int, seed: int = 0) -> str:
    """Random sentences of common words (each word recurs every few words), about ``characters`` long."""
    return long_documents(n=1, sentences=max(1, characters // 64), seed=seed)[0]


def passages_of(segmenter: object, title: str, text: str) -> list[str]:
    run = pd.DataFrame({"qid": ["1"], "docno": ["d"], "score": [1.0], "title": [title], "text": [text]})
    return segmenter.with_max_passages(None)(run)["text"].tolist()  # type: ignore[attr-defined]


def check_spans(passages: list[str], spans: list[tuple], title: str, text: str) -> None:
    """Every passage's words are at its span (a prepended title's words aside)."""
    for passage, (field, start, end) in zip(passages, spans, strict=True):
        assert field in ("title", "text"), passage
        source = title if field == "title" else text
        found = source[start:end].split()
        assert found and passage.split()[-len(found) :] == found


def test_a_title_that_is_also_the_first_sentence_is_located_in_the_title() -> None:
    title, text = "Cats purr.", "Cats purr. Dogs bark."
    passages = passages_of(Sentences(), title, text)
    assert passages == ["Cats purr.", "Cats purr.", "Dogs bark."]
    assert locate_passages(passages, title, text) == [("title", 0, 10), ("text", 0, 10), ("text", 11, 21)]
    # a segmenter that skips the title reads the text's own first sentence
    skipped = passages_of(Sentences(title="skip"), title, text)
    assert locate_passages(skipped, title, text) == [("text", 0, 10), ("text", 11, 21)]


def test_a_title_found_again_later_in_the_text_stays_the_titles() -> None:
    title, text = "Dogs bark.", "Cats purr. Dogs bark."
    passages = passages_of(Sentences(), title, text)
    assert locate_passages(passages, title, text) == [("title", 0, 10), ("text", 0, 10), ("text", 11, 21)]


def test_repeated_sentences_get_their_own_spans() -> None:
    text = "Dogs bark. Dogs bark. Cats purr."
    spans = locate_passages(["Dogs bark.", "Dogs bark.", "Cats purr."], "", text)
    assert spans == [("text", 0, 10), ("text", 11, 21), ("text", 22, 32)]


def test_prepended_titles_and_overlapping_windows_are_located() -> None:
    title, text = "Calcium", sentences_text(3000, seed=1)
    for segmenter in (Sentences(title="prepend"), Windows(length=12, stride=5), Whole(), Sentences()):
        passages = passages_of(segmenter, title, text)
        spans = locate_passages(passages, title, text)
        check_spans(passages, spans, title, text)
        starts = [s for f, s, _ in spans if f == "text"]
        assert starts == sorted(starts)  # in document order, never the same place twice
        assert len(set(starts)) == len(starts)


def test_an_unknown_passage_is_not_found_and_does_not_move_the_cursor() -> None:
    locator = PassageLocator("", "a b c a b c d")
    assert locator.locate("zz top") == (None, None, None)
    assert locator.locate("a b c") == ("text", 0, 5)
    assert locator.locate("a b c") == ("text", 6, 11)
    assert locator.locate("a b") == ("text", 0, 3)  # nothing further on: found anywhere


def test_passage_span_keeps_its_one_passage_reading() -> None:
    assert passage_span("a b c", "", "a b c a b c d", after=3) == ("text", 6, 11)
    assert passage_span("T", "T", "First one.") == ("title", 0, 1)
    assert passage_span("T Second one.", "T", "First one.  Second one.") == ("text", 12, 23)


@pytest.mark.parametrize("segment", ["sentences", "prepend", "windows"])
def test_locating_a_megabyte_documents_passages_costs_linear_work(segment: str) -> None:
    """The cost is counted, not timed: word positions read, passed over and compared stay within a
    small multiple of the document's words plus the passages' (the old locator rescanned the whole
    text for every passage: about words x passages)."""
    title, text = "Calcium channels", sentences_text(1_000_000)
    segmenter = {
        "sentences": Sentences(),
        "prepend": Sentences(title="prepend"),
        "windows": Windows(length=150, stride=75),
    }[segment]
    passages = passages_of(segmenter, title, text)
    locator = PassageLocator(title, text)
    spans = locator.locate_all(passages)
    check_spans(passages[::97], spans[::97], title, text)
    assert all(field is not None for field, _, _ in spans)
    words = len(text.split()) + len(title.split())
    passage_words = sum(len(p.split()) for p in passages)
    assert len(passages) > 5000 or segment == "windows"
    assert locator.work <= 4 * (words + passage_words)


def test_the_first_passages_of_a_huge_document_read_only_its_beginning() -> None:
    text = sentences_text(1_000_000)
    passages = passages_of(Sentences(), "", text[: text.index(". ", 5000) + 1])
    locator = PassageLocator("", text)
    locator.locate_all(passages)
    assert locator.work < 20_000  # about 800 words located; the 137,000 words after them are not read


def test_ranking_a_megabyte_document_locates_its_evidence_in_linear_work(
    tiny_bi_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evirank import ranker as ranker_module
    from evirank.ranker import Ranker

    locators: list[PassageLocator] = []

    class Counted(PassageLocator):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            locators.append(self)

    monkeypatch.setattr(
        ranker_module, "locate_passages", lambda p, title, text: Counted(title, text).locate_all(p)
    )
    text = sentences_text(1_000_000, seed=2)
    ranker = Ranker(tiny_bi_encoder_path, scorer="bi", device="cpu", max_passages=40, show_passages=40)
    (doc,) = ranker.rank("calcium channel", [{"id": "big", "title": "Calcium channels", "text": text}])
    assert len(doc.evidence) == 40
    for item in doc.evidence:
        source = text if item.field == "text" else "Calcium channels"
        assert (
            source[item.start : item.end].split()
            == item.text.split()[-len(source[item.start : item.end].split()) :]
        )
    assert len(locators) == 1 and locators[0].work < 20_000  # 40 sentences of 137,000 words
