"""Example builders: labels, provenance, caps, negatives, pair files, and splits without leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evirank.errors import InputFormatError
from evirank.frames import Document, make_qrels, make_run, make_topics
from evirank.segment import Windows
from evirank.train.examples import (
    EXAMPLE_COLUMNS,
    document_examples,
    evidence_examples,
    make_examples,
    read_evidence,
    read_pairs,
    short_text_examples,
    split_around,
    split_by_query,
    summarize_examples,
    write_examples,
)

TOPICS = make_topics([("1", "bbc cuts"), ("2", "fifa soccer")])
QRELS = make_qrels([("1", "t1", 2), ("1", "t2", 1), ("1", "t3", 0), ("1", "t4", -2), ("2", "t6", 1)])
RUN = make_run(
    [
        ("1", "t1", 9.0),
        ("1", "t2", 8.0),
        ("1", "t3", 7.0),
        ("1", "t4", 6.0),
        ("1", "t5", 5.0),
        ("2", "t6", 3.0),
        ("2", "t7", 2.0),
    ]
)
TEXTS = {f"t{i}": f"tweet {i}" for i in range(1, 8)}


def split_sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(".") if s.strip()]


def test_short_texts_collapse_grades_to_binary_and_skip_unjudged_by_default() -> None:
    ex = short_text_examples(TOPICS, QRELS, RUN, TEXTS, source="mb")
    labels = dict(zip(ex.docno, ex.label, strict=True))
    assert labels == {"t1": 1, "t2": 1, "t3": 0, "t4": 0, "t6": 1}  # 2,1 -> 1; 0, -2 (spam) -> 0
    assert list(ex.columns) == list(EXAMPLE_COLUMNS)
    assert set(ex.source) == {"mb"}
    assert ex.loc[ex.docno == "t1", "query"].item() == "bbc cuts"
    assert ex.loc[ex.docno == "t1", "text"].item() == "tweet 1"


def test_short_texts_can_use_unjudged_candidates_as_negatives_and_cut_depth() -> None:
    ex = short_text_examples(TOPICS, QRELS, RUN, TEXTS, unjudged="negative")
    assert dict(zip(ex.docno, ex.label, strict=True))["t5"] == 0 and "t7" in set(ex.docno)
    shallow = short_text_examples(TOPICS, QRELS, RUN, TEXTS, depth=2)
    assert sorted(shallow.docno) == ["t1", "t2", "t6"]


def test_short_texts_skip_candidates_missing_from_the_corpus() -> None:
    texts = {k: v for k, v in TEXTS.items() if k != "t2"}
    assert "t2" not in set(short_text_examples(TOPICS, QRELS, RUN, texts).docno)


def test_mismatched_query_ids_fail_loudly() -> None:
    topics = make_topics([("MB001", "bbc cuts")])
    with pytest.raises(ValueError, match="id formats"):
        short_text_examples(topics, QRELS, RUN, TEXTS)


def test_documents_label_every_passage_of_relevant_documents_with_title_and_cap() -> None:
    docs = {
        "d1": Document("d1", "Title One", "a b c d e f g h i j"),
        "d2": Document("d2", "Title Two", "k l m n o p"),
        "d3": Document("d3", "Title Three", "q r s"),
        "d4": Document("d4", "", "t u v"),
    }
    qrels = make_qrels([("1", "d1", 1), ("1", "d3", 0)])
    run = make_run([("1", "d2", 3.0), ("1", "d3", 2.0), ("1", "d1", 1.0), ("1", "d4", 0.5)])
    ex = document_examples(
        TOPICS,
        qrels,
        run,
        docs,
        segment=Windows(4, 2),
        max_passages=3,
        negatives_per_query=2,
        source="dc",
    )
    pos = ex[ex.label == 1]
    assert set(pos.docno) == {"d1"} and len(pos) == 3  # capped at 3 of 4 windows
    assert pos.pid.tolist() == [0, 1, 2]
    assert all(t.startswith("Title One ") for t in pos.text)
    neg = ex[ex.label == 0]
    assert set(neg.docno) == {"d2", "d3"}  # the 2 best-ranked non-relevant (d4 is third)
    skipped = document_examples(TOPICS, qrels, run, docs, unjudged="skip")
    assert set(skipped[skipped.label == 0].docno) == {"d3"}  # judged non-relevant only
    assert skipped.loc[skipped.docno == "d1", "text"].item() == "Title One a b c d e f g h i j"


def test_split_around_keeps_gold_sentences_whole() -> None:
    text = "First claim here. Gold sentence, with a comma. Dr. Smith said more. Last one."
    units = split_around(text, ["Gold sentence, with a comma."], split_sentences)
    assert ("Gold sentence, with a comma.", True) in units
    assert [s for s, gold in units if gold] == ["Gold sentence, with a comma."]
    assert units[0] == ("First claim here.", False)


def test_evidence_gold_sentences_positive_others_and_run_negatives_negative(tmp_path: Path) -> None:
    path = tmp_path / "ev.jsonl"
    path.write_text(
        json.dumps({"query-id": "1", "corpus-id": "d1", "evidence": ["Cuts hit the BBC."]})
        + "\n"
        + json.dumps({"query-id": "1", "corpus-id": "d1", "evidence": ["Staff fell by half."]})
        + "\n",
        encoding="utf-8",
    )
    docs = {
        "d1": Document("d1", "T1", "Intro text. Cuts hit the BBC. Staff fell by half. Other news."),
        "d2": Document("d2", "T2", "Unrelated one. Unrelated two."),
        "d3": Document("d3", "T3", "Relevant but no gold. Still relevant."),
    }
    run = make_run([("1", "d3", 3.0), ("1", "d2", 2.0), ("1", "d1", 1.0)])
    qrels = make_qrels([("1", "d1", 1), ("1", "d3", 1)])
    ex = evidence_examples(
        TOPICS, read_evidence(path), docs, split_sentences, run=run, qrels=qrels, source="sf"
    )
    assert sorted(ex[ex.label == 1].text) == ["Cuts hit the BBC.", "Staff fell by half."]
    same_doc = ex[ex.source == "sf/same-doc"]
    assert sorted(same_doc.text) == ["Intro text.", "Other news."] and set(same_doc.label) == {0}
    run_negative = ex[ex.source == "sf/run-negative"]
    assert set(run_negative.docno) == {"d2"}  # d3 is relevant in the qrels: never a negative
    assert ex[ex.docno == "d1"].pid.tolist() == [0, 1, 2, 3]


def test_read_evidence_names_file_and_line_of_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "ev.jsonl"
    path.write_text('{"query-id": "1", "corpus-id": "d1", "evidence": ["ok"]}\n{"query-id": "1"}\n')
    with pytest.raises(InputFormatError, match=r"ev.jsonl:2"):
        read_evidence(path)


def test_read_pairs_tsv_with_header_groups_equal_queries(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text(
        "query\ttext\tlabel\nbbc cuts\tbbc cuts jobs\t2\nbbc cuts\tweather\t0\nfifa\tqatar 2022\t1\n"
    )
    ex = read_pairs(path)
    assert ex.label.tolist() == [1, 0, 1]
    assert ex.qid.nunique() == 2 and ex.qid[0] == ex.qid[1]
    assert set(ex.source) == {"pairs.tsv"}


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("q\tt\n", r"pairs.tsv:1: expected 3 tab-separated fields"),
        ("q\tt\tyes\n", r"pairs.tsv:1: .*integer label"),
    ],
)
def test_read_pairs_rejects_bad_lines_with_their_number(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text(content)
    with pytest.raises(InputFormatError, match=match):
        read_pairs(path)


def test_examples_round_trip_through_jsonl_and_refuse_overwrite(tmp_path: Path) -> None:
    ex = short_text_examples(TOPICS, QRELS, RUN, TEXTS, source="mb")
    path = write_examples(ex, tmp_path / "ex.jsonl")
    pd.testing.assert_frame_equal(read_pairs(path), ex)
    with pytest.raises(FileExistsError):
        write_examples(ex, path)


def test_make_examples_rejects_graded_labels() -> None:
    with pytest.raises(ValueError, match="0 or 1"):
        make_examples([("1", "q", "d", 0, "t", 2, "x")])


def test_summary_counts_per_source() -> None:
    ex = pd.concat([short_text_examples(TOPICS, QRELS, RUN, TEXTS, source=s) for s in ("a", "b")])
    summary = summarize_examples(ex)
    assert summary["rows"] == 10 and summary["positives"] == 6
    assert summary["sources"]["a"] == {"rows": 5, "queries": 2, "positives": 3}


@pytest.mark.parametrize("seed", range(5))
def test_split_by_query_never_leaks_a_query(seed: int) -> None:
    rows = [
        (str(q), f"query {q}", f"d{i}", 0, "text", i % 2, "s") for q in range(20) for i in range(q % 4 + 1)
    ]
    ex = make_examples(rows)
    train, val = split_by_query(ex, 0.25, seed=seed)
    assert set(train.qid).isdisjoint(set(val.qid))
    assert len(train) + len(val) == len(ex)
    assert val.qid.nunique() == 5
    for qid in val.qid.unique():  # every row of a held-out query is held out
        assert (ex.qid == qid).sum() == (val.qid == qid).sum()
    again, _ = split_by_query(ex, 0.25, seed=seed)
    pd.testing.assert_frame_equal(train, again)


def test_split_by_query_needs_two_queries() -> None:
    with pytest.raises(ValueError, match="at least 2 queries"):
        split_by_query(make_examples([("1", "q", "d", 0, "t", 1, "s")]))
