"""Reading scored passages: formats, first-stage scores from a run, and errors naming file and line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evirank.errors import InputFormatError
from evirank.frames import make_run
from evirank.tune.inputs import attach_first_stage, read_passages

ROWS = pd.DataFrame(
    {"qid": ["1", "1", "1"], "docno": ["a", "a", "b"], "pid": [0, 1, 0], "score": [0.5, 0.7, 0.1]}
)


@pytest.mark.parametrize("name", ["p.parquet", "p.tsv", "p.tsv.gz", "p.jsonl", "p.jsonl.gz"])
def test_passages_files_in_every_format_read_alike(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if ".parquet" in name:
        ROWS.to_parquet(path)
    elif ".tsv" in name:
        ROWS.to_csv(path, sep="\t", index=False)
    else:
        ROWS.to_json(path, orient="records", lines=True)
    frame = read_passages(path)
    assert frame[["qid", "docno", "pid", "score"]].values.tolist() == ROWS.values.tolist()


def test_bad_passages_files_say_where(tmp_path: Path) -> None:
    bad_score = tmp_path / "bad.tsv"
    bad_score.write_text("qid\tdocno\tscore\n1\ta\t0.5\n1\tb\tmany\n")
    with pytest.raises(InputFormatError) as info:
        read_passages(bad_score)
    assert info.value.line == 3 and "'score'" in str(info.value)
    no_score = tmp_path / "cols.tsv"
    no_score.write_text("qid\tdocno\n1\ta\n")
    with pytest.raises(InputFormatError, match="columns"):
        read_passages(no_score)
    (tmp_path / "x.csv").write_text("qid,docno,score\n")
    with pytest.raises(InputFormatError, match="ending in"):
        read_passages(tmp_path / "x.csv")
    with pytest.raises(FileNotFoundError):
        read_passages(tmp_path / "missing.parquet")


def test_first_stage_scores_come_from_the_run_top_depth() -> None:
    run = make_run([("1", "a", 9.0), ("1", "b", 8.0), ("1", "c", 7.0)])
    joined = attach_first_stage(ROWS, run, depth=1)
    assert joined["docno"].unique().tolist() == ["a"]  # b is below the depth
    assert joined["first_stage_score"].tolist() == [9.0, 9.0] and joined["first_stage_rank"].tolist() == [
        1,
        1,
    ]
    with pytest.raises(ValueError, match="no passage belongs"):
        attach_first_stage(ROWS.assign(qid="9"), run)
