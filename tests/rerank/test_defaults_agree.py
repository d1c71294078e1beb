"""One query, every front end, no pipeline flag given: ``rerank``, ``serve``'s searcher, the JSON API,
``evirank rank`` and ``Ranker`` give each document the same score, because they share one set of
defaults (the settings table); ``rank`` and ``Ranker`` are given the first stage's scores, which
they cannot compute from documents held in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rerank_cases import DOCS, TOPICS

from evirank.cli import main
from evirank.config import SETTINGS
from evirank.io import read_run
from evirank.ranker import Ranker

QUERY_ID = "1"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pyserini")
    from evirank.lucene import build_index

    folder = tmp_path_factory.mktemp("agree") / "index"
    build_index(DOCS, folder)
    return folder


def test_every_front_end_scores_a_query_alike_with_the_defaults(
    index: Path, tiny_bi_encoder_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    query = TOPICS[QUERY_ID]
    topics = tmp_path / "topics.tsv"
    topics.write_text(f"{QUERY_ID}\t{query}\n")
    model = ["--model", str(tiny_bi_encoder_path), "--device", "cpu"]

    # rerank: BM25 from the index at the default k, the default depth, segmenter and aggregator
    out = tmp_path / "run.txt"
    assert (
        main(["-q", "rerank", "--index", str(index), "--topics", str(topics), *model, "--output", str(out)])
        == 0
    )
    reranked = read_run(out)
    assert 0 < len(reranked) <= SETTINGS.default("depth")
    expected = dict(zip(reranked["docno"], reranked["score"], strict=True))
    record = json.loads(Path(f"{out}.json").read_text())["config"]["pipeline"]
    assert record["aggregate"] == SETTINGS.default("aggregate") and record["alpha"] == SETTINGS.default(
        "alpha"
    )

    # serve: the searcher and the JSON API, a request naming no number
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from evirank.serve.app import create_app
    from evirank.serve.build import build_searcher
    from evirank.serve.config import ServeConfig

    searcher = build_searcher(index, model=str(tiny_bi_encoder_path), device="cpu")
    served = searcher.search(query)
    assert {c.docno: c.score for c in served.candidates} == pytest.approx(expected, abs=1e-9)
    with TestClient(create_app(searcher, ServeConfig())) as client:
        answer = client.get("/v1/search", params={"q": query}).json()
    api = {c["docno"]: c["score"] for c in answer["candidates"]}
    assert api == pytest.approx({d: expected[d] for d in api}, abs=1e-9)

    # rank and Ranker: the same candidates, each with its first-stage (BM25) score from `search`
    bm25_run = tmp_path / "bm25.txt"
    assert (
        main(["-q", "search", "--index", str(index), "--topics", str(topics), "--output", str(bm25_run)]) == 0
    )
    first = read_run(bm25_run)
    bm25 = dict(zip(first["docno"], first["score"], strict=True))
    docs = [
        {"id": d.docno, "title": d.title, "text": d.text, "bm25": bm25[d.docno]}
        for d in DOCS
        if d.docno in bm25
    ]
    assert {d["id"] for d in docs} == set(expected)
    scores = [d["bm25"] for d in docs]
    ranked = Ranker(tiny_bi_encoder_path, device="cpu").rank(query, docs, first_stage_scores=scores)
    assert {d.id: d.score for d in ranked} == pytest.approx(expected, abs=1e-9)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps(d) + "\n" for d in docs))
    argv = [
        "rank",
        "--query",
        query,
        "--docs",
        str(jsonl),
        "--first-stage-key",
        "bm25",
        *model,
        "--top",
        "0",
        "--json",
    ]
    assert main(argv) == 0
    shown = {line["id"]: line["score"] for line in map(json.loads, capsys.readouterr().out.splitlines())}
    assert shown == pytest.approx(expected, abs=1e-9)
