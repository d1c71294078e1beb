"""Reading corpora: BEIR folders, JSONL files (BEIR and Pyserini shapes), and the papers' collections.

Accepted JSONL line shapes (extra keys are ignored):

- BEIR: ``{"_id": ..., "title": ..., "text": ...}`` (title optional)
- Pyserini: ``{"id": ..., "contents": ...}`` or ``{"id": ..., "title": ..., "text": ...}``

A *corpus path* is a JSONL file (``.jsonl``, ``.jsonl.gz``, any name), a BEIR folder holding
``corpus.jsonl`` (or ``corpus.jsonl.gz``), ``irds:<dataset-id>``, or a file or folder of a
collection as distributed (:mod:`evirank.io.collections`: TREC SGML, New York Times XML,
Washington Post JSON lines, WARC, MS MARCO documents TSV), its format given or detected
(:func:`corpus_format`). Reading streams: documents are yielded one at a time, so a corpus of
any size fits in memory; only the set of ids seen so far is kept, to reject duplicates. Every
format goes through :func:`read_corpus` and the same rule (repeated ids, empty documents).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.jsonl"
    >>> _ = path.write_text('{"id": "d1", "contents": "Fish swim."}\\n')
    >>> list(read_corpus(path))
    [Document(docno='d1', title='', text='Fish swim.')]
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from evirank.config.values import check_unicode_record
from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections import FORMATS, count_collection, detect_format, read_collection
from evirank.io.collections.base import Located
from evirank.io.files import (
    PathLike,
    check_docno,
    iter_lines,
    json_error,
    open_binary,
    shorten,
    type_name,
)
from evirank.io.irds import irds_id, load_irds
from evirank.outputs import atomic_output
from evirank.progress import progress

logger = logging.getLogger(__name__)

CORPUS_FILE_NAMES = ("corpus.jsonl", "corpus.jsonl.gz")
INDEX_RULE: dict[str, Any] = {"check_duplicates": True, "empty": "skip"}
"""How every command reads a corpus by default (``index``, ``rerank --corpus``): a duplicate id
or a malformed line is an error; a document with neither title nor text is skipped, with a
warning naming its line (it can never be retrieved)."""
_SHAPES = '{"_id", "title", "text"} (BEIR), {"id", "contents"} or {"id", "title", "text"} (Pyserini)'
#: Every format a corpus path may be read in: JSONL corpora and BEIR folders (``jsonl``, or
#: ``beir``: the same reader), and the collection formats of :mod:`evirank.io.collections`.
CORPUS_FORMATS = ("jsonl", "beir", *FORMATS)


@dataclass
class CorpusTally:
    """What a read of a corpus found, filled in as :func:`read_corpus` streams it.

    Attributes:
        source: the corpus path.
        files: the files read so far.
        read: the documents yielded.
        skipped: the documents skipped (neither title nor text), each named in a warning.
        complete: whether the whole corpus was read.

    Example:
        >>> tally = CorpusTally("c.jsonl", files=1, read=2, skipped=1, complete=True)
        >>> tally.summary()
        'c.jsonl: read 3 documents from 1 file: 2 kept, 1 skipped (neither title nor text)'
    """

    source: str = ""
    files: int = 0
    read: int = 0
    skipped: int = 0
    complete: bool = False

    def summary(self) -> str:
        """One line for the log: documents read, kept and skipped."""
        total = self.read + self.skipped
        return (
            f"{self.source}: read {total} document{'s' * (total != 1)} from {self.files} "
            f"file{'s' * (self.files != 1)}: {self.read} kept, "
            f"{self.skipped} skipped (neither title nor text)"
        )


def corpus_file(path: PathLike) -> Path:
    """Resolve a JSONL corpus path to its file: the file itself, or a BEIR folder's ``corpus.jsonl``.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "corpus.jsonl").write_text("")
        >>> corpus_file(folder).name
        'corpus.jsonl'
    """
    p = Path(path)
    if p.is_dir():
        for name in CORPUS_FILE_NAMES:
            if (p / name).is_file():
                return p / name
        raise FileNotFoundError(
            f"{p}: a corpus folder must hold {' or '.join(CORPUS_FILE_NAMES)} (BEIR layout), or the "
            f"files of a collection ({', '.join(FORMATS)}: give --format when they are not recognised); "
            f"found {sorted(x.name for x in p.iterdir())[:10]}"
        )
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such corpus file or folder")
    return p


def corpus_format(path: PathLike, format: str | None = None) -> str:
    """The format ``path`` is read in: ``format`` when given, else what the path shows.

    ``irds:`` ids are ``"irds"``; a BEIR folder, and a file no collection format recognises, are
    ``"jsonl"`` (its reader then says what is wrong); a folder is a collection when its first
    recognised file says which (:func:`evirank.io.collections.detect_format`). ``beir`` is
    ``jsonl``.

    Raises:
        ValueError: an unknown format, or a format given for an ``irds:`` id.
        FileNotFoundError: no such path, or a folder that is neither a BEIR folder nor a
            recognised collection.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "docs.tsv"
        >>> _ = path.write_text("D1\\thttp://x/\\tCats\\tCats purr.\\n")
        >>> corpus_format(path), corpus_format(path, "beir")
        ('msmarco-docs', 'jsonl')
    """
    if format is not None and format not in CORPUS_FORMATS:
        raise ValueError(f"unknown corpus format {format!r}; expected one of {', '.join(CORPUS_FORMATS)}")
    if irds_id(path) is not None:
        if format is not None:
            raise ValueError(f"{path}: an ir_datasets id carries its own format; give no format for it")
        return "irds"
    if format is not None:
        return "jsonl" if format == "beir" else format
    p = Path(path)
    if p.is_dir() and not any((p / name).is_file() for name in CORPUS_FILE_NAMES):
        found = detect_format(p)
        if found is None or found == "jsonl":
            corpus_file(p)  # raises: says what a corpus folder holds
        return found or "jsonl"
    corpus_file(p)  # raises for a missing path
    return detect_format(p) or "jsonl"


def _field(record: dict[str, Any], key: str, path: Path, line_no: int) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputFormatError(
            path, line_no, f'"{key}" to be a string', f"{type_name(value)}: {shorten(value)}"
        )
    return value


def parse_document(line: str, path: Path, line_no: int) -> Document:
    """Parse one JSONL line into a :class:`Document` (see the module docstring for the shapes).

    Raises:
        InputFormatError: malformed JSON, no id, an id or field of the wrong type, or neither
            title nor text.

    Example:
        >>> parse_document('{"_id": "d1", "title": "Fish", "text": ""}', Path("c.jsonl"), 1)
        Document(docno='d1', title='Fish', text='')
    """
    doc = _parse_record(line, path, line_no)
    if not doc.title.strip() and not doc.text.strip():
        raise _empty_error("jsonl", path, line_no, doc.docno)
    return doc


def _parse_record(line: str, path: Path, line_no: int) -> Document:
    """One JSONL line as a Document, empty or not."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, too-long integers, deep nesting
        raise InputFormatError(path, line_no, "one JSON object per line", json_error(exc)) from None
    if not isinstance(record, dict):
        raise InputFormatError(path, line_no, f"a JSON object {_SHAPES}", type_name(record))
    key = "_id" if "_id" in record else "id" if "id" in record else "docid" if "docid" in record else None
    if key is None:
        raise InputFormatError(
            path, line_no, f'a document id ("_id" or "id"); shapes: {_SHAPES}', f"keys {sorted(record)}"
        )
    raw_id = record[key]
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise InputFormatError(
            path, line_no, f'"{key}" to be a string', f"{type_name(raw_id)}: {shorten(raw_id)}"
        )
    docno = check_docno(str(raw_id), path, line_no)
    title = _field(record, "title", path, line_no)
    if "contents" in record and "text" not in record:
        text = _field(record, "contents", path, line_no)
    else:
        text = _field(record, "text", path, line_no)
    url = record.get("url")
    check_unicode_record(
        {"id": docno, "title": title, "text": text, "url": url if isinstance(url, str) else ""}, path, line_no
    )
    return Document(docno, title, text, url if isinstance(url, str) and url.strip() else None)


