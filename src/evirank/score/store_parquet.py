"""A score store that machines can share: a folder of Parquet shards, local or on any fsspec URL.

A SQLite file cannot take writes from several machines; object stores (S3, GCS) and shared
file systems can take many files. :class:`ParquetScoreStore` keeps the same content as
:class:`~evirank.score.store.ScoreStore`, keyed the same way (the scorer's fingerprint plus
the 16-byte hashes of the query and passage texts), as append-only shards::

    STORE/
      store.json                         {"format": "evirank-score-store", "version": 1}
      fingerprints/<fingerprint>.json    kind, description, created
      scores/<fingerprint>/<name>.parquet      qhash, phash (binary 16), score (float64)
      embeddings/<fingerprint>/<name>.parquet  hash (binary 16), vector (list<float32>)
      segments/<fingerprint>/<name>.parquet    qid, docno, pid, qhash, phash, written
      texts/<name>.parquet                     hash (binary 16), text
      file_hashes/<key>.json                   sha256 of model files by file identity, size, mtime

Every shard is written under a temporary name (``.tmp-...``, never read) and renamed into
place, so a reader sees a shard whole or not at all; a killed writer leaves at most a
temporary file. A shard's name is the hash of its content, so writing the same results twice
(a Ray task retried after a lost worker) gives the same file and nothing is counted twice.
Readers take the union of the shards; a pair found in several shards has one score (the
same key always gets the same score from the same fingerprint). ``evirank store merge``
compacts many small shards into few.

Example:
    >>> import tempfile
    >>> store = ParquetScoreStore(tempfile.mkdtemp() + "/scores")
    >>> fp = store.register("ab12" * 16, kind="cross", description={"model": "demo"})
    >>> store.put_scores(fp, ["what is bm25"], ["BM25 is a ranking function."], [3.5])
    >>> store.get_scores(fp, ["what is bm25"] * 2, ["BM25 is a ranking function.", "Other."]).tolist()
    [3.5, nan]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evirank.errors import InputFormatError
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.outputs import naming_write_failures
from evirank.score.store import FINGERPRINT, FingerprintError, text_hash

logger = logging.getLogger(__name__)

FORMAT = "evirank-score-store"
VERSION = 1
_TMP = ".tmp-"

_SCORES = pa.schema([("qhash", pa.binary(16)), ("phash", pa.binary(16)), ("score", pa.float64())])
_TEXTS = pa.schema([("hash", pa.binary(16)), ("text", pa.string())])
_EMBEDDINGS = pa.schema([("hash", pa.binary(16)), ("vector", pa.list_(pa.float32()))])
_SEGMENTS = pa.schema(
    [
        (QID, pa.string()),
        (DOCNO, pa.string()),
        (PID, pa.int64()),
        ("qhash", pa.binary(16)),
        ("phash", pa.binary(16)),
        ("written", pa.float64()),
    ]
)


def is_parquet_store(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a Parquet-shard store rather than a SQLite file.

    A URL (``s3://``, ``gs://``, ``memory://``, ``file://``) or an existing folder is a Parquet
    store; an existing file is SQLite; a new path is SQLite when it ends in ``.sqlite``,
    ``.sqlite3`` or ``.db``, else a Parquet folder.

    Example:
        >>> is_parquet_store("runs/bm25.txt.scores.sqlite"), is_parquet_store("s3://bucket/scores")
        (False, True)
    """
    text = os.fspath(location)
    if "://" in text:
        return True
    if os.path.isdir(text):
        return True
    if os.path.exists(text):
        return False
    return os.path.splitext(text)[1].lower() not in (".sqlite", ".sqlite3", ".db")


def _key(qhashes: Iterable[bytes], phashes: Iterable[bytes]) -> list[bytes]:
    return [q + p for q, p in zip(qhashes, phashes, strict=True)]


