"""The rerank service in process: models by name, batching across requests, limits, deadlines,
dropped work, relevance in [0, 1], offsets into the caller's fields, the API key and CORS."""

from __future__ import annotations

import asyncio
import math
import threading
import time

import pytest

from evirank.score.relevance import SCALES, to_relevance
from evirank.serve.batcher import MicroBatcher
from evirank.serve.rerank import (
    CallerDocument,
    ClientGone,
    LimitExceeded,
    RerankBusy,
    RerankJob,
    RerankLimits,
    RerankService,
    RerankTimeout,
    UnknownModel,
)
from evirank.serve.testing import toy_ranker

DOCS = ["Stocks fell today.", "Dogs bark. Cats purr when content.", "Cats sleep a lot."]

fastapi = pytest.importorskip("fastapi")


def client(service: RerankService, **kwargs):
    from fastapi.testclient import TestClient

    from evirank.serve.app import create_app

    return TestClient(create_app(rerank=service, **kwargs))


def test_one_model_answers_any_name_several_need_a_served_one() -> None:
    one = RerankService({"toy": toy_ranker()})
    assert one.resolve("rerank-english-v3.0") == "toy" and one.resolve(None) == "toy"
    two = RerankService({"a": toy_ranker(), "b": toy_ranker()})
    assert two.resolve("b") == "b" and two.resolve(None) == "a"
    with pytest.raises(UnknownModel, match="unknown model 'c'; this server serves a, b"):
        two.resolve("c")
    answer = client(two).post("/v2/rerank", json={"model": "c", "query": "cats", "documents": DOCS})
    assert answer.status_code == 400 and "serves a, b" in answer.json()["message"]
    one.close()
    two.close()


def test_concurrent_requests_share_model_batches_and_get_their_own_answers() -> None:
    ranker = toy_ranker(delay_s=0.05)
    service = RerankService({"toy": ranker})
    queries = ["cats purr", "stocks fell", "dogs bark", "cats sleep"] * 3
    results: dict[int, int] = {}

    def ask(i: int) -> None:
        outcome = service.rerank_blocking(None, RerankJob.of(queries[i], DOCS))
        results[i] = outcome.hits[0].index

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(queries))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {"cats purr": 1, "stocks fell": 0, "dogs bark": 1, "cats sleep": 2}
    assert all(results[i] == expected[q] for i, q in enumerate(queries))
    sizes = list(service._batchers["toy"].batch_sizes)
    assert sum(sizes) == len(queries) and max(sizes) > 1  # several requests in one model call
    assert ranker.scorer.calls < len(queries)
    service.close()


def test_limits_are_413_naming_the_limit_before_any_work() -> None:
    ranker = toy_ranker()
    service = RerankService(
        {"toy": ranker}, RerankLimits(max_documents=3, max_document_chars=50, max_request_tokens=30)
    )
    with pytest.raises(LimitExceeded, match="--max-documents"):
        service.check(RerankJob.of("q", ["a"] * 4))
    with pytest.raises(LimitExceeded, match=r"document 1 has 60 characters.*--max-document-chars"):
        service.check(RerankJob.of("q", ["a", "b" * 60]))
    with pytest.raises(LimitExceeded, match="--max-request-tokens"):
        service.check(RerankJob.of("one two three", ["w " * 20, "w " * 20]))
    answer = client(service).post("/rerank", json={"query": "q", "texts": ["a"] * 4})
    assert answer.status_code == 413 and answer.json()["error_type"] == "Validation"
    assert ranker.scorer.calls == 0
    service.close()


def test_a_full_queue_is_503_with_retry_after_and_a_slow_request_times_out() -> None:
    service = RerankService({"toy": toy_ranker(delay_s=0.6)}, RerankLimits(max_pending=1, timeout_s=0.2))
    with pytest.raises(RerankTimeout):
        service.rerank_blocking(None, RerankJob.of("cats", DOCS))
    assert service.pending == 1  # a batch that started finishes; its slot is held until then
    for _ in range(100):
        if service.pending == 0:
            break
        time.sleep(0.05)
    _, running = service.submit(None, RerankJob.of("cats", DOCS))
    with pytest.raises(RerankBusy) as refused:
        service.submit(None, RerankJob.of("dogs", DOCS))
    assert refused.value.retry_after >= 1
    running.result(timeout=5)
    service.close()


