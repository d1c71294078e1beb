"""The readers on the real collections in ../shared/datasets (skipped when absent; each well under 2 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evirank.io import count_corpus, read_corpus, read_qrels, read_run, read_topic_fields, read_topics


def test_robust04_has_250_topics_with_title_and_description(datasets: Path) -> None:
    fields = read_topic_fields(datasets / "trec-newswire-topics" / "topics.robust04.txt")
    assert len(fields) == 250
    assert fields["qid"].tolist()[:2] == ["301", "302"] and fields["qid"].tolist()[-1] == "700"
    for column in ("title", "description", "narrative"):
        assert (fields[column].str.len() > 0).all(), column
        assert not fields[column].str.contains(r"<|Description:|Narrative:", regex=True).any(), column
    assert fields.iloc[0]["title"] == "International Organized Crime"


@pytest.mark.parametrize("name", ["core17", "core18"])
def test_core_topics_have_50_topics_matching_their_qrels(datasets: Path, name: str) -> None:
    folder = datasets / "trec-newswire-topics"
    topics = read_topics(folder / f"topics.{name}.txt", field="title+description+narrative")
    qrels = read_qrels(folder / f"qrels.{name}.txt")
    assert len(topics) == 50
    assert set(qrels["qid"]) == set(topics["qid"])


@pytest.mark.parametrize(("year", "count", "first"), [(2011, 50, "1"), (2012, 60, "51"), (2013, 60, "111")])
def test_microblog_topics_normalise_to_the_ids_of_qrels_and_run(
    datasets: Path, year: int, count: int, first: str
) -> None:
    folder = datasets / "microblog" / str(year)
    topics = read_topics(folder / f"topics.microblog{year}.txt")
    assert len(topics) == count and topics["qid"].iloc[0] == first
    assert topics["query"].str.len().min() > 0
    qrels = read_qrels(folder / f"qrels.microblog{year}.txt")
    run = read_run(folder / f"run.microblog{year}.ql.txt")
    assert set(qrels["qid"]) <= set(topics["qid"])
    assert set(run["qid"]) <= set(topics["qid"])


def test_microblog_2011_run_candidates_are_in_its_corpus(datasets: Path) -> None:
    folder = datasets / "microblog" / "2011"
    run = read_run(folder / "run.microblog2011.ql.txt")
    docnos = {d.docno for d in read_corpus(folder / "corpus.jsonl")}
    assert set(run["docno"]) <= docnos
    assert run.attrs["tag"] == "lucene4lm"


def test_dl19_topics_qrels_and_runs(datasets: Path) -> None:
    folder = datasets / "trec-dl19-passage"
    topics = read_topics(folder / "topics.dl19-passage.tsv")
    qrels = read_qrels(folder / "qrels.dl19-passage.txt")
    assert len(topics) == 43 and qrels["qid"].nunique() == 43
    assert set(qrels["qid"]) == set(topics["qid"])
    assert set(qrels["label"]) == {0, 1, 2, 3}
    for name in ("bm25", "bm25-rm3"):
        run = read_run(folder / f"run.dl19-passage.{name}.txt")
        assert run.groupby("qid").size().max() <= 100
        assert set(run["qid"]) == set(topics["qid"])
    assert count_corpus(folder / "corpus.jsonl") == 5492


def test_scifact_folder(datasets: Path) -> None:
    folder = datasets / "scifact"
    test = read_topics(folder, split="test")
    assert len(test) == 300
    assert len(read_topics(folder, split="train")) == 809
    assert set(read_qrels(folder / "qrels" / "test.tsv")["qid"]) == set(test["qid"])
    docs = list(read_corpus(folder))
    assert len(docs) == 5183 == count_corpus(folder)
    assert all(d.title or d.text for d in docs)
