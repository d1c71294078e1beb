"""Write documents in the papers' distributed formats, as the tests' own fixtures.

Each writer spreads the documents over several files (some gzip-compressed, some in nested
folders), escaping text as the format needs, so that reading the folder back must give the same
titles and texts (whitespace aside) as the documents' JSONL form.
"""

from __future__ import annotations

import gzip
import html
import io
import json
import tarfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

from evirank.frames import Document


def _open_text(path: Path, compressed: bool) -> io.TextIOBase:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compressed:
        return gzip.open(path.with_name(path.name + ".gz"), "wt", encoding="utf-8")  # type: ignore[return-value]
    return path.open("w", encoding="utf-8")


def _split(docs: Sequence[Document], parts: int) -> list[list[Document]]:
    return [list(docs[i::parts]) for i in range(parts)]


def write_trec(docs: Sequence[Document], folder: Path, *, files: int = 3) -> Path:
    """TREC SGML: ``<DOC>``s with ``<HEADLINE>`` and ``<TEXT>``, over ``files`` files in two folders,
    every other file gzipped; plus a ``cr/`` folder and a ``readme`` that readers must skip."""
    for number, part in enumerate(_split(docs, files)):
        path = folder / ("fbis" if number % 2 else "latimes") / f"part{number:02d}"
        with _open_text(path, compressed=number % 2 == 0) as handle:
            for doc in part:
                handle.write(f"<DOC>\n<DOCNO> {doc.docno} </DOCNO>\n<DOCID> {number} </DOCID>\n")
                if doc.title:
                    handle.write(
                        f"<HEADLINE>\n<P>\n{html.escape(doc.title, quote=False)}\n</P>\n</HEADLINE>\n"
                    )
                handle.write("<BYLINE>\nBy Somebody Else\n</BYLINE>\n")
                handle.write(f"<TEXT>\n<P>\n{html.escape(doc.text, quote=False)}\n</P>\n</TEXT>\n</DOC>\n")
    skipped = folder / "cr" / "cr93e1"
    skipped.parent.mkdir(parents=True, exist_ok=True)
    skipped.write_text(f"<DOC>\n<DOCNO> {docs[0].docno} </DOCNO>\n<TEXT>\nCongress.\n</TEXT>\n</DOC>\n")
    (folder / "readme.txt").write_text("TREC disks: not documents.\n")
    return folder


def nitf(doc: Document) -> str:
    """One New York Times NITF article."""
    title = f"<hedline><hl1>{xml_escape(doc.title)}</hl1></hedline>" if doc.title else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE nitf SYSTEM "http://www.nitf.org/IPTC/NITF/3.3/specification/dtd/nitf-3-3.dtd">\n'
        '<nitf change.date="June 10, 2005" change.time="19:30" version="-//IPTC//DTD NITF 3.3//EN">\n'
        f'<head><title>{xml_escape(doc.title)}</title><docdata><doc-id id-string="{doc.docno}"/>'
        "</docdata></head>\n<body><body.head>"
        f'{title}<byline class="print_byline">By A. Writer</byline></body.head>\n<body.content>'
        f'<block class="lead_paragraph"><p>{xml_escape(doc.text[:40])}</p></block>\n'
        f'<block class="full_text"><p>{xml_escape(doc.text)}</p></block>'
        "</body.content></body>\n</nitf>\n"
    )


def write_nyt(docs: Sequence[Document], folder: Path) -> Path:
    """NITF XML: one article per file in dated folders (every third gzipped), the last third of
    the documents packed in a ``.tgz`` archive, as the corpus is distributed."""
    packed = len(docs) - len(docs) // 3
    for number, doc in enumerate(docs[:packed]):
        path = folder / "1987" / f"{number % 12 + 1:02d}" / f"{number:07d}.xml"
        with _open_text(path, compressed=number % 3 == 2) as handle:
            handle.write(nitf(doc))
    if packed < len(docs):
        with tarfile.open(folder / "1988.tgz", "w:gz") as archive:
            for number, doc in enumerate(docs[packed:], start=packed):
                data = nitf(doc).encode("utf-8")
                member = tarfile.TarInfo(f"1988/01/01/{number:07d}.xml")
                member.size = len(data)
                archive.addfile(member, io.BytesIO(data))
    return folder


