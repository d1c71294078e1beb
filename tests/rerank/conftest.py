"""A tiny collection for re-ranking tests: a BEIR corpus, topics, and a first-stage run, as files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rerank_cases import DOCS, RUN, TOPICS


@pytest.fixture
def collection(tmp_path: Path) -> dict[str, Path]:
    """Files of the tiny collection: corpus (BEIR JSONL), topics (TSV), run (TREC), passages corpus."""
    folder = tmp_path / "data"
    folder.mkdir()
    corpus = folder / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": d.docno, "title": d.title, "text": d.text}) + "\n" for d in DOCS)
    )
    pyserini = folder / "passages.jsonl"
    pyserini.write_text("".join(json.dumps({"id": d.docno, "contents": d.contents}) + "\n" for d in DOCS))
    topics = folder / "topics.tsv"
    topics.write_text("".join(f"{qid}\t{query}\n" for qid, query in TOPICS.items()))
    run = folder / "run.txt"
    lines = []
    for qid in TOPICS:
        rows = sorted((r for r in RUN if r[0] == qid), key=lambda r: (-r[2], r[1]))
        lines += [f"{qid} Q0 {docno} {rank} {score} bm25\n" for rank, (_, docno, score) in enumerate(rows, 1)]
    run.write_text("".join(lines))
    return {"corpus": corpus, "passages": pyserini, "topics": topics, "run": run, "folder": folder}
