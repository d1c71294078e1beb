"""Sentence splitters on SciFact abstracts: speed, sentences per document, agreement with gold sentences.

Each splitter runs through ``evirank.segment.Sentences(title="skip", splitter=...)``, so the
numbers include evirank's own work (word spans, boundary snapping). "gold match" is the
fraction of SciFact's gold evidence sentences (train + test) that come out as one segment,
whitespace-normalised: a proxy for boundary quality. Splitters that are not installed are
skipped. CPU seconds are this process's own, so they are fair on a shared machine; wall
seconds are shown too.

Usage:
    PYTHONPATH=src python benchmarks/segment_speed.py [--data DATASETS] [--limit N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import datasets, footer, header

from evirank import markdown
from evirank.segment import Sentences, Windows

_REGEX = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def regex_baseline(text: str) -> list[str]:
    """Split after . ! ? followed by space and an upper-case letter, digit or bracket."""
    return _REGEX.split(text)


def blingfire_splitter() -> Callable[[str], Sequence[str]]:
    import blingfire  # type: ignore[import-not-found]

    return lambda text: blingfire.text_to_sentences(text).split("\n")


def load(data: Path, limit: int | None) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    docs: dict[str, dict[str, str]] = {}
    with (data / "scifact" / "corpus.jsonl").open() as f:
        for line in f:
            doc = json.loads(line)
            docs[doc["_id"]] = doc
            if limit and len(docs) >= limit:
                break
    gold = []
    for split in ("train", "test"):
        with (data / "scifact" / "evidence" / f"{split}.jsonl").open() as f:
            for line in f:
                row = json.loads(line)
                if row["corpus-id"] in docs:
                    gold += [(row["corpus-id"], " ".join(s.split())) for s in row["evidence"]]
    return docs, gold


def measure(stage: Any, docs: dict[str, dict[str, str]], gold: list[tuple[str, str]]) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    splits = {docno: stage.segments(doc["title"], doc["text"]) for docno, doc in docs.items()}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n_segments = sum(len(s) for s in splits.values())
    sets = {docno: {" ".join(s.split()) for s in segs} for docno, segs in splits.items()}
    matched = sum(sentence in sets[docno] for docno, sentence in gold)
    return {
        "docs/s (cpu)": len(docs) / cpu,
        "segments/s (cpu)": n_segments / cpu,
        "wall s": wall,
        "segments/doc": n_segments / len(docs),
        "gold match": matched / len(gold) if gold else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the datasets folder (default: EVIRANK_DATASETS, DATA, ../shared/datasets)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N documents")
    args = parser.parse_args()
    docs, gold = load(args.data or datasets(), args.limit)

    print(
        header(
            "Sentence splitting on SciFact abstracts",
            f"{len(docs)} documents, {len(gold)} gold evidence sentences",
            packages=("syntok", "pysbd", "blingfire"),
        )
    )
    candidates: list[tuple[str, Any]] = [
        ("syntok (default)", Sentences(title="skip")),
        ("pysbd", Sentences(title="skip", splitter="pysbd")),
        ("regex baseline", Sentences(title="skip", splitter=regex_baseline)),
    ]
    if importlib.util.find_spec("blingfire"):
        candidates.append(("blingfire", Sentences(title="skip", splitter=blingfire_splitter())))
    candidates.append(("Windows(150, 75)", Windows()))

    rows = [(name, measure(stage, docs, gold)) for name, stage in candidates]
    columns = list(rows[0][1])
    table = [
        [name, *[f"{row[c]:.3f}" if c == "gold match" else f"{row[c]:,.2f}" for c in columns]]
        for name, row in rows
    ]
    print(markdown.table(["splitter", *columns], table))
    print(footer())


if __name__ == "__main__":
    main()