def _empty_error(format: str, path: PathLike, line_no: int | None, docno: str) -> InputFormatError:
    if format == "jsonl":
        return InputFormatError(
            path,
            line_no,
            'a document with a non-empty "title", "text" or "contents"',
            f"document {shorten(docno)} with no text at all",
            hint="drop the line; a document with only a title is fine",
        )
    return InputFormatError(
        path,
        line_no,
        f"a document with some text ({FORMATS[format].description})",
        f"document {shorten(docno)} with no text at all",
    )


def read_corpus(
    path: PathLike,
    *,
    format: str | None = None,
    check_duplicates: bool = True,
    empty: Literal["error", "skip"] = "error",
    tally: CorpusTally | None = None,
) -> Iterator[Document]:
    """Stream the documents of a corpus: JSONL, a BEIR folder, ``irds:``, or a collection as distributed.

    Args:
        path: a JSONL file (BEIR or Pyserini shape, optionally gzipped), a BEIR folder,
            ``irds:<dataset-id>`` (through :mod:`evirank.io.irds`), or a file or folder of a
            collection format (:mod:`evirank.io.collections`; folders are read recursively).
        format: one of :data:`CORPUS_FORMATS`; by default the path says (:func:`corpus_format`).
        check_duplicates: reject a document id seen before (keeps a set of ids in memory).
        empty: a document with neither title nor text is an error (``"error"``) or is skipped
            with a warning naming its file and line (``"skip"``, what Anserini's indexer does:
            such a document can never be retrieved).
        tally: filled in with the documents read and skipped, for a summary (not for ``irds:``).

    Yields:
        one :class:`~evirank.frames.Document` per document, in file order (files sorted).

    Raises:
        InputFormatError: naming the file and the 1-based line, for malformed JSON, XML or
            SGML, a missing or badly typed id or field, a duplicate id, a document with
            neither title nor text, non-UTF-8 bytes (TREC and WARC files read them as
            U+FFFD, as Anserini does), or a corpus without any document.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.jsonl"
        >>> _ = path.write_text('{"_id": "d1", "title": "Fish", "text": "They swim."}\\n')
        >>> [d.contents for d in read_corpus(path)]
        ['Fish They swim.']
    """
    if empty not in ("error", "skip"):
        raise ValueError(f"empty must be 'error' or 'skip', found {empty!r}")
    form = corpus_format(path, format)
    if form == "irds":
        return load_irds(str(irds_id(path))).docs()
    tally = tally if tally is not None else CorpusTally()
    if form == "jsonl":
        file = corpus_file(path)
        tally.source = str(file)
        return _checked(_jsonl_records(file), form, file, check_duplicates, empty, tally)
    tally.source = str(path)
    return _checked(read_collection(path, form), form, Path(path), check_duplicates, empty, tally)


