"""``evirank tune`` end to end on tiny inputs: a passages file, a score store, folds files, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evirank.cli import main
from evirank.evaluate import evaluate
from evirank.frames import make_run
from evirank.io import read_qrels, read_run, write_qrels, write_run
from evirank.tune.synthetic import synthetic_passages


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    passages, qrels = synthetic_passages(n_queries=20, depth=12, sentences=3, seed=4)
    docs = passages.drop_duplicates(["qid", "docno"])
    run = make_run(docs[["qid", "docno", "first_stage_score"]].rename(columns={"first_stage_score": "score"}))
    # Two documents per query beyond the re-ranked ones: they must follow in first-stage order.
    tail = pd.DataFrame(
        [(q, f"tail{i}", -100.0 - i) for q in run["qid"].unique() for i in range(2)],
        columns=["qid", "docno", "score"],
    )
    paths = {
        "passages": tmp_path / "passages.parquet",
        "tsv": tmp_path / "passages.tsv",
        "run": tmp_path / "run.bm25.txt",
        "qrels": tmp_path / "qrels.txt",
    }
    passages.to_parquet(paths["passages"])
    passages.drop(columns=["first_stage_score", "first_stage_rank"]).to_csv(
        paths["tsv"], sep="\t", index=False
    )
    write_run(make_run(pd.concat([run[["qid", "docno", "score"]], tail])), paths["run"])
    write_qrels(qrels, paths["qrels"])
    return paths


def test_tune_from_a_passages_file_writes_run_params_and_record(
    inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "birch-cv"
    args = [
        "tune",
        "--passages",
        str(inputs["passages"]),
        "--run",
        str(inputs["run"]),
        "--qrels",
        str(inputs["qrels"]),
        "--aggregate",
        "birch:2",
        "--k-folds",
        "4",
        "--seed",
        "3",
        "--grid",
        "alpha=0:1:0.25",
        "w2=0,0.5,1",
        "--metric",
        "nDCG@10",
        "--output",
        str(out),
    ]
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "folds.json",
        "grid.tsv",
        "params.tsv",
        "run.txt",
        "tune.json",
    ]
    record = json.loads((out / "tune.json").read_text())
    assert record["aggregate"] == "birch:2" and record["settings"] == 15 and record["metric"] == "nDCG@10"
    assert len(record["choices"]) == 4 and set(record["choices"][0]["params"]) == {"alpha", "w1", "w2"}
    assert {"read", "grid", "total"} <= set(record["timings"]) and record["versions"]["evirank"]
    run = read_run(out / "run.txt")
    assert run.groupby("qid").size().eq(14).all()  # 12 re-ranked + the 2 tail documents
    assert run[run["docno"].str.startswith("tail")]["rank"].min() == 13
    qrels = read_qrels(inputs["qrels"])
    assert evaluate(run, qrels, ["nDCG@10"])["nDCG@10"] == pytest.approx(
        record["evaluation"]["means"]["nDCG@10"]
    )
    params = pd.read_csv(out / "params.tsv", sep="\t", dtype={"fold": str})
    assert params["fold"].tolist() == ["1", "2", "3", "4", "all"]
    grid = pd.read_csv(out / "grid.tsv", sep="\t")
    assert len(grid) == 15 and "tune_mean[1]" in grid.columns
    printed = capsys.readouterr().out
    assert "| fold |" in printed and "cross-validated run (20 queries)" in printed

    # The output is never overwritten without --overwrite.
    assert main(args) == 2
    assert main([*args, "--overwrite"]) == 0


def test_tune_with_a_tsv_folds_file_and_passages_tsv(inputs: dict[str, Path], tmp_path: Path) -> None:
    folds = tmp_path / "folds.tsv"
    folds.write_text("".join(f"{q}\t{'AB'[q % 2]}\n" for q in range(1, 21)))
    out = tmp_path / "maxp"
    assert (
        main(
            [
                "tune",
                "--passages",
                str(inputs["tsv"]),
                "--run",
                str(inputs["run"]),
                "--qrels",
                str(inputs["qrels"]),
                "--aggregate",
                "maxp",
                "--folds",
                str(folds),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads((out / "tune.json").read_text())
    assert [c["fold"] for c in record["choices"]] == ["A", "B"]
    assert record["settings"] == 11  # the default grid: alpha=0:1:0.1
    saved = json.loads((out / "folds.json").read_text())
    assert sorted(saved["A"]["predict"]["test"], key=int) == [str(q) for q in range(2, 21, 2)]


def test_tune_from_a_score_store(inputs: dict[str, Path], tmp_path: Path) -> None:
    from evirank.score.store import ScoreStore

    passages = pd.read_parquet(inputs["passages"])
    store_path = tmp_path / "scores.sqlite"
    with ScoreStore(store_path) as store:
        fp = store.register("f" * 64, kind="cross", description={"model": "test"})
        store.record_segments(fp, passages)
        store.put_scores(
            fp, passages["query"].tolist(), passages["text"].tolist(), passages["score"].tolist()
        )
        # A second scorer: the store then needs --fingerprint.
        other = store.register("e" * 64, kind="bi", description={"model": "other"})
        store.record_segments(other, passages.head(5))
    out = tmp_path / "from-store"
    base = [
        "tune",
        "--scores",
        str(store_path),
        "--run",
        str(inputs["run"]),
        "--qrels",
        str(inputs["qrels"]),
        "--grid",
        "alpha=0,0.5,1",
        "--k-folds",
        "2",
        "--output",
        str(out),
    ]
    assert main(base) == 2  # two scorers, no fingerprint
    assert main([*base, "--fingerprint", "fff"]) == 0
    record = json.loads((out / "tune.json").read_text())
    assert record["fingerprint"] == "f" * 64
    from_file = tmp_path / "from-file"
    assert (
        main(
            [
                "tune",
                "--passages",
                str(inputs["passages"]),
                "--run",
                str(inputs["run"]),
                "--qrels",
                str(inputs["qrels"]),
                "--grid",
                "alpha=0,0.5,1",
                "--k-folds",
                "2",
                "--output",
                str(from_file),
            ]
        )
        == 0
    )
    # The same passages and scores, read from the store or from the file, give the same run.
    columns = ["qid", "docno", "rank", "score"]
    assert read_run(out / "run.txt")[columns].equals(read_run(from_file / "run.txt")[columns])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--grid", "w4=0,1"], "has no parameter 'w4'"),
        (["--grid", "alpha=0:1"], "three numbers"),
        (["--aggregate", "bm25"], "unknown aggregator"),
        (["--metric", "NumRet"], "evaluates"),
    ],
)
def test_bad_flags_fail_with_one_clear_line(
    inputs: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, extra: list[str], message: str
) -> None:
    args = [
        "tune",
        "--passages",
        str(inputs["passages"]),
        "--qrels",
        str(inputs["qrels"]),
        "--output",
        str(tmp_path / "x"),
        *extra,
    ]
    assert main(args) == 2
    assert message in caplog.text
    assert not (tmp_path / "x").exists()


def test_tune_with_the_robust04_folds(datasets: Path, tmp_path: Path) -> None:
    folds_file = datasets / "trec-newswire-topics" / "folds.robust04.yang19.json"
    qids = sorted(json.loads(folds_file.read_text())["s1"]["train_qids"]) + sorted(
        q for fold in json.loads(folds_file.read_text()).values() for q in fold["predict"]["test"]
    )
    robust = sorted(set(qids), key=int)
    passages, qrels = synthetic_passages(n_queries=len(robust), depth=10, sentences=3, seed=8)
    rename = {str(i + 1): q for i, q in enumerate(robust)}
    passages["qid"] = passages["qid"].map(rename)
    qrels["qid"] = qrels["qid"].map(rename)
    passages.to_parquet(tmp_path / "p.parquet")
    write_qrels(qrels, tmp_path / "qrels.txt")
    out = tmp_path / "cv"
    assert (
        main(
            [
                "-q",
                "tune",
                "--passages",
                str(tmp_path / "p.parquet"),
                "--qrels",
                str(tmp_path / "qrels.txt"),
                "--folds",
                str(folds_file),
                "--aggregate",
                "birch:3",
                "--grid",
                "alpha=0:1:0.5",
                "w2=0,1",
                "w3=0",
                "--output",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads((out / "tune.json").read_text())
    assert [c["fold"] for c in record["choices"]] == ["s1", "s2", "s3", "s4", "s5"]
    assert all(c["n_tune"] == 200 and c["n_test"] == 50 for c in record["choices"])
    assert record["evaluation"]["queries"] == 250
