"""Scores of this checkout against another checkout's, family by family, on SciFact pairs.

A change to how inputs are built (tokenising, joining token ids, batching) must leave the scores
as they were. Each checkout scores the same (claim, sentence) pairs in a fresh process (``--src``
puts its ``src`` folder first on the import path) with the models given, and the table shows the
largest score difference per family. Families without a model given are left out; the
bi-encoder runs with its offline default (all-MiniLM-L6-v2).

Usage (from the repository root):
    PYTHONPATH=src python benchmarks/same_scores.py --before-src ../evirank-before/src \\
        --cross models/minilm-scifact --seq2seq models/monot5 --llm models/qwen3-reranker
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def score(args: argparse.Namespace) -> None:
    """In a child process: score the pairs with ``args.src``'s evirank and save them (npz)."""
    sys.path.insert(0, str(Path(args.src).resolve()))
    import numpy as np

    from evirank.config import Runtime
    from evirank.frames import QUERY, SCORE, make_passages
    from evirank.score import BiEncoder, CrossEncoder
    from evirank.score.families.llm import YesNoReranker
    from evirank.score.families.seq2seq import MonoT5

    lines = Path(args.pairs_file).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:: max(1, len(lines) // args.pairs)][: args.pairs]]
    codes = {q: str(i) for i, q in enumerate(dict.fromkeys(r["query"] for r in rows))}
    frame = make_passages([(codes[r["query"]], f"d{i}", 0, r["text"]) for i, r in enumerate(rows)])
    frame[QUERY] = [r["query"] for r in rows]
    runtime = Runtime(device="cpu", max_length=args.max_length)
    scores = {"bi": BiEncoder(None, runtime)(frame)[SCORE].to_numpy()}
    if args.cross:
        scores["cross"] = CrossEncoder(args.cross, runtime)(frame)[SCORE].to_numpy()
    if args.seq2seq:
        scores["seq2seq"] = MonoT5(args.seq2seq, runtime)(frame)[SCORE].to_numpy()
    if args.llm:
        scores["llm"] = YesNoReranker(args.llm, runtime)(frame)[SCORE].to_numpy()
    np.savez(args.out, **scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before-src", required=True, help="the other checkout's src folder")
    parser.add_argument("--cross", help="a cross-encoder folder")
    parser.add_argument("--seq2seq", help="a monoT5 folder")
    parser.add_argument("--llm", help="a yes/no LLM reranker folder")
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=None, help="the input cap (default: the model's)")
    parser.add_argument("--pairs-file", help="JSONL of {query, text} (default: the GPU check's)")
    parser.add_argument("--src", help=argparse.SUPPRESS)  # the child's
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src:
        score(args)
        return
    import numpy as np
    from _common import REPO, footer, header
    from gpu_inputs import write_pairs

    pairs_file = (
        Path(args.pairs_file)
        if args.pairs_file
        else REPO / "work" / "gpu-check" / "scifact-pairs-150000.jsonl"
    )
    write_pairs(pairs_file, 150_000, seed=0)
    passed = [
        f"--{name}={value}"
        for name, value in (("cross", args.cross), ("seq2seq", args.seq2seq), ("llm", args.llm))
        if value
    ]
    if args.max_length:
        passed.append(f"--max-length={args.max_length}")
    results = []
    with tempfile.TemporaryDirectory() as work:
        for src in (Path(args.before_src), REPO / "src"):
            out = Path(work) / f"{len(results)}.npz"
            subprocess.run(
                [sys.executable, __file__, "--before-src", str(src), "--src", str(src), "--out", str(out),
                 "--pairs", str(args.pairs), "--pairs-file", str(pairs_file), *passed],
                check=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )  # fmt: skip
            results.append(dict(np.load(out)))
    before, after = results
    lines = [
        header(
            "Scores of this checkout against another checkout's, by family",
            f"pairs: {len(after['bi']):,} claim/sentence pairs from {pairs_file.name}; CPU, fp32",
            packages=("torch", "transformers", "tokenizers"),
        ),
        "| family | pairs | max abs score difference | identical |",
        "| --- | ---: | ---: | --- |",
        *(
            f"| {family} | {len(new):,} | {float(np.abs(new - before[family]).max()):.2e} | "
            f"{'yes' if np.array_equal(new, before[family]) else 'no'} |"
            for family, new in after.items()
        ),
        footer(),
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
