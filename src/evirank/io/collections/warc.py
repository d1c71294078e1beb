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

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections.base import Located
from evirank.io.collections.markup import html_title_and_text
from evirank.io.files import GZIP_ERRORS, check_docno, gzip_error, open_binary, shorten

logger = logging.getLogger(__name__)

SUFFIXES = (".warc", ".warc.gz")
#: The record types of the WARC standard (1.0 and ClueWeb09's 0.18); another is a damaged header.
RECORD_TYPES = frozenset(
    {"warcinfo", "response", "resource", "request", "metadata", "revisit", "conversion", "continuation"}
)
#: A record longer than this (bytes, by its ``Content-Length``) is reported, not read into memory.
MAX_RECORD = 256 * 2**20
_HTTP_END = re.compile(rb"\r?\n\r?\n")
# A WARC record's start inside another's payload: the end of a record (a blank line), its version
# line and header lines up to a Content-Length. A payload that holds one swallowed the next record.
_RECORD_INSIDE = re.compile(
    rb"\r?\n\r?\nWARC/\d+\.\d+\r?\n(?:[A-Za-z][\w-]*:[^\r\n]*\r?\n)*?Content-Length:", re.IGNORECASE
)
_CHUNK = 2**20
_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")  # a header name (a token of RFC 9110)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters: damage in a header value


class _Reader:
    """Lines and blocks of a (gzipped) WARC file, counting lines and bytes for error messages."""

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self.handle = handle
        self.path = path
        self.line = 0  # lines read so far
        self.offset = 0  # bytes read so far (of the decompressed file)

    def readline(self) -> bytes:
        try:
            raw = self.handle.readline()
        except GZIP_ERRORS as exc:
            raise gzip_error(self.path, self.line + 1, exc) from None
        if raw:
            self.line += 1
            self.offset += len(raw)
        return raw

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes (fewer only at the end of the file), read a chunk at a time."""
        parts: list[bytes] = []
        left = size
        while left > 0:
            try:
                data = self.handle.read(min(left, _CHUNK))
            except GZIP_ERRORS as exc:
                raise gzip_error(self.path, self.line + 1, exc) from None
            if not data:
                break
            parts.append(data)
            left -= len(data)
            self.line += data.count(b"\n")
            self.offset += len(data)
        return b"".join(parts)


def read_warc(path: Path) -> Iterator[Located]:
    """The pages (``response`` records with a ``WARC-TREC-ID``) of one WARC file, plain or ``.gz``.

    A record whose ``Content-Length`` does not end where the next record starts (too short: the
    record's own bytes follow; too long: the next record is inside its payload), or one longer
    than :data:`MAX_RECORD`, is an error naming the file, the record's line and its byte offset.
    Response records without a ``WARC-TREC-ID``, and other records with one, are skipped with one
    warning per file naming the first.
    """
    with open_binary(path) as handle:
        reader = _Reader(handle, path)
        previous: tuple[int, int, int] | None = None  # the last record's line, offset and length
        unnamed: list[int] = []  # lines of pages without an id, and of ids on other records
        while True:
            raw = reader.readline()
            if not raw:
                break
            if not raw.strip():
                continue
            if not raw.startswith(b"WARC/"):
                if previous is not None:
                    line, offset, size = previous
                    raise InputFormatError(
                        path, line, f"a record of {size} bytes (its Content-Length), then the next record",
                        f"{shorten(raw)} on line {reader.line} after the payload of the record at byte "
                        f"offset {offset}: its Content-Length ends inside its content",
                    )  # fmt: skip
                raise InputFormatError(
                    path, reader.line, "a WARC record starting with WARC/1.0 or WARC/0.18", shorten(raw)
                )
            start, offset = reader.line, reader.offset - len(raw)
            headers = _headers(reader, start)
            length = _content_length(path, start, offset, headers.get("content-length", ""))
            payload = reader.read(length)
            if len(payload) < length:
                raise InputFormatError(
                    path, start, f"{length} bytes of payload (Content-Length)",
                    f"{len(payload)} bytes before the end of the file (record at byte offset {offset})",
                    hint="is the file complete?",
                )  # fmt: skip
            inside = _RECORD_INSIDE.search(payload)
            if inside is not None:
                where = inside.start() + inside.group(0).index(b"WARC/")
                at = reader.offset - len(payload) + where
                at_line = reader.line - payload.count(b"\n", where) + 1
                raise InputFormatError(
                    path, start, f"a record of {length} bytes (its Content-Length), then the next record",
                    f"another WARC record inside its payload, at byte offset {at} (line {at_line}): "
                    "its Content-Length runs into the next record",
                )  # fmt: skip
            previous = (start, offset, length)
            kind = headers.get("warc-type", "")
            if kind.lower() not in RECORD_TYPES:
                raise InputFormatError(
                    path, start, f"a WARC-Type among {', '.join(sorted(RECORD_TYPES))}",
                    f"{shorten(kind or 'none')} (record at byte offset {offset})",
                )  # fmt: skip
            docno = headers.get("warc-trec-id")
            response = kind.lower() == "response"
            if response != bool(docno):  # a page without its id, or an id on another kind of record
                unnamed.append(start)
            elif response and docno:
                page = _page(check_docno(docno, path, start), payload)
                url = headers.get("warc-target-uri") or None
                yield Located(Document(page.docno, page.title, page.text, url), start)
    if unnamed:
        logger.warning(
            "%s:%d: skipped %d record(s) that are not a page with its id (a response record with a "
            "WARC-TREC-ID header): a page without an id, or an id on a record of another type",
            path, unnamed[0], len(unnamed),
        )  # fmt: skip


def _content_length(path: Path, line: int, offset: int, value: str) -> int:
    """A record's ``Content-Length`` as a number of bytes, or an error naming the record."""
    if not (value.isascii() and value.isdigit()):
        raise InputFormatError(
            path, line, "a Content-Length header in each WARC record",
            f"{shorten(value or 'none')} (record at byte offset {offset})",
        )  # fmt: skip
    if len(value) > 18 or int(value) > MAX_RECORD:
        raise InputFormatError(
            path, line, f"a Content-Length of at most {MAX_RECORD // 2**20} MiB",
            f"{shorten(value)} bytes (record at byte offset {offset})",
            hint="is the header damaged?",
        )  # fmt: skip
    return int(value)


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
        if not colon or not _NAME.fullmatch(name.strip()) or _CONTROL.search(value.rstrip("\r\n")):
            raise InputFormatError(reader.path, reader.line, "a WARC header NAME: VALUE", shorten(raw))
        headers[name.strip().lower()] = value.strip()


def _page(docno: str, payload: bytes) -> Document:
    """A page's title and text, after its HTTP headers."""
    if payload.startswith(b"HTTP/"):
        end = _HTTP_END.search(payload)
        payload = payload[end.end() :] if end else b""
    title, text = html_title_and_text(payload.decode("utf-8", errors="replace"))
    return Document(docno, title, text)
