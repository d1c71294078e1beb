"""The New York Times Annotated Corpus (Core17): NITF XML, one ``<nitf>`` article per file.

As distributed (LDC2008T19), the articles are ``.xml`` files packed in one ``.tgz`` per month
(``data/1987/01.tgz``); both the archives and the unpacked files (plain or ``.gz``) are read,
and a file may hold several ``<nitf>`` elements. What is kept is what Anserini's
``NewYorkTimesCollection`` keeps: the id from ``<doc-id id-string="...">``, and the text of
the print headline (``<hedline><hl1>``, the title), the abstract (the last ``<p>`` of
``<abstract>``) and the full text (the ``<p>`` of ``<block class="full_text">``, one line
each). Text nodes are joined with spaces, as Anserini joins them. An XML error, or an article
without an id, is an error naming the file (and archive member) and line.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "0000001.xml"
    >>> _ = path.write_text('<nitf><head><docdata><doc-id id-string="1"/></docdata></head><body>'
    ...     '<body.head><hedline><hl1>Cats</hl1></hedline></body.head><body.content>'
    ...     '<block class="full_text"><p>Cats purr.</p><p>Dogs bark.</p></block>'
    ...     '</body.content></body></nitf>')
    >>> [located.doc for located in read_nyt(path)]
    [Document(docno='1', title='Cats', text='Cats purr.\\nDogs bark.')]
"""

from __future__ import annotations

import re
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections.base import Located
from evirank.io.files import (
    GZIP_ERRORS,
    check_docno,
    decode_line,
    gzip_error,
    open_binary,
    read_text,
    shorten,
)

ARCHIVE_SUFFIXES = (".tgz", ".tar.gz")
FILE_SUFFIXES = (".xml", ".xml.gz", *ARCHIVE_SUFFIXES)

_NITF = re.compile(r"<nitf\b.*?</nitf\s*>", re.DOTALL)
_NITF_BYTES = re.compile(rb"<nitf\b")
_NITF_START = re.compile(r"<nitf\b")
# What may stand between articles: XML declarations, document types, comments, processing
# instructions and white space.
_PROLOG = re.compile(r"\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>\[]*(?:\[.*?\])?\s*>", re.DOTALL | re.IGNORECASE)
_SHAPE = 'New York Times NITF XML: <nitf> with <doc-id id-string="..."> and <body>'


def read_nyt(path: Path) -> Iterator[Located]:
    """The articles of one file: an ``.xml`` (or ``.xml.gz``) file, or a ``.tgz`` archive of them."""
    if path.name.endswith(ARCHIVE_SUFFIXES):
        yield from _read_archive(path)
    else:
        yield from _articles(str(path), read_text(path))


def count_nyt(path: Path) -> int:
    """The number of ``<nitf>`` elements of a file or archive (no parsing)."""
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        with open_binary(path) as handle:
            return len(_NITF_BYTES.findall(handle.read()))
    count = 0
    with tarfile.open(path, "r:gz") as archive:
        for member in archive:
            member_file = archive.extractfile(member) if member.name.endswith(".xml") else None
            if member_file is not None:
                count += len(_NITF_BYTES.findall(member_file.read()))
    return count


def _read_archive(path: Path) -> Iterator[Located]:
    try:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive:
                if not (member.isfile() and member.name.endswith(".xml")):
                    continue
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                where = f"{path} ({member.name})"
                data = handle.read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    line_start = data.rfind(b"\n", 0, exc.start) + 1
                    line_end = data.find(b"\n", exc.start)
                    decode_line(
                        data[line_start : len(data) if line_end < 0 else line_end],
                        where,
                        data.count(b"\n", 0, exc.start) + 1,
                        line_start,
                    )
                    raise  # pragma: no cover - decode_line raises
                yield from _articles(where, text)
    except (tarfile.TarError, *GZIP_ERRORS) as exc:
        raise gzip_error(path, None, exc) from None


def _articles(where: str, text: str) -> Iterator[Located]:
    found = False
    position = 0
    for match in _NITF.finditer(text):
        found = True
        _check_gap(where, text, position, match.start())
        position = match.end()
        line = text.count("\n", 0, match.start()) + 1
        try:
            root = ET.fromstring(match.group(0))
        except ET.ParseError as exc:
            row, column = exc.position
            problem = str(exc).split(": line ")[0]
            raise InputFormatError(
                where, line + row - 1, _SHAPE, f"an XML error at column {column + 1}: {problem}"
            ) from None
        yield Located(_article(where, root, line), line)
    if found:
        _check_gap(where, text, position, len(text))
    elif _NITF_START.search(text):
        _check_gap(where, text, 0, len(text))
    else:
        raise InputFormatError(where, None, _SHAPE, f"no <nitf> element (starts with {shorten(text[:60])})")


def _check_gap(where: str, text: str, start: int, end: int) -> None:
    """Raise unless ``text[start:end]`` (between articles) holds only what may stand there.

    An article cut short (its ``</nitf>`` missing) or damaged (its ``<nitf>`` tag changed) leaves
    its words here; they are reported with their line, never dropped.
    """
    position = start
    while position < end:
        match = _PROLOG.match(text, position, end)
        if match is None or match.end() == position:
            break
        position = match.end()
    if position >= end:
        return
    line = text.count("\n", 0, position) + 1
    cut = _NITF_START.match(text, position)
    found = (
        "a <nitf> without its </nitf> (an article cut short)"
        if cut is not None
        else f"text outside a <nitf> element: {shorten(text[position : min(end, position + 60)])}"
    )
    raise InputFormatError(where, line, _SHAPE, found, hint="is the file complete?" if cut else None)


def _words(element: ET.Element | None) -> str | None:
    """All text under ``element``, text nodes joined by spaces (Anserini's ``getAllText``)."""
    if element is None:
        return None
    return " ".join(" ".join(part.strip() for part in element.itertext()).split())


def _article(where: str, root: ET.Element, line: int) -> Document:
    doc_id = root.find("head/docdata/doc-id")
    docno = None if doc_id is None else doc_id.get("id-string")
    if docno is None:
        raise InputFormatError(where, line, _SHAPE, "an article without <doc-id id-string=...>")
    check_docno(docno.strip(), where, line)
    head = root.find("body/body.head")
    headline = abstract = None
    if head is not None:
        for hl1 in head.iterfind("hedline/hl1"):
            headline = _words(hl1)
        for paragraph in head.iterfind("abstract/p"):
            abstract = _words(paragraph)
    body = None
    for block in root.iterfind("body/body.content/block"):
        if block.get("class") == "full_text":
            paragraphs = [_words(p) or "" for p in block.iterfind("p")]
            body = "\n".join(paragraphs) if paragraphs else None
    text = "\n".join(part for part in (abstract, body) if part is not None)
    return Document(docno.strip(), headline or "", text)
