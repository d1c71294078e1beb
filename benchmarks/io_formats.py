"""Benchmark of evirank.io: corpus streaming, run reading and writing, at realistic sizes.

Generates a synthetic corpus (default 200k documents of ~550 words, like the first-stage
benchmark) and a synthetic run (default 5,000 queries x 1,000 documents), then times each
reader and writer in a fresh process and prints a Markdown table with peak memory (RSS).

Usage:
    PYTHONPATH=src python benchmarks/io_formats.py [--docs 200000] [--words 550] [--queries 5000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import footer, header

from evirank import markdown

WORKERS = {
    "read_corpus": (
        "from evirank.io import read_corpus\nn = sum(1 for _ in read_corpus(PATH))",
        "docs",
    ),
    "count_corpus": ("from evirank.io import count_corpus\nn = count_corpus(PATH)", "docs"),
    "load_texts (last 1,000 ids)": (
        "from evirank.io import load_texts\nn = len(load_texts(PATH, [f'd{i}' for i in range(N - 1000, N)]))",
        "docs",
    ),
    "read_run": ("from evirank.io import read_run\nn = len(read_run(PATH))", "lines"),
    "read_run + write_run": (
        "from evirank.io import read_run, write_run\nrun = read_run(PATH)\n"
        "write_run(run, PATH + '.out', overwrite=True)\nn = len(run)",
        "lines",
    ),
    "read_qrels": ("from evirank.io import read_qrels\nn = len(read_qrels(PATH))", "lines"),
}


def make_corpus(path: Path, docs: int, words: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(50_000)]
    with path.open("w", encoding="utf-8") as handle:
        for i in range(docs):
            n = max(1, int(rng.gauss(words, words / 4)))
            text = " ".join(rng.choices(vocab, k=n))
            handle.write(json.dumps({"_id": f"d{i}", "title": f"title {i}", "text": text}) + "\n")


def make_run(path: Path, queries: int, depth: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for q in range(1, queries + 1):
            docs = rng.sample(range(10_000_000), depth)
            scores = sorted((rng.random() * 20 for _ in range(depth)), reverse=True)
            handle.writelines(
                f"{q} Q0 d{d} {r} {s:.6f} synthetic\n"
                for r, (d, s) in enumerate(zip(docs, scores, strict=True), 1)
            )


def make_qrels(path: Path, queries: int, per_query: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for q in range(1, queries + 1):
            handle.writelines(
                f"{q} 0 d{d} {rng.randint(0, 3)}\n" for d in rng.sample(range(10_000_000), per_query)
            )


def measure(name: str, path: Path, docs: int) -> tuple[float, int, float]:
    code, _ = WORKERS[name]
    script = (
        f"import resource, time\nimport evirank.io\nPATH = {str(path)!r}\nN = {docs}\n"
        f"t = time.perf_counter()\n{code}\n"
        "print(time.perf_counter() - t, n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    seconds, count, rss = out.stdout.split()
    return float(seconds), int(count), float(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--words", type=int, default=550)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--depth", type=int, default=1_000)
    args = parser.parse_args()
    print(
        header(
            "Reading and writing the frames",
            f"{args.docs:,} generated documents of {args.words} words; a run of {args.queries:,} queries "
            f"x {args.depth:,}; qrels of {args.queries:,} queries x 200",
            packages=("numpy", "pandas", "pyarrow"),
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        corpus, run, qrels = folder / "corpus.jsonl", folder / "run.txt", folder / "qrels.txt"
        make_corpus(corpus, args.docs, args.words)
        make_run(run, args.queries, args.depth)
        make_qrels(qrels, args.queries, 200)
        inputs = {"corpus": corpus, "run": run, "qrels": qrels}
        rows = []
        for name, (_, unit) in WORKERS.items():
            path = inputs[
                "corpus" if "corpus" in name or "texts" in name else "qrels" if "qrels" in name else "run"
            ]
            seconds, count, rss = measure(name, path, args.docs)
            size = path.stat().st_size / 2**20
            rows.append(
                (
                    name,
                    f"{size:,.0f} MiB",
                    f"{count:,} {unit}",
                    f"{seconds:.2f}",
                    f"{count / seconds:,.0f}",
                    f"{rss:,.0f}",
                )
            )
    print(markdown.table(["operation", "input", "items", "seconds", "items/s", "peak RSS MiB"], rows))
    print(footer())


if __name__ == "__main__":
    main()
