"""Locating every passage of one long document: seconds and work against the document's size.

Each document is random sentences of common words (``--sizes`` characters); its passages come from
``Sentences()`` (the title its own passage) with no passage limit, and
:class:`evirank.segment.spans.PassageLocator` finds them all, in order. "work" is the word positions
read, passed over and compared; it grows with the words, not with words x passages (locating each
passage by rescanning the text took minutes for one megabyte).

Usage:
    PYTHONPATH=src python benchmarks/span_locating.py --sizes 100000 1000000 10000000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from _common import footer, header

from evirank import markdown
from evirank.segment import Sentences
from evirank.segment.spans import PassageLocator

WORDS = [
    "cells",
    "protein",
    "binding",
    "receptor",
    "signal",
    "pathway",
    "mouse",
    "tumour",
    "growth",
    "factor",
    "gene",
    "calcium",
]


def document(characters: int, seed: int = 0) -> str:
    """Random sentences of common words, about ``characters`` long."""
    rng = np.random.default_rng(seed)
    parts, size = [], 0
    while size < characters:
        sentence = " ".join(rng.choice(WORDS, size=int(rng.integers(4, 12)))).capitalize() + "."
        parts.append(sentence)
        size += len(sentence) + 1
    return " ".join(parts)


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    args = parser.parse_args()
    rows = []
    for size in args.sizes:
        title, text = "Calcium channels", document(size)
        run = pd.DataFrame({"qid": ["1"], "docno": ["d"], "score": [1.0], "title": [title], "text": [text]})
        passages = Sentences().with_max_passages(None)(run)["text"].tolist()
        started = time.perf_counter()
        locator = PassageLocator(title, text)
        located = locator.locate_all(passages)
        seconds = time.perf_counter() - started
        words = len(text.split())
        rows.append(
            [
                f"{size:,}",
                f"{words:,}",
                f"{len(passages):,}",
                f"{sum(f is not None for f, _, _ in located):,}",
                f"{seconds:.2f}",
                f"{locator.work:,}",
                f"{locator.work / words:.1f}",
            ]
        )
    print(header("Locating every passage of one document", "Sentences(), no passage limit"))
    print(
        markdown.table(
            ["characters", "words", "passages", "located", "seconds", "work", "work per word"], rows
        )
    )
    print(footer())


if __name__ == "__main__":
    main()
