"""The papers' collections as distributed: TREC disks, New York Times, Washington Post, WARC, MS MARCO.

One module per format reads one file into documents with their lines; this module knows which
files of a folder belong to a collection (nested folders, plain or ``.gz``), tells the format of
a path when it is unambiguous (:func:`detect_format`), and reads or counts a whole collection.
:func:`evirank.io.read_corpus` is the one entry point every command uses; it applies the corpus
rule (repeated ids, empty documents) to what these readers yield.

=================  ==========================================  =================================
format             files                                       as distributed for
=================  ==========================================  =================================
``trec``           ``<DOC>`` SGML, any name (``cr``, ``dtd``   Robust04 (TREC disks 4 and 5)
                   folders and ``readme*`` files skipped)
``nyt``            NITF ``.xml`` files or ``.tgz`` archives    Core17 (New York Times)
``wapo``           JSON lines ``.jl`` / ``.jsonl`` / ``.txt``  Core18 (Washington Post v2)
``warc``           ``.warc`` / ``.warc.gz``                    ClueWeb09-B
``msmarco-docs``   ``msmarco-docs.tsv`` (or every ``.tsv``     MS MARCO documents
                   with four columns)
=================  ==========================================  =================================

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "la010189").write_text("<DOC>\\n<DOCNO>LA1</DOCNO>\\n<TEXT>Cats.</TEXT>\\n</DOC>\\n")
    >>> detect_format(folder)
    'trec'
    >>> [(path.name, located.doc.text) for path, located in read_collection(folder, "trec")]
    [('la010189', 'Cats.')]
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from evirank.errors import InputFormatError
from evirank.io.collections import msmarco, nyt, trec, wapo, warc
from evirank.io.collections.base import Located
from evirank.io.files import GZIP_ERRORS, PathLike, gzip_error, open_binary


@dataclass(frozen=True)
class CollectionFormat:
    """A distributed collection format: how to read and count one of its files, and which files are its.

    Attributes:
        name: the ``--format`` name.
        description: what it is, for messages.
        read: one file's documents, with their lines.
        count: one file's number of documents, cheaply.
        accepts: whether a file found in a collection folder is one of its files.
        skip_folders: folder names (lower case) left out when a folder is read.
    """

    name: str
    description: str
    read: Callable[[Path], Iterator[Located]]
    count: Callable[[Path], int]
    accepts: Callable[[Path], bool]
    skip_folders: frozenset[str] = frozenset()


def _not_compressed_by_unix_compress(path: Path) -> bool:
    if re.search(r"\.\d*z$", path.name, re.IGNORECASE) and not path.name.endswith(".gz"):
        raise InputFormatError(
            path,
            None,
            "a plain or gzip-compressed TREC file",
            "a file compressed with Unix compress (.z, .Z, .0z, ...)",
            hint=f"decompress it first: gzip -dc {path} > {path.with_suffix('')} (gzip reads that format)",
        )
    return not path.name.lower().startswith("readme")


FORMATS: dict[str, CollectionFormat] = {
    f.name: f
    for f in (
        CollectionFormat(
            "trec",
            "TREC SGML documents (<DOC> <DOCNO>...</DOCNO> ... </DOC>)",
            trec.read_trec,
            trec.count_trec,
            _not_compressed_by_unix_compress,
            frozenset({"cr", "dtd", "dtds"}),
        ),
        CollectionFormat(
            "nyt",
            "New York Times NITF XML (.xml files or .tgz archives of them)",
            nyt.read_nyt,
            nyt.count_nyt,
            lambda path: path.name.endswith(nyt.FILE_SUFFIXES),
        ),
        CollectionFormat(
            "wapo",
            'Washington Post JSON lines ({"id", "title", "contents": [...]})',
            wapo.read_wapo,
            wapo.count_wapo,
            lambda path: path.name.endswith(wapo.SUFFIXES) and not path.name.lower().startswith("readme"),
        ),
        CollectionFormat(
            "warc",
            "WARC files of web pages (ClueWeb09/12: .warc or .warc.gz)",
            warc.read_warc,
            warc.count_warc,
            lambda path: path.name.endswith(warc.SUFFIXES),
        ),
        CollectionFormat(
            "msmarco-docs",
            "MS MARCO documents TSV (docid, url, title, body)",
            msmarco.read_msmarco_docs,
            msmarco.count_msmarco_docs,
            lambda path: path.name.endswith(msmarco.SUFFIXES) and sniff(_head(path)) == "msmarco-docs",
        ),
    )
}
"""The collection formats by name."""


def collection_files(path: PathLike, format: str) -> list[Path]:
    """The files of a collection: ``path`` itself, or the files of ``format`` under the folder ``path``
    (nested folders included, hidden names and the format's skipped folders left out), sorted.

    Raises:
        InputFormatError: a folder without any file of the format.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> for name in ("fbis/fb1", "cr/cr1", "readme.txt"):
        ...     (folder / name).parent.mkdir(exist_ok=True)
        ...     _ = (folder / name).write_text("")
        >>> [str(p.relative_to(folder)) for p in collection_files(folder, "trec")]
        ['fbis/fb1']
    """
    kind = FORMATS[format]
    root = Path(path)
    if not root.is_dir():
        return [root]
    if format == "msmarco-docs":
        for name in (msmarco.FILE_NAME, msmarco.FILE_NAME + ".gz"):
            if (root / name).is_file():
                return [root / name]
    found: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(
            d for d in subfolders if not d.startswith(".") and d.lower() not in kind.skip_folders
        )
        for name in sorted(names):
            file = Path(folder) / name
            if not name.startswith(".") and kind.accepts(file):
                found.append(file)
    if not found:
        seen = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())[:10]
        raise InputFormatError(root, None, f"{kind.description} in this folder", f"no such file among {seen}")
    return found


def read_collection(path: PathLike, format: str) -> Iterator[tuple[Path, Located]]:
    """Every document of a collection file or folder, with its file and line, in file order."""
    kind = FORMATS[format]
    for file in collection_files(path, format):
        for located in kind.read(file):
            yield file, located


def count_collection(path: PathLike, format: str) -> int:
    """The number of documents of a collection, counted without parsing them (for progress bars)."""
    kind = FORMATS[format]
    total = 0
    for file in collection_files(path, format):
        try:
            total += kind.count(file)
        except GZIP_ERRORS as exc:
            raise gzip_error(file, None, exc) from None
    return total


def _head(path: Path, limit: int = 65536) -> bytes:
    """The first bytes of a file (decompressed), or of an archive's first member."""
    if path.name.endswith(nyt.ARCHIVE_SUFFIXES):
        return b"<nitf"  # only the New York Times is distributed as archives of articles
    try:
        with open_binary(path) as handle:
            return handle.read(limit)
    except (OSError, EOFError, ValueError):
        return b""


_CONTENTS_LIST = re.compile(r'(?<!\\)"contents"\s*:\s*\[')


def sniff(head: bytes) -> str | None:
    """The collection format a file's first bytes show, or ``None`` (JSONL corpora are ``"jsonl"``).

    Example:
        >>> sniff(b"<DOC>\\n<DOCNO> FT911-1 </DOCNO>"), sniff(b"WARC/0.18\\r\\n"), sniff(b"D1\\tu\\tt\\tb\\n")
        ('trec', 'warc', 'msmarco-docs')
        >>> sniff(b'{"id": "a1", "title": "t", "contents": [{"type": "kicker"}]}\\n')
        'wapo'
        >>> sniff(b'{"_id": "d1", "title": "", "text": "x"}\\n'), sniff(b"what is this")
        ('jsonl', None)
    """
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    first = lines[0].strip()
    if first.startswith("{"):
        # A key "contents" whose value is a list (the line may be cut: no JSON parsing).
        return "wapo" if _CONTENTS_LIST.search(first) else "jsonl"
    if first.startswith("WARC/"):
        return "warc"
    if re.match(r"<DOC(?:\s[^>]*)?>", first, re.IGNORECASE):
        return "trec"
    if first.startswith("<") and re.search(r"<nitf\b", text):
        return "nyt"
    if not first.startswith("<") and len(first.split("\t")) >= 4:
        return "msmarco-docs"
    return None


def detect_format(path: PathLike) -> str | None:
    """The collection format of a file or folder, when its first file shows it; ``None`` otherwise.

    A file is recognised by its first non-blank line: ``<DOC>`` (trec), ``<nitf`` after XML
    declarations (nyt), a JSON object whose ``contents`` is a list (wapo; another JSON object is a
    JSONL corpus: ``"jsonl"``), ``WARC/`` (warc), four or more tab-separated columns (msmarco-docs).
    A folder is recognised by its first file (in sorted order) that is recognised.
    """
    root = Path(path)
    if not root.is_dir():
        return sniff(_head(root)) if root.is_file() else None
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or name.lower().startswith("readme"):
                continue
            found = sniff(_head(Path(folder) / name))
            if found is not None:
                return found
    return None
