"""A persistent score store: score each (model, query, passage) once, reuse it forever.

One SQLite file (WAL journal, so readers never block the writer) holds:

- ``scores``: (fingerprint, query hash, passage hash) -> score, written in chunks while a
  scorer runs, so an interrupted run (Ctrl-C, a killed process) keeps what it finished and a
  rerun scores only what is missing;
- ``texts``: hash -> text, so scores can be read back as text for analysis;
- ``segments``: which (qid, docno, pid) got which query and passage text under a fingerprint,
  written by the scorers, so a document's passages and their scores can be shown
  (:func:`evirank.score.explain`) and whole runs re-aggregated offline
  (:meth:`ScoreStore.passages_scores`);
- ``embeddings``: bi-encoder vectors per (fingerprint, text hash);
- ``fingerprints``: what each fingerprint means (model, settings), for people;
- ``file_hashes``: sha256 of model files by identity (path with device, inode and ctime), size
  and mtime (:func:`evirank.score.fingerprint.file_identity`), so big checkpoints are read once.

Texts are keyed by a 128-bit BLAKE2b hash of their UTF-8 bytes (collisions are out of reach
at any realistic corpus size; the text itself is stored once beside it).

Example:
    >>> import tempfile, pathlib
    >>> store = ScoreStore(pathlib.Path(tempfile.mkdtemp()) / "scores.sqlite")
    >>> fp = store.register("ab12" * 16, kind="cross", description={"model": "demo"})
    >>> store.put_scores(fp, ["what is bm25"], ["BM25 is a ranking function."], [3.5])
    >>> store.get_scores(fp, ["what is bm25"] * 2, ["BM25 is a ranking function.", "Other."]).tolist()
    [3.5, nan]
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from evirank.errors import EvirankError, InputFormatError, InputPathError, OutputNotWritableError
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.outputs import naming_write_failures

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
FINGERPRINT = "fingerprint"
_CHUNK = 500  # rows per executemany / IN-list chunk

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fingerprints (
    id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
    description TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS texts (hash BLOB PRIMARY KEY, text TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scores (
    fp INTEGER NOT NULL, qhash BLOB NOT NULL, phash BLOB NOT NULL, score REAL NOT NULL,
    PRIMARY KEY (fp, qhash, phash)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS embeddings (
    fp INTEGER NOT NULL, hash BLOB NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (fp, hash)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS segments (
    fp INTEGER NOT NULL, qid TEXT NOT NULL, docno TEXT NOT NULL, pid INTEGER NOT NULL,
    qhash BLOB NOT NULL, phash BLOB NOT NULL, written REAL NOT NULL,
    PRIMARY KEY (fp, qid, docno, pid)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS segments_by_doc ON segments (qid, docno);
CREATE TABLE IF NOT EXISTS file_hashes (
    path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL,
    PRIMARY KEY (path, size, mtime_ns)) WITHOUT ROWID;
"""


class FingerprintError(EvirankError, LookupError):
    """A fingerprint (or prefix) matches nothing, or several, in a score store."""


def text_hash(text: str) -> bytes:
    """The 16-byte key of a text (BLAKE2b of its UTF-8 bytes).

    Example:
        >>> len(text_hash("a sentence"))
        16
    """
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def check_sqlite_path(path: str | os.PathLike[str]) -> Path:
    """Check, before any work, that a SQLite score store can be written at ``path`` (a store of
    ours, or a new file in a writable folder).

    Raises:
        InputPathError: ``path`` is a folder.
        OutputNotWritableError: the store (or its folder) cannot be written.
        InputFormatError: a file that is not an evirank score store.
    """
    from evirank.outputs import check_writable

    out = Path(path)
    if out.is_dir():
        raise InputPathError(out, "a score store file (SQLite)", "a folder")
    if out.exists() and not os.access(out, os.R_OK | os.W_OK):
        raise OutputNotWritableError(out, "the score store file is not writable")
    check_ours(out)
    return check_writable(out)