def test_a_client_that_disconnects_is_dropped_before_its_batch_runs() -> None:
    ranker = toy_ranker(delay_s=0.3)
    service = RerankService({"toy": ranker})
    _, first = service.submit(None, RerankJob.of("cats", DOCS))  # occupies the model

    async def gone() -> bool:
        return True

    async def ask() -> None:
        await service.rerank(None, RerankJob.of("dogs", DOCS), gone, poll_s=0.01)

    with pytest.raises(ClientGone):
        asyncio.run(ask())
    first.result(timeout=5)
    time.sleep(0.1)
    assert ranker.scorer.calls == 1  # the dropped request never reached the model
    service.close()


def test_relevance_is_monotone_in_the_score_and_within_0_1_for_every_scale() -> None:
    for scale in SCALES:
        values = [to_relevance(x, scale, positions=8) for x in (-40.0, -3.0, -0.5, 0.0, 0.5, 3.0, 40.0)]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert values == sorted(values)
    assert to_relevance(math.log(0.3), "log-probability") == pytest.approx(0.3)
    assert to_relevance(0.0, "log-odds") == 0.5
    with pytest.raises(ValueError, match="unknown score scale"):
        to_relevance(0.0, "percent")


def test_offsets_point_into_the_callers_own_field() -> None:
    doc = CallerDocument.of(
        {"title": "Pets", "summary": "Short one.", "body": "Cats purr."}, ["summary", "body"]
    )
    assert doc.text == "Short one.\nCats purr."
    start = doc.text.index("Cats")
    assert doc.locate("text", start, start + 10) == ("body", 0, 10)
    assert doc.locate("text", 0, 20) == (None, None, None)  # spans two fields
    titled = CallerDocument.of({"title": "Pets", "text": "Cats purr."})
    assert titled.title == "Pets" and titled.locate("title", 0, 4) == ("title", 0, 4)
    service = RerankService({"toy": toy_ranker()})
    answer = (
        client(service)
        .post(
            "/v1/rerank",
            json={
                "query": "cats purr",
                "documents": [{"body": "Stocks fell."}, {"body": "Dogs bark. Cats purr when content."}],
                "rank_fields": ["body"],
            },
        )
        .json()
    )
    best = answer["results"][0]
    sent = "Dogs bark. Cats purr when content."
    passage = best["evidence"][0]
    assert best["index"] == 1 and passage["field"] == "body"
    assert sent[passage["start"] : passage["end"]] == "Cats purr when content."
    missing = client(service).post(
        "/v1/rerank",
        json={"query": "q", "documents": [{"text": "a"}, {"body": "b"}], "rank_fields": ["text"]},
    )
    assert missing.status_code == 400 and "documents.1: it has no field 'text'" in missing.json()["message"]
    service.close()


def test_reading_limits_cap_the_passages_read() -> None:
    service = RerankService({"toy": toy_ranker()})
    long = "One fact. " * 30 + "Cats purr."
    whole = client(service).post("/v1/rerank", json={"query": "cats purr", "documents": [long]}).json()
    capped = (
        client(service)
        .post("/v1/rerank", json={"query": "cats purr", "documents": [long], "max_chunks_per_doc": 5})
        .json()
    )
    assert whole["results"][0]["passages"] == 31 and capped["results"][0]["passages"] == 5
    assert whole["results"][0]["raw_score"] > capped["results"][0]["raw_score"]
    tokens = (
        client(service)
        .post("/v2/rerank", json={"query": "cats purr", "documents": [long], "max_tokens_per_doc": 10})
        .json()
    )
    assert tokens["results"][0]["passages"] < 31
    service.close()


