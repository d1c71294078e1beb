"""Reading corpora: BEIR folders and JSONL files (BEIR and Pyserini shapes), plain or gzipped.

Accepted line shapes (extra keys are ignored):

- BEIR: ``{"_id": ..., "title": ..., "text": ...}`` (title optional)
- Pyserini: ``{"id": ..., "contents": ...}`` or ``{"id": ..., "title": ..., "text": ...}``

A *corpus path* is a JSONL file (``.jsonl``, ``.jsonl.gz``, any name) or a BEIR folder
holding ``corpus.jsonl`` (or ``corpus.jsonl.gz``). Reading streams: documents are yielded
one at a time, so a corpus of any size fits in memory; only the set of ids seen so far is
kept, to reject duplicates.

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
from pathlib import Path
from typing import Any, Literal

from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io._common import PathLike, iter_lines, json_error, open_binary, shorten, type_name
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


def corpus_file(path: PathLike) -> Path:
    """Resolve a corpus path to its JSONL file: the file itself, or a BEIR folder's ``corpus.jsonl``.

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
            f"{p}: a corpus folder must hold {' or '.join(CORPUS_FILE_NAMES)} (BEIR layout); "
            f"found {sorted(x.name for x in p.iterdir())[:10]}"
        )
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such corpus file or folder")
    return p


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
    docno = str(raw_id)
    if not docno.strip() or docno != docno.strip() or any(c.isspace() for c in docno):
        raise InputFormatError(
            path,
            line_no,
            "a non-empty document id without whitespace (TREC runs separate columns by whitespace)",
            f"id {shorten(docno)}",
        )
    title = _field(record, "title", path, line_no)
    if "contents" in record and "text" not in record:
        text = _field(record, "contents", path, line_no)
    else:
        text = _field(record, "text", path, line_no)
    if not title.strip() and not text.strip():
        raise InputFormatError(
            path,
            line_no,
            'a document with a non-empty "title", "text" or "contents"',
            f"document {shorten(docno)} with no text at all",
            hint="drop the line; a document with only a title is fine",
        )
    return Document(docno, title, text)


def read_corpus(
    path: PathLike, *, check_duplicates: bool = True, empty: Literal["error", "skip"] = "error"
) -> Iterator[Document]:
    """Stream the documents of a corpus (a BEIR folder, or a JSONL / JSONL.gz file).

    Args:
        path: a JSONL file (BEIR or Pyserini shape, optionally gzipped), a BEIR folder, or
            ``irds:<dataset-id>`` (through :mod:`evirank.io.irds`).
        check_duplicates: reject a document id seen before (keeps a set of ids in memory).
        empty: a document with neither title nor text is an error (``"error"``) or is skipped
            with a warning naming its file and line (``"skip"``, what Anserini's indexer does:
            such a document can never be retrieved).

    Yields:
        one :class:`~evirank.frames.Document` per non-blank line, in file order.

    Raises:
        InputFormatError: naming the file and the 1-based line, for malformed JSON, a missing
            or badly typed id or field, a duplicate id, a document with neither title nor
            text, non-UTF-8 bytes, or a file without any document.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.jsonl"
        >>> _ = path.write_text('{"_id": "d1", "title": "Fish", "text": "They swim."}\\n')
        >>> [d.contents for d in read_corpus(path)]
        ['Fish They swim.']
    """
    dataset_id = irds_id(path)
    if dataset_id is not None:
        return load_irds(dataset_id).docs()
    if empty not in ("error", "skip"):
        raise ValueError(f"empty must be 'error' or 'skip', found {empty!r}")
    return _iter_corpus(corpus_file(path), check_duplicates, empty)


def _iter_corpus(file: Path, check_duplicates: bool, empty: str = "error") -> Iterator[Document]:
    seen: dict[str, int] = {}
    count = 0
    skipped = 0
    for line_no, line in iter_lines(file):
        if not line.strip():
            continue
        try:
            doc = parse_document(line, file, line_no)
        except InputFormatError as exc:
            if empty != "skip" or not exc.found.endswith("with no text at all"):
                raise
            skipped += 1
            logger.warning("%s:%d: skipped a document with neither title nor text", file, line_no)
            continue
        if check_duplicates:
            first = seen.setdefault(doc.docno, line_no)
            if first != line_no:
                raise InputFormatError(
                    file,
                    line_no,
                    "unique document ids",
                    f"id {shorten(doc.docno)} again (first on line {first})",
                )
        count += 1
        yield doc
    if skipped:
        logger.warning("%s: skipped %d document(s) with neither title nor text", file, skipped)
    if count == 0:
        raise InputFormatError(file, None, f"at least one JSON document per line ({_SHAPES})", "no documents")
    logger.debug("read %d documents from %s", count, file)


def count_corpus(path: PathLike) -> int:
    """Count the documents of a corpus cheaply (non-blank lines; no JSON parsing).

    Useful for a progress bar's total before a streaming pass.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
        >>> _ = path.write_text('{"id": "a", "contents": "x"}\\n\\n{"id": "b", "contents": "y"}\\n')
        >>> count_corpus(path)
        2
    """
    dataset_id = irds_id(path)
    if dataset_id is not None:
        known = load_irds(dataset_id).docs_count()
        if known is not None:
            return known
        return sum(1 for _ in load_irds(dataset_id).docs())
    file = corpus_file(path)
    count = 0
    with open_binary(file) as handle:
        for raw in handle:
            if raw.strip():
                count += 1
    return count


def load_texts(path: PathLike, docnos: Iterable[str], *, missing: str = "error") -> dict[str, Document]:
    """Read a corpus and keep only the wanted documents (e.g. a run's candidates), by docno.

    One streaming pass over the whole file, under the same rule as ``evirank index``
    (:data:`INDEX_RULE`): a malformed line or a duplicate id anywhere is an error naming its
    line, and a document with neither title nor text is skipped with a warning. Only the
    wanted documents are kept in memory.

    Args:
        path: a corpus path (see :func:`read_corpus`).
        docnos: the ids wanted.
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
        docs = progress(read_corpus(path, **INDEX_RULE), desc="finding texts", unit="doc")
        for doc in docs:
            if doc.docno in wanted:
                found[doc.docno] = doc
    absent = sorted(wanted - found.keys())
    if absent:
        shown = ", ".join(absent[:10]) + (" ..." if len(absent) > 10 else "")
        if missing == "error":
            raise KeyError(
                f"{corpus_file(path)}: {len(absent)} wanted document(s) not in the corpus: {shown}"
            )
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
