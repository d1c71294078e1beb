"""``evirank index`` ends with a summary of the documents read and skipped, and warns when a quick
count of the files' documents disagrees with what was read (documents lost or merged)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evirank.cli import main
from evirank.frames import Document


@pytest.fixture
def fake_lucene(monkeypatch: pytest.MonkeyPatch) -> list[Document]:
    """Replace the Lucene build by one that only reads the documents (no Java)."""
    indexed: list[Document] = []

    def build_index(documents: Iterable[Document], index_dir: Any, **_: Any) -> Any:
        indexed.extend(documents)
        return SimpleNamespace(path=str(index_dir))

    monkeypatch.setattr("evirank.lucene.index.build_index", build_index)
    return indexed


def test_index_logs_the_documents_read_and_skipped(
    tmp_path: Path, fake_lucene: list[Document], caplog: pytest.LogCaptureFixture
) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        '{"_id": "a", "text": "cats"}\n{"_id": "b", "text": " "}\n{"_id": "c", "text": "dogs"}\n'
    )
    with caplog.at_level(logging.INFO):
        assert main(["index", "--corpus", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    assert [d.docno for d in fake_lucene] == ["a", "c"]
    assert (
        f"{corpus}: read 3 documents from 1 file: 2 kept, 1 skipped (neither title nor text)" in caplog.text
    )
    assert "quick count" not in caplog.text


def test_index_warns_when_the_files_hold_more_documents_than_were_read(
    tmp_path: Path, fake_lucene: list[Document], caplog: pytest.LogCaptureFixture
) -> None:
    # an id on a record that is not a page: the reader skips it with a warning, the quick count of
    # ids counts it, and the summary says so
    page = b"HTTP/1.1 200 OK\r\n\r\n<p>apple</p>"
    record = b"WARC/1.0\r\nWARC-Type: %s\r\nWARC-TREC-ID: %s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n"
    corpus = tmp_path / "00.warc"
    corpus.write_bytes(
        record % (b"response", b"p1", len(page), page) + record % (b"metadata", b"p2", len(page), page)
    )
    with caplog.at_level(logging.INFO):
        assert main(["index", "--corpus", str(corpus), "--index", str(tmp_path / "idx")]) == 0
    assert [d.docno for d in fake_lucene] == ["p1"]
    assert f"{corpus}:10: skipped 1 record(s) that are not a page with its id" in caplog.text
    assert (
        "a quick count of the documents' start markers in the files finds 2, but 1 were read" in caplog.text
    )
