"""Folds: the Robust04 JSON format, qid/fold TSV, seeded k folds, and errors that name file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evirank.errors import InputFormatError
from evirank.tune import Fold, Folds, FoldsError, k_folds, read_folds, write_folds


def test_robust04_folds_tune_on_four_folds_and_predict_the_fifth(datasets: Path) -> None:
    path = datasets / "trec-newswire-topics" / "folds.robust04.yang19.json"
    folds = read_folds(path)
    assert [f.name for f in folds] == ["s1", "s2", "s3", "s4", "s5"]
    assert all(len(f.test) == 50 and len(f.tune) == 200 for f in folds)
    assert sorted(folds.qids) == sorted(set(folds.qids)) and len(folds.qids) == 250
    for fold in folds:
        assert not set(fold.tune) & set(fold.test)
        assert set(fold.tune) | set(fold.test) == set(folds.qids)
    train_only = read_folds(path, tune_on=("train",))
    assert all(len(f.tune) == 150 for f in train_only)


def test_json_folds_inline(tmp_path: Path) -> None:
    data = {
        "a": {"train_qids": ["1", "2"], "predict": {"dev": ["3"], "test": ["4"]}},
        "b": {"train_qids": [3, 4], "predict": {"dev": [1], "test": [2]}},
    }
    path = tmp_path / "folds.json"
    path.write_text(json.dumps(data))
    folds = read_folds(path)
    assert folds[0] == Fold("a", ("1", "2", "3"), ("4",))
    assert folds[1] == Fold("b", ("3", "4", "1"), ("2",))
    assert read_folds(path, tune_on=("dev",))[0].tune == ("3",)


def test_tsv_folds_with_header_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "folds.tsv"
    path.write_text("qid\tfold\n# five queries, two folds\n1\tA\n2\tB\n3\tA\n\n4\tB\n5\tA\n3\tA\n")
    folds = read_folds(path)
    assert [f.name for f in folds] == ["A", "B"]
    assert folds[0].test == ("1", "3", "5") and folds[0].tune == ("2", "4")
    assert folds.fold_of()["4"] == "B"


def test_written_folds_read_back_the_same(tmp_path: Path) -> None:
    folds = k_folds([f"q{i}" for i in range(12)], k=3, seed=7)
    path = write_folds(folds, tmp_path / "folds.json")
    again = read_folds(path)
    assert [(f.name, set(f.tune), set(f.test)) for f in again] == [
        (f.name, set(f.tune), set(f.test)) for f in folds
    ]
    with pytest.raises(FileExistsError):
        write_folds(folds, path)


def test_k_folds_are_deterministic_balanced_and_disjoint() -> None:
    qids = [str(q) for q in range(1, 24)]
    folds = k_folds(qids, k=5, seed=3)
    assert sorted(len(f.test) for f in folds) == [4, 4, 5, 5, 5]
    assert sorted(folds.qids, key=int) == qids
    for fold in folds:
        assert set(fold.tune) == set(qids) - set(fold.test)
    assert k_folds(list(reversed(qids)), k=5, seed=3).fold_of() == folds.fold_of()
    assert k_folds(qids, k=5, seed=4).fold_of() != folds.fold_of()


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('{"a": {"train_qids": ["1"], "predict": {"test": ["2"]}},\n "b": [1]}', 2, "fold 'b'"),
        ('{"a": {"train_qids": ["1"],\n "predict": {"test": []}}}', 1, "non-empty"),
        ('{"a": {"train_qids": "1 2", "predict": {"test": ["3"]}}}', 1, "list of query ids"),
        ('{"a": {"train_qids": ["1"],\n "predict": {"test": ["2"]}\n', 3, "invalid JSON"),
        ("1\tA\n2\tB\n3 A extra\n", 3, "two columns"),
        ("1\tA\n2\tB\n1\tB\n", 3, "already in fold A"),
    ],
)
def test_bad_folds_files_name_the_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "folds.txt"
    path.write_text(text)
    with pytest.raises(InputFormatError) as info:
        read_folds(path)
    assert info.value.line == line
    assert str(path) in str(info.value) and words in str(info.value)


def test_json_folds_that_leak_test_queries_into_tuning_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "folds.json"
    path.write_text(json.dumps({"a": {"train_qids": ["1", "2"], "predict": {"dev": [], "test": ["2"]}}}))
    with pytest.raises(InputFormatError, match="both tuned on and predicted"):
        read_folds(path)


def test_single_fold_tsv_and_overlapping_test_sets_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "one.tsv"
    path.write_text("1\tA\n2\tA\n")
    with pytest.raises(InputFormatError, match="at least 2 folds"):
        read_folds(path)
    with pytest.raises(FoldsError, match="predicted by folds"):
        Folds([Fold("a", ("1",), ("2",)), Fold("b", ("3",), ("2",))])


def test_restrict_drops_queries_without_data() -> None:
    folds = Folds([Fold("a", ("1", "2"), ("3",)), Fold("b", ("1", "3"), ("2", "9"))])
    kept = folds.restrict(["1", "2", "3"])
    assert kept[1].test == ("2",)
    assert len(folds.restrict(["1", "2"])) == 1
    with pytest.raises(FoldsError, match="no tuning queries"):
        folds.restrict(["3"])
