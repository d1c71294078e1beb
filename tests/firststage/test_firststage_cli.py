"""``evirank search --first-stage dense | rrf | interp``: runs and records written, fused as the Python
API fuses, tunable."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evirank.cli import main
from evirank.firststage import interpolate, rrf
from evirank.io import read_run

DOCS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr on the mat. They sleep a lot in the sun."},
    {"_id": "d2", "title": "Dogs", "text": "Dogs bark at night. A dog chases cats."},
    {"_id": "d3", "title": "Birds", "text": "Birds sing. Birds fly south. Some birds swim in lakes."},
    {"_id": "d4", "title": "Fish", "text": "Fish swim in the sea."},
    {"_id": "d5", "title": "", "text": "Snakes hiss quietly. A cat watches the snake."},
    {"_id": "d6", "title": "Bees", "text": "Bees make honey. Honey is sweet. Bears like honey."},
]
TOPICS = "1\tcats sleeping on mats\n2\thoney bees\n3\tbirds that swim\n"
QRELS = "1 0 d1 1\n2 0 d6 1\n3 0 d3 1\n3 0 d4 1\n"


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory, tiny_bi_encoder_path: Path) -> dict[str, Path]:
    pytest.importorskip("pyserini")
    folder = tmp_path_factory.mktemp("hybrid")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (folder / "topics.tsv").write_text(TOPICS)
    (folder / "qrels.txt").write_text(QRELS)
    index = folder / "index"
    model = ["--model", str(tiny_bi_encoder_path), "--device", "cpu"]
    assert main(["-q", "index", "--corpus", str(corpus), "--index", str(index), "--embed", *model]) == 0
    return {"folder": folder, "index": index, "topics": folder / "topics.tsv", "qrels": folder / "qrels.txt"}


def search(collection: dict[str, Path], model: Path, output: Path, *flags: str) -> int:
    args = ["-q", "search", "--index", str(collection["index"]), "--topics", str(collection["topics"])]
    return main(
        [*args, "--output", str(output), "--k", "4", *flags, "--model", str(model), "--device", "cpu"]
    )


def test_search_dense_and_fused_runs_round_trip(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    model = tiny_bi_encoder_path
    bm25_out, dense_out = tmp_path / "bm25.txt", tmp_path / "dense.txt"
    assert search(collection, model, bm25_out) == 0
    assert search(collection, model, dense_out, "--first-stage", "dense") == 0
    bm25, dense = read_run(bm25_out), read_run(dense_out)
    assert dense.groupby("qid").size().tolist() == [4, 4, 4]
    record = json.loads((tmp_path / "dense.txt.json").read_text())
    assert record["config"]["dense"]["pooling"] == "max"
    assert record["config"]["dense"]["segment"] == "sentences:prepend"
    assert record["config"]["fusion"] is None and record["tag"] == "dense"

    rrf_out, table_out = tmp_path / "rrf.txt", tmp_path / "fusion.parquet"
    assert search(collection, model, rrf_out, "--first-stage", "rrf", "--save-fusion", str(table_out)) == 0
    want = rrf(bm25, dense, depth=4)
    got = read_run(rrf_out)
    assert got[["qid", "docno"]].values.tolist() == want[["qid", "docno"]].values.tolist()
    assert json.loads((tmp_path / "rrf.txt.json").read_text())["config"]["fusion"] == "rrf:60"
    table = pd.read_parquet(table_out)
    assert {"qid", "docno", "pid", "score", "first_stage_score"} <= set(table.columns)

    interp_out = tmp_path / "interp.txt"
    assert search(collection, model, interp_out, "--first-stage", "interp:0.3") == 0
    want = interpolate(bm25, dense, 0.3, depth=4)
    assert read_run(interp_out)[["qid", "docno"]].values.tolist() == want[["qid", "docno"]].values.tolist()
    assert "bm25+dense-interp0.3" in interp_out.read_text().splitlines()[0]

    # the fusion table is what evirank tune cross-validates the weight on
    tuned = tmp_path / "tuned"
    args = ["-q", "tune", "--passages", str(table_out), "--qrels", str(collection["qrels"])]
    grid = ["--aggregate", "maxp", "--grid", "alpha=0:1:0.5", "--k-folds", "3", "--metric", "nDCG@10"]
    assert main([*args, *grid, "--output", str(tuned)]) == 0
    assert read_run(tuned / "run.txt")["qid"].nunique() == 3


def test_a_hybrid_run_feeds_rerank(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    hybrid = tmp_path / "hybrid.txt"
    assert search(collection, tiny_bi_encoder_path, hybrid, "--first-stage", "rrf") == 0
    out = tmp_path / "reranked.txt"
    args = ["-q", "rerank", "--run", str(hybrid), "--index", str(collection["index"])]
    args += ["--topics", str(collection["topics"]), "--scorer", "bi", "--model", str(tiny_bi_encoder_path)]
    args += ["--segment", "sentences:prepend", "--device", "cpu", "--depth", "3", "--aggregate", "maxp"]
    assert main([*args, "--output", str(out)]) == 0
    assert set(read_run(out)["docno"]) <= set(read_run(hybrid)["docno"])


def test_search_refuses_what_it_cannot_do(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "run.txt"
    assert search(collection, tiny_bi_encoder_path, out, "--first-stage", "max") == 2
    assert "rrf[:K] or interp[:WEIGHT]" in caplog.text
    assert search(collection, tiny_bi_encoder_path, out, "--save-fusion", str(tmp_path / "t.parquet")) == 2
    assert search(collection, tiny_bi_encoder_path, out, "--first-stage", "dense", "--rm3") == 2
    assert search(collection, tiny_bi_encoder_path, out, "--first-stage", "dense", "--vectors", "none") == 2
    caplog.clear()
    # another model than the vectors' (a different token cap changes the fingerprint)
    assert search(collection, tiny_bi_encoder_path, out, "--first-stage", "dense", "--max-length", "16") == 2
    assert "passage vectors were made with" in caplog.text
    assert not out.exists()


def test_dense_search_needs_vectors(
    tmp_path: Path, tiny_bi_encoder_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("pyserini")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    index = tmp_path / "plain"
    assert main(["-q", "index", "--corpus", str(corpus), "--index", str(index)]) == 0
    (tmp_path / "topics.tsv").write_text(TOPICS)
    collection = {"index": index, "topics": tmp_path / "topics.tsv"}
    assert search(collection, tiny_bi_encoder_path, tmp_path / "run.txt", "--first-stage", "dense") == 2
    assert "has no passage vectors" in caplog.text and "evirank embed" in caplog.text


def test_rerank_retrieves_hybrid_candidates_itself(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    hybrid = tmp_path / "hybrid.txt"
    assert search(collection, tiny_bi_encoder_path, hybrid, "--first-stage", "interp:0.3") == 0
    args = ["-q", "rerank", "--index", str(collection["index"]), "--topics", str(collection["topics"])]
    args += ["--scorer", "bi", "--model", str(tiny_bi_encoder_path), "--device", "cpu", "--k", "4"]
    args += ["--segment", "sentences:prepend", "--depth", "4", "--aggregate", "maxp"]
    out = tmp_path / "reranked.txt"
    assert main([*args, "--first-stage", "interp:0.3", "--output", str(out)]) == 0
    record = json.loads((tmp_path / "reranked.txt.json").read_text())
    assert record["first_stage"]["method"] == "interp:0.3"
    by_query = read_run(out).groupby("qid")["docno"].apply(set).to_dict()
    assert by_query == read_run(hybrid).groupby("qid")["docno"].apply(set).to_dict()
    # the same with the run given: the same re-ranked run
    again = tmp_path / "again.txt"
    assert main([*args, "--run", str(hybrid), "--output", str(again)]) == 0
    assert (
        read_run(again)[["qid", "docno"]].values.tolist() == read_run(out)[["qid", "docno"]].values.tolist()
    )
    assert main([*args, "--first-stage", "best", "--output", str(tmp_path / "x.txt")]) == 2
    assert (
        main([*args, "--first-stage", "rrf", "--run", str(hybrid), "--output", str(tmp_path / "x.txt")]) == 2
    )


def test_the_dense_query_encoder_runs_on_the_backend_asked_for(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "run.txt"
    model = ["--model", str(tiny_bi_encoder_path), "--device", "cpu", "--backend", "onnx"]
    rerank = ["-q", "rerank", "--index", str(collection["index"]), "--topics", str(collection["topics"])]
    rerank += [
        "--first-stage",
        "dense",
        "--k",
        "4",
        "--depth",
        "2",
        "--scorer",
        "bi",
        *model,
        "--output",
        str(out),
    ]
    # the index's vectors were made on torch: an onnx query encoder is another fingerprint, refused
    # naming the setting (the queries used to be embedded on torch whatever --backend said)
    assert main(rerank) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("backend 'torch' in the vectors, 'onnx' here" in e for e in errors), errors
    assert not out.exists()
    vectors = tmp_path / "onnx-vectors"
    embed = ["-q", "embed", "--index", str(collection["index"]), "--segment", "sentences:prepend"]
    assert main([*embed, *model, "--output", str(vectors)]) == 0
    assert main([*rerank, "--vectors", str(vectors)]) == 0
    assert read_run(out).groupby("qid").size().tolist() == [4, 4, 4]
