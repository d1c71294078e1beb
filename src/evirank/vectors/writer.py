"""Writing a passage-vector folder: blocks of documents, one atomic shard each, resume, compaction.

:class:`ShardWriter` is the format: it owns ``VECTORS.partial/`` (its manifest and one Parquet shard
per block, each written under a temporary name and renamed, so a shard is complete or absent, with
its size and sha256 beside it in ``part-NNNNNN.parquet.sha256``, checked before a resumed build or
the compaction reads it: a damaged shard is named and its block embedded again) and
compacts the shards into ``VECTORS/`` (``passages.parquet``, ``vectors.npy``, ``manifest.json``) in one
rename. :class:`VectorBuilder` puts a segmenter and a bi-encoder in front of it: given a block number
and that block's documents it segments, embeds and writes that one shard. Blocks are independent, so
they can run in any order, in any process (a pickled builder reloads its model lazily), and a build
that stops is resumed by running it again: blocks whose shard exists are skipped.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "vectors"
    >>> writer = ShardWriter(out, VectorsIdentity("f" * 64, "sentences:segment"), block_size=2)
    >>> writer.open()
    set()
    >>> _ = writer.write(0, ["d1", "d1"], [0, 1], ["Cats.", "Purr."], np.eye(2, dtype=np.float32))
    >>> len(writer.finish(blocks=1))
    2
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from evirank.checksums import DamagedArtefactError, file_digest, file_problem, write_checksums
from evirank.errors import EvirankError
from evirank.frames import Document
from evirank.outputs import atomic_file, check_output, replace_output, temporary_path, write_atomically
from evirank.progress import progress_bar
from evirank.segment.budget import passage_budget
from evirank.vectors.manifest import (
    FORMAT,
    MANIFEST,
    PARTIAL_SUFFIX,
    PASSAGES,
    SHARDS,
    VECTORS,
    VERSION,
    VectorsIdentity,
    identity_of,
    mismatch,
    now,
    read_manifest,
    versions,
    write_manifest,
)
from evirank.vectors.reader import PassageVectors

logger = logging.getLogger(__name__)

#: Documents per block by default: small enough that a resumed build loses little, large enough that
#: the model sees full batches.
DEFAULT_BLOCK_SIZE = 1000

_SHARD_RE = re.compile(r"^part-(\d{6})\.parquet$")
#: A shard's checksum file: ``SHA256 SIZE`` of the shard beside it.
CHECKSUM_SUFFIX = ".sha256"
_SHARD_FILE_RE = re.compile(r"^part-(\d{6})\.parquet(?:\.sha256)?$")


class IncompleteBuildError(EvirankError, RuntimeError):
    """The shards of a build do not cover every block (compaction refused)."""


def shard_name(block: int) -> str:
    """The file name of block ``block``'s shard.

    Example:
        >>> shard_name(3)
        'part-000003.parquet'
    """
    return f"part-{block:06d}.parquet"


def blocks(
    documents: Iterable[Document], block_size: int = DEFAULT_BLOCK_SIZE
) -> Iterator[tuple[int, list[Document]]]:
    """Cut ``documents`` into numbered blocks of ``block_size``, in order (the build's unit of work).

    Example:
        >>> docs = [Document(f"d{i}", "", "x") for i in range(5)]
        >>> [(b, len(ds)) for b, ds in blocks(docs, 2)]
        [(0, 2), (1, 2), (2, 1)]
    """
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, found {block_size}")
    iterator = iter(documents)
    number = 0
    while chunk := list(islice(iterator, block_size)):
        yield number, chunk
        number += 1


def _check_partial_is_ours(partial: Path) -> None:
    """Refuse to clear a ``.partial`` folder without a manifest unless it holds only shards.

    Such a folder is what a build killed before its first manifest write leaves (an empty
    ``shards/``), or a user's own folder that happens to have this name: that one is never removed.
    """
    for entry in partial.iterdir():
        only_shards = (
            entry.name == SHARDS
            and entry.is_dir()
            and not entry.is_symlink()
            and all(_SHARD_FILE_RE.match(p.name) or p.name.startswith(".") for p in entry.iterdir())
        )
        if only_shards or entry.name.startswith(".tmp-"):
            continue
        raise EvirankError(
            f"{partial}: a folder without a vector-build manifest holding {entry.name}; it was left "
            "unchanged (remove it yourself, or choose another output path)"
        )


class ShardWriter:
    """The on-disk side of a build: a partial folder of shards, then the compacted folder.

    Args:
        output: the vector folder to create (``VECTORS``); shards go to ``VECTORS.partial``.
        identity: what makes the vectors (model fingerprint and segmenter).
        block_size: documents per block (recorded; a resumed build must use the same).
        overwrite: replace an existing ``VECTORS``, and start afresh over a ``.partial`` folder of another
            identity or block size.
        source: where the documents came from (recorded in the manifest, for people).

    Example:
        See the module docstring.
    """

    def __init__(
        self,
        output: str | os.PathLike[str],
        identity: VectorsIdentity,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        overwrite: bool = False,
        source: str | None = None,
    ) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1, found {block_size}")
        self.output = Path(output)
        self.identity = identity
        self.block_size = block_size
        self.overwrite = overwrite
        self.source = source

    @property
    def partial(self) -> Path:
        """The folder the shards are written to until compaction."""
        return self.output.with_name(self.output.name + PARTIAL_SUFFIX)

    def _manifest(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "complete": False,
            "fingerprint": self.identity.fingerprint,
            "model": self.identity.model,
            "segment": self.identity.segment,
            "block_size": self.block_size,
            "source": self.source,
            "created": now(),
            "shard_checksums": True,
        }

    def open(self) -> set[int]:
        """Create (or resume) the partial folder; return the blocks already written.

        Raises:
            OutputExistsError: ``VECTORS`` exists and ``overwrite`` is false.
            VectorsMismatchError: a ``.partial`` folder of another model or segmenter exists and
                ``overwrite`` is false.
        """
        # --overwrite replaces only a vector folder (one holding a manifest), never a user's folder
        check_output(self.output, self.overwrite, marker=MANIFEST)
        shards = self.partial / SHARDS
        if self.partial.exists():
            try:
                found = read_manifest(self.partial)
            except (OSError, ValueError):
                found = None
            if found is None:
                _check_partial_is_ours(self.partial)
            if found is not None and not self.overwrite:
                stored = identity_of(found)
                if not stored.matches(self.identity):
                    raise mismatch(self.partial, stored, self.identity)
                if found.get("block_size") != self.block_size:
                    raise EvirankError(
                        f"{self.partial}: an unfinished build with block size {found.get('block_size')} "
                        f"is there; resume it with --block-size {found.get('block_size')}, or pass "
                        "--overwrite to start afresh"
                    )
                done = self.done() - self.damaged(self.done(), found)
                logger.info("resuming %s: %d block(s) already written", self.partial, len(done))
                return done
            if found is None and any(shards.glob("*.parquet")) and not self.overwrite:
                raise EvirankError(
                    f"{self.partial}: shards without a manifest; pass --overwrite to start afresh"
                )
            shutil.rmtree(self.partial)
        shards.mkdir(parents=True, exist_ok=True)
        write_manifest(self.partial, self._manifest())
        return set()

    def done(self) -> set[int]:
        """The blocks whose shard is complete."""
        folder = self.partial / SHARDS
        if not folder.is_dir():
            return set()
        return {int(m.group(1)) for p in folder.iterdir() if (m := _SHARD_RE.match(p.name))}

    def shard_problem(self, block: int) -> str | None:
        """What is wrong with block ``block``'s shard against its checksum file; None when it matches."""
        shard = self.partial / SHARDS / shard_name(block)
        record = shard.with_name(shard.name + CHECKSUM_SUFFIX)
        try:
            digest, size = record.read_text(encoding="utf-8").split()
            return file_problem(shard, int(size), digest)
        except FileNotFoundError:
            return "its checksum file is missing"
        except (OSError, UnicodeDecodeError, ValueError):
            return "its checksum file is damaged"

    def damaged(self, blocks: Iterable[int], manifest: dict[str, Any]) -> set[int]:
        """The ``blocks`` whose shard does not match its checksum; each is named in a warning and
        removed, so the build embeds it again. A build begun by a version that wrote no checksums
        keeps its shards unchecked (with a note in the log)."""
        checked = bool(manifest.get("shard_checksums"))
        bad: set[int] = set()
        unchecked = 0
        for block in sorted(blocks):
            problem = self.shard_problem(block)
            if problem is None:
                continue
            if not checked and problem == "its checksum file is missing":
                unchecked += 1
                continue
            logger.warning(
                "%s: this vector shard is damaged (%s); block %d is embedded again",
                self.partial / SHARDS / shard_name(block),
                problem,
                block,
            )
            self.remove(block)
            bad.add(block)
        if unchecked:
            logger.info(
                "%s: %d shard(s) written without checksums are used unchecked", self.partial, unchecked
            )
        return bad

    def remove(self, block: int) -> None:
        """Remove block ``block``'s shard and its checksum file (the block is then not written)."""
        shard = self.partial / SHARDS / shard_name(block)
        for path in (shard, shard.with_name(shard.name + CHECKSUM_SUFFIX)):
            path.unlink(missing_ok=True)

    def write(
        self,
        block: int,
        docnos: Sequence[str],
        pids: Sequence[int] | np.ndarray,
        texts: Sequence[str],
        vectors: np.ndarray,
    ) -> Path:
        """Write block ``block``'s shard atomically (a temporary name, then a rename); return its path.

        Args:
            block: the block number (0-based, in corpus order).
            docnos: one per passage; a document's passages are consecutive, in pid order.
            pids: each passage's position in its document.
            texts: the exact passage texts.
            vectors: float [passages, dim], L2-normalised; stored as float16.
        """
        pa = _pyarrow()
        matrix = np.asarray(vectors)
        n = len(docnos)
        if matrix.ndim != 2 or matrix.shape[0] != n or len(pids) != n or len(texts) != n:
            raise ValueError(
                f"block {block}: expected {n} pids, texts and vector rows, found {len(pids)}, "
                f"{len(texts)} and a matrix of shape {matrix.shape}"
            )
        dim = matrix.shape[1]
        flat = pa.array(matrix.astype(np.float16).ravel(), type=pa.float16())
        table = pa.table(
            {
                "docno": pa.array([str(d) for d in docnos], type=pa.string()),
                "pid": pa.array(np.asarray(pids, dtype=np.int32), type=pa.int32()),
                "text": pa.array([str(t) for t in texts], type=pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
            }
        )
        folder = self.partial / SHARDS
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / shard_name(block)
        with atomic_file(final) as tmp:
            _parquet().write_table(table, tmp)
            # the checksum first: a shard in place always has its own beside it
            record = f"{file_digest(tmp)} {tmp.stat().st_size}\n"
            write_atomically(final.with_name(final.name + CHECKSUM_SUFFIX), record)
        return final

    def finish(self, blocks: int | None = None) -> PassageVectors:
        """Compact the shards, in block order, into ``VECTORS`` (one rename); return it opened.

        Args:
            blocks: how many blocks the corpus has; ``None`` trusts the shards present (0..max).

        Raises:
            IncompleteBuildError: a block has no shard.
            InputFormatError: a document appears in two blocks, or shards disagree on the dimension.
        """
        pa, pq = _pyarrow(), _parquet()
        done = self.done()
        expected = blocks if blocks is not None else (max(done) + 1 if done else 0)
        missing = sorted(set(range(expected)) - done)
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
            raise IncompleteBuildError(
                f"{self.partial}: {len(missing)} of {expected} block(s) have no shard yet ({shown}); "
                "run the build again to write them"
            )
        if expected == 0:
            raise ValueError(f"{self.partial}: no passages to compact (the corpus is empty)")
        manifest = read_manifest(self.partial)
        problems = {block: self.shard_problem(block) for block in range(expected)}
        if manifest.get("shard_checksums"):
            bad = {block: problem for block, problem in problems.items() if problem is not None}
        else:  # a build begun without checksums: only a shard that has one is checked
            bad = {b: p for b, p in problems.items() if p not in (None, "its checksum file is missing")}
        if bad:
            for block in bad:
                self.remove(block)
            raise DamagedArtefactError(
                self.partial,
                "unfinished vector build",
                [f"{SHARDS}/{shard_name(block)}: {problem}" for block, problem in sorted(bad.items())],
                "run the build again: the damaged blocks (removed) are embedded again",
            )
        check_output(self.output, self.overwrite, marker=MANIFEST)  # checked again: it may have appeared
        tmp = temporary_path(self.output)
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        try:
            counts, dim = [], None
            for block in range(expected):
                meta = pq.read_metadata(self.partial / SHARDS / shard_name(block))
                counts.append(meta.num_rows)
                shard_dim = (
                    pq.read_schema(self.partial / SHARDS / shard_name(block)).field("vector").type.list_size
                )
                if dim is not None and shard_dim != dim:
                    raise _format_error(self.partial, block, f"dimension {dim}", f"dimension {shard_dim}")
                dim = shard_dim
            total = int(sum(counts))
            assert dim is not None
            matrix = np.lib.format.open_memmap(tmp / VECTORS, mode="w+", dtype=np.float16, shape=(total, dim))
            writer = None
            seen: set[str] = set()
            row = 0
            bar = progress_bar(desc="compacting vectors", total=expected, unit="block")
            try:
                for block in range(expected):
                    shard = pq.read_table(self.partial / SHARDS / shard_name(block))
                    n = shard.num_rows
                    flat = shard.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
                    matrix[row : row + n] = np.asarray(flat, dtype=np.float16).reshape(n, dim)
                    docs = shard.column("docno").to_pylist()
                    first_of_doc = [d for i, d in enumerate(docs) if i == 0 or docs[i - 1] != d]
                    again = [d for d in first_of_doc if d in seen] or _repeated(first_of_doc)
                    if again:
                        raise _format_error(
                            self.partial, block, "each document in one block, once", f"{again[0]!r} again"
                        )
                    seen.update(first_of_doc)
                    table = pa.table(
                        {
                            "docno": shard.column("docno"),
                            "pid": shard.column("pid"),
                            "text": shard.column("text"),
                            "row": pa.array(np.arange(row, row + n, dtype=np.int64)),
                        }
                    )
                    if writer is None:
                        writer = pq.ParquetWriter(tmp / PASSAGES, table.schema)
                    writer.write_table(table)
                    row += n
                    bar.update(1)
            finally:
                bar.close()
                if writer is not None:
                    writer.close()
            matrix.flush()
            del matrix
            manifest.update(
                complete=True,
                dim=int(dim),
                dtype="float16",
                normalised=True,
                documents=len(seen),
                passages=total,
                blocks=expected,
                compacted=now(),
                versions=versions(),
            )
            write_checksums(tmp, [PASSAGES, VECTORS])  # checked when the folder is opened
            write_manifest(tmp, manifest)  # last: a folder with a manifest is complete
            replace_output(tmp, self.output, self.overwrite, marker=MANIFEST)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        shutil.rmtree(self.partial)
        logger.info(
            "wrote %s: %d passages of %d documents, %d dimensions (float16)",
            self.output,
            total,
            len(seen),
            dim,
        )
        return PassageVectors.open(self.output)


def _repeated(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        if item in seen:
            out.append(item)
        seen.add(item)
    return out


def _format_error(folder: Path, block: int, expected: str, found: str) -> Exception:
    from evirank.errors import InputFormatError

    return InputFormatError(folder / SHARDS / shard_name(block), None, expected, found)


def _pyarrow() -> Any:
    from evirank.extras import require

    return require("pyarrow", "core")


def _parquet() -> Any:
    from evirank.extras import require

    return require("pyarrow.parquet", "core")


class VectorBuilder:
    """Segment and embed a corpus block by block into a passage-vector folder.

    Args:
        output: the vector folder to create.
        scorer: the bi-encoder (:class:`evirank.score.BiEncoder`); its passage prefix is applied.
        segment: the segmenter spec (``evirank rerank --segment``'s grammar), or a segmenter.
        block_size: documents per block.
        overwrite: replace an existing folder, or an unfinished build of another identity.
        source: where the documents come from (recorded in the manifest).

    Example:
        >>> from evirank.score import BiEncoder
        >>> builder = VectorBuilder("/tmp/vectors", BiEncoder(), "windows:100:50")  # doctest: +SKIP
        >>> len(builder.build([Document("d1", "Cats", "Cats purr. They sleep.")]))  # doctest: +SKIP
        2
        >>> # the same, one block at a time (what a distributed build does on its workers):
        >>> for block, docs in blocks(documents, builder.block_size):  # doctest: +SKIP
        ...     if block not in builder.pending_done():
        ...         builder.build_block(block, docs)
        >>> builder.finish(blocks=n_blocks)  # doctest: +SKIP
    """

    def __init__(
        self,
        output: str | os.PathLike[str],
        scorer: Any,
        segment: Any,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        overwrite: bool = False,
        source: str | None = None,
    ) -> None:
        self.output = Path(output)
        self.scorer = scorer
        self.segment = segment
        self.block_size = block_size
        self.overwrite = overwrite
        self.source = source

    def __getstate__(self) -> dict[str, Any]:
        """Parameters only (the segmenter and writer are rebuilt where the builder is unpickled)."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def segmenter(self) -> Any:
        """The segmenter, cut to the bi-encoder's passage room as ``evirank rerank`` does."""
        if getattr(self, "segmenter_", None) is None:
            if isinstance(self.segment, str):
                from evirank.segment.segment_spec import parse_segment

                budget = passage_budget(self.scorer)
                self.segmenter_ = parse_segment(
                    self.segment,
                    tokenizer=budget[0] if budget else None,
                    max_tokens=budget[1] if budget else None,
                )
            else:
                self.segmenter_ = self.segment
        return self.segmenter_

    @property
    def writer(self) -> ShardWriter:
        """The :class:`ShardWriter` (computes the identity: loads the tokenizer, not the weights)."""
        if getattr(self, "writer_", None) is None:
            identity = VectorsIdentity.of(self.scorer, self.segmenter)
            self.writer_ = ShardWriter(
                self.output,
                identity,
                block_size=self.block_size,
                overwrite=self.overwrite,
                source=self.source,
            )
        return self.writer_

    def open(self) -> set[int]:
        """Start or resume the build; return the blocks already written (see :meth:`ShardWriter.open`)."""
        return self.writer.open()

    def pending_done(self) -> set[int]:
        """The blocks already written (a worker may call this before :meth:`build_block`)."""
        return self.writer.done()

    def passages(self, documents: Sequence[Document]) -> tuple[list[str], np.ndarray, list[str]]:
        """(docnos, pids, texts) of every passage of ``documents``, in order."""
        segmenter = self.segmenter
        docnos: list[str] = []
        pids: list[int] = []
        texts: list[str] = []
        for doc in documents:
            segments = segmenter.segments(doc.title or "", doc.text or "") or [""]
            docnos.extend([doc.docno] * len(segments))
            pids.extend(range(len(segments)))
            texts.extend(segments)
        return docnos, np.asarray(pids, dtype=np.int32), texts

    def build_block(self, block: int, documents: Sequence[Document]) -> int:
        """Segment, embed and write block ``block`` (replacing any earlier shard); return its passages."""
        docnos, pids, texts = self.passages(documents)
        prefix = getattr(self.scorer, "passage_prefix", "")
        vectors = self.scorer.embed([prefix + t for t in texts]) if texts else np.zeros((0, 0), np.float32)
        self.writer.write(block, docnos, pids, texts, vectors)
        return len(texts)

    def finish(self, blocks: int | None = None) -> PassageVectors:
        """Compact the shards into the vector folder (see :meth:`ShardWriter.finish`)."""
        return self.writer.finish(blocks)

    def build(self, documents: Iterable[Document], *, total: int | None = None) -> PassageVectors:
        """The whole build in this process: every block not yet written, then compaction.

        Args:
            documents: the corpus, in order (the same order on a resumed run).
            total: the number of documents, if known (only for the progress bar).
        """
        done = self.open()
        bar = progress_bar(desc="embedding", total=total, unit="doc")
        count = 0
        passages = 0
        try:
            for block, docs in blocks(documents, self.block_size):
                count += 1
                if block not in done:
                    passages += self.build_block(block, docs)
                    bar.set_postfix(passages=passages)
                bar.update(len(docs))
        finally:
            bar.close()
        if done - set(range(count)):
            logger.warning(
                "%s has shards beyond the corpus's %d block(s) (was the corpus shortened?); they are ignored",
                self.writer.partial,
                count,
            )
            for extra in done - set(range(count)):
                self.writer.remove(extra)
        return self.finish(count)


__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "MANIFEST",
    "IncompleteBuildError",
    "ShardWriter",
    "VectorBuilder",
    "blocks",
    "shard_name",
]