SQLITE_MAGIC = b"SQLite format 3\x00"
_EXPECTED = "an evirank score store (SQLite)"


def check_ours(path: Path) -> None:
    """Raise unless ``path`` is absent, empty, or an evirank score store; never changes the file.

    A file that is not SQLite is recognised by its first bytes; a SQLite database by its tables,
    read through a read-only connection. So a user's own database given as a store is refused
    before anything could write to it (a writable connection would switch its journal to WAL).

    Raises:
        InputFormatError: another kind of file, or another SQLite database.
    """
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise OutputNotWritableError(path, exc.strerror or str(exc)) from None
    if head != SQLITE_MAGIC:
        raise InputFormatError(path, None, _EXPECTED, "a file that is not a SQLite database")
    try:
        conn = _connect_read_only(path, timeout=5.0)
    except sqlite3.Error as exc:
        raise InputFormatError(path, None, _EXPECTED, f"a SQLite file that cannot be read ({exc})") from None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        schema = None
        if "meta" in tables:
            schema = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    except sqlite3.Error as exc:
        raise InputFormatError(path, None, _EXPECTED, f"a damaged SQLite file ({exc})") from None
    finally:
        conn.close()
    if tables and "meta" not in tables:
        shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
        raise InputFormatError(
            path,
            None,
            _EXPECTED,
            f"another SQLite database (tables: {shown}); it was left unchanged",
            hint="give a new path for the score store",
        )
    if tables and (schema is None or schema[0] != SCHEMA_VERSION):
        found = schema[0] if schema else None
        raise InputFormatError(path, None, _EXPECTED, f"schema version {found}, expected {SCHEMA_VERSION}")


def _connect_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """A read-only connection that leaves no ``-wal``/``-shm`` files behind and works on a
    read-only file system.

    Without a ``-wal`` file beside the database (no writer has it open, and the last one
    checkpointed when it closed), the file is opened ``immutable``: SQLite then takes no locks
    and creates no files. With one, a writer may be at work or have died before checkpointing,
    and the scores in the WAL are needed: the file is opened ``mode=ro``, which shares the
    writer's ``-shm`` (both files were there before; nothing new is left).
    """
    uri = path.resolve().as_uri()
    wal = path.with_name(path.name + "-wal")
    if not wal.exists():
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout, check_same_thread=False)
    try:
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout, check_same_thread=False)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:  # a read-only folder without the -shm file
        logger.warning(
            "%s: a -wal file is beside it but cannot be shared on this file system; reading the "
            "main file only (scores not checkpointed yet are not seen)",
            path,
        )
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout, check_same_thread=False)


_open_stores: weakref.WeakSet[ScoreStore] = weakref.WeakSet()
"""The stores open in this process, closed when it exits (see :func:`_close_open_stores`)."""


@atexit.register
def _close_open_stores() -> None:
    """Close every store still open when the process exits.

    A store held by a thread that is still running at exit (the service's worker threads, after a
    Ctrl-C) is never collected, so its connection was never closed and SQLite left ``-wal`` and
    ``-shm`` files beside it. Closing the last connection checkpoints the log into the store and
    removes them; committed scores are kept either way.
    """
    for store in list(_open_stores):
        try:
            if store._lock.acquire(timeout=5):  # a write in flight on another thread finishes first
                try:
                    store._conn.close()
                finally:
                    store._lock.release()
        except Exception:  # exit goes on whatever one store does
            logger.debug("closing %s at exit failed", store.path, exc_info=True)


