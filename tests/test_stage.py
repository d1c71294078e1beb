import pandas as pd
import pytest

from evirank.frames import make_run
from evirank.stage import CutOff, Pipeline, Stage


class Scale(Stage):
    def __init__(self, factor: float) -> None:
        self.factor = factor

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return make_run(frame.assign(score=frame["score"] * self.factor))


def test_pipeline_runs_stages_in_order_and_cuts_per_query() -> None:
    run = make_run([("1", "a", 3.0), ("1", "b", 2.0), ("1", "c", 1.0), ("2", "x", 1.0)])
    pipeline = Scale(2.0) % 2 >> Scale(-1.0)
    out = pipeline(run)
    assert isinstance(pipeline, Pipeline) and len(pipeline.stages) == 3
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
