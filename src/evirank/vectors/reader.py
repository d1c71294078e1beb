"""Reading a passage-vector folder: identity checks, (docno, pid) -> row lookups, float32 vectors.

The matrix is memory-mapped (``np.load(..., mmap_mode="r")``): opening a folder reads its passage
table, not its vectors, and a lookup touches only the rows it asks for.

Example:
    >>> vectors = PassageVectors.open("indexes/scifact/vectors")  # doctest: +SKIP
    >>> rows = vectors.lookup(["4983", "4983"], [0, 1])  # doctest: +SKIP
    >>> vectors.vectors(rows).shape  # doctest: +SKIP
    (2, 384)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.checksums import has_checksums, verify_checksums
from evirank.errors import InputFormatError
from evirank.vectors.manifest import (
    PASSAGES,
    VECTORS,
    VectorsIdentity,
    identity_of,
    mismatch,
    read_manifest,
    segment_spec,
)

logger = logging.getLogger(__name__)


class PassageVectors:
    """A complete passage-vector folder, opened for lookups.

    Use :meth:`open`; the constructor takes what it reads.

    Attributes:
        path: the folder.
        manifest: its ``manifest.json``.
        identity: model fingerprint and segmenter.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], table: Any, matrix: np.ndarray) -> None:
        self.path = path
        self.manifest = manifest
        self.identity: VectorsIdentity = identity_of(manifest)
        self._table = table
        self._matrix = matrix
        docnos = table.column("docno").to_numpy(zero_copy_only=False)
        n = len(docnos)
        starts = np.flatnonzero(np.r_[True, docnos[1:] != docnos[:-1]]) if n else np.zeros(0, np.int64)
        self._doc_index = pd.Index(docnos[starts]) if n else pd.Index([], dtype=object)
        self._starts = starts.astype(np.int64)
        self._counts = np.diff(np.r_[starts, n]).astype(np.int64)
        self._texts: np.ndarray | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> PassageVectors:
        """Open a complete vector folder.

        Raises:
            FileNotFoundError: no such folder or no manifest (an unfinished build has only
                ``PATH.partial``: run the build again to finish it).
            InputFormatError: a manifest of another format, or files that disagree with it.
            DamagedArtefactError: a file differs from the size and sha256 recorded when the
                folder was made (checked once per process while the file is unchanged).
        """
        folder = Path(path)
        if not folder.is_dir():
            partial = folder.with_name(folder.name + ".partial")
            hint = (
                f" (an unfinished build is at {partial}: run it again to finish)" if partial.is_dir() else ""
            )
            raise FileNotFoundError(f"{folder}: no passage-vector folder{hint}")
        manifest = read_manifest(folder)
        if not manifest.get("complete", False):
            raise InputFormatError(folder, None, "a complete vector folder", '"complete": false')
        if has_checksums(folder):
            verify_checksums(
                folder,
                "passage-vector folder",
                "embed the collection again (`evirank embed ... --overwrite`, or `evirank index --embed`)",
            )
        else:
            logger.info("%s has no checksums (an older evirank made it): its files are not checked", folder)
        from evirank.extras import require

        pq = require("pyarrow.parquet", "core")
        table = pq.read_table(folder / PASSAGES, columns=["docno", "pid", "text"])
        matrix = np.load(folder / VECTORS, mmap_mode="r")
        expected = (manifest.get("passages"), manifest.get("dim"))
        if (
            matrix.ndim != 2
            or (matrix.shape[0], matrix.shape[1]) != expected
            or table.num_rows != matrix.shape[0]
        ):
            raise InputFormatError(
                folder / VECTORS,
                None,
                f"{expected[0]} passages of {expected[1]} dimensions (manifest.json) and as many table rows",
                f"a matrix of shape {matrix.shape} and {table.num_rows} table rows",
            )
        return cls(folder, manifest, table, matrix)

    def __len__(self) -> int:
        return int(self._matrix.shape[0])

    def __repr__(self) -> str:
        return f"PassageVectors({str(self.path)!r}, {len(self)} passages, {self.identity.name()})"

    @property
    def dim(self) -> int:
        """Dimensions of a vector."""
        return int(self._matrix.shape[1])

    @property
    def documents(self) -> int:
        """Documents with passages."""
        return len(self._doc_index)

    def check(self, *, fingerprint: str | None = None, segment: Any = None, model: Any = None) -> None:
        """Raise :class:`~evirank.vectors.manifest.VectorsMismatchError` unless the vectors were made alike.

        Args:
            fingerprint: the querying bi-encoder's fingerprint (not checked when None).
            segment: the querying segmenter or its spec (not checked when None).
            model: the querying bi-encoder's description (or name), for the message.
        """
        wanted = VectorsIdentity(
            fingerprint if fingerprint is not None else self.identity.fingerprint,
            segment_spec(segment) if segment is not None else self.identity.segment,
            model if isinstance(model, dict) else {"model": str(model) if model is not None else "?"},
        )
        if not self.identity.matches(wanted):
            raise mismatch(self.path, self.identity, wanted)

    def check_scorer(self, scorer: Any, segment: Any = None) -> None:
        """:meth:`check` against a bi-encoder (its fingerprint and description) and a segmenter."""
        describe = getattr(scorer, "describe", None)
        self.check(
            fingerprint=str(scorer.fingerprint),
            segment=segment,
            model=dict(describe()) if describe is not None else repr(scorer),
        )

    def lookup(self, docnos: Sequence[str] | np.ndarray, pids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The rows of (docno, pid) passages: int64, ``-1`` where a passage is not stored.

        Example:
            >>> vectors.lookup(["d1", "nope"], [0, 0])  # doctest: +SKIP
            array([ 0, -1])
        """
        pid = np.asarray(pids, dtype=np.int64)
        where = self._doc_index.get_indexer(pd.Index(np.asarray(docnos, dtype=object)))
        found = where >= 0
        safe = np.where(found, where, 0)
        ok = found & (pid >= 0) & (pid < (self._counts[safe] if len(self._counts) else 0))
        return np.where(ok, (self._starts[safe] if len(self._starts) else 0) + pid, -1).astype(np.int64)

    def document_of(self, rows: np.ndarray) -> np.ndarray:
        """The document position (0 .. :attr:`documents` - 1, in row order) of each of ``rows``.

        A document's passages are consecutive rows, so this is a binary search over their first rows.

        Example:
            >>> vectors.docnos(vectors.document_of(np.array([0, 1])))  # doctest: +SKIP
            array(['d1', 'd1'], dtype=object)
        """
        index = np.asarray(rows, dtype=np.int64)
        if len(index) and (index.min() < 0 or index.max() >= len(self)):
            raise IndexError(f"rows must be within 0..{len(self) - 1}")
        return (np.searchsorted(self._starts, index, side="right") - 1).astype(np.int64)

    def docnos(self, positions: np.ndarray) -> np.ndarray:
        """The docnos of document positions (see :meth:`document_of`), as an object array."""
        return np.asarray(self._doc_index, dtype=object)[np.asarray(positions, dtype=np.int64)]

    @property
    def matrix(self) -> np.ndarray:
        """The whole float16 matrix [passages, dim], memory-mapped (read-only; nothing is loaded)."""
        return self._matrix

    def texts(self, rows: np.ndarray) -> np.ndarray:
        """The stored passage texts of ``rows`` (object array; rows must be >= 0)."""
        if self._texts is None:
            self._texts = self._table.column("text").to_numpy(zero_copy_only=False)
        return self._texts[np.asarray(rows, dtype=np.int64)]

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """float32 [len(rows), dim] vectors of ``rows`` (rows must be >= 0)."""
        index = np.asarray(rows, dtype=np.int64)
        if len(index) and (index.min() < 0 or index.max() >= len(self)):
            raise IndexError(f"rows must be within 0..{len(self) - 1}; look passages up first")
        return np.asarray(self._matrix[index], dtype=np.float32)

    def frame(self) -> pd.DataFrame:
        """The whole passage table [docno, pid, text, row], in row order.

        Example:
            >>> vectors.frame().columns.tolist()  # doctest: +SKIP
            ['docno', 'pid', 'text', 'row']
        """
        frame = self._table.to_pandas()
        return frame.assign(row=np.arange(len(frame), dtype=np.int64))

    def counts(self, docnos: Sequence[str] | np.ndarray) -> np.ndarray:
        """How many passages each of ``docnos`` has stored (0 for a document not stored).

        Example:
            >>> vectors.counts(["d1", "nope"]).tolist()  # doctest: +SKIP
            [2, 0]
        """
        where = self._doc_index.get_indexer(pd.Index(np.asarray(docnos, dtype=object)))
        counts = self._counts[np.where(where >= 0, where, 0)] if len(self._counts) else np.zeros(len(where))
        return np.where(where >= 0, counts, 0).astype(np.int64)

    def passages(self, docnos: Sequence[str]) -> pd.DataFrame:
        """The stored passages of ``docnos`` [docno, pid, text, row], in order; absent ones skipped.

        Example:
            >>> vectors.passages(["d1"])[["pid", "text"]].values.tolist()  # doctest: +SKIP
            [[0, 'Cats purr.'], [1, 'They sleep.']]
        """
        where = self._doc_index.get_indexer(pd.Index(np.asarray(docnos, dtype=object)))
        keep = where >= 0
        starts = self._starts[where[keep]]
        counts = self._counts[where[keep]]
        rows = np.repeat(starts, counts) + (
            np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        names = np.asarray(docnos, dtype=object)[keep]
        return pd.DataFrame(
            {
                "docno": np.repeat(names, counts),
                "pid": rows - np.repeat(starts, counts),
                "text": self.texts(rows),
                "row": rows,
            }
        )
