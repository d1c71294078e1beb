"""The JSON API and the page over a toy searcher: shape, errors, timeouts, admission control, concurrency."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from evirank.config import SETTINGS  # noqa: E402
from evirank.frames import DOCNO, Document  # noqa: E402
from evirank.serve.app import create_app  # noqa: E402
from evirank.serve.config import ServeConfig  # noqa: E402
from evirank.serve.searcher import TIMING_KEYS, Searcher  # noqa: E402
from evirank.serve.testing import TOY_DOCUMENTS, ToyIndex, ToyMaxP, ToyScorer, ToySentences, toy_searcher  # noqa: E402


def client(searcher: Searcher | None = None, **config: Any) -> TestClient:
    return TestClient(
        create_app(searcher or toy_searcher(), ServeConfig(**config)), raise_server_exceptions=False
    )


class Spied:
    """The toy searcher, recording the k each retrieval asked for and the documents segmented."""

    def __init__(self) -> None:
        index = ToyIndex()
        self.retrieved: list[int] = []
        self.reranked: list[set[str]] = []
        spied = self

        def retrieve(topics: Any, k: int) -> Any:
            spied.retrieved.append(k)
            return index.retrieve(topics, k)

        class Spy(ToySentences):
            def transform(self, frame: Any) -> Any:
                spied.reranked.append(set(frame[DOCNO]))
                return super().transform(frame)

        self.searcher = Searcher(retrieve, Spy(), ToyScorer(), ToyMaxP(), index.lookup)

    def get(self, **params: Any) -> Any:
        return client(self.searcher).get("/v1/search", params=params)


# "cats dogs" shares words with four toy documents; the first stage ranks d3, d2, d1, d5


# ---- shape -------------------------------------------------------------------------------------------
def test_search_answers_the_documented_shape_a_superset_of_anserini() -> None:
    body = client().get("/v1/search", params={"q": "cats purr", "top": 2, "depth": 4}).json()
    assert {"api", "index", "query", "candidates"} <= set(body)  # Anserini's SearchResponse
    assert body["query"] == {"text": "cats purr"}
    assert (body["top"], body["depth"], body["k"], body["index"]) == (2, 4, 4, "toy")
    assert set(body["timings"]) == set(TIMING_KEYS)
    assert {"first_stage", "segmentation", "model", "aggregation", "wait", "total"} <= set(TIMING_KEYS)
    assert len(body["candidates"]) == 2
    for rank, cand in enumerate(body["candidates"], start=1):
        assert {"docid", "score", "rank", "doc"} <= set(cand)  # Anserini's Candidate
        assert {"docno", "first_stage_score", "first_stage_rank", "title", "evidence"} <= set(cand)
        assert cand["rank"] == rank and cand["docid"] == cand["docno"]
        scores = [e["score"] for e in cand["evidence"]]
        assert scores == sorted(scores, reverse=True) and 1 <= len(scores) <= 3
        for ev in cand["evidence"]:
            assert cand["doc"]["text"][ev["start"] : ev["end"]] == ev["text"]
    first = body["candidates"][0]
    assert first["docno"] == "d1"
    assert first["evidence"][0]["text"] == "Cats purr when they are content."


def test_defaults_come_from_the_config() -> None:
    body = client(default_top=2, default_depth=3).get("/v1/search", params={"q": "cats dogs"}).json()
    assert (body["top"], body["depth"], body["k"]) == (2, 3, 3)
    assert len(body["candidates"]) == 2
    body = client(default_top=10, default_depth=20).get("/v1/search", params={"q": "cats", "depth": 2}).json()
    assert (body["top"], body["k"]) == (2, 2)  # top: the default cut to depth; k: the depth


def test_the_config_defaults_are_the_settings_tables() -> None:
    config = ServeConfig()
    assert (config.default_top, config.default_depth, config.max_depth) == (
        SETTINGS.default("top"),
        SETTINGS.default("depth"),
        SETTINGS.default("max_depth"),
    )
    assert (config.timeout_s, config.workers, config.max_pending) == (
        SETTINGS.default("timeout"),
        SETTINGS.default("workers"),
        SETTINGS.default("max_pending"),
    )


def test_a_request_naming_only_depth_retrieves_and_reranks_that_many() -> None:
    spied = Spied()
    body = spied.get(q="cats dogs", depth=2).json()
    assert spied.retrieved == [2] and spied.reranked == [{"d3", "d2"}]
    assert (body["top"], body["depth"], body["k"]) == (2, 2, 2)
    assert [c["docno"] for c in body["candidates"]] == ["d3", "d2"]


def test_k_smaller_than_depth_reranks_k() -> None:
    spied = Spied()
    body = spied.get(q="cats dogs", top=1, depth=4, k=2).json()
    assert spied.retrieved == [2] and spied.reranked == [{"d3", "d2"}]
    assert (body["top"], body["depth"], body["k"]) == (1, 2, 2)  # depth: the documents re-ranked
    assert len(body["candidates"]) == 1


def test_documents_retrieved_beyond_depth_are_neither_reranked_nor_returned() -> None:
    spied = Spied()
    body = spied.get(q="cats dogs", top=4, depth=2, k=4).json()
    assert spied.retrieved == [4] and spied.reranked == [{"d3", "d2"}]
    assert (body["top"], body["depth"], body["k"]) == (2, 2, 4)
    assert {c["docno"] for c in body["candidates"]} == {"d3", "d2"}
    assert all(c["evidence"] for c in body["candidates"])


@pytest.mark.parametrize(
    ("params", "numbers"),
    [
        ({"top": 50, "depth": 3}, (3, 3, 3)),  # cut to depth
        ({"top": 50, "depth": 4, "k": 2}, (2, 2, 2)),  # cut to k
        ({"top": 100, "depth": 100}, (100, 100, 100)),  # the first stage finds 4: all are returned
    ],
)
def test_top_is_capped_by_depth_and_k(params: dict[str, int], numbers: tuple[int, int, int]) -> None:
    body = client().get("/v1/search", params={"q": "cats dogs", **params}).json()
    assert (body["top"], body["depth"], body["k"]) == numbers
    assert len(body["candidates"]) == min(numbers[0], 4)


def test_k_in_its_old_meaning_of_results_shown_is_refused_with_what_to_write() -> None:
    response = client().get("/v1/search", params={"q": "cats", "k": 5})
    assert response.status_code == 400
    assert response.json() == {
        "error": "k is the first-stage depth (documents retrieved), 5 here, fewer than the "
        f"{SETTINGS.default('top')} results shown (top); to get 5 results write top=5"
    }
    response = client().get("/v1/search", params={"q": "cats", "k": 2, "depth": 4})  # 4 would be shown
    assert response.status_code == 400 and "fewer than the 4 results shown" in response.json()["error"]
    for fine in (
        {"k": 5, "top": 5},
        {"k": 5, "top": 10},
        {"k": SETTINGS.default("top")},
        {"k": 3, "depth": 3},
    ):
        assert client().get("/v1/search", params={"q": "cats", **fine}).status_code == 200, fine


def test_query_is_stripped_and_unicode_survives() -> None:
    body = client().get("/v1/search", params={"q": "  café cats ☕ "}).json()
    assert body["query"]["text"] == "café cats ☕"


def test_document_endpoint_and_ids_with_slashes() -> None:
    docs = (*TOY_DOCUMENTS, Document("msmarco/doc/7", "Slash", "An id with slashes."))
    index = ToyIndex(docs)
    searcher = Searcher(index.retrieve, ToySentences(), ToyScorer(), ToyMaxP(), index.lookup)
    c = client(searcher)
    body = c.get("/v1/doc/d1").json()
    assert body["docno"] == body["docid"] == "d1"
    assert body["title"] == "Why cats purr" == body["doc"]["title"]
    assert c.get("/v1/doc/msmarco/doc/7").json()["text"] == "An id with slashes."


def test_health_reports_what_is_served_and_the_limits() -> None:
    body = client(timeout_s=7).get("/health").json()
    assert body["status"] == "ok" and body["in_flight"] == 0
    assert body["info"]["index"] == "toy"
    assert body["limits"] == {
        "max_depth": SETTINGS.default("max_depth"),
        "max_query_chars": 1000,
        "timeout_s": 7,
        "workers": SETTINGS.default("workers"),
        "max_pending": SETTINGS.default("max_pending"),
    }


def test_openapi_documents_400_not_422_and_docs_need_no_cdn() -> None:
    c = client()
    spec = c.get("/openapi.json").json()
    assert set(spec["paths"]) == {
        "/v1/search",
        "/v1/doc/{docno}",
        "/v1/attention",
        "/health",
        "/ready",
        "/metrics",
    }
    search = spec["paths"]["/v1/search"]["get"]
    assert {"200", "400", "503"} == set(search["responses"])
    assert {p["name"] for p in search["parameters"]} == {"q", "top", "depth", "k"}
    docs = c.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    for url in re.findall(r'(?:src|href)="([^"]+)"', docs.text):
        assert not url.startswith("http"), url  # served locally: the machine may be offline
        assert c.get(url).status_code == 200, url


def test_openapi_describes_top_depth_and_k_with_the_settings_help_and_the_limits() -> None:
    spec = client(default_top=7, default_depth=30, max_depth=60).get("/openapi.json").json()
    parameters = {p["name"]: p for p in spec["paths"]["/v1/search"]["get"]["parameters"]}
    for name in ("top", "depth", "k"):
        description = parameters[name]["description"]
        assert SETTINGS[name].help in description, name
        assert "at most 60" in description, name
        assert parameters[name]["schema"]["anyOf"][0]["maximum"] == 60, name
    assert "Default 7" in parameters["top"]["description"]
    assert "Default 30" in parameters["depth"]["description"]
    assert "Default: the request's depth" in parameters["k"]["description"]


# ---- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({}, "query is empty"),
        ({"q": ""}, "query is empty"),
        ({"q": "   "}, "query is empty"),
        ({"q": "x" * 1001}, "at most 1000 characters"),
        ({"q": "cats", "top": 0}, "top: Input should be greater than or equal to 1"),
        ({"q": "cats", "top": 101}, "top: Input should be less than or equal to 100"),
        ({"q": "cats", "top": "ten"}, "top: Input should be a valid integer"),
        ({"q": "cats", "top": "1.5"}, "top: Input should be a valid integer"),
        ({"q": "cats", "depth": 0}, "depth: Input should be greater than or equal to 1"),
        ({"q": "cats", "depth": 1000}, "depth: Input should be less than or equal to 100"),
        ({"q": "cats", "k": 0}, "k: Input should be greater than or equal to 1"),
        ({"q": "cats", "k": 101}, "k: Input should be less than or equal to 100"),
        ({"q": "cats", "k": "ten"}, "k: Input should be a valid integer"),
        ({"q": "cats", "k": 3}, "k is the first-stage depth (documents retrieved), 3 here"),
    ],
)
def test_bad_search_input_gets_400_with_a_clear_message(params: dict[str, Any], needle: str) -> None:
    response = client().get("/v1/search", params=params)
    assert response.status_code == 400
    body = response.json()
    assert needle in body["error"]
    assert len(body["error"]) < 300  # an oversized query is not echoed back whole


def test_unknown_docno_route_and_method_get_json_4xx() -> None:
    c = client()
    missing = c.get("/v1/doc/no-such-doc")
    assert missing.status_code == 404 and "no-such-doc" in missing.json()["error"]
    assert c.get("/v2/nothing").status_code == 404 and c.get("/v2/nothing").json()["error"]
    assert c.post("/v1/search", params={"q": "cats"}).status_code == 405


def test_a_failing_model_gives_a_json_500_not_a_crash() -> None:
    index = ToyIndex()
    broken = Searcher(index.retrieve, ToySentences(), ToyScorer(fail_on="boom"), ToyMaxP(), index.lookup)
    c = client(broken)
    response = c.get("/v1/search", params={"q": "cats boom"})
    assert response.status_code == 500 and "RuntimeError" in response.json()["error"]
    assert c.get("/v1/search", params={"q": "cats"}).status_code == 200  # the service lives on


# ---- timeouts and load -------------------------------------------------------------------------------
def test_a_slow_model_times_out_cleanly_with_503() -> None:
    c = client(toy_searcher(delay_s=1.0), timeout_s=0.2)
    began = time.monotonic()
    response = c.get("/v1/search", params={"q": "cats"})
    elapsed = time.monotonic() - began
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert "longer than 0.2 s" in response.json()["error"]
    assert elapsed < 0.9  # answered at the timeout, not when the model finished


def test_the_page_shows_a_timeout_as_a_message() -> None:
    response = client(toy_searcher(delay_s=1.0), timeout_s=0.2).get("/", params={"q": "cats"})
    assert response.status_code == 503
    assert 'class="error"' in response.text and "longer than 0.2 s" in response.text


def test_concurrent_requests_are_answered_correctly_and_the_model_runs_one_call_at_a_time(
    live_server: Any,
) -> None:
    searcher = toy_searcher(delay_s=0.02)
    queries = ["cats purr", "dogs bark", "ocean heat", "pets home", "cat dog", "bark greeting"] * 4
    expected = {q: searcher.search(q, 3, 5).candidates for q in set(queries)}
    app = create_app(searcher, ServeConfig(workers=4))
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as http:

        def ask(q: str) -> tuple[int, list[str], list[str]]:
            r = http.get("/v1/search", params={"q": q, "top": 3, "depth": 5})
            body = r.json()
            return (
                r.status_code,
                [c["docno"] for c in body["candidates"]],
                [c["evidence"][0]["text"] for c in body["candidates"]],
            )

        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = list(pool.map(ask, queries))
    for q, (status, docnos, best) in zip(queries, answers, strict=True):
        assert status == 200
        assert docnos == [c.docno for c in expected[q]]
        assert best == [c.evidence[0].text for c in expected[q]]
    assert searcher.scorer.max_concurrent == 1  # type: ignore[attr-defined]
    assert searcher.scorer.calls == len(set(queries)) + len(queries)  # type: ignore[attr-defined]


def test_more_searches_than_admitted_get_503_busy_at_once(live_server: Any) -> None:
    app = create_app(toy_searcher(delay_s=0.5), ServeConfig(workers=1, max_pending=2, timeout_s=5))
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        with ThreadPoolExecutor(max_workers=5) as pool:
            responses = list(pool.map(lambda q: http.get("/v1/search", params={"q": q}), ["cats"] * 5))
        statuses = sorted(r.status_code for r in responses)
        assert statuses.count(200) >= 2 and 503 in statuses
        busy = next(r for r in responses if r.status_code == 503)
        assert "busy" in busy.json()["error"]
        time.sleep(0.1)
        assert http.get("/health").json()["in_flight"] == 0


def test_timed_out_searches_do_not_pile_up_behind_a_slow_model(live_server: Any) -> None:
    searcher = toy_searcher(delay_s=0.6)
    app = create_app(searcher, ServeConfig(workers=2, timeout_s=0.3))
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        with ThreadPoolExecutor(max_workers=6) as pool:
            statuses = list(
                pool.map(lambda q: http.get("/v1/search", params={"q": q}).status_code, ["cats"] * 6)
            )
        assert statuses == [503] * 6
        time.sleep(1.0)
        # queued searches were dropped or gave up at their deadline: at most the one holding the model ran it
        assert searcher.scorer.calls <= 2  # type: ignore[attr-defined]
        assert http.get("/health").json()["in_flight"] == 0


def test_time_queued_for_a_worker_is_reported_as_wait(live_server: Any) -> None:
    app = create_app(toy_searcher(delay_s=0.3), ServeConfig(workers=1))
    with (
        live_server(app) as url,
        httpx.Client(base_url=url, timeout=30) as http,
        ThreadPoolExecutor(max_workers=2) as pool,
    ):
        bodies = list(pool.map(lambda q: http.get("/v1/search", params={"q": q}).json(), ["cats", "dogs"]))
    waits = sorted(b["timings"]["wait"] for b in bodies)
    assert waits[1] >= 250  # the second search queued behind the first one's 300 ms model call
    for body in bodies:
        assert body["timings"]["total"] >= body["timings"]["wait"] + body["timings"]["model"] - 0.01


def test_a_search_that_could_only_time_out_in_the_queue_is_refused_at_once(live_server: Any) -> None:
    app = create_app(toy_searcher(delay_s=0.4), ServeConfig(workers=1, max_pending=32, timeout_s=2))
    with live_server(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/v1/search", params={"q": "cats"}).status_code == 200  # learns ~0.4 s a search
        with ThreadPoolExecutor(max_workers=12) as pool:
            responses = list(pool.map(lambda q: http.get("/v1/search", params={"q": q}), ["dogs"] * 12))
        refused = [r for r in responses if r.status_code == 503 and "queued" in r.json()["error"]]
        assert refused, [r.status_code for r in responses]
        for r in refused:
            assert r.elapsed.total_seconds() < 1.0  # answered at once, not after the 2 s timeout
            assert int(r.headers["Retry-After"]) >= 1
        # what could finish in time was admitted (~5 at 0.4 s each within 2 s): answered, or timed out
        # when a busy machine made the searches slower than the server had learned
        admitted = [r for r in responses if r not in refused]
        assert len(admitted) >= 3, [r.status_code for r in responses]
        assert any(r.status_code == 200 for r in admitted)
        assert all(r.status_code == 200 or "took longer" in r.json()["error"] for r in admitted)


# ---- why a score ----------------------------------------------------------------------------------
def test_each_candidate_carries_the_terms_of_its_score_on_the_api_and_the_page() -> None:
    from evirank.aggregate import Birch

    index = ToyIndex(TOY_DOCUMENTS)
    searcher = Searcher(index.retrieve, ToySentences(), ToyScorer(), Birch(top_n=2, alpha=0.4), index.lookup)
    body = client(searcher).get("/v1/search", params={"q": "cats purr", "top": 3, "depth": 4}).json()
    assert body["candidates"]
    for candidate in body["candidates"]:
        names = [t["name"] for t in candidate["terms"]]
        assert names == ["first stage", "passage 1", "passage 2"]
        assert sum(t["contribution"] for t in candidate["terms"]) == pytest.approx(candidate["score"])
        assert candidate["terms"][0]["weight"] == pytest.approx(0.4)
    page = client(searcher).get("/", params={"q": "cats purr", "top": 3, "depth": 4}).text
    assert page.count('<details class="why">') == len(body["candidates"])
    assert '<td class="term">first stage</td><td>0.4</td>' in page


def test_the_pages_document_links_are_percent_encoded_and_serve_their_document() -> None:
    """An id holding ``?``, ``#``, ``%`` or ``/`` links to its own document (``q?z`` served ``q``,
    ``h#1`` was not found)."""
    ids = ("q?z", "h#1", "50%off", "a/b&c")
    docs = (*TOY_DOCUMENTS, *(Document(d, "Cats", f"Cats purr loudly in {i}.") for i, d in enumerate(ids)))
    index = ToyIndex(docs)
    c = client(Searcher(index.retrieve, ToySentences(), ToyScorer(), ToyMaxP(), index.lookup))
    page = c.get("/", params={"q": "cats purr loudly", "top": 20}).text
    links = dict(re.findall(r'<a class="docno" href="([^"]+)"[^>]*>([^<]+)</a>', page))
    shown = {name.replace("&amp;", "&"): href.replace("&amp;", "&") for href, name in links.items()}
    assert set(ids) <= set(shown), shown
    for docno in ids:
        assert c.get(shown[docno]).json()["docno"] == docno
