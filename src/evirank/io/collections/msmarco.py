"""MS MARCO documents (``msmarco-docs.tsv``): ``docid TAB url TAB title TAB body`` per line.

The title is the document's title and the body its text; the URL is kept as the document's source
(stored, shown and linked by the search page), not indexed. (Anserini's MS
MARCO document regressions index ``url + title + body`` from a JSONL conversion; evirank indexes
title and body, the text a re-ranker reads, as the JSONL form of the same documents would be
indexed.) A line with fewer than four columns is an error naming the file and line; a body with
tabs keeps them, with a warning naming the file and the first such line (a line break lost
between two documents looks the same).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "msmarco-docs.tsv"
    >>> _ = path.write_text("D1\\thttp://cats.example/\\tCats\\tCats purr.\\n")
    >>> [located.doc for located in read_msmarco_docs(path)]
    [Document(docno='D1', title='Cats', text='Cats purr.', url='http://cats.example/')]
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections.base import Located
from evirank.io.files import check_docno, iter_lines, open_binary, shorten

logger = logging.getLogger(__name__)

SUFFIXES = (".tsv", ".tsv.gz")
#: In a folder, this file (or its ``.gz``) is the collection; without it, every ``.tsv`` file with
#: four columns is (so that the queries' and qrels' files beside it are left out).
FILE_NAME = "msmarco-docs.tsv"
_SHAPE = "4 tab-separated columns: docid, url, title, body"


def read_msmarco_docs(path: Path) -> Iterator[Located]:
    """The documents of one MS MARCO documents TSV file (plain or ``.gz``)."""
    extra: list[int] = []  # lines with more than four columns
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        columns = line.split("\t", 3)
        if len(columns) < 4:
            raise InputFormatError(path, line_no, _SHAPE, f"{len(columns)} column(s): {shorten(line)}")
        docid, url, title, body = columns
        docno = check_docno(docid.strip(), path, line_no)
        if "\t" in body:
            extra.append(line_no)
        yield Located(Document(docno, title, body, url.strip() or None), line_no)
    if extra:
        logger.warning(
            "%s:%d: more than 4 tab-separated columns on %d line(s); the columns after the third are "
            "read as the body (two documents on one line if a line break was lost: check the file)",
            path, extra[0], len(extra),
        )  # fmt: skip


def count_msmarco_docs(path: Path) -> int:
    """The number of non-blank lines of a file."""
    with open_binary(path) as handle:
        return sum(1 for raw in handle if raw.strip())
