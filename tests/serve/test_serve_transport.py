"""``evirank serve`` at the transport level: it binds before it says it serves; an over-long URL gets 414."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from evirank.cli import main
from evirank.serve.limits import MAX_REQUEST_LINE, bind_socket, limited_http_protocol

pytest.importorskip("uvicorn")


def test_a_port_in_use_is_a_clear_error_and_nothing_claims_to_serve(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import evirank.cli.serve as serve_cli
    from evirank.serve.testing import toy_searcher

    monkeypatch.setattr(serve_cli, "searcher_from_args", lambda *args, **kwargs: toy_searcher())
    held = bind_socket("127.0.0.1", 0)
    held.listen()
    port = held.getsockname()[1]
    try:
        assert main(["serve", "--index", "idx", "--port", str(port), "--no-warmup"]) == 2
    finally:
        held.close()
    assert f"cannot listen on 127.0.0.1:{port}" in caplog.text
    assert "serving" not in caplog.text


@pytest.fixture
def server() -> Iterator[int]:
    import uvicorn

    from evirank.serve.app import create_app
    from evirank.serve.testing import toy_searcher

    sock = bind_socket("127.0.0.1", 0)
    config = uvicorn.Config(create_app(toy_searcher()), log_level="warning", http=limited_http_protocol())
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not instance.started:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    yield sock.getsockname()[1]
    instance.should_exit = True
    thread.join(10)
    sock.close()


def _get(port: int, target: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        chunks: list[Any] = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("size", [MAX_REQUEST_LINE + 1, 1_000_000])
def test_an_over_long_url_is_answered_414_not_a_reset(server: int, size: int) -> None:
    answer = _get(server, b"/v1/search?q=" + b"a" * size)
    assert answer.startswith(b"HTTP/1.1 414 URI Too Long")


def test_ordinary_requests_still_pass(server: int) -> None:
    assert _get(server, b"/health").startswith(b"HTTP/1.1 200")
    assert _get(server, b"/v1/search?q=" + b"cats+" * 100).startswith(b"HTTP/1.1 200")
