from pathlib import Path

import pandas as pd
import pytest

from evirank.frames import make_qrels, make_run
from evirank.stage import Chain, CutOff, Stage


class Scale(Stage):
    def __init__(self, factor: float) -> None:
        self.factor = factor

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return make_run(frame.assign(score=frame["score"] * self.factor))


def test_pipeline_runs_stages_in_order_and_cuts_per_query() -> None:
    run = make_run([("1", "a", 3.0), ("1", "b", 2.0), ("1", "c", 1.0), ("2", "x", 1.0)])
    pipeline = Scale(2.0) % 2 >> Scale(-1.0)
    out = pipeline(run)
    assert isinstance(pipeline, Chain) and len(pipeline.stages) == 3
    assert out[out.qid == "1"].docno.tolist() == ["b", "a"]
    assert out[out.qid == "2"].docno.tolist() == ["x"]


def test_stage_does_not_mutate_its_input() -> None:
    run = make_run([("1", "a", 3.0), ("1", "b", 2.0)])
    before = run.copy()
    (Scale(5.0) % 1)(run)
    pd.testing.assert_frame_equal(run, before)


def test_cutoff_rejects_non_positive_depth() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        CutOff(0)


def test_ties_broken_by_docno_descending_and_qids_in_numeric_order() -> None:
    run = make_run([("10", "b", 1.0), ("10", "a", 1.0), ("9", "z", 0.5)])
    assert run[["qid", "docno", "rank"]].values.tolist() == [["9", "z", 1], ["10", "b", 1], ["10", "a", 2]]


def test_one_natural_qid_order_for_runs_qrels_folds_and_splits(tmp_path: Path) -> None:
    from evirank.frames import natural_order
    from evirank.io import read_qrels, write_qrels
    from evirank.train.examples import make_examples, split_by_query
    from evirank.tune.folds import k_folds

    # numeric only when every id is a whole number (ASCII digits); otherwise text order for all
    assert natural_order(["10", "9", "100", "9"]) == ["9", "10", "100"]
    assert natural_order(["10", "9", "q1"]) == ["10", "9", "q1"]
    assert natural_order(["2", "²"]) == ["2", "²"]  # '²'.isdigit() but not a whole number
    assert natural_order([10, 9]) == [9, 10]
    mixed = make_run([("q2", "d", 1.0), ("10", "d", 1.0), ("9", "d", 1.0)])
    assert list(dict.fromkeys(mixed["qid"])) == ["10", "9", "q2"]
    write_qrels(make_qrels([("10", "d", 1), ("9", "d", 1), ("q2", "d", 1)]), tmp_path / "q.txt")
    assert [line.split()[0] for line in (tmp_path / "q.txt").read_text().splitlines()] == ["10", "9", "q2"]
    assert list(read_qrels(tmp_path / "q.txt")["qid"].unique()) == ["10", "9", "q2"]
    for fold in k_folds(["q2", "9", "10"], k=3, seed=0):
        assert fold.tune == tuple(q for q in ["10", "9", "q2"] if q not in fold.test)
    examples = make_examples([(q, "q", "d", 0, "t", 1, "demo") for q in ["10", "9", "q2", "1"]])
    train, validation = split_by_query(examples, 0.25, seed=0)
    assert sorted(set(train.qid) | set(validation.qid)) == ["1", "10", "9", "q2"]
