"""Property-based round trips of every corpus reader, with damage: no document is lost without a word.

For each format (JSONL, TREC, New York Times, Washington Post, WARC, MS MARCO documents), random
documents are written to one file, which is then damaged at a random byte offset (a byte changed,
deleted or inserted, or the file cut there). Reading it back must give one of:

- evirank's own error naming the file and the line (or byte offset) of the damage;
- a warning naming the file and a line;
- every document the damage did not touch, identical, and as many documents as were written
  (the damaged one read, perhaps changed: a changed letter cannot be told from the original).

Never fewer documents, or two merged into one, without a word.
"""

from __future__ import annotations

import html
import json
import logging
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from evirank.errors import InputFormatError  # noqa: E402
from evirank.frames import Document  # noqa: E402
from evirank.io import read_corpus  # noqa: E402

DAMAGE = settings(
    derandomize=True,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Words of letters, digits, punctuation and markup characters (escaped by each writer), and a few
# non-ASCII ones; no white space inside a word, so that every reader's white-space rule agrees.
_WORD = st.text(
    st.sampled_from("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789&<>;'\".,!?#éü€中"), min_size=1, max_size=8
)
_TEXT = st.lists(_WORD, min_size=1, max_size=12).map(" ".join)
_TITLE = st.lists(_WORD, max_size=4).map(" ".join)


@st.composite
def documents(draw: st.DrawFn) -> list[Document]:
    n = draw(st.integers(min_value=2, max_value=5))
    ids = draw(
        st.lists(st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=8), min_size=n,
                 max_size=n, unique=True)
    )  # fmt: skip
    return [Document(docno, draw(_TITLE), draw(_TEXT)) for docno in ids]


