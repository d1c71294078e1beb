"""Builders on the real collections (../shared/datasets): counts that follow from the files."""

from __future__ import annotations

from pathlib import Path

import pytest

from evirank.io import read_qrels, read_run
from evirank.train.sources import load_evidence, load_short_texts

pytestmark = pytest.mark.slow


def test_microblog_2011_examples_are_the_judged_candidates(datasets: Path) -> None:
    year = datasets / "microblog" / "2011"
    files = [year / "topics.microblog2011.txt", year / "qrels.microblog2011.txt",
             year / "run.microblog2011.ql.txt", year / "corpus.jsonl"]  # fmt: skip
    examples, record = load_short_texts(*files)
    judged = read_run(files[2]).merge(read_qrels(files[1]), on=["qid", "docno"])
    assert len(examples) == len(judged)  # every judged candidate has text in 2011
    assert examples["label"].sum() == (judged["label"] >= 1).sum()
    assert examples["qid"].nunique() == 49 and record["rows"] == len(examples)
    assert not examples["text"].str.strip().eq("").any()


def test_scifact_evidence_examples_never_use_a_relevant_document_as_negative(
    datasets: Path, tmp_path: Path
) -> None:
    sf = datasets / "scifact"
    qrels = read_qrels(sf / "qrels" / "train.tsv")
    # A stand-in first-stage run: each query's relevant documents, then the next query's ones.
    docs = qrels.groupby("qid")["docno"].apply(list)
    lines = []
    qids = list(docs.index)
    for i, qid in enumerate(qids):
        ranked = list(dict.fromkeys(docs[qid] + docs[qids[(i + 1) % len(qids)]]))
        lines += [f"{qid} Q0 {d} {r} {100 - r} stand-in" for r, d in enumerate(ranked, 1)]
    run = tmp_path / "run.txt"
    run.write_text("\n".join(lines) + "\n")
    examples, _ = load_evidence(
        sf / "queries.jsonl", sf / "evidence" / "train.jsonl", sf / "qrels" / "train.tsv", run, sf
    )
    assert (examples["label"] == 1).sum() == 1025  # the gold sentences of train's 564 (query, doc) pairs
    relevant = set(zip(qrels["qid"], qrels["docno"], strict=True))
    negatives = examples[examples["source"].str.endswith("run-negative")]
    assert len(negatives) > 0
    assert not any((q, d) in relevant for q, d in zip(negatives["qid"], negatives["docno"], strict=True))
