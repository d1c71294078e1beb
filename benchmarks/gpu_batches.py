"""evirank's torch path on a GPU: pairs/s by precision and token budget, next to sentence-transformers.

One process, one model folder, one pairs file (as ``benchmarks/peers.py`` writes it: JSONL lines of
``{"query": ..., "text": ...}``). Each setting is loaded, warmed up with one call over all pairs,
then timed over ``--rounds`` calls; the table shows the median and best pairs/s and the largest
score difference from evirank's fp32 scores. sentence-transformers' CrossEncoder runs with fp16
weights at several batch sizes on the same pairs. A short probe of where the time goes: when the
rates barely move with precision and batch size, the GPU waits for the CPU side (tokenising and
assembling inputs), not the other way round.

Usage (from the repository root, on a CUDA machine):
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/gpu_batches.py MODEL_DIR PAIRS.jsonl --pairs 30000
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import footer, header
from peers import _frame, read_pairs

from evirank.config import Runtime
from evirank.frames import QUERY, SCORE, TEXT


def timed(call: Callable[[], np.ndarray], rounds: int, n: int) -> tuple[np.ndarray, list[float]]:
    """Warm up once, then ``rounds`` timed calls: (scores of the last, pairs/s of each)."""
    import torch

    call()
    torch.cuda.synchronize()
    rates = []
    out = np.array([])
    for _ in range(rounds):
        started = time.perf_counter()
        out = call()
        torch.cuda.synchronize()
        rates.append(n / (time.perf_counter() - started))
    return out, rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a cross-encoder folder")
    parser.add_argument("pairs_file", help="JSONL of {query, text} lines")
    parser.add_argument("--pairs", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--budgets", type=int, nargs="+", default=[65536, 262144], help="tokens per batch")
    parser.add_argument("--st-batches", type=int, nargs="+", default=[32, 256, 1024])
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        parser.error(f"it measures a CUDA GPU and torch {torch.__version__} sees none")
    from sentence_transformers import CrossEncoder as STCrossEncoder

    from evirank.score import CrossEncoder

    frame = _frame(read_pairs(Path(args.pairs_file))).head(args.pairs)
    pairs = list(zip(frame[QUERY], frame[TEXT], strict=True))
    rows: list[tuple[str, float, float, float]] = []
    reference: np.ndarray | None = None

    def run(label: str, call: Callable[[], np.ndarray]) -> None:
        nonlocal reference
        out, rates = timed(call, args.rounds, len(frame))
        if reference is None:
            reference = out
        rows.append((label, statistics.median(rates), max(rates), float(np.abs(out - reference).max())))
        gc.collect()
        torch.cuda.empty_cache()

    settings = [("fp32", 65536)] + [("bf16", b) for b in args.budgets] + [("fp16", args.budgets[-1])]
    for dtype, budget in settings:
        scorer = CrossEncoder(args.model, Runtime(device="cuda", dtype=dtype, batch_tokens=budget))
        scorer.load()
        run(f"evirank {dtype}, {budget:,} tokens per batch", lambda s=scorer: s(frame)[SCORE].to_numpy())
        del scorer
    model = STCrossEncoder(args.model, device="cuda", model_kwargs={"dtype": torch.float16})
    identity = torch.nn.Identity()
    for size in args.st_batches:
        run(
            f"sentence-transformers fp16 weights, batch {size}",
            lambda b=size: np.asarray(
                model.predict(pairs, batch_size=b, activation_fn=identity, show_progress_bar=False)
            ).reshape(-1),
        )
    lines = [
        header(
            "evirank's torch path on the GPU by precision and token budget, next to sentence-transformers",
            f"pairs: {len(frame):,} from {Path(args.pairs_file).name}; "
            f"one warm-up call, then {args.rounds} timed",
            packages=("torch", "transformers", "sentence-transformers", "tokenizers"),
            device=torch.cuda.get_device_name(0),
        ),
        "| setting | pairs/s median | best | max abs diff vs evirank fp32 |",
        "| --- | ---: | ---: | ---: |",
        *(f"| {label} | {median:,.0f} | {best:,.0f} | {diff:.1e} |" for label, median, best, diff in rows),
        footer(),
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
