"""The ir_datasets adapter, with a local stand-in for ir_datasets (nothing is downloaded)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import evirank.io.irds as irds
from evirank.errors import MissingExtraError
from evirank.frames import Document

TitleDoc = namedtuple("TitleDoc", ["doc_id", "text", "title"])
BodyDoc = namedtuple("BodyDoc", ["doc_id", "url", "title", "body"])
TrecQuery = namedtuple("TrecQuery", ["query_id", "title", "description", "narrative"])
GenericQuery = namedtuple("GenericQuery", ["query_id", "text"])
MbQuery = namedtuple("MbQuery", ["query_id", "query", "time", "tweet_time"])
TrecQrel = namedtuple("TrecQrel", ["query_id", "doc_id", "relevance", "iteration"])


class StandIn:
    """Mimics the part of an ir_datasets Dataset that the adapter uses."""

    def __init__(self, docs: list[Any], queries: list[Any], qrels: list[Any]) -> None:
        self._docs, self._queries, self._qrels = docs, queries, qrels

    def has_docs(self) -> bool:
        return bool(self._docs)

    def has_queries(self) -> bool:
        return bool(self._queries)

    def has_qrels(self) -> bool:
        return bool(self._qrels)

    def docs_iter(self) -> Iterator[Any]:
        return iter(self._docs)

    def docs_count(self) -> int:
        return len(self._docs)

    def queries_iter(self) -> Iterator[Any]:
        return iter(self._queries)

    def qrels_iter(self) -> Iterator[Any]:
        return iter(self._qrels)


@pytest.fixture
def fake_irds(monkeypatch: pytest.MonkeyPatch) -> dict[str, StandIn]:
    registry = {
        "demo/trec": StandIn(
            [
                TitleDoc("d1", "Fish swim.", "Fish"),
                BodyDoc("d2", "http://x", "", "Birds fly."),
                TitleDoc("d3", "", ""),
            ],
            [TrecQuery("301", "Organized Crime", "Find groups.", "Relevant if ...")],
            [TrecQrel("301", "d1", 2, "0"), TrecQrel("301", "d2", 0, "0")],
        ),
        "demo/mb": StandIn([], [MbQuery("1", "bbc cuts", "t", "1")], []),
        "demo/beir": StandIn([], [GenericQuery("q1", "a claim")], []),
    }
    seen: list[str] = []

    def require(module: str, extra: str) -> Any:
        seen.append(f"{module}[{extra}]")
        return SimpleNamespace(load=lambda dataset_id: registry[dataset_id])

    monkeypatch.setattr(irds, "require", require)
    return registry


def test_docs_become_documents_and_empty_ones_are_skipped(fake_irds: dict[str, StandIn]) -> None:
    ds = irds.load_irds("demo/trec")
    assert list(ds.docs()) == [Document("d1", "Fish", "Fish swim."), Document("d2", "", "Birds fly.")]
    assert ds.docs_count() == 3


def test_topics_fields_and_qrels(fake_irds: dict[str, StandIn]) -> None:
    ds = irds.load_irds("irds:demo/trec")
    assert ds.topics().values.tolist() == [["301", "Organized Crime"]]
    assert ds.topics("title+description").values.tolist() == [["301", "Organized Crime Find groups."]]
    assert ds.qrels().values.tolist() == [["301", "d1", 2], ["301", "d2", 0]]


def test_query_text_attribute_varies_by_collection(fake_irds: dict[str, StandIn]) -> None:
    assert irds.load_irds("demo/mb").topics().values.tolist() == [["1", "bbc cuts"]]
    assert irds.load_irds("demo/beir").topics().values.tolist() == [["q1", "a claim"]]
    with pytest.raises(ValueError, match="no description"):
        irds.load_irds("demo/beir").topics("description")
    with pytest.raises(ValueError, match="has no docs"):
        list(irds.load_irds("demo/mb").docs())


def test_missing_ir_datasets_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    def require(module: str, extra: str) -> Any:
        raise MissingExtraError(module, extra)

    monkeypatch.setattr(irds, "require", require)
    with pytest.raises(MissingExtraError, match=r"evirank\[datasets\]"):
        irds.load_irds("beir/scifact")


def test_readers_accept_irds_references(fake_irds: dict[str, StandIn]) -> None:
    from evirank.io import count_corpus, read_corpus, read_qrels, read_topics

    assert [d.docno for d in read_corpus("irds:demo/trec")] == ["d1", "d2"]
    assert count_corpus("irds:demo/trec") == 3
    assert read_topics("irds:demo/trec", field="description").values.tolist() == [["301", "Find groups."]]
    assert len(read_qrels("irds:demo/trec")) == 2
    with pytest.raises(ValueError, match="split"):
        read_topics("irds:demo/trec", split="test")
