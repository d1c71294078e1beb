"""Fixtures of the Lucene tests: a tiny inline corpus, indexed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from evirank.frames import Document

# Six documents. "dup-b" and "dup-a" are the same text, given in that order (and split over two
# indexing threads), so Lucene's internal order disagrees with docno order: ties must still
# come out docno ascending.
TINY_CORPUS = [
    Document("cats", "Cats", "Cats purr when they are content; a purring cat is a happy cat."),
    Document("dogs", "Dogs", "Dogs bark at strangers and wag their tails at friends."),
    Document("fish", "Goldfish", "Goldfish grow to the size of their bowl, or so people say."),
    Document("dup-b", "Parrots", "Parrots can learn words and mimic human speech."),
    Document("dup-a", "Parrots", "Parrots can learn words and mimic human speech."),
    Document("notitle", "", "Hamsters store food in their cheek pouches."),
]


@pytest.fixture(scope="session")
def tiny_corpus() -> list[Document]:
    """The six documents of :data:`TINY_CORPUS`."""
    return list(TINY_CORPUS)


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny corpus indexed with two threads (needs Java and pyserini)."""
    pytest.importorskip("pyserini")
    from evirank.lucene import build_index

    path = tmp_path_factory.mktemp("lucene") / "tiny-index"
    build_index(TINY_CORPUS, path, threads=2)
    return path


@pytest.fixture(scope="session")
def scifact(datasets: Path) -> Path:
    """The BEIR SciFact folder of the datasets folder (skip when absent)."""
    if not (datasets / "scifact" / "corpus.jsonl").is_file():
        pytest.skip(f"{datasets / 'scifact'} is not here")
    return datasets / "scifact"
