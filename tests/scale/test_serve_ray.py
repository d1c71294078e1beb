"""``evirank serve --ray local --replicas 2``: the same answers as one process, and a killed model
replica's in-flight requests answered by the other without an error reaching the client."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # Ray and Ray Serve start, two replicas load the model: a minute or two

httpx = pytest.importorskip("httpx")
pytest.importorskip("ray.serve")
pytest.importorskip("transformers")

QUERY = "why do cats purr"
DOCUMENTS = [f"Rivers and lakes hold most of the fresh water on land, sentence {i}. " * 30 for i in range(24)]
DOCUMENTS.append("Dogs bark at strangers. Cats purr when they are content and sometimes when hurt.")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def ray_service() -> Iterator[str]:
    port = _free_port()
    short = tempfile.mkdtemp(prefix="evirank-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_TMPDIR": short}
    log = Path(short) / "serve.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "evirank",
                "serve",
                "--ray",
                "local",
                "--replicas",
                "2",
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError("evirank serve --ray stopped:\n" + log.read_text()[-3000:])
            try:
                if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            raise AssertionError("evirank serve --ray did not start:\n" + log.read_text()[-3000:])
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def _ask(url: str, query: str = QUERY) -> httpx.Response:
    return httpx.post(
        f"{url}/v2/rerank", json={"model": "any", "query": query, "documents": DOCUMENTS}, timeout=180
    )


def test_two_replicas_answer_as_one_process(ray_service: str) -> None:
    from evirank.cli import build_parser
    from evirank.cli.serve import rerank_from_args, served_models
    from evirank.serve.rerank import RerankJob

    local = rerank_from_args(build_parser().parse_args(["serve"]), served_models(None))
    expected = local.rerank_blocking(None, RerankJob.of(QUERY, DOCUMENTS))
    local.close()
    answers = [_ask(ray_service).json()["results"] for _ in range(4)]  # both replicas answer some
    for results in answers:
        assert [r["index"] for r in results] == [hit.index for hit in expected.hits]
        for result, hit in zip(results, expected.hits, strict=True):
            assert result["raw_score"] == pytest.approx(hit.score, abs=1e-5)
    assert answers[0][0]["index"] == len(DOCUMENTS) - 1


def test_a_killed_replica_costs_no_client_an_error(ray_service: str) -> None:
    found = subprocess.run(
        ["pgrep", "-f", "ServeReplica:evirank:evirank-models"], capture_output=True, text=True, check=False
    )
    replicas = [int(pid) for pid in found.stdout.split()]
    assert len(replicas) == 2
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(_ask, ray_service, f"{QUERY} {i}") for i in range(32)]
        time.sleep(2.0)  # requests are in flight on both replicas
        os.kill(replicas[0], signal.SIGKILL)
        statuses = [future.result().status_code for future in futures]
    assert statuses == [200] * 32
    health = httpx.get(f"{ray_service}/health", timeout=10).json()
    assert health["info"]["rerank_models"]["default"]["retried"] >= 1
