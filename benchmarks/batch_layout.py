"""Padded against unpadded batches: pairs/s of one cross-encoder on one device, and the padding saved.

The same scorer settings twice (``--batch-layout padded`` and ``unpadded``), on the same pairs, in
alternating rounds after one warm-up call each; the table shows the median and best pairs/s, the
share of the padded batches' slots that were padding (what the unpadded layout does not compute),
and the largest score difference between the two layouts. A third row, ``auto``, is the default's
choice per batch (on a CPU: packed when at least 5% of a batch is padding).

``--per-call N`` scores the pairs N at a time, one scorer call each, as a rerank request of N short
documents does (each call is one small batch of pairs of very different lengths); without it, all
pairs go in one call, as a large reranking job's do (length-sorted batches with little padding).

Usage (from the repository root; the pairs file as ``benchmarks/gpu_inputs.py pairs`` writes it):
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/batch_layout.py MODEL_DIR PAIRS.jsonl --pairs 5000
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/batch_layout.py MODEL_DIR PAIRS.jsonl --pairs 2000 \
        --per-call 20
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from _common import footer, header
from peers import _frame, read_pairs

from evirank.config import Runtime
from evirank.frames import SCORE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a cross-encoder folder")
    parser.add_argument("pairs_file", help="JSONL of {query, text} lines")
    parser.add_argument("--pairs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the device's")
    parser.add_argument(
        "--per-call", type=int, default=0, help="pairs per scorer call, as a rerank request (default: all)"
    )
    args = parser.parse_args()
    from evirank.score import CrossEncoder

    frame = _frame(read_pairs(Path(args.pairs_file))).head(args.pairs)
    scorers = {
        layout: CrossEncoder(
            args.model,
            Runtime(
                device=args.device, dtype=args.dtype, batch_tokens=args.batch_tokens, batch_layout=layout
            ),
        )
        for layout in ("padded", "unpadded", "auto")
    }
    size = args.per_call if args.per_call > 0 else len(frame)
    calls = [frame.iloc[at : at + size] for at in range(0, len(frame), size)]

    counted: dict[str, tuple[int, int]] = {}  # each layout's batches and token slots, in its last pass

    def score_all(scorer: CrossEncoder) -> np.ndarray:
        out, batches, slots = [], 0, 0
        for call in calls:  # the scorer's stats are its last call's: added up here
            out.append(scorer(call)[SCORE].to_numpy())
            batches, slots = batches + scorer.stats_.batches, slots + scorer.stats_.tokens
        counted[scorer.runtime.batch_layout] = (batches, slots)
        return np.concatenate(out)

    rates: dict[str, list[float]] = {layout: [] for layout in scorers}
    scores: dict[str, np.ndarray] = {}
    for layout, scorer in scorers.items():
        scorer.load()
        scores[layout] = score_all(scorer)  # warm-up
    for round_no in range(args.rounds):
        order = list(scorers) if round_no % 2 == 0 else list(reversed(scorers))
        for layout in order:
            started = time.perf_counter()
            score_all(scorers[layout])
            rates[layout].append(len(frame) / (time.perf_counter() - started))
    padded = scorers["padded"]
    batches, slots = counted["padded"]
    encoder = padded.encoder_
    lengths = np.array(
        [
            len(ids)
            for ids in encoder.tokenizer(
                list(frame["query"]), list(frame["text"]), truncation=True, max_length=padded.max_length_
            )["input_ids"]
        ]
    )
    padding = 1.0 - lengths.sum() / slots if slots else float("nan")
    lines = [
        header(
            "Padded against unpadded batches, one cross-encoder",
            f"model: {Path(args.model).name}; pairs: {len(frame):,} from {Path(args.pairs_file).name}, "
            f"{lengths.mean():.1f} tokens a pair on average",
            f"device {padded.device_}, {padded.precision_}, {padded.batch_tokens_:,} tokens per batch; "
            f"{len(calls):,} scorer call(s) of up to {size:,} pairs; one warm-up round each, then "
            f"{args.rounds} alternating rounds",
            f"padded batches: {batches:,} batches, {slots:,} token slots of which "
            f"{padding:.1%} padding (tokens counted by the tokenizer, truncated as the scorer does)",
            packages=("torch", "transformers"),
        ),
        "| batch layout | pairs/s median | best | max abs score diff vs padded |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {layout} | {statistics.median(r):,.1f} | {max(r):,.1f} | "
            f"{float(np.abs(scores[layout] - scores['padded']).max()):.1e} |"
            for layout, r in rates.items()
        ),
        footer(),
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
