"""The real pipeline behind the service on SciFact: Lucene BM25, sentences, the offline bi-encoder, Birch."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.lucene]


pytest.importorskip("fastapi")
pytest.importorskip("torch")
pytest.importorskip("pyserini")


@pytest.fixture(scope="module")
def scifact(datasets: Path) -> Path:
    return datasets / "scifact"


def first_test_claims(scifact: Path, n: int) -> list[tuple[str, str, set[str]]]:
    relevant: dict[str, set[str]] = {}
    with (scifact / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
        next(lines)
        for line in lines:
            qid, docno, _ = line.rstrip("\n").split("\t")
            relevant.setdefault(qid, set()).add(docno)
    claims = []
    with (scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["_id"] in relevant:
                claims.append((record["_id"], record["text"], relevant[record["_id"]]))
    return claims[:n]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, scifact: Path) -> Any:
    from fastapi.testclient import TestClient

    from evirank.io import read_corpus
    from evirank.lucene import build_index
    from evirank.serve.app import create_app
    from evirank.serve.build import build_searcher

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    index = tmp_path_factory.mktemp("serve") / "scifact"
    build_index(read_corpus(scifact), index)
    searcher = build_searcher(index)
    searcher.warm_up()
    return TestClient(create_app(searcher))


def test_scifact_claims_are_served_with_located_evidence(client: Any, scifact: Path) -> None:
    before = after = pairs = 0
    for _, claim, relevant in first_test_claims(scifact, 6):
        response = client.get("/v1/search", params={"q": claim, "top": 20, "depth": 20})
        assert response.status_code == 200
        body = response.json()
        candidates = body["candidates"]
        assert [c["rank"] for c in candidates] == list(range(1, 21))
        # re-ranking permutes the first stage's top 20: nothing lost, nothing added
        assert sorted(c["first_stage_rank"] for c in candidates) == list(range(1, 21))
        for cand in candidates:
            assert 1 <= len(cand["evidence"]) <= 3
            for ev in cand["evidence"]:
                if ev["start"] is not None:
                    assert cand["doc"]["text"][ev["start"] : ev["end"]] in ev["text"]
            assert cand["evidence"][0]["start"] is not None  # the best sentence is highlighted in the text
            if cand["docno"] in relevant:
                before, after, pairs = before + cand["first_stage_rank"], after + cand["rank"], pairs + 1
    assert pairs >= 3
    # the evidence should not push relevant documents down overall (one place of slack per pair)
    assert after <= before + pairs


def test_scifact_page_and_document_lookup(client: Any, scifact: Path) -> None:
    _, claim, _ = first_test_claims(scifact, 1)[0]
    html = client.get("/", params={"q": claim, "top": 3}).text
    assert html.count('class="result"') == 3 and html.count("<mark") >= 3
    docno = client.get("/v1/search", params={"q": claim, "top": 1}).json()["candidates"][0]["docno"]
    assert client.get(f"/v1/doc/{docno}").json()["docno"] == docno
    assert client.get("/v1/doc/not-a-scifact-id").status_code == 404
