"""The two kinds of score store behind one door: a SQLite file (:class:`~evirank.score.store.ScoreStore`)
or a folder or URL of Parquet shards (:class:`~evirank.score.store_parquet.ParquetScoreStore`).

:func:`open_store` opens either by its location, :func:`check_store_path` checks before any work
that one can be written there, and :func:`copy_store` copies between any two (merge, export).

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> type(open_store(folder / "s.sqlite")).__name__, type(open_store(folder / "shards")).__name__
    ('ScoreStore', 'ParquetScoreStore')
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evirank.errors import InputPathError
from evirank.frames import DOCNO, PID, QID, QUERY, TEXT
from evirank.score.store import FINGERPRINT, ScoreStore, Store, check_sqlite_path
from evirank.score.store_parquet import ParquetScoreStore, is_parquet_store

logger = logging.getLogger(__name__)


def check_store_path(path: str | os.PathLike[str]) -> Path:
    """Check, before any work, that a score store can be opened for writing at ``path``.

    A URL or a folder (or a new path without a SQLite suffix) is a Parquet-shard store
    (:func:`open_store`); a local one must be writable.

    Raises:
        InputPathError: ``path`` is a folder that holds other files than a Parquet-shard store.
        OutputNotWritableError: the store (or its folder) cannot be written.

    Example:
        >>> import tempfile
        >>> check_store_path(tempfile.mkdtemp() + "/scores.sqlite").name
        'scores.sqlite'
    """
    from evirank.outputs import check_writable

    out = Path(path)
    if is_parquet_store(path):  # a folder or URL of Parquet shards
        if "://" in os.fspath(path):
            return out  # checked when opened
        if out.is_dir() and not (out / "store.json").is_file() and any(out.iterdir()):
            raise InputPathError(
                out,
                "a score store (a SQLite file, or a folder of Parquet shards)",
                "a folder with other files",
            )
        return check_writable(out / "store.json")
    return check_sqlite_path(out)


def open_store(location: Store | str | os.PathLike[str], *, readonly: bool = False) -> Store:
    """The score store at ``location``: a SQLite file, or a Parquet-shard folder or URL.

    A URL (``s3://``, ``gs://``, ``memory://``, ``file://``) or an existing folder opens a
    :class:`~evirank.score.store_parquet.ParquetScoreStore`; an existing file, or a new path
    ending in ``.sqlite``, ``.sqlite3`` or ``.db``, a :class:`ScoreStore`; any other new path
    becomes a Parquet folder. A store object is returned as it is.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> type(open_store(folder / "s.sqlite")).__name__, type(open_store(folder / "shards")).__name__
        ('ScoreStore', 'ParquetScoreStore')
    """
    if isinstance(location, Store):
        return location
    if is_parquet_store(location):
        return ParquetScoreStore(location, readonly=readonly)
    return ScoreStore(location, readonly=readonly)


#: Rows per write when copying a store (one Parquet shard each).
COPY_ROWS = 500_000


def copy_store(source: Store, dest: Store, fingerprints: Sequence[str] | None = None) -> dict[str, int]:
    """Copy fingerprints, scores, embeddings, segments and their texts from ``source`` into ``dest``.

    Works between any two kinds (SQLite to Parquet shards and back, or merging several stores);
    what ``dest`` holds already is kept and not written again, so copying the same store twice
    adds nothing the second time (a Parquet store gains no new shard). A document whose segments
    differ in the two stores keeps the more recent recording.

    Args:
        source: the store to read.
        dest: the store to write.
        fingerprints: copy only these (full fingerprints or unique prefixes); all when None.

    Returns:
        Counts copied (new in ``dest``): fingerprints, scores, embeddings, segments.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> a = open_store(folder / "a.sqlite")
        >>> a.put_scores(a.register("ab" * 32, kind="cross", description={}), ["q"], ["p"], [1.0])
        >>> shards = open_store(folder / "shards")
        >>> copy_store(a, shards)["scores"], copy_store(a, shards)["scores"]
        (1, 0)
    """
    table = source.fingerprints()
    chosen = (
        list(table[FINGERPRINT])
        if fingerprints is None
        else [source.resolve_fingerprint(f) for f in fingerprints]
    )
    described = table.set_index(FINGERPRINT)
    known = set(dest.fingerprints()[FINGERPRINT])
    counts = {"fingerprints": 0, "scores": 0, "embeddings": 0, "segments": 0}
    for fp in chosen:
        row = described.loc[fp]
        dest.register(fp, kind=str(row["kind"]), description=dict(row["description"]))
        counts["fingerprints"] += fp not in known
        scores = source.score_table(fp)
        for start in range(0, len(scores), COPY_ROWS):
            part = scores.iloc[start : start + COPY_ROWS]
            qhashes, phashes = part["qhash"].tolist(), part["phash"].tolist()
            missing = np.isnan(dest.lookup(fp, qhashes, phashes))
            if missing.any():
                part = part[missing]
                dest.put(fp, part["qhash"].tolist(), part["phash"].tolist(), part["score"].tolist())
                counts["scores"] += int(missing.sum())
        vectors = source.embedding_table(fp)
        for start in range(0, len(vectors), COPY_ROWS):
            part = vectors.iloc[start : start + COPY_ROWS]
            have = dest.get_embeddings(fp, part["hash"].tolist())
            part = part[[i not in have for i in range(len(part))]]
            if part.empty:
                continue
            hashes = part["hash"].tolist()
            texts = source.texts(hashes)
            dest.put_texts(texts.values(), texts.keys())
            dest.put_embeddings(fp, hashes, np.stack(part["vector"].tolist()))
            counts["embeddings"] += len(part)
        segments = _newer_segments(source.segment_table(fp), dest.segment_table(fp))
        # cut between documents only: a document's segments are recorded (replaced) as a whole
        new_doc = (
            np.flatnonzero(
                (segments[QID].to_numpy()[1:] != segments[QID].to_numpy()[:-1])
                | (segments[DOCNO].to_numpy()[1:] != segments[DOCNO].to_numpy()[:-1])
            )
            + 1
        )
        cuts, last = [], 0
        for boundary in new_doc.tolist():
            if boundary - last >= COPY_ROWS:
                cuts.append(boundary)
                last = boundary
        for part in np.split(np.arange(len(segments)), cuts) if len(segments) else []:
            part = segments.iloc[part]
            texts = source.texts([*part["qhash"], *part["phash"]])
            frame = part[[QID, DOCNO, PID]].assign(
                **{QUERY: [texts[h] for h in part["qhash"]], TEXT: [texts[h] for h in part["phash"]]}
            )
            dest.record_segments(fp, frame, part["qhash"].tolist(), part["phash"].tolist())
        counts["segments"] += len(segments)
    return counts


def _newer_segments(source: pd.DataFrame, dest: pd.DataFrame) -> pd.DataFrame:
    """The documents of ``source`` whose segments ``dest`` lacks, or holds otherwise and older.

    Both are segment tables [qid, docno, pid, qhash, phash, written]; the result keeps
    ``source``'s rows of those documents, sorted by qid, docno, pid.
    """
    source = source.sort_values([QID, DOCNO, PID], kind="stable").reset_index(drop=True)
    if dest.empty or source.empty:
        return source

    def documents(frame: pd.DataFrame) -> pd.DataFrame:
        keyed = frame.assign(
            _seg=[
                f"{p}:{bytes(q).hex()}:{bytes(h).hex()}"
                for p, q, h in zip(frame[PID], frame["qhash"], frame["phash"], strict=True)
            ]
        )
        return keyed.groupby([QID, DOCNO], sort=False).agg(
            segs=("_seg", lambda v: "|".join(sorted(v))), written=("written", "max")
        )

    mine, theirs = documents(source), documents(dest)
    joined = mine.merge(theirs, left_index=True, right_index=True, how="left", suffixes=("", "_dest"))
    wanted = joined["segs_dest"].isna() | (
        (joined["segs"] != joined["segs_dest"]) & (joined["written"] > joined["written_dest"])
    )
    keys = set(joined.index[wanted.to_numpy()])
    if len(keys) == len(joined):
        return source
    chosen = [(q, d) in keys for q, d in zip(source[QID], source[DOCNO], strict=True)]
    return source[chosen].reset_index(drop=True)
