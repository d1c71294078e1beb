"""Qrels and runs: both qrels formats, deterministic exact run writing, and bad lines."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.errors import InputFormatError, OutputExistsError
from evirank.frames import make_qrels, make_run
from evirank.io import read_qrels, read_run, write_qrels, write_run


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- qrels -----------------------------------------------------------------------------


def test_reads_trec_qrels(tmp_path: Path) -> None:
    path = write(tmp_path / "q.txt", "1 0 d1 2\n1 0 d2 0\n\n2 Q0 d1 -1\n")
    qrels = read_qrels(path)
    assert qrels.values.tolist() == [["1", "d1", 2], ["1", "d2", 0], ["2", "d1", -1]]
    assert qrels["label"].dtype.kind == "i"


def test_reads_beir_qrels_with_header(tmp_path: Path) -> None:
    path = write(tmp_path / "test.tsv", "query-id\tcorpus-id\tscore\n1\t31715818\t1\n3\t14717500\t1\n")
    assert read_qrels(path).values.tolist() == [["1", "31715818", 1], ["3", "14717500", 1]]


def test_docnos_that_look_like_missing_values_stay_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "q.txt", "1 0 NA 1\n1 0 null 0\n")
    assert read_qrels(path)["docno"].tolist() == ["NA", "null"]


def test_repeated_identical_judgement_is_kept_once(tmp_path: Path) -> None:
    path = write(tmp_path / "q.txt", "1 0 d1 1\n1 0 d1 1\n")
    assert len(read_qrels(path)) == 1


@pytest.mark.parametrize(
    ("text", "bad_line", "message"),
    [
        ("1 0 d1 1\n1 0 d2\n", 2, "4 columns"),
        ("1 0 d1 1\n\n1 0 d2 1 extra\n", 3, "4 columns"),
        ("1 0 d1 1\n1 0 d2 high\n", 2, "integer relevance label"),
        ("1 0 d1 1\n1 0 d2 0.5\n", 2, "integer relevance label"),
        ("1 0 d1 1\n1 0 d1 2\n", 2, "line 1"),
        ("1 d1\n", 1, "TREC qrels"),
        ("query-id\tcorpus-id\tscore\n1\td1\n", 2, "3 columns"),
    ],
)
def test_bad_qrels_lines_name_file_and_line(tmp_path: Path, text: str, bad_line: int, message: str) -> None:
    path = write(tmp_path / "q.txt", text)
    with pytest.raises(InputFormatError, match=message) as info:
        read_qrels(path)
    assert info.value.line == bad_line
    assert str(info.value).startswith(f"{path}:{bad_line}:")


def test_empty_qrels_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="empty"):
        read_qrels(write(tmp_path / "q.txt", ""))


def test_qrels_round_trip_in_both_formats(tmp_path: Path) -> None:
    qrels = make_qrels([("10", "d2", 1), ("2", "d9", 0), ("2", "d1", 3)])
    for fmt in ("trec", "beir"):
        path = write_qrels(qrels, tmp_path / f"q.{fmt}", format=fmt)
        back = read_qrels(path)
        assert back.values.tolist() == [["2", "d1", 3], ["2", "d9", 0], ["10", "d2", 1]]
        with pytest.raises(OutputExistsError):
            write_qrels(qrels, path, format=fmt)


# --- runs ------------------------------------------------------------------------------


def test_reads_a_run_sorted_with_its_tag(tmp_path: Path) -> None:
    path = write(tmp_path / "r.txt", "2 Q0 a 1 1.0 t\n10 Q0 b 1 5 t\n2 Q0 c 2 3.5 t\n2 Q0 b 3 3.5 t\n")
    run = read_run(path)
    assert run[["qid", "docno", "rank"]].values.tolist() == [
        ["2", "c", 1],
        ["2", "b", 2],
        ["2", "a", 3],
        ["10", "b", 1],
    ]
    assert run.attrs["tag"] == "t"
    assert run["score"].dtype == np.float64


@pytest.mark.parametrize(
    ("text", "bad_line", "message"),
    [
        ("1 Q0 d1 1 2.0 t\n1 Q0 d2 2 1.0\n", 2, "6 columns"),
        ("1 Q0 d1 1 2.0 t\n1 Q0 d2 2 1.0 t x\n", 2, "6 columns"),
        ("1 Q0 d1 1 2.0 t\n\n1 Q0 d2 2 high t\n", 3, "score in column 5"),
        ("1 Q0 d1 1 nan t\n", 1, "score in column 5"),
        ("1 Q0 d1 1 2.0 t\n1 Q0 d1 2 1.0 t\n", 2, "first on line 1"),
    ],
)
def test_bad_run_lines_name_file_and_line(tmp_path: Path, text: str, bad_line: int, message: str) -> None:
    path = write(tmp_path / "r.txt", text)
    with pytest.raises(InputFormatError, match=message) as info:
        read_run(path)
    assert info.value.line == bad_line
    assert str(info.value).startswith(f"{path}:{bad_line}:")


def test_non_utf8_run_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "r.txt"
    path.write_bytes(b"1 Q0 d1 1 2.0 t\n1 Q0 d\xff 2 1.0 t\n")
    with pytest.raises(InputFormatError, match="not valid UTF-8") as info:
        read_run(path)
    assert info.value.line == 2


def test_written_scores_round_trip_exactly_and_create_no_ties(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    scores = 10 + rng.random(500) * 1e-7  # differences far below 6 decimals
    run = make_run(pd.DataFrame({"qid": "1", "docno": [f"d{i}" for i in range(500)], "score": scores}))
    path = write_run(run, tmp_path / "r.txt")
    back = read_run(path)
    assert back["score"].nunique() == 500
    assert back[["docno", "score"]].equals(run[["docno", "score"]])


def test_write_run_is_deterministic_and_byte_identical(tmp_path: Path) -> None:
    rows = [("2", "b", 1.0), ("10", "a", 3.0), ("2", "a", 1.0), ("2", "c", 2.0)]
    first = write_run(make_run(rows), tmp_path / "a.txt", tag="x")
    shuffled = pd.DataFrame(rows[::-1], columns=["qid", "docno", "score"])  # unsorted, no rank column
    second = write_run(shuffled, tmp_path / "b.txt", tag="x")
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text().splitlines() == [
        "2 Q0 c 1 2.0 x",
        "2 Q0 b 2 1.0 x",
        "2 Q0 a 3 1.0 x",
        "10 Q0 a 1 3.0 x",
    ]


def test_write_run_keeps_a_read_tag_and_refuses_to_overwrite(tmp_path: Path) -> None:
    source = write(tmp_path / "in.txt", "1 Q0 d1 1 2.0 bm25\n")
    out = write_run(read_run(source), tmp_path / "out.txt")
    assert out.read_text() == "1 Q0 d1 1 2.0 bm25\n"
    with pytest.raises(OutputExistsError):
        write_run(read_run(source), out)
    write_run(make_run([("1", "d2", 1.0)]), out, tag="new", overwrite=True)
    assert out.read_text() == "1 Q0 d2 1 1.0 new\n"
    assert not list(tmp_path.glob(".tmp-*"))


def test_write_run_gzip(tmp_path: Path) -> None:
    path = write_run(make_run([("1", "d1", 1.5)]), tmp_path / "r.txt.gz")
    with gzip.open(path, "rt") as handle:
        assert handle.read() == "1 Q0 d1 1 1.5 evirank\n"
    assert read_run(path)["score"].tolist() == [1.5]


@pytest.mark.parametrize(
    ("rows", "tag", "message"),
    [
        ([("1", "d 1", 1.0)], "t", "whitespace"),
        ([("1", "d1", float("nan"))], "t", "NaN"),
        ([("1", "d1", 1.0)], "two words", "tag"),
    ],
)
def test_write_run_rejects_unwritable_values(
    tmp_path: Path, rows: list[tuple[str, str, float]], tag: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        write_run(pd.DataFrame(rows, columns=["qid", "docno", "score"]), tmp_path / "r.txt", tag=tag)
    assert not (tmp_path / "r.txt").exists()


def test_crlf_bom_and_gzip_qrels_and_runs(tmp_path: Path) -> None:
    qrels = tmp_path / "q.txt"
    qrels.write_bytes(b"\xef\xbb\xbf1 0 d1 1\r\n1 0 d2 0\r\n")
    assert read_qrels(qrels).values.tolist() == [["1", "d1", 1], ["1", "d2", 0]]
    run = tmp_path / "r.txt"
    run.write_bytes(b"\xef\xbb\xbf1 Q0 d1 1 2.0 t\r\n1\tQ0\td2\t2\t1.0\tt\r\n")
    assert read_run(run)[["qid", "docno", "score"]].values.tolist() == [["1", "d1", 2.0], ["1", "d2", 1.0]]
    assert read_run(run).attrs["tag"] == "t"
    gz = tmp_path / "q.tsv.gz"
    with gzip.open(gz, "wt") as handle:
        handle.write("\nquery-id\tcorpus-id\tscore\n7\td1\t2\n")
    assert read_qrels(gz).values.tolist() == [["7", "d1", 2]]


def test_non_utf8_in_a_gzipped_qrels_names_the_line(tmp_path: Path) -> None:
    gz = tmp_path / "q.txt.gz"
    with gzip.open(gz, "wb") as handle:
        handle.write(b"1 0 d1 1\n1 0 d\xe9 0\n")
    with pytest.raises(InputFormatError, match="not valid UTF-8") as info:
        read_qrels(gz)
    assert info.value.line == 2
