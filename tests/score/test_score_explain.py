"""explain (API and CLI): a document's passages with scores, best first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import PID, QID, QUERY, RANK, SCORE, make_passages
from evirank.score import BiEncoder, CrossEncoder, FingerprintError, NotScoredError, explain

DOC = ["The cat sat on the mat.", "Dogs bark.", "The cat was on a mat, sitting.", "Interest rates rose."]


def passages() -> pd.DataFrame:
    rows = [("7", "d1", i, t) for i, t in enumerate(DOC)] + [
        ("7", "d2", 0, "Cats."),
        ("8", "d1", 0, "Other."),
    ]
    frame = make_passages(rows)
    frame[QUERY] = frame[QID].map({"7": "where did the cat sit", "8": "bm25"})
    return frame


def test_explain_orders_a_frame_best_first_with_pid_breaking_ties() -> None:
    frame = passages().assign(score=[0.2, 0.9, 0.2, np.nan, 5.0, 5.0])
    out = explain(frame, "7", "d1")
    assert out[PID].tolist() == [1, 0, 2, 3]  # 0.9, then the 0.2 tie by pid, unscored last
    assert out[RANK].tolist() == [1, 2, 3, 4]
    with pytest.raises(NotScoredError):
        explain(frame, "7", "nope")


def test_explain_from_a_store_matches_the_scored_frame(tiny_cross_encoder_path: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    scored = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store))(passages())
    out = explain(store, "7", "d1")
    expected = scored[(scored[QID] == "7") & (scored["docno"] == "d1")].sort_values(SCORE, ascending=False)
    assert out[PID].tolist() == expected[PID].tolist()
    np.testing.assert_array_equal(out[SCORE], expected[SCORE])
    assert (out[QUERY] == "where did the cat sit").all()


def test_several_scorers_in_one_store_must_be_told_apart(
    tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite"
    cross = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store))
    cross(passages())
    BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", store=store))(passages())
    with pytest.raises(FingerprintError, match="fingerprint"):
        explain(store, "7", "d1")
    assert len(explain(store, "7", "d1", fingerprint=cross.fingerprint[:8])) == len(DOC)


def test_cli_explain_prints_passages_best_first(
    tiny_cross_encoder_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    scored = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store))(passages())
    best = scored[(scored[QID] == "7") & (scored["docno"] == "d1")].sort_values(SCORE, ascending=False)
    assert main(["explain", "--scores", str(store), "--qid", "7", "--docno", "d1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "query 7: where did the cat sit"
    assert "4 passages" in lines[1]
    assert lines[3].split()[:2] == ["1", str(best[PID].iloc[0])] and lines[3].endswith(best["text"].iloc[0])
    assert (
        main(
            [
                "explain",
                "--scores",
                str(store),
                "--qid",
                "7",
                "--docno",
                "d1",
                "--format",
                "jsonl",
                "--show-passages",
                "2",
            ]
        )
        == 0
    )
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r[PID] for r in records] == best[PID].tolist()[:2]


def test_cli_explain_reports_unknown_documents_and_stores(
    tmp_path: Path, tiny_cross_encoder_path: Path
) -> None:
    assert main(["explain", "--scores", str(tmp_path / "absent.sqlite"), "--qid", "1", "--docno", "d"]) == 2
    store = tmp_path / "s.sqlite"
    CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store))(passages())
    assert main(["explain", "--scores", str(store), "--qid", "7", "--docno", "missing"]) == 2
