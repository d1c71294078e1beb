"""Web pages in WARC files (ClueWeb09 and ClueWeb12: ``.warc.gz``, WARC/0.18 or WARC/1.0).

Each ``response`` record with a ``WARC-TREC-ID`` header is a document with that id; other
records (``warcinfo``, requests) are skipped. The page follows its HTTP headers: its
``<title>`` is the document's title and the rest of its text, scripts, styles and markup
removed (:func:`~evirank.io.collections.markup.html_title_and_text`), its text. Anserini's
``ClueWeb09Collection`` indexes the HTTP headers and the whole page as one text; evirank leaves
the headers out and keeps the title apart, which is what a re-ranker (and Dai & Callan's
passages, the title before each) should read. Pages are decoded as UTF-8, other bytes read as
U+FFFD, as Anserini does. A record without its headers, ``Content-Length`` or payload is an
error naming the file and line.

Example:
    >>> import tempfile, pathlib
    >>> page = b"HTTP/1.1 200 OK\\r\\nContent-Type: text/html\\r\\n\\r\\n<title>Cats</title><p>Cats purr.</p>"
    >>> record = (b"WARC/0.18\\r\\nWARC-Type: response\\r\\nWARC-TREC-ID: clueweb09-en0000-00-00000\\r\\n"
    ...           b"Content-Length: %d\\r\\n\\r\\n" % len(page)) + page + b"\\r\\n\\r\\n"
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "00.warc"
    >>> _ = path.write_bytes(record)
    >>> [located.doc for located in read_warc(path)]
    [Document(docno='clueweb09-en0000-00-00000', title='Cats', text='Cats purr.')]
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections.base import Located
from evirank.io.collections.markup import html_title_and_text
from evirank.io.files import GZIP_ERRORS, check_docno, gzip_error, open_binary, shorten

SUFFIXES = (".warc", ".warc.gz")
_HTTP_END = re.compile(rb"\r?\n\r?\n")


class _Reader:
    """Lines and blocks of a (gzipped) WARC file, counting lines for error messages."""

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self.handle = handle
        self.path = path
        self.line = 0  # lines read so far

    def readline(self) -> bytes:
        try:
            raw = self.handle.readline()
        except GZIP_ERRORS as exc:
            raise gzip_error(self.path, self.line + 1, exc) from None
        if raw:
            self.line += 1
        return raw

    def read(self, size: int) -> bytes:
        try:
            data = self.handle.read(size)
        except GZIP_ERRORS as exc:
            raise gzip_error(self.path, self.line + 1, exc) from None
        self.line += data.count(b"\n")
        return data


def read_warc(path: Path) -> Iterator[Located]:
    """The pages (``response`` records with a ``WARC-TREC-ID``) of one WARC file, plain or ``.gz``."""
    with open_binary(path) as handle:
        reader = _Reader(handle, path)
        while True:
            raw = reader.readline()
            if not raw:
                return
            if not raw.strip():
                continue
            if not raw.startswith(b"WARC/"):
                raise InputFormatError(
                    path, reader.line, "a WARC record starting with WARC/1.0 or WARC/0.18", shorten(raw)
                )
            start = reader.line
            headers = _headers(reader, start)
            length = headers.get("content-length", "")
            if not (length.isascii() and length.isdigit()):
                raise InputFormatError(
                    path, start, "a Content-Length header in each WARC record", shorten(length or "none")
                )
            payload = reader.read(int(length))
            if len(payload) < int(length):
                raise InputFormatError(
                    path, start, f"{length} bytes of payload (Content-Length)", f"{len(payload)} bytes",
                    hint="is the file complete?",
                )  # fmt: skip
            docno = headers.get("warc-trec-id")
            if headers.get("warc-type") == "response" and docno:
                page = _page(check_docno(docno, path, start), payload)
                url = headers.get("warc-target-uri") or None
                yield Located(Document(page.docno, page.title, page.text, url), start)


def count_warc(path: Path) -> int:
    """The number of ``WARC-TREC-ID`` headers of a file (no parsing)."""
    with open_binary(path) as handle:
        return sum(1 for raw in handle if raw.startswith(b"WARC-TREC-ID:"))


def _headers(reader: _Reader, start: int) -> dict[str, str]:
    headers: dict[str, str] = {}
    while True:
        raw = reader.readline()
        if not raw:
            raise InputFormatError(
                reader.path, start, "this WARC record's headers, then an empty line", "the end of the file"
            )
        if not raw.strip():
            return headers
        name, colon, value = raw.decode("utf-8", errors="replace").partition(":")
        if not colon:
            raise InputFormatError(reader.path, reader.line, "a WARC header NAME: VALUE", shorten(raw))
        headers[name.strip().lower()] = value.strip()


def _page(docno: str, payload: bytes) -> Document:
    """A page's title and text, after its HTTP headers."""
    if payload.startswith(b"HTTP/"):
        end = _HTTP_END.search(payload)
        payload = payload[end.end() :] if end else b""
    title, text = html_title_and_text(payload.decode("utf-8", errors="replace"))
    return Document(docno, title, text)