def _jsonl_records(file: Path) -> Iterator[tuple[Path, Located]]:
    for line_no, line in iter_lines(file):
        if line.strip():
            yield file, Located(_parse_record(line, file, line_no), line_no)


def _checked(
    records: Iterator[tuple[Path, Located]],
    format: str,
    source: Path,
    check_duplicates: bool,
    empty: str,
    tally: CorpusTally,
) -> Iterator[Document]:
    """The corpus rule, the same for every format: repeated ids and (unless skipped) empty documents
    are errors naming their file and line; a corpus without documents is an error."""
    files: dict[Path, int] = {}
    seen: dict[str, int] = {}  # docno -> file number * 2**40 + line
    count = 0
    skipped = 0
    for file, (doc, line) in records:
        number = files.setdefault(file, len(files))
        tally.files = len(files)
        if not doc.title.strip() and not doc.text.strip():
            if empty != "skip":
                raise _empty_error(format, file, line, doc.docno)
            skipped += 1
            tally.skipped = skipped
            logger.warning("%s:%s: skipped a document with neither title nor text", file, line)
            continue
        if check_duplicates:
            where = seen.setdefault(doc.docno, number * 2**40 + (line or 0))
            if where != number * 2**40 + (line or 0):
                first_file, first_line = divmod(where, 2**40)
                place = "" if first_file == number else f" in {list(files)[first_file]}"
                raise InputFormatError(
                    file,
                    line,
                    "unique document ids",
                    f"id {shorten(doc.docno)} again (first{place} on line {first_line})",
                )
        count += 1
        tally.read = count
        yield doc
    tally.complete = True
    if skipped:
        logger.warning("%s: skipped %d document(s) with neither title nor text", source, skipped)
    if count == 0:
        shape = (
            f"JSON document per line ({_SHAPES})"
            if format == "jsonl"
            else f"document ({FORMATS[format].description})"
        )
        raise InputFormatError(source, None, f"at least one {shape}", "no documents")
    logger.debug("read %d documents from %s", count, source)


