"""``evirank serve`` without an index, called through the field's own rerank clients.

The service runs as a subprocess on 127.0.0.1 with the offline all-MiniLM-L6-v2 model and an API key;
the Cohere SDK (v1 and v2), LangChain's ``CohereRerank``, Haystack's ``CohereRanker``, LlamaIndex's
TEI postprocessor and plain HTTP (TEI, Jina) each send the same documents: one long document whose
answer lies past its first 512 tokens, and short ones that do not answer. The long one must come
first, and its evidence offsets must slice the answer back out of the text as sent.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("transformers")

KEY = "test-key-123"
QUERY = "does regular aspirin use lower the risk of a heart attack"
ANSWER = "Taking a low dose of aspirin every day lowered the risk of a first heart attack by a fifth."
FILLER = (
    "The river delta formed over thousands of years as silt settled where the current slowed. ",
    "Glaciers carved the valley walls into steep cliffs that now attract climbers every summer. ",
    "The orchestra rehearsed the symphony for weeks before the premiere in the old opera house. ",
    "Merchants carried silk and spices along the caravan routes that crossed the high desert. ",
    "The bridge was built from granite blocks cut in a quarry about forty miles to the north. ",
    "Seabirds nest on the rocky island in spring and leave for the open ocean in the autumn. ",
    "The committee met on Tuesday to review the budget for the new public library building. ",
    "Early printing presses used movable type arranged by hand, one letter at a time. ",
)


def long_document() -> str:
    """About 1,200 words of unrelated sentences, then the answer, then a few more."""
    body = "".join(FILLER[i % len(FILLER)] for i in range(80))
    return body + ANSWER + " " + "".join(FILLER[:3])


DOCUMENTS = [
    "Aspirin was first sold as a powder by a German company at the end of the nineteenth century.",
    "Heart rate rises during exercise and falls again within minutes after the exercise stops.",
    long_document(),
    "Willow bark has been chewed for pain relief since ancient times in many parts of the world.",
]
LONG = 2


def _answer_located(text: str, evidence: list[dict]) -> bool:
    """Whether one evidence passage's offsets slice the answer's words out of ``text``."""
    for passage in evidence:
        if passage["start"] is None:
            continue
        span = text[passage["start"] : passage["end"]]
        if "heart attack by a fifth" in span:
            return True
    return False


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The service, started as ``evirank serve`` on a free port; its base URL."""
    folder = tmp_path_factory.mktemp("rerank-service")
    key_file = folder / "key.txt"
    key_file.write_text(KEY + "\n", encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable, "-m", "evirank", "serve", "--port", "0", "--api-key-file", str(key_file),
        "--max-documents", "1000", "--max-document-chars", "100000", "--timeout", "60",
    ]  # fmt: skip
    log = (folder / "serve.log").open("w+", encoding="utf-8")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        url = _wait_for_url(folder / "serve.log", process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _wait_for_url(log: Path, process: subprocess.Popen[bytes], timeout: float = 180.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", log.read_text(encoding="utf-8"))
        if found:
            url = found.group(1)
            for _ in range(100):
                try:
                    if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                        return url
                except httpx.HTTPError:
                    time.sleep(0.1)
        if process.poll() is not None:
            raise AssertionError("evirank serve stopped:\n" + log.read_text(encoding="utf-8")[-3000:])
        time.sleep(0.2)
    raise AssertionError("evirank serve did not start:\n" + log.read_text(encoding="utf-8")[-3000:])


def test_the_long_document_is_past_the_models_input_length() -> None:
    words = len(DOCUMENTS[LONG].split())
    assert words > 1000 and DOCUMENTS[LONG].index(ANSWER) > len(DOCUMENTS[LONG]) * 0.9


def test_cohere_v1_sdk(service: str) -> None:
    cohere = pytest.importorskip("cohere")
    client = cohere.Client(api_key=KEY, base_url=service)
    response = client.rerank(
        model="rerank-english-v3.0", query=QUERY, documents=DOCUMENTS, top_n=3, return_documents=True
    )
    assert next(r.index for r in response.results) == LONG
    assert len(response.results) == 3
    best = response.results[0]
    assert 0.0 <= best.relevance_score <= 1.0
    assert best.document is not None and best.document.text == DOCUMENTS[LONG]
    extra = best.model_dump()
    assert _answer_located(DOCUMENTS[LONG], extra["evidence"]) and extra["passages"] > 20


def test_cohere_v2_sdk_with_objects_and_rank_fields(service: str) -> None:
    cohere = pytest.importorskip("cohere")
    client = cohere.ClientV2(api_key=KEY, base_url=service)
    response = client.rerank(model="any-name", query=QUERY, documents=DOCUMENTS, top_n=2)
    assert next(r.index for r in response.results) == LONG and len(response.results) == 2
    scores = [r.relevance_score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    # objects through plain HTTP (the v2 SDK sends strings): the body field is ranked, offsets index it
    objects = [{"headline": f"doc {i}", "body": text} for i, text in enumerate(DOCUMENTS)]
    raw = httpx.post(
        f"{service}/v1/rerank",
        json={"query": QUERY, "documents": objects, "rank_fields": ["body"], "return_documents": True},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=60,
    ).json()
    best = raw["results"][0]
    assert best["index"] == LONG and best["document"]["headline"] == f"doc {LONG}"
    assert {p["field"] for p in best["evidence"]} == {"body"}
    assert _answer_located(DOCUMENTS[LONG], best["evidence"])


def test_langchain_cohere_rerank(service: str) -> None:
    cohere = pytest.importorskip("cohere")
    rerank = pytest.importorskip("langchain_cohere").CohereRerank
    from langchain_core.documents import Document

    compressor = rerank(client=cohere.ClientV2(api_key=KEY, base_url=service), model="evirank", top_n=2)
    ranked = compressor.compress_documents([Document(page_content=d) for d in DOCUMENTS], QUERY)
    assert ranked[0].page_content == DOCUMENTS[LONG] and len(ranked) == 2
    assert 0 <= ranked[0].metadata["relevance_score"] <= 1


def test_haystack_cohere_ranker(service: str) -> None:
    rankers = pytest.importorskip("haystack_integrations.components.rankers.cohere")
    from haystack import Document
    from haystack.utils import Secret

    ranker = rankers.CohereRanker(
        model="evirank", top_k=2, api_key=Secret.from_token(KEY), api_base_url=service
    )
    ranked = ranker.run(query=QUERY, documents=[Document(content=d) for d in DOCUMENTS])["documents"]
    assert ranked[0].content == DOCUMENTS[LONG] and len(ranked) == 2


def test_llamaindex_tei_postprocessor(service: str) -> None:
    tei = pytest.importorskip("llama_index.postprocessor.tei_rerank")
    from llama_index.core.schema import NodeWithScore, TextNode

    postprocessor = tei.TextEmbeddingInference(base_url=service, top_n=2, auth_token=f"Bearer {KEY}")
    nodes = [NodeWithScore(node=TextNode(text=d, id_=str(i))) for i, d in enumerate(DOCUMENTS)]
    ranked = postprocessor.postprocess_nodes(nodes, query_str=QUERY)
    assert ranked[0].node.get_content() == DOCUMENTS[LONG] and len(ranked) == 2


def test_tei_and_jina_over_plain_http(service: str) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    tei = httpx.post(
        f"{service}/rerank",
        json={"query": QUERY, "texts": DOCUMENTS, "raw_scores": True, "return_text": True},
        headers=headers,
        timeout=60,
    ).json()
    assert next(hit["index"] for hit in tei) == LONG and tei[0]["text"] == DOCUMENTS[LONG]
    assert tei[0]["score"] == tei[0]["raw_score"]  # raw: the cosine, not mapped
    jina = httpx.post(
        f"{service}/v1/rerank",
        json={
            "model": "jina-reranker-v2-base-multilingual",
            "query": QUERY,
            "documents": DOCUMENTS,
            "top_n": 1,
        },
        headers=headers,
        timeout=60,
    ).json()
    assert jina["results"][0]["document"]["text"] == DOCUMENTS[LONG]  # Jina's default: documents returned
    assert jina["usage"]["total_tokens"] > 0 and jina["model"] == "default"


def test_without_the_key_every_route_but_health_is_401(service: str) -> None:
    for path, body in (("/v1/rerank", {"message"}), ("/v2/rerank", {"message"}), ("/rerank", {"error"})):
        answer = httpx.post(f"{service}{path}", json={"query": "x", "documents": ["y"]}, timeout=10)
        assert answer.status_code == 401 and body <= set(answer.json())
        wrong = httpx.post(f"{service}{path}", json={}, headers={"Authorization": "Bearer wrong"}, timeout=10)
        assert wrong.status_code == 401
    assert httpx.get(f"{service}/metrics", timeout=10).status_code == 401
    assert httpx.get(f"{service}/health", timeout=10).status_code == 200


def test_32_concurrent_clients_get_no_5xx_and_metrics_count_them(service: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    headers = {"Authorization": f"Bearer {KEY}"}
    short = [d for i, d in enumerate(DOCUMENTS) if i != LONG] * 3

    def one(i: int) -> int:
        body = {"model": "m", "query": f"{QUERY} {i}", "documents": short, "top_n": 3}
        return httpx.post(f"{service}/v2/rerank", json=body, headers=headers, timeout=120).status_code

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        statuses = list(pool.map(one, range(48)))
    assert statuses == [200] * 48
    text = httpx.get(f"{service}/metrics", headers=headers, timeout=10).text
    families = {family.name: family for family in text_string_to_metric_families(text)}
    answered = sum(
        s.value
        for s in families["evirank_requests"].samples
        if s.name == "evirank_requests_total" and s.labels == {"endpoint": "/v2/rerank", "status": "200"}
    )
    assert answered >= 48
    batches = families["evirank_batch_requests"].samples
    count = next(s.value for s in batches if s.name == "evirank_batch_requests_count")
    total = next(s.value for s in batches if s.name == "evirank_batch_requests_sum")
    assert total >= 48 and count < total  # some requests shared a model batch
    assert "evirank_queue_depth" in families and "evirank_passages_scored" in families


@pytest.mark.parametrize("path", ["/v1/rerank", "/v2/rerank", "/rerank"])
def test_hostile_requests_get_the_shapes_own_4xx(service: str, path: str) -> None:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    field = "texts" if path == "/rerank" else "documents"
    bodies: list[tuple[bytes | dict, int]] = [
        (b'{"query": "x", ', 400),
        (b"\xff\xfe\xfa not utf-8", 400),
        ({"query": 5, field: ["a"]}, 422 if path == "/rerank" else 400),
        ({"query": "x", field: "not a list"}, 422 if path == "/rerank" else 400),
        ({"query": "x", field: ["a"] * 10_000}, 413),
        ({"query": "x", field: ["word " * 1_000_000]}, 413),
        ({"query": "   ", field: ["a"]}, 422 if path == "/rerank" else 400),
        ({"query": "x", field: []}, 422 if path == "/rerank" else 400),
    ]
    if path != "/rerank":
        bodies += [
            ({"query": "x", field: ["a"], "top_n": 0}, 400),
            ({"query": "x", field: ["a"], "top_n": -3}, 400),
        ]
    for body, status in bodies:
        if isinstance(body, bytes):
            answer = httpx.post(f"{service}{path}", content=body, headers=headers, timeout=60)
        else:
            answer = httpx.post(f"{service}{path}", json=body, headers=headers, timeout=60)
        assert answer.status_code == status, (
            body if isinstance(body, bytes) else str(body)[:80],
            answer.text[:300],
        )
        shape = answer.json()
        assert ("error" in shape and "error_type" in shape) if path == "/rerank" else "message" in shape
        assert "Traceback" not in answer.text
    if path != "/rerank":
        larger = httpx.post(
            f"{service}{path}",
            json={"query": QUERY, field: DOCUMENTS, "top_n": 50},
            headers=headers,
            timeout=60,
        )
        assert larger.status_code == 200 and len(larger.json()["results"]) == len(DOCUMENTS)
