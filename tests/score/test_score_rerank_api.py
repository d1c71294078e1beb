"""Every model family behind the ``/rerank`` API: tiny random models of each, ranked through the
service's Cohere and TEI shapes, with the relevance in [0, 1] and in the order of the raw scores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_score_colbert import build_colbert
from test_score_llm import build_tiny_llm
from test_score_parade import build_parade

from evirank.ranker import Ranker
from evirank.score.relevance import to_relevance
from evirank.serve.rerank import RerankService, score_scale
from seq2seq_helpers import build_tiny_t5

pytest.importorskip("torch")
pytest.importorskip("fastapi")

QUERY = "cat vaccine"
DOCUMENTS = [
    "The dog sat on the mat. A virus infects cells.",
    "A cat sat. The vaccine protects the cat. Cells score evidence.",
    "Retrieval of a sentence. The mat is red.",
]


@pytest.fixture(scope="module")
def families(tmp_path_factory: pytest.TempPathFactory, tiny_bert_builder: Callable[..., Path]) -> dict:
    root = tmp_path_factory.mktemp("families")
    cross = tiny_bert_builder(root / "cross", head="classify", num_labels=1)
    bi = tiny_bert_builder(root / "bi", head="embed", seed=2)
    return {
        "cross": ({"scorer": "cross"}, cross),
        "bi": ({"scorer": "bi"}, bi),
        "seq2seq": ({"scorer": "seq2seq"}, build_tiny_t5(root / "t5")),
        "llm": ({"scorer": "llm"}, build_tiny_llm(root / "llm")),
        "colbert": ({"scorer": "colbert"}, build_colbert(root / "colbert")),
        "parade": (
            {"scorer": "parade", "aggregate": "document"},
            build_parade(root / "parade", "avg", tiny_bert_builder),
        ),
        "several": ({"scorer": [f"ce=cross:{cross}", f"be=bi:{bi}"]}, None),
    }


@pytest.mark.parametrize("family", ["cross", "bi", "seq2seq", "llm", "colbert", "parade", "several"])
def test_every_family_ranks_through_the_rerank_api(family: str, families: dict) -> None:
    from fastapi.testclient import TestClient

    from evirank.serve.app import create_app

    options, path = families[family]
    ranker = Ranker(path, device="cpu", **options)
    service = RerankService({family: ranker})
    client = TestClient(create_app(rerank=service))
    cohere = client.post("/v2/rerank", json={"model": family, "query": QUERY, "documents": DOCUMENTS})
    assert cohere.status_code == 200, cohere.text
    results = cohere.json()["results"]
    assert sorted(r["index"] for r in results) == [0, 1, 2]
    relevance = [r["relevance_score"] for r in results]
    raw = [r["raw_score"] for r in results]
    assert all(0.0 <= value <= 1.0 for value in relevance)
    assert raw == sorted(raw, reverse=True) and relevance == sorted(relevance, reverse=True)
    expected_scale = {
        "bi": "cosine",
        "colbert": "maxsim",
        "seq2seq": "log-probability",
        "llm": "log-probability",
    }
    assert score_scale(ranker) == expected_scale.get(family, "log-odds")
    if family in ("cross", "seq2seq", "llm"):  # MaxP alone: the relevance maps the best passage's score
        assert relevance[0] == pytest.approx(
            to_relevance(results[0]["evidence"][0]["score"], score_scale(ranker))
        )
    for result in results:
        text = DOCUMENTS[result["index"]]
        for passage in result["evidence"]:
            assert text[passage["start"] : passage["end"]] == passage["text"]
    tei = client.post("/rerank", json={"query": QUERY, "texts": DOCUMENTS, "raw_scores": True}).json()
    assert [hit["index"] for hit in tei] == [r["index"] for r in results]
    assert [hit["score"] for hit in tei] == pytest.approx(raw)
    service.close()
