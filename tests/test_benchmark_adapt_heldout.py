"""benchmarks/adapt_heldout.py checks models on documents adaptation never drew, and prints its table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evirank.frames import Document
from evirank.train.adaptation import AdaptConfig, examples_from
from evirank.train.pseudo import DOCNO_OF, split_documents

REPO = Path(__file__).resolve().parents[1]


def _benchmark() -> Any:
    """The benchmark's module (benchmarks/ is not a package: it is imported from its folder)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import adapt_heldout
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return adapt_heldout


WORDS = ("cells", "grow", "divide", "signal", "protein", "gene", "binds", "tumour", "virus", "immune", "dose")
TASKS = {"span against span", "span against the whole document", "ICT (two sentences or more)"}


def _corpus(n: int) -> list[Document]:
    """``n`` short documents of two sentences each."""
    first = (" ".join(WORDS[i % 5 : i % 5 + 6]) for i in range(n))
    second = (" ".join(WORDS[(i + 3) % 7 :]) for i in range(n))
    return [
        Document(f"d{i}", f"Title {i}", f"Some {a} number {i}. The {b} case {i}.")
        for i, (a, b) in enumerate(zip(first, second, strict=True))
    ]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"_id": d.docno, "title": d.title, "text": d.text}) + "\n" for d in _corpus(30))
    )
    command = [sys.executable, "benchmarks/adapt_heldout.py", "--corpus", str(corpus), *args]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)


def test_the_held_out_documents_are_none_that_adaptation_trained_on() -> None:
    documents = _corpus(40)
    config = AdaptConfig(method="crop", sample_documents=25, negatives=1)
    trained = set(examples_from(documents, config)[DOCNO_OF])
    unseen = _benchmark().held_out(split_documents(documents), 25, config.train.seed, n=100)
    assert len(trained) == 25
    assert len(unseen) == 15
    assert not trained & {doc.docno for doc in unseen}
    assert len(_benchmark().held_out(split_documents(documents), 25, config.train.seed, n=10)) == 10


def test_each_task_pairs_a_document_with_its_own_text() -> None:
    unseen = split_documents(_corpus(12))
    checks = _benchmark().tasks(unseen, (2, 4))
    assert set(checks) == TASKS
    for task, rows in checks.items():
        assert len(rows) == 12, task
        for docno, query, text in rows[[DOCNO_OF, "query", "text"]].itertuples(index=False):
            doc = next(d for d in unseen if d.docno == docno)
            whole = f"{doc.title} {' '.join(doc.sentences)}"
            assert query in whole and set(text.split()) <= set(whole.split()), task


def test_the_script_prints_a_row_per_model_and_task(tmp_path: Path, tiny_bi_encoder_path: Path) -> None:
    model = str(tiny_bi_encoder_path)
    done = _run(tmp_path, "--sample-documents", "20", "--crop-words", "2", "4", "--model", model)
    assert done.returncode == 0, done.stderr
    assert "30 documents, 10 not drawn for training, 10 of them checked" in done.stdout
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith(f"| {model} ")]
    assert {row[2].strip() for row in rows} == TASKS
    for row in rows:
        assert 1 / 10 <= float(row[4]) <= 1


@pytest.mark.parametrize("sample", ["30", "31"])
def test_a_sample_that_leaves_nothing_unseen_is_refused(tmp_path: Path, sample: str) -> None:
    done = _run(tmp_path, "--sample-documents", sample, "--model", "zero-shot")
    assert done.returncode == 2
    assert "leaves no document" in done.stderr