def test_the_api_key_guards_all_but_health_and_cors_is_off_unless_asked(tmp_path) -> None:
    from evirank.serve.access import read_api_key

    (tmp_path / "key").write_text("s3cret\n")
    key = read_api_key(tmp_path / "key")
    service = RerankService({"toy": toy_ranker()})
    guarded = client(service, api_key=key)
    body = {"query": "cats", "texts": DOCS}
    assert guarded.post("/rerank", json=body).status_code == 401
    assert guarded.post("/rerank", json=body, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert guarded.post("/rerank", json=body, headers={"Authorization": "s3cret"}).status_code == 200
    assert guarded.get("/health").status_code == 200 and guarded.get("/ready").status_code == 200
    origin = {"Origin": "https://app.example"}
    assert "access-control-allow-origin" not in client(service).get("/health", headers=origin).headers
    allowed = client(service, cors_origins=["https://app.example"]).get("/health", headers=origin)
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(Exception, match="empty"):
        read_api_key(tmp_path / "empty")
    service.close()


def test_micro_batcher_bounds_a_batch_by_the_items_size() -> None:
    seen: list[list[int]] = []
    gate = threading.Event()

    def run(items: list[int]) -> list[int]:
        gate.wait(5)
        seen.append(items)
        return items

    batcher = MicroBatcher(run, max_batch=10, max_wait_s=0.05, size=lambda x: x, max_size=10)
    futures = batcher.enqueue([1])
    time.sleep(0.1)  # the first batch holds [1] and waits on the gate
    futures += batcher.enqueue([4, 4, 4, 20, 1])
    gate.set()
    assert [f.result(5) for f in futures] == [1, 4, 4, 4, 20, 1]
    assert seen == [[1], [4, 4], [4], [20], [1]]  # never over 10, except one item alone
    batcher.close()


def test_rerank_also_takes_the_documents_body_of_vllm_and_infinity() -> None:
    service = RerankService({"toy": toy_ranker()})
    answer = client(service).post("/rerank", json={"model": "m", "query": "cats purr", "documents": DOCS})
    body = answer.json()
    assert (
        answer.status_code == 200
        and body["results"][0]["index"] == 1
        and "relevance_score" in body["results"][0]
    )
    bad = client(service).post("/rerank", json={"query": "cats", "documents": []})
    assert bad.status_code == 400 and "message" in bad.json()
    tei = client(service).post("/rerank", json={"query": "cats purr", "texts": DOCS}).json()
    assert tei[0]["index"] == 1 and "score" in tei[0]
    service.close()


@pytest.mark.parametrize(
    ("path", "field"),
    [("/v1/rerank", "message"), ("/v2/rerank", "message"), ("/rerank", "error"), ("/search", "error")],
)
def test_a_request_stopped_at_shutdown_is_answered_503_in_its_shape(path: str, field: str) -> None:
    import json

    from evirank.serve.rerank_routes import ServiceMiddleware

    async def stopped_app(scope: object, receive: object, send: object) -> None:
        raise asyncio.CancelledError("Task cancelled, timeout graceful shutdown exceeded")

    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    middleware = ServiceMiddleware(stopped_app, key=None, metrics=None, endpoints=set())
    asyncio.run(middleware({"type": "http", "path": path, "method": "POST", "headers": []}, receive, send))
    start, body = sent[0], sent[1]
    assert start["status"] == 503
    assert (b"retry-after", b"5") in list(start["headers"])  # type: ignore[call-overload]
    assert "shutting down" in json.loads(body["body"])[field]  # type: ignore[arg-type]


def test_a_request_stopped_after_its_answer_started_is_not_answered_twice() -> None:
    from evirank.serve.rerank_routes import ServiceMiddleware

    async def half_answered(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        raise asyncio.CancelledError

    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    middleware = ServiceMiddleware(half_answered, key=None, metrics=None, endpoints=set())
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(
            middleware({"type": "http", "path": "/v2/rerank", "method": "POST", "headers": []}, receive, send)
        )
    assert len(sent) == 1
