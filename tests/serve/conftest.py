"""Fixtures for the service tests: a live uvicorn server in a thread, on a free port of 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Run ``app`` with uvicorn on 127.0.0.1 in a daemon thread; yield its base URL."""
    uvicorn = pytest.importorskip("uvicorn")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start within 10 s")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def live_server() -> Callable[[Any], Any]:
    """``with live_server(app) as url: ...``"""
    return serve_in_thread


EMBEDDED_DOCS = [
    {"_id": "d1", "title": "Cats", "text": "The cat sat on the mat. It is a cat. Cats are not dogs."},
    {"_id": "d2", "title": "Dogs", "text": "Dogs sat on the mat. A dog is not a cat."},
    {"_id": "d3", "title": "", "text": "BM25 ranks documents. A passage is evidence. The query is relevant."},
    {"_id": "d4", "title": "Vaccine", "text": "A vaccine trains cells. The virus is in the cell."},
]


@pytest.fixture(scope="session")
def embedded_index(tmp_path_factory: pytest.TempPathFactory, tiny_bi_encoder_path: Any) -> Any:
    """A tiny Lucene index built with ``evirank index --embed`` (the tiny bi-encoder's vectors inside)."""
    import json

    pytest.importorskip("pyserini")
    from evirank.cli import main

    folder = tmp_path_factory.mktemp("embedded")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in EMBEDDED_DOCS))
    index = folder / "index"
    args = ["-q", "index", "--corpus", str(corpus), "--index", str(index), "--embed"]
    assert main([*args, "--model", str(tiny_bi_encoder_path), "--device", "cpu"]) == 0
    return index