class ScoreStore:
    """A persistent SQLite store of scores, embeddings and scored segments.

    Args:
        path: the SQLite file; created (with its folder) unless ``readonly``.
        readonly: open an existing store for reading only (``explain``, analysis).
        timeout: seconds to wait for another process's write lock.

    Raises:
        FileNotFoundError: ``readonly`` and no store at ``path``.
        InputFormatError: ``path`` is not an evirank score store.

    Example:
        >>> import tempfile, pathlib
        >>> with ScoreStore(pathlib.Path(tempfile.mkdtemp()) / "s.sqlite") as store:
        ...     store.fingerprints().empty
        True
    """

    def __init__(
        self, path: str | os.PathLike[str], *, readonly: bool = False, timeout: float = 60.0
    ) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.RLock()
        self._fp_ids: dict[str, int] = {}
        if readonly:
            if not self.path.is_file():
                raise FileNotFoundError(f"{self.path}: no score store here")
            check_ours(self.path)
            self._conn = _connect_read_only(self.path, timeout)
        else:
            check_sqlite_path(self.path)  # a file that is not ours is refused unchanged
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._conn = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False)
            except sqlite3.OperationalError as exc:
                raise OutputNotWritableError(self.path, f"SQLite: {exc}") from None
        try:
            self._setup()
        except sqlite3.OperationalError as exc:
            self._conn.close()
            if "readonly" in str(exc) or "unable to open" in str(exc) or "disk I/O" in str(exc):
                raise OutputNotWritableError(self.path, f"SQLite: {exc}") from None
            raise InputFormatError(self.path, None, "an evirank score store (SQLite)", str(exc)) from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise InputFormatError(self.path, None, "an evirank score store (SQLite)", str(exc)) from exc
        _open_stores.add(self)

    def _setup(self) -> None:
        conn = self._conn
        if not self.readonly:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: safe against a killed process
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables and "meta" not in tables:
                raise sqlite3.DatabaseError(f"a SQLite file with other tables: {sorted(tables)}")
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            conn.commit()
        row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {row[0] if row else None}, expected {SCHEMA_VERSION}"
            )

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (committed data is on disk already)."""
        with self._lock:
            self._conn.close()
        _open_stores.discard(self)

    def __enter__(self) -> ScoreStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ScoreStore({str(self.path)!r})"

    def __getstate__(self) -> dict[str, Any]:
        """A pickled store reopens its file on unpickling (connections cannot travel)."""
        return {"path": self.path, "readonly": self.readonly}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], readonly=state["readonly"])  # type: ignore[misc]

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise PermissionError(f"{self.path}: this score store was opened read-only")
        with (
            self._lock,
            naming_write_failures(self.path, kept="the scores stored before are kept (a rerun resumes)"),
        ):
            try:
                yield self._conn
                self._conn.commit()
            except BaseException:
                with suppress(sqlite3.Error):
                    self._conn.rollback()
                raise

    # -- fingerprints ----------------------------------------------------------------
    def register(self, fingerprint: str, *, kind: str, description: Mapping[str, Any]) -> str:
        """Record what ``fingerprint`` means (idempotent; fills in one first seen as ``unknown``)."""
        with self._write() as conn:
            conn.execute(
                "INSERT INTO fingerprints (fingerprint, kind, description, created) VALUES (?,?,?,?)"
                " ON CONFLICT (fingerprint) DO UPDATE"
                " SET kind=excluded.kind, description=excluded.description WHERE fingerprints.kind='unknown'",
                (fingerprint, kind, json.dumps(dict(description), sort_keys=True, default=str), time.time()),
            )
        return fingerprint

    def _fp_id(self, fingerprint: str, create: bool) -> int | None:
        if fingerprint in self._fp_ids:
            return self._fp_ids[fingerprint]
        with self._lock:
            row = self._conn.execute(
                "SELECT id FROM fingerprints WHERE fingerprint=?", (fingerprint,)
            ).fetchone()
        if row is None:
            if not create:
                return None
            self.register(fingerprint, kind="unknown", description={})
            return self._fp_id(fingerprint, create=False)
        self._fp_ids[fingerprint] = int(row[0])
        return int(row[0])

    def fingerprints(self) -> pd.DataFrame:
        """Every fingerprint with its kind, description (a dict), creation time and counts."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT f.fingerprint, f.kind, f.description, f.created,"
                " (SELECT COUNT(*) FROM scores s WHERE s.fp=f.id),"
                " (SELECT COUNT(*) FROM segments g WHERE g.fp=f.id)"
                " FROM fingerprints f ORDER BY f.created, f.id"
            ).fetchall()
        frame = pd.DataFrame(
            rows, columns=[FINGERPRINT, "kind", "description", "created", "scores", "segments"]
        )
        frame["description"] = [json.loads(d) for d in frame["description"]]
        return frame

    def resolve_fingerprint(self, prefix: str) -> str:
        """The one stored fingerprint that starts with ``prefix`` (like a short git hash).

        Raises:
            FingerprintError: none or several match.
        """
        with self._lock:
            found = [
                r[0]
                for r in self._conn.execute(
                    "SELECT fingerprint FROM fingerprints WHERE substr(fingerprint, 1, ?) = ?",
                    (len(prefix), prefix),
                )
            ]
        if len(found) != 1:
            raise FingerprintError(
                f"{self.path}: fingerprint {prefix!r} matches {len(found)} stored fingerprints "
                f"({', '.join(f[:12] for f in found) or 'none'}); expected exactly one"
            )
        return found[0]

    # -- file hash cache (used by evirank.score.fingerprint) --------------------------
    def cached_file_hash(self, path: str, size: int, mtime_ns: int) -> str | None:
        """The sha256 recorded for a file with this path, size and modification time, if any."""
        with self._lock:
            row = self._conn.execute(
                "SELECT sha256 FROM file_hashes WHERE path=? AND size=? AND mtime_ns=?",
                (path, size, mtime_ns),
            ).fetchone()
        return None if row is None else str(row[0])

    def put_file_hash(self, path: str, size: int, mtime_ns: int, sha256: str) -> None:
        """Remember a file's sha256 (ignored on a read-only store)."""
        if self.readonly:
            return
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO file_hashes VALUES (?,?,?,?)", (path, size, mtime_ns, sha256)
            )

    # -- texts and scores ------------------------------------------------------------
    def put_texts(self, texts: Iterable[str], hashes: Iterable[bytes] | None = None) -> None:
        """Store texts by hash (already stored texts are skipped)."""
        texts = list(texts)
        keys = list(hashes) if hashes is not None else [text_hash(t) for t in texts]
        with self._write() as conn:
            for start in range(0, len(texts), _CHUNK):
                conn.executemany(
                    "INSERT OR IGNORE INTO texts VALUES (?,?)",
                    zip(keys[start : start + _CHUNK], texts[start : start + _CHUNK], strict=True),
                )

    def lookup(self, fingerprint: str, qhashes: Sequence[bytes], phashes: Sequence[bytes]) -> np.ndarray:
        """Stored scores of hashed pairs, ``nan`` where a pair has none."""
        out = np.full(len(qhashes), np.nan, dtype=np.float64)
        fp = self._fp_id(fingerprint, create=False)
        if fp is None or not len(qhashes):
            return out
        with self._lock:
            conn = self._conn
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS want (i INTEGER, qhash BLOB, phash BLOB)")
            conn.execute("DELETE FROM want")
            conn.executemany(
                "INSERT INTO want VALUES (?,?,?)", zip(range(len(qhashes)), qhashes, phashes, strict=True)
            )
            rows = conn.execute(
                "SELECT w.i, s.score FROM want w JOIN scores s"
                " ON s.fp=? AND s.qhash=w.qhash AND s.phash=w.phash",
                (fp,),
            ).fetchall()
            conn.execute("DELETE FROM want")
            conn.commit()
        if rows:
            idx, vals = zip(*rows, strict=True)
            out[list(idx)] = vals
        return out

    def put(
        self, fingerprint: str, qhashes: Sequence[bytes], phashes: Sequence[bytes], scores: Sequence[float]
    ) -> None:
        """Store scores of hashed pairs in one transaction (texts go through :meth:`put_texts`)."""
        fp = self._fp_id(fingerprint, create=True)
        rows = [
            (fp, q, p, float(s)) for q, p, s in zip(qhashes, phashes, scores, strict=True) if np.isfinite(s)
        ]
        with self._write() as conn:
            conn.executemany("INSERT OR REPLACE INTO scores VALUES (?,?,?,?)", rows)

    def get_scores(self, fingerprint: str, queries: Sequence[str], passages: Sequence[str]) -> np.ndarray:
        """Stored scores of (query, passage) texts, ``nan`` where missing."""
        return self.lookup(fingerprint, [text_hash(q) for q in queries], [text_hash(p) for p in passages])

    def put_scores(
        self, fingerprint: str, queries: Sequence[str], passages: Sequence[str], scores: Sequence[float]
    ) -> None:
        """Store scores of (query, passage) texts, with the texts."""
        qh = [text_hash(q) for q in queries]
        ph = [text_hash(p) for p in passages]
        self.put_texts([*queries, *passages], [*qh, *ph])
        self.put(fingerprint, qh, ph, scores)

    def count_scores(self, fingerprint: str | None = None) -> int:
        """How many scores are stored (for one fingerprint, or in all)."""
        with self._lock:
            if fingerprint is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM scores").fetchone()[0])
            fp = self._fp_id(fingerprint, create=False)
            if fp is None:
                return 0
            return int(self._conn.execute("SELECT COUNT(*) FROM scores WHERE fp=?", (fp,)).fetchone()[0])

    def score_table(self, fingerprint: str) -> pd.DataFrame:
        """Every stored score of ``fingerprint``: [qhash, phash, score]."""
        fp = self._fp_id(fingerprint, create=False)
        with self._lock:
            rows = self._conn.execute(
                "SELECT qhash, phash, score FROM scores WHERE fp=?", (-1 if fp is None else fp,)
            ).fetchall()
        return pd.DataFrame(rows, columns=["qhash", "phash", "score"]).astype({"score": np.float64})

    def texts(self, hashes: Iterable[bytes] | None = None) -> dict[bytes, str]:
        """Stored texts by hash (only ``hashes`` when given)."""
        with self._lock:
            if hashes is None:
                return {bytes(h): t for h, t in self._conn.execute("SELECT hash, text FROM texts")}
            wanted = list(set(hashes))
            found: dict[bytes, str] = {}
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for h, t in self._conn.execute(
                    f"SELECT hash, text FROM texts WHERE hash IN ({marks})", chunk
                ):
                    found[bytes(h)] = t
            return found

    # -- embeddings ------------------------------------------------------------------
    def embedding_table(self, fingerprint: str) -> pd.DataFrame:
        """Every stored vector of ``fingerprint``: [hash, vector] (float32 arrays)."""
        fp = self._fp_id(fingerprint, create=False)
        with self._lock:
            rows = self._conn.execute(
                "SELECT hash, vector FROM embeddings WHERE fp=?", (-1 if fp is None else fp,)
            ).fetchall()
        return pd.DataFrame(
            {"hash": [h for h, _ in rows], "vector": [np.frombuffer(v, dtype=np.float32) for _, v in rows]}
        )

    def get_embeddings(self, fingerprint: str, hashes: Sequence[bytes]) -> dict[int, np.ndarray]:
        """Stored float32 vectors by position in ``hashes`` (missing positions are absent)."""
        fp = self._fp_id(fingerprint, create=False)
        found: dict[int, np.ndarray] = {}
        if fp is None:
            return found
        position = {h: i for i, h in enumerate(hashes)}
        with self._lock:
            for start in range(0, len(hashes), _CHUNK):
                chunk = list(hashes[start : start + _CHUNK])
                marks = ",".join("?" * len(chunk))
                for key, blob in self._conn.execute(
                    f"SELECT hash, vector FROM embeddings WHERE fp=? AND hash IN ({marks})", (fp, *chunk)
                ):
                    found[position[key]] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_embeddings(
        self, fingerprint: str, hashes: Sequence[bytes], vectors: np.ndarray | Sequence[np.ndarray]
    ) -> None:
        """Store float32 vectors (one per hash; they may differ in length) in one transaction."""
        fp = self._fp_id(fingerprint, create=True)
        rows = [
            (fp, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in zip(hashes, vectors, strict=True)
        ]
        with self._write() as conn:
            conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?,?,?)", rows)

    # -- segments --------------------------------------------------------------------
    def record_segments(
        self,
        fingerprint: str,
        passages: pd.DataFrame,
        qhashes: Sequence[bytes] | None = None,
        phashes: Sequence[bytes] | None = None,
    ) -> None:
        """Remember which (qid, docno, pid) got which query and passage text under ``fingerprint``.

        A document's earlier segments under the same fingerprint are replaced as a whole, so a
        re-segmented document never mixes passages of two segmentations.

        Args:
            fingerprint: the scorer's fingerprint.
            passages: a frame with qid, query, docno, pid, text.
            qhashes: :func:`text_hash` of each row's query (computed when omitted).
            phashes: :func:`text_hash` of each row's text (computed when omitted).
        """
        require_columns(passages, (QID, QUERY, DOCNO, PID, TEXT), "ScoreStore.record_segments")
        fp = self._fp_id(fingerprint, create=True)
        queries = passages[QUERY].astype(str).tolist()
        texts = passages[TEXT].astype(str).tolist()
        qh = list(qhashes) if qhashes is not None else [text_hash(q) for q in queries]
        ph = list(phashes) if phashes is not None else [text_hash(t) for t in texts]
        qids = passages[QID].astype(str).tolist()
        docnos = passages[DOCNO].astype(str).tolist()
        pids = [int(p) for p in passages[PID]]
        now = time.time()
        docs = sorted(set(zip(qids, docnos, strict=True)))
        uniq_text = dict(zip(qh, queries, strict=True)) | dict(zip(ph, texts, strict=True))
        self.put_texts(list(uniq_text.values()), list(uniq_text.keys()))
        with self._write() as conn:
            conn.executemany(
                "DELETE FROM segments WHERE fp=? AND qid=? AND docno=?", [(fp, q, d) for q, d in docs]
            )
            conn.executemany(
                "INSERT OR REPLACE INTO segments VALUES (?,?,?,?,?,?,?)",
                [(fp, *row, now) for row in zip(qids, docnos, pids, qh, ph, strict=True)],
            )

    def segment_table(self, fingerprint: str) -> pd.DataFrame:
        """The recorded segments of ``fingerprint``: [qid, docno, pid, qhash, phash, written]."""
        fp = self._fp_id(fingerprint, create=False)
        with self._lock:
            rows = self._conn.execute(
                "SELECT qid, docno, pid, qhash, phash, written FROM segments WHERE fp=?"
                " ORDER BY qid, docno, pid",
                (-1 if fp is None else fp,),
            ).fetchall()
        return pd.DataFrame(rows, columns=[QID, DOCNO, PID, "qhash", "phash", "written"])

    def passages_scores(
        self,
        fingerprint: str | None = None,
        *,
        qids: Iterable[str] | None = None,
        docnos: Iterable[str] | None = None,
    ) -> pd.DataFrame:
        """Every recorded segment with its texts and score, for analysis or offline aggregation.

        Args:
            fingerprint: one fingerprint (or unique prefix); ``None`` reads them all.
            qids: keep only these queries.
            docnos: keep only these documents.

        Returns:
            A Passages frame [qid, query, docno, pid, text, score, fingerprint], ordered by
            fingerprint, qid, docno, pid; ``score`` is ``nan`` for segments not scored yet.
        """
        where, params = [], []
        if fingerprint is not None:
            where.append("f.fingerprint=?")
            params.append(self.resolve_fingerprint(fingerprint))
        for column, values in (("g.qid", qids), ("g.docno", docnos)):
            if values is not None:
                vals = [str(v) for v in values]
                where.append(f"{column} IN ({','.join('?' * len(vals))})" if vals else "0")
                params.extend(vals)
        sql = (
            "SELECT g.qid, tq.text, g.docno, g.pid, tp.text, s.score, f.fingerprint"
            " FROM segments g JOIN fingerprints f ON f.id=g.fp"
            " JOIN texts tq ON tq.hash=g.qhash JOIN texts tp ON tp.hash=g.phash"
            " LEFT JOIN scores s ON s.fp=g.fp AND s.qhash=g.qhash AND s.phash=g.phash"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY f.fingerprint, g.qid, g.docno, g.pid"
        )
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        frame = pd.DataFrame(rows, columns=[QID, QUERY, DOCNO, PID, TEXT, SCORE, FINGERPRINT])
        frame[PID] = frame[PID].astype(np.int64)
        frame[SCORE] = frame[SCORE].astype(np.float64)
        return frame


