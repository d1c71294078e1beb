"""TREC SGML documents (TREC disks 4 and 5, the Robust04 collection): ``<DOC> ... </DOC>``.

Each ``<DOC>`` names its id in ``<DOCNO>`` (or as ``<DOC id="...">``). What is kept is what
Anserini's ``TrecCollection`` keeps: the fields ``<TEXT>``, ``<HEADLINE>``, ``<TITLE>``, ``<HL>``,
``<HEAD>``, ``<TTL>``, ``<DD>``, ``<DATE>``, ``<LP>`` and ``<LEADPARA>``, in document order,
with their markup removed (:func:`~evirank.io.collections.markup.markup_text`). The headline
fields (``HEADLINE``, ``TITLE``, ``HL``, ``HEAD``, ``TTL``) become the document's title and the
others its text, so title and text together hold the words Anserini indexes; other fields
(``<BYLINE>``, ``<SECTION>``, FBIS's ``<HEADER>``) are left out, as Anserini leaves them out. A
document without any of these fields is read whole, tags removed (Anserini would index it as
empty and skip it). Tag names are matched in any case.

The disks' bytes are not all UTF-8: other bytes are read as U+FFFD, as Java's readers do, with a
warning naming the first such line of each file. Text outside ``<DOC>`` elements, a ``<DOC>``
left open, or one without an id is an error naming the file and line.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "la010189"
    >>> _ = path.write_text("<DOC>\\n<DOCNO> LA010189-0001 </DOCNO>\\n<HEADLINE><P>Cats</P></HEADLINE>\\n"
    ...     "<BYLINE>By A. Writer</BYLINE>\\n<TEXT>\\n<P>Cats &amp; dogs.</P>\\n</TEXT>\\n</DOC>\\n")
    >>> [located.doc for located in read_trec(path)]
    [Document(docno='LA010189-0001', title='Cats', text='Cats & dogs.')]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Generator, Iterator
from pathlib import Path

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections.base import Located
from evirank.io.collections.markup import markup_text
from evirank.io.files import check_docno, iter_lines, open_binary, shorten

logger = logging.getLogger(__name__)

#: The fields Anserini's TrecCollection keeps, and those of them that are headlines (the title).
FIELDS = ("TEXT", "HEADLINE", "TITLE", "HL", "HEAD", "TTL", "DD", "DATE", "LP", "LEADPARA")
TITLE_FIELDS = frozenset({"HEADLINE", "TITLE", "HL", "HEAD", "TTL"})

#: A document longer than this (characters) without its ``</DOC>`` is reported, not buffered.
MAX_DOCUMENT = 64 * 2**20

_START = re.compile(r"<DOC(?:\s[^>]*)?>", re.IGNORECASE)
_START_BYTES = re.compile(rb"<DOC(?:\s[^>]*)?>", re.IGNORECASE)
_END = re.compile(r"</DOC\s*>", re.IGNORECASE)
_DOCNO = re.compile(r"<DOCNO>(.*?)</DOCNO\s*>", re.IGNORECASE | re.DOTALL)
_ID_ATTRIBUTE = re.compile(r"""\bid\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
_FIELD = re.compile(r"<(" + "|".join(FIELDS) + r")>(.*?)(?:</\1\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_FIELD_TAG = re.compile(r"<(/?)(" + "|".join(FIELDS) + r")(\s*)>", re.IGNORECASE)
_MARKUP_ONLY = re.compile(r"<[!?/]?[A-Za-z][^>]*>|<!--.*?-->|<\?.*?\?>", re.DOTALL)
_SHAPE = "TREC documents: <DOC> <DOCNO>id</DOCNO> ... </DOC>"


def read_trec(path: Path) -> Iterator[Located]:
    """The documents of one TREC SGML file (plain or ``.gz``), with the line of each ``<DOC>``."""
    pending: list[str] = []
    size = 0
    first_line = 1  # the line of pending[0]
    for line_no, line in iter_lines(path, errors="replace"):
        if not pending:
            first_line = line_no
        pending.append(line)
        size += len(line) + 1
        if "</doc" not in line.lower():
            if size > MAX_DOCUMENT:
                _too_long(path, "\n".join(pending), first_line)
            continue
        rest, rest_line = yield from _documents(path, "\n".join(pending), first_line)
        pending = [rest] if rest else []
        size = len(rest)
        first_line = rest_line
    if pending:
        rest, rest_line = yield from _documents(path, "\n".join(pending), first_line)
        if rest.strip():
            raise InputFormatError(
                path,
                rest_line,
                "a </DOC> closing the <DOC> of this line",
                "the end of the file",
                hint="is the file complete?",
            )


def count_trec(path: Path) -> int:
    """The number of ``<DOC>`` tags of a file (no parsing)."""
    with open_binary(path) as handle:
        return sum(len(_START_BYTES.findall(raw)) for raw in handle)


def _too_long(path: Path, text: str, first_line: int) -> None:
    start = _START.search(text)
    where = first_line + (text.count("\n", 0, start.start()) if start else 0)
    raise InputFormatError(
        path,
        where,
        "a </DOC> closing the <DOC> of this line",
        f"more than {MAX_DOCUMENT // 2**20} MiB of text without one",
    )


def _documents(path: Path, text: str, first_line: int) -> Generator[Located, None, tuple[str, int]]:
    """Yield the complete documents of ``text``; return what follows the last one, and its line."""
    position = 0

    def line_of(offset: int) -> int:
        return first_line + text.count("\n", 0, offset)

    while True:
        start = _START.search(text, position)
        gap = text[position : start.start() if start else len(text)]
        if gap.strip() and _MARKUP_ONLY.sub("", gap).strip():
            stray = position + len(gap) - len(gap.lstrip())
            raise InputFormatError(
                path, line_of(stray), _SHAPE, f"text outside a document: {shorten(gap.strip())}"
            )
        if start is None:
            return "", line_of(len(text))
        end = _END.search(text, start.end())
        if end is None:
            return text[start.start() :], line_of(start.start())
        nested = _START.search(text, start.end(), end.start())
        if nested is not None:
            raise InputFormatError(
                path,
                line_of(nested.start()),
                f"a </DOC> closing the <DOC> of line {line_of(start.start())} before the next <DOC>",
                "another <DOC>",
            )
        line = line_of(start.start())
        yield Located(_document(path, text[start.start() : end.start()], start.group(0), line), line)
        position = end.end()


def _document(path: Path, chunk: str, start_tag: str, line: int) -> Document:
    """One ``<DOC ...> ... `` (without its ``</DOC>``) as a Document."""
    attribute = _ID_ATTRIBUTE.search(start_tag)
    body = chunk[len(start_tag) :]
    docno_tag = _DOCNO.search(body)
    if attribute is not None:
        docno = attribute.group(1).strip()
    elif docno_tag is not None:
        again = _DOCNO.search(body, docno_tag.end())
        if again is not None:  # two documents read as one: their </DOC> and <DOC> were lost
            raise InputFormatError(
                path, line + body.count("\n", 0, again.start()),
                f"one <DOCNO> in each <DOC> (this one's, line {line}, has its own)",
                f"another <DOCNO>{shorten(again.group(1).strip())}</DOCNO>",
                hint="is a </DOC> or <DOC> missing?",
            )  # fmt: skip
        # the id is not text, wherever it stands: fields before it are kept as those after it
        kept_lines = " " + "\n" * docno_tag.group(0).count("\n")  # so that lines keep their numbers
        docno, body = (
            docno_tag.group(1).strip(),
            body[: docno_tag.start()] + kept_lines + body[docno_tag.end() :],
        )
    else:
        raise InputFormatError(
            path, line, 'a <DOCNO>id</DOCNO> (or <DOC id="...">) in each <DOC>', "a document without one"
        )
    check_docno(docno, path, line)
    _check_fields(path, body, line)
    titles: list[str] = []
    texts: list[str] = []
    for field in _FIELD.finditer(body):
        words = markup_text(field.group(2))
        if words:
            (titles if field.group(1).upper() in TITLE_FIELDS else texts).append(words)
    if not titles and not texts and _FIELD.search(body) is None:
        texts.append(markup_text(body))
    return Document(docno, " ".join(titles), " ".join(texts))


def _check_fields(path: Path, body: str, line: int) -> None:
    """Warn about a kept field closed without being opened: what it held is not read as that field
    (a damaged ``<TEXT>`` tag would otherwise lose the document's text without a word)."""
    open_fields: dict[str, int] = {}
    for tag in _FIELD_TAG.finditer(body):
        name = tag.group(2).upper()
        if not tag.group(1):
            open_fields[name] = open_fields.get(name, 0) + (0 if tag.group(3) else 1)
        elif open_fields.get(name, 0) > 0:
            open_fields[name] -= 1
        else:
            where = line + body.count("\n", 0, tag.start())
            logger.warning(
                "%s:%d: a </%s> without its <%s>: the words before it are not read as that field "
                "(is the document damaged?)",
                path, where, name, name,
            )  # fmt: skip
            return
