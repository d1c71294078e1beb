"""Every reader of JSON lines refuses text that UTF-8 cannot hold (a lone surrogate, written in JSON
as an escape such as ``\\ud800``) with evirank's own error naming the file, the line and the field:
such text could be neither indexed, stored, nor written out, and ended in a bare
UnicodeEncodeError naming nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evirank.cli import main
from evirank.errors import InputFormatError
from evirank.io.corpus import read_corpus
from evirank.io.topics import read_topics
from evirank.train.examples import read_evidence, read_pairs


def _corpus(path: Path) -> Any:
    return list(read_corpus(path))


def _wapo(path: Path) -> Any:
    return list(read_corpus(path, format="wapo"))


#: reader, file name, a good line, a line whose field holds a lone surrogate, the field named
READERS: dict[str, tuple[Callable[[Path], Any], str, dict[str, Any], dict[str, Any], str]] = {
    "corpus": (_corpus, "corpus.jsonl", {"_id": "a", "text": "x"}, {"_id": "b", "text": "y\ud800"}, "text"),
    "corpus url": (
        _corpus,
        "corpus.jsonl",
        {"_id": "a", "text": "x"},
        {"_id": "b", "text": "y", "url": "http://e/\udc80"},
        "url",
    ),
    "queries": (
        read_topics,
        "queries.jsonl",
        {"_id": "1", "text": "q"},
        {"_id": "2", "text": "\udfff"},
        "text",
    ),
    "training pairs": (
        read_pairs,
        "pairs.jsonl",
        {"query": "q", "text": "t", "label": 1},
        {"query": "q", "text": "t\udc00", "label": 0},
        "text",
    ),
    "evidence": (
        read_evidence,
        "evidence.jsonl",
        {"query-id": "1", "corpus-id": "d", "evidence": ["s"]},
        {"query-id": "1", "corpus-id": "e", "evidence": ["fine", "s\ud83d"]},
        "evidence[1]",
    ),
    "wapo": (
        _wapo,
        "TREC_Washington_Post_collection.v3.jl",
        {"id": "a", "title": "T", "contents": [{"type": "sanitized_html", "content": "<p>x</p>"}]},
        {"id": "b", "title": "T\udc00", "contents": [{"type": "sanitized_html", "content": "<p>y</p>"}]},
        "title",
    ),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_lone_surrogate_in_any_json_lines_reader_is_named_with_file_line_and_field(
    reader: str, tmp_path: Path
) -> None:
    read, name, good, bad, field = READERS[reader]
    path = tmp_path / name
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")  # json.dumps escapes it: \ud800
    with pytest.raises(
        InputFormatError, match=r"expected text that UTF-8 can hold, found a lone surrogate"
    ) as caught:
        read(path)
    assert str(caught.value).startswith(f"{path}:2: ")
    assert f"in its {field!r}" in str(caught.value)


def test_train_refuses_pairs_with_a_lone_surrogate_before_any_model_work(
    tmp_path: Path, tiny_cross_encoder_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pairs = tmp_path / "pairs.jsonl"
    lines = [
        {"query": "cats", "text": "cats purr", "label": 1},
        {"query": "dogs\udc00", "text": "x", "label": 0},
    ]
    pairs.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "model"
    code = main(
        ["train", "--pairs", str(pairs), "--model", str(tiny_cross_encoder_path), "--output", str(out)]
    )
    assert code == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any(e.startswith(f"{pairs}:2: expected text that UTF-8 can hold") for e in errors), errors
    assert not out.exists()