class ParquetScoreStore:
    """A score store made of Parquet shards in a folder or at an fsspec URL.

    Args:
        location: a local folder or a URL (``s3://bucket/scores``: needs ``s3fs``; ``gs://``:
            ``gcsfs``); created unless ``readonly``.
        readonly: open an existing store for reading only.
        storage_options: passed to fsspec (credentials, endpoint).

    Raises:
        FileNotFoundError: ``readonly`` and no store at ``location``.
        InputFormatError: ``location`` holds something else than an evirank store.

    Example:
        >>> import tempfile
        >>> with ParquetScoreStore(tempfile.mkdtemp() + "/s") as store:
        ...     store.fingerprints().empty
        True
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        readonly: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        from fsspec.core import url_to_fs

        self.location = os.fspath(location)
        self.path = self.location  # what messages name, as ScoreStore.path
        self.readonly = readonly
        self.storage_options = dict(storage_options or {})
        self._fs, self._root = url_to_fs(self.location, **self.storage_options)
        self._root = self._root.rstrip("/")
        self._lock = threading.RLock()
        manifest = f"{self._root}/store.json"
        if self._fs.exists(manifest):
            try:
                info = json.loads(self._fs.cat_file(manifest))
            except ValueError as exc:
                raise InputFormatError(manifest, None, "an evirank score store manifest", str(exc)) from exc
            if info.get("format") != FORMAT or int(info.get("version", -1)) != VERSION:
                raise InputFormatError(
                    manifest, None, f"format {FORMAT!r} version {VERSION}", f"{info!r:.200}"
                )
        elif readonly:
            raise FileNotFoundError(f"{self.location}: no score store here")
        else:
            if self._fs.exists(self._root) and self._fs.ls(self._root, detail=False):
                raise InputFormatError(
                    self.location, None, "an empty folder or an evirank Parquet score store", "other files"
                )
            self._fs.makedirs(self._root, exist_ok=True)
            self._write_bytes(manifest, json.dumps({"format": FORMAT, "version": VERSION}).encode())

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Nothing to close: every write is already a finished file."""

    def __enter__(self) -> ParquetScoreStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ParquetScoreStore({self.location!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"location": self.location, "readonly": self.readonly, "options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["location"], readonly=state["readonly"], storage_options=state["options"]
        )

    # -- files -----------------------------------------------------------------------
    def _check_writable(self) -> None:
        if self.readonly:
            raise PermissionError(f"{self.location}: this score store was opened read-only")

    def _write_bytes(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` atomically: a temporary name, then a rename."""
        # Not outputs.atomic_file: the store may be any fsspec file system (S3, GCS), where the
        # temporary must be written and moved through fsspec.
        folder, name = path.rsplit("/", 1)
        tmp = f"{folder}/{_TMP}{uuid.uuid4().hex}-{name}"
        with naming_write_failures(
            self.location, kept="the shards written before are kept (a rerun resumes)"
        ):
            try:
                self._fs.makedirs(folder, exist_ok=True)
                with self._fs.open(tmp, "wb") as handle:
                    handle.write(data)
                self._fs.mv(tmp, path)
            except BaseException:
                with suppress(Exception):
                    if self._fs.exists(tmp):
                        self._fs.rm(tmp)
                raise

    def _write_table(self, folder: str, table: pa.Table) -> str:
        """Write one shard named by its content; returns its path (an existing one is kept)."""
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        data = sink.getvalue().to_pybytes()
        name = hashlib.blake2b(data, digest_size=16).hexdigest()
        path = f"{self._root}/{folder}/{name}.parquet"
        if not self._fs.exists(path):
            self._write_bytes(path, data)
        return path

    def shards(self, folder: str) -> list[str]:
        """Finished shards under ``folder`` (relative to the store), sorted by name."""
        base = f"{self._root}/{folder}"
        if not self._fs.exists(base):
            return []
        names = [str(p) for p in self._fs.find(base, detail=False)]
        return sorted(
            p for p in names if p.endswith(".parquet") and not p.rsplit("/", 1)[-1].startswith(_TMP)
        )

    def _read(self, path: str, columns: list[str] | None = None) -> pa.Table:
        """A shard, checked against its name: a shard is named by the hash of its bytes, so a
        damaged or cut one is found for certain (never read as other scores) and named."""
        data = self._fs.cat_file(path)
        name = path.rsplit("/", 1)[-1].removesuffix(".parquet")
        if hashlib.blake2b(data, digest_size=16).hexdigest() != name:
            raise InputFormatError(
                path,
                None,
                "a shard whose bytes match its name (the hash of its content)",
                f"other bytes ({len(data):,} of them): the file is damaged or cut short",
                hint="delete it; a rerun computes what it held again",
            )
        try:
            return pq.read_table(pa.BufferReader(data), columns=columns)
        except (pa.ArrowException, OSError) as exc:  # pragma: no cover - a shard that hashes right reads
            raise InputFormatError(path, None, "a Parquet shard", f"{type(exc).__name__}: {exc}") from exc

    def _tables(self, folder: str, columns: list[str] | None = None) -> Iterator[pa.Table]:
        for path in self.shards(folder):
            yield self._read(path, columns)

    # -- fingerprints ----------------------------------------------------------------
    def register(self, fingerprint: str, *, kind: str, description: Mapping[str, Any]) -> str:
        """Record what ``fingerprint`` means (idempotent; fills in one first seen as ``unknown``)."""
        path = f"{self._root}/fingerprints/{fingerprint}.json"
        if self._fs.exists(path):
            known = json.loads(self._fs.cat_file(path))
            if known.get("kind") != "unknown" or kind == "unknown":
                return fingerprint
        self._check_writable()
        record = {"kind": kind, "description": dict(description), "created": time.time()}
        self._write_bytes(path, json.dumps(record, sort_keys=True, default=str).encode())
        return fingerprint

    def _known(self) -> dict[str, dict[str, Any]]:
        base = f"{self._root}/fingerprints"
        found: dict[str, dict[str, Any]] = {}
        if not self._fs.exists(base):
            return found
        for path in self._fs.ls(base, detail=False):
            name = str(path).rsplit("/", 1)[-1]
            if name.endswith(".json") and not name.startswith(_TMP):
                found[name[: -len(".json")]] = json.loads(self._fs.cat_file(path))
        return found

    def fingerprints(self) -> pd.DataFrame:
        """Every fingerprint with its kind, description (a dict), creation time and counts."""
        rows = []
        for fingerprint, info in self._known().items():
            rows.append(
                (
                    fingerprint,
                    info.get("kind", "unknown"),
                    info.get("description", {}),
                    float(info.get("created", 0.0)),
                    self.count_scores(fingerprint),
                    len(self.segment_table(fingerprint)),  # current segments, not rows of every shard
                )
            )
        frame = pd.DataFrame(
            rows, columns=[FINGERPRINT, "kind", "description", "created", "scores", "segments"]
        )
        return frame.sort_values(["created", FINGERPRINT], kind="stable").reset_index(drop=True)

    def resolve_fingerprint(self, prefix: str) -> str:
        """The one stored fingerprint that starts with ``prefix``.

        Raises:
            FingerprintError: none or several match.
        """
        found = sorted(f for f in self._known() if f.startswith(prefix))
        if len(found) != 1:
            raise FingerprintError(
                f"{self.location}: fingerprint {prefix!r} matches {len(found)} stored fingerprints "
                f"({', '.join(f[:12] for f in found) or 'none'}); expected exactly one"
            )
        return found[0]

    # -- file hash cache -------------------------------------------------------------
    def _file_key(self, path: str, size: int, mtime_ns: int) -> str:
        digest = hashlib.blake2b(f"{path}\0{size}\0{mtime_ns}".encode(), digest_size=16).hexdigest()
        return f"{self._root}/file_hashes/{digest}.json"

    def cached_file_hash(self, path: str, size: int, mtime_ns: int) -> str | None:
        """The sha256 recorded for a file with this path, size and modification time, if any."""
        key = self._file_key(path, size, mtime_ns)
        if not self._fs.exists(key):
            return None
        return str(json.loads(self._fs.cat_file(key))["sha256"])

    def put_file_hash(self, path: str, size: int, mtime_ns: int, sha256: str) -> None:
        """Remember a file's sha256 (ignored on a read-only store)."""
        if self.readonly:
            return
        record = {"path": path, "size": size, "mtime_ns": mtime_ns, "sha256": sha256}
        self._write_bytes(self._file_key(path, size, mtime_ns), json.dumps(record).encode())

    # -- texts and scores ------------------------------------------------------------
    def put_texts(self, texts: Iterable[str], hashes: Iterable[bytes] | None = None) -> None:
        """Store texts by hash in one shard."""
        texts = list(texts)
        keys = list(hashes) if hashes is not None else [text_hash(t) for t in texts]
        if not texts:
            return
        self._check_writable()
        unique = dict(zip(keys, texts, strict=True))
        table = pa.table({"hash": list(unique), "text": list(unique.values())}, schema=_TEXTS)
        self._write_table("texts", table)

    def lookup(self, fingerprint: str, qhashes: Sequence[bytes], phashes: Sequence[bytes]) -> np.ndarray:
        """Stored scores of hashed pairs, ``nan`` where a pair has none (reads one shard at a time)."""
        out = np.full(len(qhashes), np.nan, dtype=np.float64)
        if not len(qhashes):
            return out
        wanted = pa.array(_key(qhashes, phashes), type=pa.binary())
        for table in self._tables(f"scores/{fingerprint}"):
            keys = pc.binary_join_element_wise(
                pc.cast(table["qhash"], pa.binary()), pc.cast(table["phash"], pa.binary()), b""
            )
            keep = pc.is_in(keys, value_set=wanted)
            if not pc.any(keep).as_py():
                continue
            found = keys.filter(keep)
            values = table["score"].filter(keep).to_numpy()
            positions = pc.index_in(wanted, value_set=found).fill_null(-1).to_numpy()
            idx = np.flatnonzero(positions >= 0)
            out[idx] = values[positions[idx]]
        return out

    def put(
        self, fingerprint: str, qhashes: Sequence[bytes], phashes: Sequence[bytes], scores: Sequence[float]
    ) -> None:
        """Store scores of hashed pairs as one shard (non-finite scores are left out)."""
        self._check_writable()
        values = np.asarray(scores, dtype=np.float64)
        keep = np.isfinite(values)
        if not keep.any():
            return
        if not self._fs.exists(f"{self._root}/fingerprints/{fingerprint}.json"):
            self.register(fingerprint, kind="unknown", description={})
        table = pa.table(
            {
                "qhash": [q for q, k in zip(qhashes, keep, strict=True) if k],
                "phash": [p for p, k in zip(phashes, keep, strict=True) if k],
                "score": values[keep],
            },
            schema=_SCORES,
        )
        self._write_table(f"scores/{fingerprint}", table)

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

    def score_table(self, fingerprint: str) -> pd.DataFrame:
        """Every distinct stored score of ``fingerprint``: [qhash, phash, score]."""
        tables = list(self._tables(f"scores/{fingerprint}"))
        if not tables:
            return pd.DataFrame({"qhash": [], "phash": [], "score": np.array([], dtype=np.float64)})
        frame = pa.concat_tables(tables).to_pandas()
        return frame.drop_duplicates(["qhash", "phash"], keep="last").reset_index(drop=True)

    def count_scores(self, fingerprint: str | None = None) -> int:
        """How many distinct scores are stored (for one fingerprint, or in all)."""
        chosen = [fingerprint] if fingerprint is not None else list(self._known())
        return sum(len(self.score_table(f)) for f in chosen)

    # -- embeddings ------------------------------------------------------------------
    def get_embeddings(self, fingerprint: str, hashes: Sequence[bytes]) -> dict[int, np.ndarray]:
        """Stored float32 vectors by position in ``hashes`` (missing positions are absent)."""
        found: dict[int, np.ndarray] = {}
        if not len(hashes):
            return found
        position = {h: i for i, h in enumerate(hashes)}
        wanted = pa.array(list(position), type=pa.binary(16))
        for table in self._tables(f"embeddings/{fingerprint}"):
            keep = pc.is_in(table["hash"], value_set=wanted)
            for key, vector in zip(
                table["hash"].filter(keep).to_pylist(), table["vector"].filter(keep).to_pylist(), strict=True
            ):
                found[position[key]] = np.asarray(vector, dtype=np.float32)
        return found

    def embedding_table(self, fingerprint: str) -> pd.DataFrame:
        """Every stored vector of ``fingerprint``: [hash, vector] (float32 arrays)."""
        tables = list(self._tables(f"embeddings/{fingerprint}"))
        if not tables:
            return pd.DataFrame({"hash": [], "vector": []})
        frame = pa.concat_tables(tables).to_pandas()
        frame["vector"] = [np.asarray(v, dtype=np.float32) for v in frame["vector"]]
        return frame.drop_duplicates("hash", keep="last").reset_index(drop=True)

    def put_embeddings(
        self, fingerprint: str, hashes: Sequence[bytes], vectors: np.ndarray | Sequence[np.ndarray]
    ) -> None:
        """Store float32 vectors (one per hash; they may differ in length) as one shard."""
        self._check_writable()
        rows = [np.asarray(v, dtype=np.float32) for v in vectors]
        table = pa.table({"hash": list(hashes), "vector": rows}, schema=_EMBEDDINGS)
        self._write_table(f"embeddings/{fingerprint}", table)

    # -- segments --------------------------------------------------------------------
    def record_segments(
        self,
        fingerprint: str,
        passages: pd.DataFrame,
        qhashes: Sequence[bytes] | None = None,
        phashes: Sequence[bytes] | None = None,
    ) -> None:
        """Remember which (qid, docno, pid) got which query and passage text under ``fingerprint``.

        A later shard replaces a document's earlier segments as a whole when read.
        """
        require_columns(passages, (QID, QUERY, DOCNO, PID, TEXT), "ParquetScoreStore.record_segments")
        self._check_writable()
        queries = passages[QUERY].astype(str).tolist()
        texts = passages[TEXT].astype(str).tolist()
        qh = list(qhashes) if qhashes is not None else [text_hash(q) for q in queries]
        ph = list(phashes) if phashes is not None else [text_hash(t) for t in texts]
        self.put_texts([*queries, *texts], [*qh, *ph])
        table = pa.table(
            {
                QID: passages[QID].astype(str).tolist(),
                DOCNO: passages[DOCNO].astype(str).tolist(),
                PID: np.asarray(passages[PID], dtype=np.int64),
                "qhash": qh,
                "phash": ph,
                "written": np.full(len(passages), time.time()),
            },
            schema=_SEGMENTS,
        )
        self._write_table(f"segments/{fingerprint}", table)

    def segment_table(self, fingerprint: str) -> pd.DataFrame:
        """The current segments of ``fingerprint`` (each document's latest recording)."""
        tables = list(self._tables(f"segments/{fingerprint}"))
        if not tables:
            return _SEGMENTS.empty_table().to_pandas()
        frame = pa.concat_tables(tables).to_pandas()
        latest = frame.groupby([QID, DOCNO])["written"].transform("max")
        frame = frame[frame["written"] == latest]
        return frame.drop_duplicates([QID, DOCNO, PID], keep="last").reset_index(drop=True)

    def texts(self, hashes: Iterable[bytes] | None = None) -> dict[bytes, str]:
        """Stored texts by hash (only ``hashes`` when given)."""
        wanted = None if hashes is None else pa.array(list(set(hashes)), type=pa.binary(16))
        found: dict[bytes, str] = {}
        for table in self._tables("texts"):
            if wanted is not None:
                table = table.filter(pc.is_in(table["hash"], value_set=wanted))
            found.update(zip(table["hash"].to_pylist(), table["text"].to_pylist(), strict=True))
        return found

    def passages_scores(
        self,
        fingerprint: str | None = None,
        *,
        qids: Iterable[str] | None = None,
        docnos: Iterable[str] | None = None,
    ) -> pd.DataFrame:
        """Every recorded segment with its texts and score (as :meth:`ScoreStore.passages_scores`)."""
        chosen = [self.resolve_fingerprint(fingerprint)] if fingerprint is not None else list(self._known())
        keep_q = None if qids is None else {str(q) for q in qids}
        keep_d = None if docnos is None else {str(d) for d in docnos}
        frames = []
        for fp in chosen:
            seg = self.segment_table(fp)
            if keep_q is not None:
                seg = seg[seg[QID].isin(keep_q)]
            if keep_d is not None:
                seg = seg[seg[DOCNO].isin(keep_d)]
            if seg.empty:
                continue
            texts = self.texts([*seg["qhash"], *seg["phash"]])
            scores = self.lookup(fp, seg["qhash"].tolist(), seg["phash"].tolist())
            frames.append(
                pd.DataFrame(
                    {
                        QID: seg[QID].to_numpy(),
                        QUERY: [texts[h] for h in seg["qhash"]],
                        DOCNO: seg[DOCNO].to_numpy(),
                        PID: seg[PID].astype(np.int64).to_numpy(),
                        TEXT: [texts[h] for h in seg["phash"]],
                        SCORE: scores,
                        FINGERPRINT: fp,
                    }
                )
            )
        columns = [QID, QUERY, DOCNO, PID, TEXT, SCORE, FINGERPRINT]
        if not frames:
            empty = pd.DataFrame({c: [] for c in columns})
            empty[PID] = empty[PID].astype(np.int64)
            empty[SCORE] = empty[SCORE].astype(np.float64)
            return empty
        frame = pd.concat(frames, ignore_index=True)
        return frame.sort_values([FINGERPRINT, QID, DOCNO, PID], kind="stable").reset_index(drop=True)