def _jsonl(doc: Document) -> bytes:
    return (
        json.dumps({"_id": doc.docno, "title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n"
    ).encode()


def _trec(doc: Document) -> bytes:
    title = f"<HEADLINE>\n{html.escape(doc.title, quote=False)}\n</HEADLINE>\n" if doc.title else ""
    return (
        f"<DOC>\n<DOCNO> {doc.docno} </DOCNO>\n{title}<BYLINE>By A. Writer</BYLINE>\n"
        f"<TEXT>\n<P>\n{html.escape(doc.text, quote=False)}\n</P>\n</TEXT>\n</DOC>\n"
    ).encode()


def _nyt(doc: Document) -> bytes:
    return (
        f'<nitf version="-//IPTC//DTD NITF 3.3//EN">\n<head><docdata><doc-id id-string="{doc.docno}"/>'
        f"</docdata></head>\n<body><body.head><hedline><hl1>{xml_escape(doc.title)}</hl1></hedline>"
        f'</body.head>\n<body.content><block class="full_text"><p>{xml_escape(doc.text)}</p></block>'
        "</body.content></body>\n</nitf>\n"
    ).encode()


def _wapo(doc: Document) -> bytes:
    items = [
        {"type": "byline", "content": "By A. Writer"},
        {"type": "sanitized_html", "content": f"<p>{html.escape(doc.text, quote=False)}</p>"},
    ]
    record = {"id": doc.docno, "title": doc.title, "contents": items}
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


def _warc(doc: Document) -> bytes:
    page = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
        f"<html><head><title>{html.escape(doc.title)}</title></head><body><p>{html.escape(doc.text)}</p>"
        "</body></html>"
    ).encode()
    head = (
        f"WARC/0.18\r\nWARC-Type: response\r\nWARC-TREC-ID: {doc.docno}\r\n"
        f"Content-Length: {len(page)}\r\n\r\n"
    ).encode()
    return head + page + b"\r\n\r\n"


def _msmarco(doc: Document) -> bytes:
    return f"{doc.docno}\thttp://example.com/{doc.docno}\t{doc.title}\t{doc.text}\n".encode()


_WARCINFO = b"WARC/0.18\r\nWARC-Type: warcinfo\r\nContent-Length: 12\r\n\r\nsoftware: x\n\r\n\r\n"

#: format -> (file name, what comes before the documents, one document's bytes)
FORMATS: dict[str, tuple[str, bytes, Callable[[Document], bytes]]] = {
    "jsonl": ("corpus.jsonl", b"", _jsonl),
    "trec": ("la010189", b"", _trec),
    "nyt": ("articles.xml", b'<?xml version="1.0" encoding="UTF-8"?>\n', _nyt),
    "wapo": ("wapo.jl", b"", _wapo),
    "warc": ("00.warc", _WARCINFO, _warc),
    "msmarco-docs": ("msmarco-docs.tsv", b"", _msmarco),
}


def written(format: str, docs: Sequence[Document]) -> tuple[str, bytes, list[tuple[int, int]]]:
    """The file name, bytes and each document's byte span [start, end) of ``docs`` in ``format``."""
    name, head, write = FORMATS[format]
    data = bytearray(head)
    spans = []
    for doc in docs:
        part = write(doc)
        spans.append((len(data), len(data) + len(part)))
        data += part
    return name, bytes(data), spans


@contextmanager
def _warnings() -> Iterator[list[str]]:
    """The messages evirank logs at WARNING or above while the block runs."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Keep(logging.WARNING)
    root = logging.getLogger("evirank")
    root.addHandler(handler)
    try:
        yield messages
    finally:
        root.removeHandler(handler)


def damage(data: bytes, kind: str, offset: int, byte: int) -> bytes:
    """``data`` with one byte changed, deleted or inserted at ``offset``, or cut there."""
    if kind == "replace":
        return (
            data[:offset] + bytes([byte if byte != data[offset] else (byte + 1) % 256]) + data[offset + 1 :]
        )
    if kind == "delete":
        return data[:offset] + data[offset + 1 :]
    if kind == "insert":
        return data[:offset] + bytes([byte]) + data[offset:]
    return data[:offset]  # cut


def check_read_back(format: str, docs: list[Document], kind: str, offset: int, byte: int) -> None:
    """The property of the module docstring for one damaged file."""
    name, data, spans = written(format, docs)
    offset %= len(data)
    damaged_data = damage(data, kind, offset, byte)
    # the documents the damage touches (an insertion at a boundary touches both sides)
    touched = {
        i
        for i, (start, end) in enumerate(spans)
        if start <= offset < end or (kind == "insert" and offset == end) or (kind == "cut" and end > offset)
    }
    expected = len(docs) if kind != "cut" else sum(1 for start, _ in spans if start < offset)
    with tempfile.TemporaryDirectory(prefix="evirank-damage-") as folder:
        path = Path(folder) / name
        path.write_bytes(damaged_data)
        with _warnings() as warned:
            try:
                found = list(read_corpus(path, format=format, empty="skip"))
            except InputFormatError as exc:
                assert exc.path.endswith(name), exc
                nothing = exc.found.startswith("no ")  # no document at all: the whole file is named
                assert exc.line is not None or "offset" in str(exc) or nothing, exc
                return
        if any(re.search(re.escape(name) + r":\d+", message) for message in warned):
            return  # the damage is reported with the file and line
        by_id = {d.docno: d for d in found}
        for i, doc in enumerate(docs):
            if i not in touched:
                assert by_id.get(doc.docno) == doc, (doc, found, damaged_data)
        assert len(found) == expected, (docs, found, damaged_data)


@pytest.mark.parametrize("format", sorted(FORMATS))
@DAMAGE
@given(docs=documents())
def test_undamaged_documents_read_back_identical(format: str, docs: list[Document]) -> None:
    name, data, _ = written(format, docs)
    with tempfile.TemporaryDirectory(prefix="evirank-damage-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        with _warnings() as warned:
            assert list(read_corpus(path, format=format)) == docs
        assert not warned


@pytest.mark.parametrize("format", sorted(FORMATS))
@DAMAGE
@given(
    docs=documents(),
    kind=st.sampled_from(["replace", "delete", "insert", "cut"]),
    offset=st.integers(min_value=0, max_value=100_000),
    byte=st.sampled_from(b"\n\t\r <>/\"'{}:,&;0aWX\x00\xff\xc3"),
)
@example(docs=[Document("A", "", "x y"), Document("B", "", "z")], kind="delete", offset=0, byte=0)
def test_damage_is_reported_or_no_document_is_lost(
    format: str, docs: list[Document], kind: str, offset: int, byte: int
) -> None:
    check_read_back(format, docs, kind, offset, byte)
