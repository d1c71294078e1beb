"""Corpus reading: BEIR and Pyserini JSONL shapes, folders, gzip, and every bad-input case."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evirank.errors import InputFormatError, OutputExistsError
from evirank.frames import Document
from evirank.io import count_corpus, load_texts, read_corpus, write_corpus


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_the_three_shapes_and_skips_blank_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.jsonl",
        '{"_id": "b1", "title": "Fish", "text": "They swim.", "metadata": {}}\n'
        "\n"
        '{"id": "p1", "contents": "Birds fly."}\n'
        '{"id": "p2", "title": "Cats", "text": "They sleep."}\n',
    )
    assert list(read_corpus(path)) == [
        Document("b1", "Fish", "They swim."),
        Document("p1", "", "Birds fly."),
        Document("p2", "Cats", "They sleep."),
    ]


def test_a_beir_folder_reads_its_corpus_jsonl(tmp_path: Path) -> None:
    write(tmp_path / "corpus.jsonl", '{"_id": "d1", "title": "", "text": "x"}\n')
    assert [d.docno for d in read_corpus(tmp_path)] == ["d1"]
    assert count_corpus(tmp_path) == 1


def test_gzipped_corpus(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write('{"id": "d1", "contents": "é x"}\n{"id": "d2", "contents": "y"}\n')
    assert [d.text for d in read_corpus(path)] == ["é x", "y"]
    assert count_corpus(path) == 2


def test_integer_ids_become_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"id": 7, "contents": "x"}\n')
    assert next(read_corpus(path)).docno == "7"


def test_a_title_with_empty_text_is_still_a_document(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"_id": "d1", "title": "Only a title", "text": ""}\n')
    assert list(read_corpus(path)) == [Document("d1", "Only a title", "")]


def test_missing_file_is_reported_at_call_time(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        read_corpus(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    ("lines", "bad_line", "message"),
    [
        (['{"id": "d1", "contents": "x"}', '{"id": "d2", "contents": '], 2, "malformed JSON"),
        (['{"contents": "x"}'], 1, "document id"),
        (['{"id": "d1", "contents": "x"}', "", '{"id": "d1", "contents": "y"}'], 3, "first on line 1"),
        (['{"id": "d1", "contents": "   "}'], 1, "no text"),
        (['{"_id": "d1", "title": "", "text": ""}'], 1, "no text"),
        (['{"id": ["d1"], "contents": "x"}'], 1, '"id" to be a string'),
        (['{"id": "d1", "contents": 3}'], 1, '"contents" to be a string'),
        (['{"_id": "d1", "title": 3, "text": "x"}'], 1, '"title" to be a string'),
        (['["d1", "x"]'], 1, "JSON object"),
        (['{"id": "d 1", "contents": "x"}'], 1, "without whitespace"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, lines: list[str], bad_line: int, message: str) -> None:
    path = write(tmp_path / "c.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(InputFormatError, match=message) as info:
        list(read_corpus(path))
    assert info.value.line == bad_line
    assert str(info.value).startswith(f"{path}:{bad_line}: expected ")


def test_non_utf8_bytes_name_line_and_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    first = b'{"id": "d1", "contents": "ok"}\n'
    path.write_bytes(first + b'{"id": "d2", "contents": "caf\xe9"}\n')
    with pytest.raises(InputFormatError) as info:
        list(read_corpus(path))
    assert info.value.line == 2
    offset = len(first) + len(b'{"id": "d2", "contents": "caf')
    assert f"byte offset {offset}" in str(info.value)
    assert "0xe9" in str(info.value)


def test_an_empty_corpus_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", "\n")
    with pytest.raises(InputFormatError, match="no documents"):
        list(read_corpus(path))


def test_streaming_yields_before_reading_a_later_bad_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.jsonl", '{"id": "d1", "contents": "x"}\n{broken\n')
    docs = read_corpus(path)
    assert next(docs).docno == "d1"
    with pytest.raises(InputFormatError):
        next(docs)


def test_load_texts_keeps_only_wanted_documents(tmp_path: Path) -> None:
    rows = [{"id": f"d{i}", "contents": f"text {i}"} for i in range(5)]
    path = write(tmp_path / "c.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    texts = load_texts(path, ["d3", "d1"])
    assert sorted(texts) == ["d1", "d3"]
    assert texts["d3"].text == "text 3"
    with pytest.raises(KeyError, match="d9"):
        load_texts(path, ["d1", "d9"])
    assert sorted(load_texts(path, ["d1", "d9"], missing="ignore")) == ["d1"]


@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz"])
def test_write_corpus_round_trips_in_both_shapes(tmp_path: Path, name: str) -> None:
    docs = [Document("d1", "Fish", "They swim é."), Document("d2", "", "Birds fly.")]
    beir = tmp_path / f"beir-{name}"
    assert write_corpus(docs, beir) == 2
    assert list(read_corpus(beir)) == docs
    pyserini = tmp_path / f"pyserini-{name}"
    write_corpus(iter(docs), pyserini, shape="pyserini")
    assert [(d.docno, d.text) for d in read_corpus(pyserini)] == [
        ("d1", "Fish They swim é."),
        ("d2", "Birds fly."),
    ]
    with pytest.raises(OutputExistsError):
        write_corpus(docs, beir)


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    def docs() -> Iterator[Document]:
        yield Document("d1", "", "x")
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        write_corpus(docs(), tmp_path / "c.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_crlf_and_byte_order_mark_are_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "d1", "contents": "x"}\r\n{"id": "d2", "contents": "y"}\r\n')
    assert [d.docno for d in read_corpus(path)] == ["d1", "d2"]


def test_a_folder_without_corpus_jsonl_says_what_it_needs(tmp_path: Path) -> None:
    write(tmp_path / "docs.txt", "x")
    with pytest.raises(FileNotFoundError, match=r"corpus\.jsonl.*docs\.txt"):
        read_corpus(tmp_path)


def test_empty_documents_are_an_error_by_default_and_skipped_with_a_warning_on_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a", "title": "", "text": "x"}\n{"_id": "b", "title": "", "text": " "}\n')
    with pytest.raises(InputFormatError, match=r"c\.jsonl:2: .*no text at all"):
        list(read_corpus(path))
    with caplog.at_level("WARNING", logger="evirank"):
        docs = list(read_corpus(path, empty="skip"))
    assert [d.docno for d in docs] == ["a"]
    assert "c.jsonl:2: skipped a document with neither title nor text" in caplog.text
