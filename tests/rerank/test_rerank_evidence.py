"""Several scorers' evidence in one ranking: ``rerank --scorer``, repeated, then ``tune
--scorer-scores``, tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rerank_cases import TOPICS

from evirank.aggregate import AggregateSpec
from evirank.cli import main
from evirank.frames import DOCNO, QID, SCORE
from evirank.io import read_run
from evirank.score import open_store

DEPTH = 4


def base_args(collection: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "-q",
        "rerank",
        "--run",
        str(collection["run"]),
        "--corpus",
        str(collection["corpus"]),
        "--topics",
        str(collection["topics"]),
        "--device",
        "cpu",
        "--depth",
        str(DEPTH),
        "--output",
        str(out),
        *extra,
    ]


def qrels_file(folder: Path) -> Path:
    path = folder / "qrels.txt"
    path.write_text(
        "".join(f"{q} 0 {d} 1\n" for q, d in (("1", "d7"), ("1", "d1"), ("2", "d3"), ("3", "d4")))
    )
    return path


def run_scores(path: Path) -> dict[tuple[str, str], float]:
    run = read_run(path)
    return dict(zip(zip(run[QID], run[DOCNO], strict=True), run[SCORE], strict=True))


@pytest.fixture
def two_scorers(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path, tmp_path: Path
) -> dict[str, Path]:
    """A re-ranking by a tiny cross-encoder and a tiny bi-encoder, Birch 2S, their scores stored."""
    out = tmp_path / "two.txt"
    store = tmp_path / "scores.sqlite"
    passages = tmp_path / "two.passages.parquet"
    args = base_args(
        collection,
        out,
        "--scorer",
        f"cross:{tiny_cross_encoder_path}",
        "--scorer",
        f"bi:{tiny_bi_encoder_path}",
        "--scorer-weights",
        "bi=0.3",
        "--aggregate",
        "birch:2",
        "--alpha",
        "0.4",
        "--weights",
        "1",
        "0.5",
        "--scores",
        str(store),
        "--save-passages",
        str(passages),
    )
    assert main(args) == 0
    return {"run": out, "store": store, "passages": passages}


def test_rerank_with_two_scorers_keeps_each_in_the_store_and_records_the_weights(
    two_scorers: dict[str, Path],
) -> None:
    record = json.loads(Path(f"{two_scorers['run']}.json").read_text())
    assert record["evidence"]["weights"] == {"cross": pytest.approx(0.7), "bi": pytest.approx(0.3)}
    fingerprints = record["evidence"]["fingerprints"]
    assert set(fingerprints) == {"cross", "bi"} and len(set(fingerprints.values())) == 2
    assert record["tag"] == "evirank-cross+bi-birch2"
    with open_store(two_scorers["store"], readonly=True) as store:
        stored = set(store.fingerprints()["fingerprint"])
    assert set(fingerprints.values()) <= stored
    saved = pd.read_parquet(two_scorers["passages"])
    assert {"score_cross", "score_bi"} <= set(saved.columns)
    np.testing.assert_array_equal(saved[SCORE], saved["score_cross"])
    assert not np.allclose(saved["score_cross"], saved["score_bi"])


def test_the_ranking_is_the_documented_combination_of_the_two_scorers(two_scorers: dict[str, Path]) -> None:
    """alpha * s + (1 - alpha) * (0.7 * E_cross + 0.3 * E_bi), each E Birch 2S over min-max scores."""
    saved = pd.read_parquet(two_scorers["passages"])
    got = run_scores(two_scorers["run"])
    for qid, query in saved.groupby(QID):
        docs = query.drop_duplicates(DOCNO).set_index(DOCNO)["first_stage_score"]
        s_doc = (docs - docs.min()) / (docs.max() - docs.min())
        evidence = {}
        for label in ("cross", "bi"):
            norm = query.assign(v=(query[f"score_{label}"] - query[f"score_{label}"].min()))
            norm["v"] /= query[f"score_{label}"].max() - query[f"score_{label}"].min()
            for docno, doc in norm.groupby(DOCNO):
                top = [*sorted(doc["v"], reverse=True)[:2], 0.0]
                evidence.setdefault(docno, {})[label] = top[0] + 0.5 * top[1]
        for docno, e in evidence.items():
            expected = 0.4 * s_doc[docno] + 0.6 * (0.7 * e["cross"] + 0.3 * e["bi"])
            assert got[(str(qid), docno)] == pytest.approx(expected, abs=1e-12)


def test_tune_reads_both_scorers_from_the_store_and_matches_the_pipeline(
    collection: dict[str, Path], two_scorers: dict[str, Path], tmp_path: Path
) -> None:
    record = json.loads(Path(f"{two_scorers['run']}.json").read_text())
    fp = record["evidence"]["fingerprints"]
    store = two_scorers["store"]
    out = tmp_path / "tuned"
    args = [
        "-q",
        "tune",
        "--scorer-scores",
        f"cross={store}#{fp['cross'][:12]}",
        "--scorer-scores",
        f"bi={store}#{fp['bi'][:12]}",
        "--run",
        str(collection["run"]),
        "--depth",
        str(DEPTH),
        "--qrels",
        str(qrels_file(tmp_path)),
        "--aggregate",
        "birch:2",
        "--grid",
        "alpha=0.4",
        "w2=0.5",
        "bi=0.3",
        "--k-folds",
        "3",
        "--output",
        str(out),
    ]
    assert main(args) == 0
    # One setting, the pipeline's: the cross-validated run is the pipeline's run.
    tuned, piped = run_scores(out / "run.txt"), run_scores(two_scorers["run"])
    assert tuned.keys() == piped.keys()
    for key, value in piped.items():
        assert tuned[key] == pytest.approx(value, abs=1e-12)
    params = pd.read_csv(out / "params.tsv", sep="\t")
    assert {"alpha", "w1", "w2", "cross", "bi"} <= set(params.columns)
    assert params["cross"].tolist() == pytest.approx([0.7] * len(params))
    assert params["bi"].tolist() == pytest.approx([0.3] * len(params))
    tune_record = json.loads((out / "tune.json").read_text())
    assert tune_record["scorers"] == ["cross", "bi"]
    assert tune_record["fingerprint"] == {"cross": fp["cross"], "bi": fp["bi"]}


def test_tune_searches_the_scorer_weight_from_a_saved_passages_file(
    collection: dict[str, Path], two_scorers: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "tuned"
    passages = two_scorers["passages"]
    args = [
        "-q",
        "tune",
        "--scorer-scores",
        f"cross={passages}",
        "--scorer-scores",
        f"bi={passages}",
        "--run",
        str(collection["run"]),
        "--depth",
        str(DEPTH),
        "--qrels",
        str(qrels_file(tmp_path)),
        "--aggregate",
        "maxp",
        "--metric",
        "nDCG@10",
        "--k-folds",
        "3",
        "--output",
        str(out),
    ]
    assert main(args) == 0
    grid = pd.read_csv(out / "grid.tsv", sep="\t")
    assert list(grid.columns[:3]) == ["alpha", "cross", "bi"]
    assert len(grid) == 121  # alpha x bi, both 0:1:0.1
    np.testing.assert_allclose(grid["cross"] + grid["bi"], 1.0)


def test_one_evidence_scorer_is_the_plain_scorer(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    plain, one = tmp_path / "plain.txt", tmp_path / "one.txt"
    assert main(base_args(collection, plain, "--model", str(tiny_cross_encoder_path))) == 0
    assert main(base_args(collection, one, "--scorer", f"cross:{tiny_cross_encoder_path}")) == 0
    assert plain.read_text().replace("evirank-cross-birch3", "T") == one.read_text().replace(
        "evirank-cross-birch3", "T"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--scorer", "cross"], "needs its model"),
        (["--scorer", "lstm:x"], "unknown model family 'lstm'"),
        (["--scorer", "bi", "--scorer", "bi"], "'bi' is given twice"),
        (["--scorer", "bi", "--scorer", "b2=bi", "--scorer-weights", "b2=1.5"], "must be in [0, 1]"),
        (["--scorer", "bi", "--scorer", "b2=bi", "--scorer-weights", "xx=0.5"], "no scorer labelled"),
        (["--scorer", "bi", "--scorer-weights", "bi=0.5"], "needs two scorers"),
        (["--scorer", "alpha=bi", "--scorer", "bi"], "name of an aggregator parameter"),
        (["--scorer", "bi", "--scorer", "b2=bi", "--model", "m"], "not --model"),
        (["--scorer", "bi:m", "--model", "m"], "already names its model"),
    ],
)
def test_bad_scorer_specs_say_what_was_expected(
    collection: dict[str, Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    extra: list[str],
    message: str,
) -> None:
    assert main(base_args(collection, tmp_path / "bad.txt", *extra)) == 2
    assert message in caplog.text
    assert not (tmp_path / "bad.txt").exists()


def test_the_tuner_refuses_the_first_scorers_weight_as_a_grid_axis() -> None:
    spec = AggregateSpec.parse("maxp", scorers=("cross", "bi"))
    with pytest.raises(ValueError, match="1 minus the others"):
        spec.check(["cross"])
    assert TOPICS  # the collection the CLI tests use