def wapo_article(doc: Document) -> dict[str, object]:
    """One Washington Post article: the text in two paragraphs, with items readers must skip."""
    cut = doc.text.find(". ") + 1 or len(doc.text)
    paragraphs = [p for p in (doc.text[:cut], doc.text[cut:]) if p.strip()]
    items: list[object] = [
        {"content": doc.title, "mime": "text/plain", "type": "title"},
        {"content": "By A. Writer", "mime": "text/plain", "type": "byline"},
        {"content": 1325376000000, "mime": "text/plain", "type": "date"},
        None,
    ]
    items += [
        {
            "content": html.escape(p, quote=False),
            "mime": "text/html",
            "type": "sanitized_html",
            "subtype": "paragraph",
        }
        for p in paragraphs
    ]
    return {
        "id": doc.docno,
        "article_url": f"https://www.washingtonpost.com/{doc.docno}",
        "title": doc.title or None,
        "author": "A. Writer",
        "published_date": 1325376000000,
        "contents": items,
        "type": "article",
        "source": "The Washington Post",
    }


def write_wapo(docs: Sequence[Document], folder: Path, *, files: int = 2) -> Path:
    """Washington Post JSON lines over ``files`` files (the first gzipped)."""
    for number, part in enumerate(_split(docs, files)):
        with _open_text(folder / "data" / f"wapo-{number}.jl", compressed=number == 0) as handle:
            for doc in part:
                handle.write(json.dumps(wapo_article(doc), ensure_ascii=False) + "\n")
    (folder / "data" / "readme.txt").write_text("The TREC Washington Post Corpus.\n")
    return folder


def write_msmarco_docs(docs: Sequence[Document], folder: Path, *, files: int = 2) -> Path:
    """MS MARCO documents TSV (docid, url, title, body) over ``files`` files (the last gzipped)."""
    for number, part in enumerate(_split(docs, files)):
        with _open_text(folder / f"docs-{number}.tsv", compressed=number == files - 1) as handle:
            for doc in part:
                title, body = (" ".join(s.split()) for s in (doc.title, doc.text))
                handle.write(f"{doc.docno}\thttp://example.com/{doc.docno}\t{title}\t{body}\n")
    return folder


def warc_record(doc: Document) -> bytes:
    """One ClueWeb09 response record: HTTP headers, then an HTML page."""
    page = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nServer: Apache\r\n\r\n"
        f"<html><head><title>{html.escape(doc.title)}</title><script>var ignored = 1;</script></head>"
        f"<body><div><p>{html.escape(doc.text)}</p></div></body></html>"
    ).encode()
    head = (
        "WARC/0.18\r\nWARC-Type: response\r\nWARC-Target-URI: http://example.com/\r\n"
        f"WARC-Record-ID: <urn:uuid:{doc.docno}>\r\nWARC-TREC-ID: {doc.docno}\r\n"
        f"Content-Type: application/http;msgtype=response\r\nContent-Length: {len(page)}\r\n\r\n"
    ).encode()
    return head + page + b"\r\n\r\n"


def write_warc(docs: Sequence[Document], folder: Path, *, files: int = 2) -> Path:
    """WARC files (``.warc.gz``, the last plain ``.warc``), each opening with a ``warcinfo`` record."""
    info = b"software: Nutch 1.0-dev\r\nisPartOf: clueweb09-en\r\n"
    warcinfo = b"WARC/0.18\r\nWARC-Type: warcinfo\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n" % (len(info), info)
    for number, part in enumerate(_split(docs, files)):
        data = warcinfo + b"".join(warc_record(doc) for doc in part)
        path = folder / "en0000" / f"{number:02d}.warc"
        path.parent.mkdir(parents=True, exist_ok=True)
        if number < files - 1:
            with gzip.open(path.with_name(path.name + ".gz"), "wb") as handle:
                handle.write(data)
        else:
            path.write_bytes(data)
    return folder


WRITERS = {
    "trec": write_trec,
    "nyt": write_nyt,
    "wapo": write_wapo,
    "msmarco-docs": write_msmarco_docs,
    "warc": write_warc,
}
"""The writer of each collection format."""
