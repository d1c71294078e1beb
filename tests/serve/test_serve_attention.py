"""The attention view in the service: ``/v1/attention`` for one passage of a result, and the page's toggle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("torch")

from fastapi.testclient import TestClient

from evirank.config import Runtime
from evirank.segment.spans import document_spans
from evirank.serve.app import create_app
from evirank.serve.config import ServeConfig
from evirank.serve.searcher import Searcher
from evirank.serve.testing import ToyIndex, ToyMaxP, ToySentences, toy_searcher


def model_searcher(model: Path) -> Searcher:
    from evirank.score import CrossEncoder

    index = ToyIndex()
    return Searcher(
        index.retrieve,
        ToySentences(),
        CrossEncoder(str(model), Runtime(device="cpu")),
        ToyMaxP(),
        index.lookup,
        info={"index": "toy", "model": "tiny cross-encoder"},
    )


@pytest.fixture(scope="module")
def client(tiny_cross_encoder_path: Path) -> TestClient:
    return TestClient(
        create_app(model_searcher(tiny_cross_encoder_path), ServeConfig(default_top=3, default_depth=5))
    )


def test_attention_of_a_results_best_evidence_is_the_scorers_word_view(
    client: TestClient, tiny_cross_encoder_path: Path
) -> None:
    from evirank.score import CrossEncoder

    found = client.get("/v1/search", params={"q": "cats purr"}).json()["candidates"][0]
    best = found["evidence"][0]
    reply = client.get(
        "/v1/attention", params={"q": "cats purr", "docno": found["docno"], "pid": best["pid"]}
    )
    assert reply.status_code == 200
    body = reply.json()
    assert body["text"] == best["text"] and body["family"] == "cross" and body["level"] == "word"
    assert body["score"] == pytest.approx(best["score"], abs=1e-4)  # the passage the search scored
    expected = (
        CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu"))
        .attention("cats purr", best["text"])
        .by_word()
    )
    np.testing.assert_allclose(body["layers"][0]["weights"], expected.head_mean()[0], atol=1e-6)
    assert [u["text"] for u in body["query_units"]] == ["cats", "purr"]
    doc = client.get(f"/v1/doc/{found['docno']}").json()["text"]
    for unit in body["passage_units"]:  # every word is located in the document text
        assert doc[unit["doc_start"] : unit["doc_end"]] == unit["text"]
    assert body["layers"][0]["layer"] == body["n_layers"] - 1


def test_attention_layers_and_tokens_on_request(client: TestClient) -> None:
    body = client.get(
        "/v1/attention",
        params={"q": "cats purr", "docno": "d1", "pid": 0, "layer": [0, -1], "level": "token"},
    ).json()
    assert [layer["layer"] for layer in body["layers"]] == [0, 1] and body["level"] == "token"


@pytest.mark.parametrize(
    ("params", "status", "needle"),
    [
        ({"q": "cats", "docno": "nope", "pid": 0}, 404, "no document with docno 'nope'"),
        ({"q": "cats", "docno": "d1", "pid": 9}, 404, "document 'd1' has no passage 9 (3 passages"),
        ({"q": "cats", "docno": "d1", "pid": 0, "layer": 5}, 400, "layer 5: the model has 2 layers"),
        ({"q": "", "docno": "d1", "pid": 0}, 400, "query is empty"),
        ({"q": "cats", "docno": "d1"}, 400, "pid"),
        ({"q": "cats", "docno": "d1", "pid": 0, "level": "letters"}, 400, "level"),
    ],
)
def test_attention_bad_requests_say_what_is_wrong(
    client: TestClient, params: dict[str, object], status: int, needle: str
) -> None:
    reply = client.get("/v1/attention", params=params)
    assert reply.status_code == status and needle in reply.json()["error"]


def test_a_scorer_without_attention_answers_400_and_the_page_offers_no_toggle() -> None:
    plain = TestClient(create_app(toy_searcher()))
    reply = plain.get("/v1/attention", params={"q": "cats", "docno": "d1", "pid": 0})
    assert reply.status_code == 400
    assert (
        "(ToyScorer) has no attention view; the model families that have one: bi, colbert, cross"
        in reply.json()["error"]
    )
    assert (
        "button" not in plain.get("/", params={"q": "cats purr"}).text.split("<main")[1].split("</main>")[0]
    )


def test_the_page_puts_a_toggle_on_each_results_best_evidence(client: TestClient) -> None:
    page = client.get("/", params={"q": "cats <purr>"}).text
    assert 'data-query="cats &lt;purr&gt;"' in page
    assert page.count('class="attn"') == page.count('class="result"') > 0
    assert 'data-docno="d1" data-pid="0"' in page
    assert 'mark class="ev ev1"' in page and "data-start=" in page


def test_document_spans_skip_a_prepended_title_and_follow_the_texts_spacing() -> None:
    text = "Cats purr.  Purring   also happens."
    passage = "Why cats purr Purring also happens."
    spans = [(0, 3), (14, 21), (22, 26), (27, 34), (34, 35)]
    assert document_spans(passage, "Why cats purr", text, spans) == [
        None,
        (12, 19),
        (22, 26),
        (27, 34),
        (34, 35),
    ]
    assert document_spans("Not in it.", "", text, [(0, 3)]) == [None]