@runtime_checkable
class Store(Protocol):
    """What the scorers, ``tune``, ``explain`` and ``serve`` need of a score store.

    Implemented by :class:`ScoreStore` (one SQLite file) and
    :class:`~evirank.score.store_parquet.ParquetScoreStore` (Parquet shards in a folder or at an
    fsspec URL); :func:`open_store` picks one from a location.
    """

    path: Any
    readonly: bool

    def close(self) -> None: ...
    def register(self, fingerprint: str, *, kind: str, description: Mapping[str, Any]) -> str: ...
    def fingerprints(self) -> pd.DataFrame: ...
    def resolve_fingerprint(self, prefix: str) -> str: ...
    def cached_file_hash(self, path: str, size: int, mtime_ns: int) -> str | None: ...
    def put_file_hash(self, path: str, size: int, mtime_ns: int, sha256: str) -> None: ...
    def put_texts(self, texts: Iterable[str], hashes: Iterable[bytes] | None = None) -> None: ...
    def lookup(self, fingerprint: str, qhashes: Sequence[bytes], phashes: Sequence[bytes]) -> np.ndarray: ...
    def put(
        self, fingerprint: str, qhashes: Sequence[bytes], phashes: Sequence[bytes], scores: Sequence[float]
    ) -> None: ...
    def get_scores(self, fingerprint: str, queries: Sequence[str], passages: Sequence[str]) -> np.ndarray: ...
    def put_scores(
        self, fingerprint: str, queries: Sequence[str], passages: Sequence[str], scores: Sequence[float]
    ) -> None: ...
    def count_scores(self, fingerprint: str | None = None) -> int: ...
    def score_table(self, fingerprint: str) -> pd.DataFrame: ...
    def embedding_table(self, fingerprint: str) -> pd.DataFrame: ...
    def segment_table(self, fingerprint: str) -> pd.DataFrame: ...
    def texts(self, hashes: Iterable[bytes] | None = None) -> dict[bytes, str]: ...
    def get_embeddings(self, fingerprint: str, hashes: Sequence[bytes]) -> dict[int, np.ndarray]: ...
    def put_embeddings(
        self, fingerprint: str, hashes: Sequence[bytes], vectors: np.ndarray | Sequence[np.ndarray]
    ) -> None: ...
    def record_segments(
        self,
        fingerprint: str,
        passages: pd.DataFrame,
        qhashes: Sequence[bytes] | None = None,
        phashes: Sequence[bytes] | None = None,
    ) -> None: ...
    def passages_scores(
        self,
        fingerprint: str | None = None,
        *,
        qids: Iterable[str] | None = None,
        docnos: Iterable[str] | None = None,
    ) -> pd.DataFrame: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
