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

``--feed`` measures the host side alone, on any machine (no GPU): pairs/s tokenised, assembled,
sorted, cut by the token budget, padded and handed to a model that does nothing, on SciFact
claim/sentence pairs (written once to the pairs file), for this checkout and, with
``--before-src``, for another checkout's ``src`` folder (the code before a change):
    PYTHONPATH=src python benchmarks/gpu_batches.py --feed --before-src ../evirank-before/src
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import REPO, datasets, footer, header
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


def feed_main(argv: list[str]) -> None:
    """``--feed``: the host side alone (no GPU needed); see ``benchmarks/_feed.py``."""
    parser = argparse.ArgumentParser(
        prog="gpu_batches.py --feed",
        description="pairs/s the host prepares for a model that does nothing, before and after a change",
    )
    parser.add_argument("--feed", action="store_true", required=True)
    parser.add_argument("--model", help="a model folder whose tokenizer is used (default: all-MiniLM-L6-v2)")
    parser.add_argument(
        "--pairs-file",
        help="JSONL of {query, text} lines; made from SciFact there when missing "
        "(default: feed-pairs-N.jsonl in $EVIRANK_CACHE, else ~/.cache/evirank)",
    )
    parser.add_argument("--pairs", type=int, default=150_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=65536, help="tokens per batch")
    parser.add_argument("--pad-multiple", type=int, default=8, help="as the torch backend pads on CUDA")
    parser.add_argument(
        "--before-src",
        help="the src folder of another checkout (the code before a change), measured the same way",
    )
    args = parser.parse_args(argv)
    from _feed import write_feed_pairs

    from evirank.score.families.bi import default_bi_encoder

    model = args.model or default_bi_encoder()
    cache = Path(os.environ.get("EVIRANK_CACHE") or Path.home() / ".cache" / "evirank")
    pairs_file = Path(args.pairs_file) if args.pairs_file else cache / f"feed-pairs-{args.pairs}.jsonl"
    if not pairs_file.exists():
        data = datasets()
        assert data is not None
        write_feed_pairs(pairs_file, args.pairs, data)
    script = Path(__file__).with_name("_feed.py")
    common = [
        "--model", str(model), "--pairs-file", str(pairs_file), "--pairs", str(args.pairs),
        "--rounds", str(args.rounds), "--budget", str(args.budget), "--pad-multiple", str(args.pad_multiple),
    ]  # fmt: skip
    versions = [("this checkout", REPO / "src")]
    if args.before_src:
        versions.insert(0, (f"before: {Path(args.before_src).resolve().parent.name}", Path(args.before_src)))
    model_name = "all-MiniLM-L6-v2" if args.model is None else Path(model).name
    head = header(  # before measuring: the load average at the start
        "The host side of scoring alone: pairs/s prepared and handed to a model that does nothing",
        f"tokenizer of {model_name}; {args.budget:,} tokens per batch, padded to multiples of "
        f"{args.pad_multiple}; median of {args.rounds} rounds (each a scorer call over all pairs)",
        "cold: a new scorer, every text tokenised; warm: the same scorer called again (texts "
        "already tokenised); passages/s: the bi-encoder's passage embedding of the distinct "
        "sentences (what evirank embed does), cold and warm alike",
        packages=("tokenizers", "numpy", "pandas"),
    )
    results = []
    for label, src in versions:  # each in a fresh process
        done = subprocess.run(
            [sys.executable, str(script), "--src", str(src), *common],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        if done.returncode != 0:
            raise SystemExit(f"measuring {src} failed:\n{done.stderr[-3000:]}")
        results.append((label, src, json.loads(done.stdout.strip().splitlines()[-1])))
    first = results[-1][2]
    lines = [
        head,
        f"pairs: {first['pairs']:,} SciFact claim/sentence pairs from {pairs_file.name} "
        f"({first['distinct_queries']:,} claims, {first['distinct_texts']:,} distinct sentences, "
        f"{first['tokens_mean']:.1f} tokens a pair, {first['padded_tokens'] / first['pairs']:.1f} padded)",
        "",
        "| code | cross-encoder pairs/s, cold | pairs/s, warm | bi-encoder passages/s, cold "
        "| passages/s, warm |",
        "| --- | ---: | ---: | ---: | ---: |",
        *(
            f"| {label} | {r['cold_median']:,.0f} | {r['warm_median']:,.0f} | "
            f"{r['passages_cold_median']:,.0f} | {r['passages_warm_median']:,.0f} |"
            for label, _, r in results
        ),
        footer(),
    ]
    print("\n".join(lines), flush=True)


def main() -> None:
    if "--feed" in sys.argv[1:]:
        feed_main(sys.argv[1:])
        return
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