def count_corpus(path: PathLike, *, format: str | None = None) -> int:
    """Count the documents of a corpus cheaply (non-blank JSONL lines, ``<DOC>`` tags, ...; no parsing).

    Useful for a progress bar's total before a streaming pass.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> _ = path.write_text('{"id": "a", "contents": "x"}\\n\\n{"id": "b", "contents": "y"}\\n')
        >>> count_corpus(path)
        2
    """
    form = corpus_format(path, format)
    if form == "irds":
        dataset = load_irds(str(irds_id(path)))
        known = dataset.docs_count()
        return known if known is not None else sum(1 for _ in dataset.docs())
    if form != "jsonl":
        return count_collection(path, form)
    file = corpus_file(path)
    count = 0
    with open_binary(file) as handle:
        for raw in handle:
            if raw.strip():
                count += 1
    return count


def load_texts(
    path: PathLike, docnos: Iterable[str], *, format: str | None = None, missing: str = "error"
) -> dict[str, Document]:
    """Read a corpus and keep only the wanted documents (e.g. a run's candidates), by docno.

    One streaming pass over the whole file, under the same rule as ``evirank index``
    (:data:`INDEX_RULE`): a malformed line or a duplicate id anywhere is an error naming its
    line, and a document with neither title nor text is skipped with a warning. Only the
    wanted documents are kept in memory.

    Args:
        path: a corpus path (see :func:`read_corpus`).
        docnos: the ids wanted.
        format: the corpus format (default: detected, see :func:`corpus_format`).
        missing: ``"error"`` raises :class:`KeyError` listing wanted ids absent from the
            corpus; ``"ignore"`` leaves them out (logged at WARNING).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> _ = path.write_text('{"id": "a", "contents": "x"}\\n{"id": "b", "contents": "y"}\\n')
        >>> load_texts(path, ["b"])["b"].text
        'y'
    """
    if missing not in ("error", "ignore"):
        raise ValueError(f"missing must be 'error' or 'ignore', not {missing!r}")
    wanted = {str(d) for d in docnos}
    found: dict[str, Document] = {}
    if wanted:
        docs = progress(read_corpus(path, format=format, **INDEX_RULE), desc="finding texts", unit="doc")
        for doc in docs:
            if doc.docno in wanted:
                found[doc.docno] = doc
    absent = sorted(wanted - found.keys())
    if absent:
        shown = ", ".join(absent[:10]) + (" ..." if len(absent) > 10 else "")
        if missing == "error":
            source = corpus_file(path) if corpus_format(path, format) == "jsonl" else path
            raise KeyError(f"{source}: {len(absent)} wanted document(s) not in the corpus: {shown}")
        logger.warning("%s: %d wanted document(s) not in the corpus: %s", path, len(absent), shown)
    return found


def write_corpus(
    docs: Iterable[Document],
    path: PathLike,
    *,
    shape: str = "beir",
    overwrite: bool = False,
) -> int:
    """Write documents as JSONL, atomically (``.gz`` is gzipped); returns how many were written.

    Args:
        docs: the documents (any iterable; streamed).
        path: the output file.
        shape: ``"beir"`` writes ``{"_id", "title", "text"}``; ``"pyserini"`` writes
            ``{"id", "contents"}`` with title and text joined (:attr:`Document.contents`).
        overwrite: replace an existing file.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> write_corpus([Document("d1", "T", "x")], path, shape="pyserini")
        1
        >>> path.read_text()
        '{"id": "d1", "contents": "T x"}\\n'
    """
    if shape not in ("beir", "pyserini"):
        raise ValueError(f"shape must be 'beir' or 'pyserini', not {shape!r}")
    out = Path(path)
    count = 0
    with atomic_output(out, overwrite=overwrite) as tmp:
        opener = gzip.open if out.name.endswith(".gz") else open
        with opener(tmp, "wt", encoding="utf-8", newline="\n") as handle:
            for doc in docs:
                if shape == "beir":
                    record = {"_id": doc.docno, "title": doc.title, "text": doc.text}
                else:
                    record = {"id": doc.docno, "contents": doc.contents}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    logger.info("wrote %d documents to %s", count, out)
    return count
