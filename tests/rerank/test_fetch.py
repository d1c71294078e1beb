"""FetchText and AddQueries: text and queries for a run, from a corpus file, a mapping, or an index."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from rerank_cases import DOCS, TOPICS

from evirank.frames import DOCNO, QID, QUERY, TEXT, TITLE, Document, make_run, make_topics
from evirank.io import read_run
from evirank.rerank import AddQueries, FetchText, MissingDocumentsError, MissingQueriesError

BY_ID = {d.docno: d for d in DOCS}


def test_fetch_from_a_beir_corpus_adds_title_and_text_per_row(collection: dict[str, Path]) -> None:
    run = read_run(collection["run"])
    before = run.copy()
    out = FetchText(corpus=collection["corpus"])(run)
    pd.testing.assert_frame_equal(run, before)  # the input is not mutated
    assert len(out) == len(run)
    for docno, title, text in out[[DOCNO, TITLE, TEXT]].itertuples(index=False):
        assert (title, text) == (BY_ID[docno].title, BY_ID[docno].text)


def test_fetch_from_a_pyserini_corpus_gives_contents_as_text(collection: dict[str, Path]) -> None:
    out = FetchText(corpus=collection["passages"])(make_run([("1", "d1", 1.0), ("1", "d3", 0.5)]))
    assert out.set_index(DOCNO)[TEXT].to_dict() == {"d1": BY_ID["d1"].contents, "d3": BY_ID["d3"].text}
    assert set(out[TITLE]) == {""}


def test_a_corpus_is_read_once_for_documents_already_seen(
    collection: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import evirank.io.corpus as corpus_module

    calls: list[list[str]] = []
    real = corpus_module.load_texts

    def counting(path: object, docnos: object, **kwargs: object) -> dict[str, Document]:
        calls.append(sorted(docnos))  # type: ignore[call-overload]
        return real(path, docnos, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(corpus_module, "load_texts", counting)
    stage = FetchText(corpus=collection["corpus"])
    stage(make_run([("1", "d1", 1.0), ("2", "d1", 1.0), ("2", "d2", 0.5)]))
    stage(make_run([("3", "d2", 1.0), ("3", "d4", 0.5)]))
    assert calls == [["d1", "d2"], ["d4"]]


def test_missing_documents_are_an_error_naming_them_or_kept_with_empty_text(
    collection: dict[str, Path],
) -> None:
    run = make_run([("1", "d1", 2.0), ("1", "nope", 1.0)])
    with pytest.raises(MissingDocumentsError, match="'nope'"):
        FetchText(corpus=collection["corpus"])(run)
    kept = FetchText(corpus=collection["corpus"], missing="keep")(run)
    assert kept.set_index(DOCNO).loc["nope", [TITLE, TEXT]].tolist() == ["", ""]


def test_a_mapping_or_any_object_with_get_is_a_source() -> None:
    class Source:
        def get(self, docnos: list[str]) -> dict[str, Document]:
            missing = [d for d in docnos if d not in BY_ID]
            if missing:
                raise KeyError(missing)
            return {d: BY_ID[d] for d in docnos}

    run = make_run([("1", "d2", 2.0), ("1", "zz", 1.0)])
    for source in (BY_ID, Source()):
        out = FetchText(docs=source, missing="keep")(run)
        assert out.set_index(DOCNO).loc["d2", TEXT] == BY_ID["d2"].text
        assert out.set_index(DOCNO).loc["zz", TEXT] == ""


def test_exactly_one_source_is_required() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        FetchText()
    with pytest.raises(ValueError, match="exactly one"):
        FetchText(index="i", corpus="c")
    with pytest.raises(ValueError, match="missing"):
        FetchText(docs={}, missing="drop")  # type: ignore[arg-type]


def test_add_queries_by_qid_and_missing_topics() -> None:
    topics = make_topics(list(TOPICS.items()))
    run = make_run([("2", "d1", 1.0), ("1", "d1", 1.0), ("9", "d1", 1.0)])
    with pytest.raises(MissingQueriesError, match="'9'"):
        AddQueries(topics)(run)
    out = AddQueries(topics, missing="drop")(run)
    assert dict(zip(out[QID], out[QUERY], strict=True)) == {"1": TOPICS["1"], "2": TOPICS["2"]}
