"""Transport-level safety of ``evirank serve``: bind before announcing, answer over-long URLs with 414.

* :func:`bind_socket` binds the listening socket first, so a port in use (or a host that is
  not ours) is a clear error before the model loads, and "serving on ..." is logged only for
  an address that is really held.
* :func:`limited_http_protocol` is uvicorn's HTTP/1.1 protocol with one more rule: a request
  line (method, URL, version) longer than :data:`MAX_REQUEST_LINE` bytes is answered
  ``414 URI Too Long``, and the rest of that request is read and discarded before the
  connection closes, so the client gets the answer instead of a reset connection.

Example:
    >>> sock = bind_socket("127.0.0.1", 0)
    >>> sock.getsockname()[1] > 0
    True
    >>> sock.close()
"""

from __future__ import annotations

import socket
from typing import Any

from evirank.extras import require

MAX_REQUEST_LINE = 16_384
"""Bytes allowed in a request line; a longer URL is answered 414 (queries are far shorter)."""

DRAIN_SECONDS = 2.0
"""How long the rest of a refused request is read and discarded before the connection closes."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (IPv4 or IPv6, as ``host`` resolves), not yet listening.

    Raises:
        OSError: the address is in use, not local, or not allowed (the message names it).
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    if not infos:  # pragma: no cover - getaddrinfo raises instead
        raise OSError(f"cannot resolve {host!r}")
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host in ("::", ""):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def _too_long_response(limit: int) -> bytes:
    body = f"URI too long: the request line is longer than {limit} bytes\n".encode()
    head = (
        "HTTP/1.1 414 URI Too Long\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        "connection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def limited_http_protocol(max_request_line: int = MAX_REQUEST_LINE) -> type[Any]:
    """uvicorn's h11 protocol class, answering a request line over ``max_request_line`` bytes with 414.

    Pass it as ``uvicorn.Config(app, http=limited_http_protocol())``.
    """
    h11 = require("h11", "serve")
    h11_impl = require("uvicorn.protocols.http.h11_impl", "serve")

    class LimitedH11Protocol(h11_impl.H11Protocol):  # type: ignore[name-defined]
        _line_bytes = 0
        _line_done = False
        _refused = False

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # the rest of a refused request: read and dropped
            if self.conn.their_state is h11.IDLE and not self._line_done:
                newline = data.find(b"\n")
                seen = self._line_bytes + (len(data) if newline < 0 else newline)
                if seen > max_request_line:
                    self._refuse()
                    return
                self._line_bytes = seen
                self._line_done = newline >= 0
            super().data_received(data)

        def on_response_complete(self) -> None:
            self._line_bytes, self._line_done = 0, False
            super().on_response_complete()

        def _refuse(self) -> None:
            self._refused = True
            self.logger.warning("refused a request line over %d bytes with 414", max_request_line)
            self.transport.write(_too_long_response(max_request_line))
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self.loop.call_later(DRAIN_SECONDS, self.transport.close)

    return LimitedH11Protocol
