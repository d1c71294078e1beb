"""``evirank index --embed`` and ``evirank embed --index``: vectors beside a Lucene index, recorded in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.vectors.index import vectors_entry, vectors_of_index

DOCS = [
    {"_id": "d1", "title": "Cats", "text": "The cat sat on the mat. It is a cat."},
    {"_id": "d2", "title": "Dogs", "text": "Dogs sat on the mat."},
    {"_id": "d3", "title": "", "text": "BM25 ranks documents. A passage is evidence."},
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    return path


def test_index_embed_keeps_vectors_in_the_index_and_records_them(
    corpus: Path, tmp_path: Path, tiny_bi_encoder_path: Path
) -> None:
    pytest.importorskip("pyserini")
    index = tmp_path / "index"
    model = ["--model", str(tiny_bi_encoder_path), "--device", "cpu"]
    assert main(["-q", "index", "--corpus", str(corpus), "--index", str(index), "--embed", *model]) == 0
    entry = vectors_entry(index)
    assert entry is not None
    assert (entry["path"], entry["segment"], entry["passages"]) == ("vectors", "sentences:prepend", 5)
    vectors = vectors_of_index(index)
    assert vectors is not None and vectors.lookup(["d2"], [0]).tolist() == [2]
    assert vectors.texts(vectors.lookup(["d1"], [1])).tolist() == ["Cats It is a cat."]
    # A second run finds everything done and overwrites nothing.
    before = (index / "vectors" / "vectors.npy").read_bytes()
    assert main(["-q", "index", "--corpus", str(corpus), "--index", str(index), "--embed", *model]) == 2
    assert (index / "vectors" / "vectors.npy").read_bytes() == before
    # The same vectors from the index's stored documents (embed --index) into another folder.
    other = tmp_path / "from-index"
    assert main(["-q", "embed", "--index", str(index), *model, "--output", str(other)]) == 0
    again = vectors_of_index(index)
    assert again is not None
    from evirank.vectors import PassageVectors

    copy = PassageVectors.open(other)
    rows = copy.lookup(["d1", "d2", "d3"], [1, 0, 1])
    assert copy.texts(rows).tolist() == again.texts(again.lookup(["d1", "d2", "d3"], [1, 0, 1])).tolist()


def test_embed_reads_the_papers_collection_formats_as_their_jsonl_form(
    corpus: Path, tmp_path: Path, tiny_bi_encoder_path: Path
) -> None:
    from collection_writers import write_trec
    from evirank.frames import Document
    from evirank.vectors import PassageVectors

    model = ["--model", str(tiny_bi_encoder_path), "--device", "cpu"]
    trec = write_trec([Document(d["_id"], d["title"], d["text"]) for d in DOCS], tmp_path / "trec", files=2)
    sources = {"jsonl": ["--corpus", str(corpus)], "trec": ["--corpus", str(trec), "--corpus-format", "trec"]}
    passages = {}
    for name, source in sources.items():
        output = tmp_path / f"vectors-{name}"
        assert main(["-q", "embed", *source, *model, "--output", str(output)]) == 0
        passages[name] = PassageVectors.open(output).passages(["d1", "d2", "d3"]).drop(columns="row")
    assert len(passages["jsonl"]) == 5 and passages["trec"].equals(passages["jsonl"])  # rows: file order
