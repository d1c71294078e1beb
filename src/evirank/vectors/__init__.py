"""Passage vectors: a collection's passages embedded once, at indexing time, for evidence by lookup.

A passage-vector folder holds ``manifest.json`` (the model fingerprint and segmenter that made it),
``passages.parquet`` (docno, pid, text, row) and ``vectors.npy`` (float16, L2-normalised, memory-mapped).
:class:`VectorBuilder` writes one (blocks, atomic shards, resume, compaction); :class:`PassageVectors`
reads one. The format is described in ``docs/vectors.md``.

Example:
    >>> from evirank.vectors import PassageVectors
    >>> vectors = PassageVectors.open("indexes/scifact/vectors")  # doctest: +SKIP
    >>> vectors.vectors(vectors.lookup(["4983"], [0])).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

from evirank.vectors.manifest import VectorsIdentity, VectorsMismatchError, read_manifest, segment_spec
from evirank.vectors.reader import PassageVectors
from evirank.vectors.writer import (
    DEFAULT_BLOCK_SIZE,
    IncompleteBuildError,
    ShardWriter,
    VectorBuilder,
    blocks,
    shard_name,
)

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "IncompleteBuildError",
    "PassageVectors",
    "ShardWriter",
    "VectorBuilder",
    "VectorsIdentity",
    "VectorsMismatchError",
    "blocks",
    "read_manifest",
    "segment_spec",
    "shard_name",
]
