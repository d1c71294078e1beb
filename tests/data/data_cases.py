"""A small fake SciFact zip in BEIR's layout and registry entries for it."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

from evirank.data import Dataset, RemoteFile

SCIFACT_EXPECT = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/train.tsv")


def scifact_zip(docs: int = 40) -> bytes:
    """A small zip in BEIR's SciFact layout (``scifact/corpus.jsonl`` ...), large enough to be cut."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        corpus = "".join(
            json.dumps({"_id": str(i), "title": f"Title {i}", "text": f"Cells and viruses in {i}. " * 20})
            + "\n"
            for i in range(docs)
        )
        archive.writestr("scifact/corpus.jsonl", corpus)
        archive.writestr("scifact/queries.jsonl", json.dumps({"_id": "1", "text": "cells"}) + "\n")
        archive.writestr("scifact/qrels/test.tsv", "query-id\tcorpus-id\tscore\n1\t3\t1\n")
        archive.writestr("scifact/qrels/train.tsv", "query-id\tcorpus-id\tscore\n1\t4\t1\n")
        archive.writestr("__MACOSX/scifact/._corpus.jsonl", b"junk")
    return buffer.getvalue()


def scifact_entry(body: bytes, *, name: str = "fake-scifact", checksum: str | None = "auto") -> Dataset:
    """A registry entry for ``body`` served as ``scifact.zip`` (its real size and sha256 unless given)."""
    digest = f"sha256:{hashlib.sha256(body).hexdigest()}" if checksum == "auto" else checksum
    remote = RemoteFile(
        url="https://example.invalid/datasets/scifact.zip",
        size=len(body),
        checksum=digest,
        source="built by the test",
        unpack="zip",
        kind="zip",
        strip="scifact",
    )
    return Dataset(name=name, folder="scifact", description="fake", files=(remote,), expect=SCIFACT_EXPECT)
