"""A local HTTP server standing in for the download hosts; a fresh data home for every test.

The server runs in a thread on 127.0.0.1 and serves ``files`` by name. It answers range
requests (``Range: bytes=N-``) unless ``ranges`` is off, and breaks off a response half way
through for each name in ``cut`` (once per name). Every request is recorded.
"""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evirank.data import DATASETS, Dataset


@dataclass
class Host:
    """What the stand-in host serves and what it was asked."""

    url: str
    files: dict[str, bytes] = field(default_factory=dict)
    cut: set[str] = field(default_factory=set)
    ranges: bool = True
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)


def _handler(host: Host) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            name = self.path.lstrip("/")
            wanted = self.headers.get("Range")
            host.requests.append((name, wanted))
            body = host.files.get(name)
            if body is None:
                self.send_error(404)
                return
            start = 0
            if wanted and host.ranges:
                start = int(wanted.removeprefix("bytes=").rstrip("-"))
                if start >= len(body):
                    self.send_error(416)
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            if name in host.cut:
                host.cut.discard(name)
                self.wfile.write(part[: len(part) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(part)

    return Handler


@pytest.fixture
def host() -> Iterator[Host]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(Host(url="")))
    state = Host(url=f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def dead_url() -> str:
    """An address where nothing listens (connection refused): a machine without the host."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data home, and a datasets folder that holds nothing, for every test here."""
    home = tmp_path / "home"
    monkeypatch.setenv("EVIRANK_HOME", str(home))
    monkeypatch.setenv("EVIRANK_DATASETS", str(tmp_path / "no-datasets"))
    monkeypatch.delenv("EVIRANK_DATA_URL", raising=False)
    return home


@pytest.fixture
def register(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Add an entry to the registry for one test."""

    def add(entry: Dataset) -> Dataset:
        monkeypatch.setitem(DATASETS, entry.name, entry)
        return entry

    return add
