"""evirank's torch path on a GPU by precision, token budget and batch layout, next to sentence-transformers.

One process, one model folder, one pairs file (JSONL lines of ``{"query": ..., "text": ...}``, as
``benchmarks/gpu_inputs.py pairs`` writes them). Each evirank setting (fp32 and bf16, two token
budgets, padded and unpadded batches) is loaded, warmed up with one call over the first
``--warmup`` pairs, then timed over ``--rounds`` calls on all the pairs; sentence-transformers'
CrossEncoder runs in fp16 and bf16 weights at batch 32, 256 and 1024 on the first ``--st-pairs`` of
the same pairs (the same warm-up, the same rounds). Each row shows the median and best pairs/s, the
GPU's utilisation as ``nvidia-smi`` sampled it every 200 ms while the row ran, the model FLOP/s
reached (the encoder's forward FLOPs of the pairs' real token counts, from the model's config:
2 x weights of the linear layers x tokens, plus attention; the same count for every row, so a
[CLS]-only last layer or padding saved shows as more pairs/s, not as more FLOPs) against the
dense bf16 peak (``--peak-tflops``, the H100 SXM's by default), and the largest score difference
from evirank's fp32 padded scores. With ``--embed`` a last row embeds the pairs' distinct sentences
with the bi-encoder (all-MiniLM-L6-v2), the path of ``evirank embed``: passages/s.

Usage (from the repository root, on a CUDA machine; ``benchmarks/gpu_check.sh`` runs it all):
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/gpu_batches.py MODEL_DIR PAIRS.jsonl --pairs 150000

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
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from _common import REPO, datasets, footer, header
from peers import _frame, read_pairs
from scoring import flops_per_pair, pair_lengths

from evirank.config import Runtime
from evirank.frames import QUERY, SCORE, TEXT

#: The H100 SXM's dense bf16 tensor-core peak, TFLOP/s (no sparsity).
H100_SXM_BF16_TFLOPS = 989.0


class Utilisation:
    """GPU utilisation (percent) sampled every 200 ms by ``nvidia-smi`` (else NVML) while in use.

    Example:
        >>> with Utilisation(0) as u:  # doctest: +SKIP
        ...     run()
        >>> u.mean()  # doctest: +SKIP
        87.5
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.samples: list[float] = []
        self._process: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def __enter__(self) -> Utilisation:
        self.samples = []
        self._stop.clear()
        smi = shutil.which("nvidia-smi")
        if smi is not None:
            self._process = subprocess.Popen(
                [
                    smi,
                    "--query-gpu=utilization.gpu",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "200",
                    "-i",
                    str(self.index),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
        else:
            self._thread = threading.Thread(target=self._poll_nvml, daemon=True)
        self._thread.start()
        return self

    def _read_smi(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            try:
                self.samples.append(float(line.strip()))
            except ValueError:
                continue

    def _poll_nvml(self) -> None:
        try:
            import pynvml
        except ImportError:
            return
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
        while not self._stop.wait(0.2):
            self.samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=5)
            self._process = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def mean(self) -> float:
        """Mean of the samples (nan when none were taken)."""
        return float(np.mean(self.samples)) if self.samples else float("nan")


@dataclass
class Row:
    """One measured setting."""

    label: str
    rates: list[float]
    utilisation: float
    diff: float
    unit: str = "pairs"
    flops_per_item: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)


def timed(
    call: Callable[[int], np.ndarray], warmup: int, n: int, rounds: int, device: int, row_seconds: float
) -> tuple[np.ndarray, list[float], float]:
    """One warm-up call on ``warmup`` items, then up to ``rounds`` timed calls on ``n`` (no new one
    once the timed calls took ``row_seconds``): (output of the last, items/s of each, mean GPU
    utilisation during the timed calls)."""
    import torch

    call(warmup)
    torch.cuda.synchronize()
    rates: list[float] = []
    out = np.array([])
    spent = 0.0
    with Utilisation(device) as busy:
        while len(rates) < rounds and (not rates or spent < row_seconds):
            started = time.perf_counter()
            out = call(n)
            torch.cuda.synchronize()
            took = time.perf_counter() - started
            spent += took
            rates.append(n / took)
    return out, rates, busy.mean()


def _cell(value: float, fmt: str) -> str:
    return "-" if value is None or not np.isfinite(value) else format(value, fmt)


def table(rows: list[Row], peak: float) -> list[str]:
    """The Markdown table of ``rows`` (``peak``: FLOP/s)."""
    lines = [
        "| setting | items/s median | best | calls | GPU busy % (nvidia-smi) | model TFLOP/s (best) "
        "| % of bf16 peak | max abs diff vs evirank fp32 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        best = max(row.rates)
        achieved = row.flops_per_item * best if row.flops_per_item else float("nan")
        lines.append(
            f"| {row.label} | {row.median:,.0f} {row.unit}/s | {best:,.0f} | {len(row.rates)} "
            f"| {_cell(row.utilisation, '.0f')} "
            f"| {_cell(achieved / 1e12, '.1f')} | {_cell(100 * achieved / peak, '.1f')} "
            f"| {_cell(row.diff, '.1e')} |"
        )
    return lines


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
        help="JSONL of {query, text} lines; made there when missing, as the GPU check makes its pairs "
        "(benchmarks/gpu_inputs.py; default: the GPU check's, work/gpu-check/scifact-pairs-N.jsonl)",
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
    from gpu_inputs import write_pairs

    from evirank.score.default_model import default_bi_encoder

    model = args.model or default_bi_encoder()
    if args.pairs_file:
        pairs_file = Path(args.pairs_file)
    else:  # the GPU check's pairs, made the same way
        data = datasets(required=False)
        kind = "scifact" if data is not None and (data / "scifact").is_dir() else "synthetic"
        pairs_file = REPO / "work" / "gpu-check" / f"{kind}-pairs-{args.pairs}.jsonl"
    print(write_pairs(pairs_file, args.pairs, seed=0, synthetic=False), file=sys.stderr)
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
        f"pairs: {first['pairs']:,} claim/sentence pairs from {pairs_file.name} "
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
    parser.add_argument("--pairs", type=int, default=150_000, help="pairs timed per evirank call")
    parser.add_argument(
        "--st-pairs", type=int, default=30_000, help="pairs timed per sentence-transformers call"
    )
    parser.add_argument("--warmup", type=int, default=10_000, help="pairs of the warm-up call")
    parser.add_argument("--rounds", type=int, default=2, help="timed calls per row (at most)")
    parser.add_argument(
        "--row-seconds",
        type=float,
        default=20.0,
        help="no further timed call once a row's timed calls took this long (keeps the run short)",
    )
    parser.add_argument("--budgets", type=int, nargs=2, default=[65536, 262144], help="tokens per batch")
    parser.add_argument(
        "--layouts", nargs="+", default=["padded", "unpadded"], choices=["padded", "unpadded"]
    )
    parser.add_argument("--st-batches", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument("--st-dtypes", nargs="+", default=["fp16", "bf16"], choices=["fp16", "bf16"])
    parser.add_argument(
        "--peak-tflops", type=float, default=H100_SXM_BF16_TFLOPS, help="the GPU's dense bf16 peak (TFLOP/s)"
    )
    parser.add_argument(
        "--embed", action="store_true", help="also embed the pairs' sentences with the bi-encoder"
    )
    parser.add_argument("--device", type=int, default=0, help="CUDA device index")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        parser.error(f"it measures a CUDA GPU and torch {torch.__version__} sees none")
    torch.cuda.set_device(args.device)
    run_table(args)


def run_table(args: argparse.Namespace) -> None:
    """Measure every row and print the table (the GPU half)."""
    import torch

    from evirank.score import BiEncoder, CrossEncoder

    frame = _frame(read_pairs(Path(args.pairs_file))).head(args.pairs)
    lengths = pair_lengths(Path(args.model), frame)
    flops_per = flops_per_pair(Path(args.model), lengths) / len(frame)
    rows: list[Row] = []
    reference: np.ndarray | None = None

    def measure(label: str, call: Callable[[int], np.ndarray], n: int, **extra: object) -> None:
        nonlocal reference
        out, rates, busy = timed(call, min(args.warmup, n), n, args.rounds, args.device, args.row_seconds)
        if reference is None:
            reference = out
        diff = float(np.abs(out - reference[: len(out)]).max()) if extra.get("unit") is None else float("nan")
        rows.append(Row(label, rates, busy, diff, flops_per_item=flops_per, **extra))  # type: ignore[arg-type]
        gc.collect()
        torch.cuda.empty_cache()

    cuda = f"cuda:{args.device}"
    padding = {}
    for dtype in ("fp32", "bf16"):
        for budget in args.budgets:
            for layout in args.layouts:
                scorer = CrossEncoder(
                    args.model, Runtime(device=cuda, dtype=dtype, batch_tokens=budget, batch_layout=layout)
                )
                backend = scorer.load()
                shown = (
                    layout
                    if layout == "padded" or backend.unpadded is None
                    else (
                        "unpadded, varlen attention"
                        if backend.unpadded.varlen
                        else "unpadded, padded attention"
                    )
                )
                measure(
                    f"evirank {dtype}, {budget:,} tokens/batch, {shown}",
                    lambda n, s=scorer: s(frame.head(n))[SCORE].to_numpy(),
                    len(frame),
                )
                if layout == "padded":
                    padding[budget] = 1.0 - float(lengths.sum()) / max(scorer.stats_.tokens, 1)
                del scorer, backend
    from sentence_transformers import CrossEncoder as STCrossEncoder

    pairs = list(zip(frame[QUERY], frame[TEXT], strict=True))
    identity = torch.nn.Identity()
    for dtype in args.st_dtypes:
        weights = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        model = STCrossEncoder(args.model, device=cuda, model_kwargs={"dtype": weights})
        for size in args.st_batches:
            measure(
                f"sentence-transformers {dtype} weights, batch {size}",
                lambda n, b=size, m=model: np.asarray(
                    m.predict(pairs[:n], batch_size=b, activation_fn=identity, show_progress_bar=False),
                    dtype=np.float32,
                ).reshape(-1),
                min(args.st_pairs, len(pairs)),
            )
        del model
    if args.embed:
        sentences = list(dict.fromkeys(frame[TEXT]))
        bi = BiEncoder(None, Runtime(device=cuda, dtype="bf16"))
        backend = bi.load()
        layout = "unpadded" if backend.unpadded is not None else "padded"
        measure(
            f"evirank bi-encoder embed (all-MiniLM-L6-v2), bf16, {layout}: distinct sentences",
            lambda n: bi.embed(sentences[:n])[:, 0],
            len(sentences),
            unit="passages",
        )
        rows[-1].flops_per_item = None
    print_table(args, frame, lengths, rows, padding)


def print_table(
    args: argparse.Namespace, frame: object, lengths: np.ndarray, rows: list[Row], padding: dict[int, float]
) -> None:
    import torch

    peak = args.peak_tflops * 1e12
    name = torch.cuda.get_device_name(args.device)
    st_pairs = min(args.st_pairs, len(lengths))
    gflop = flops_per_pair(Path(args.model), lengths) / len(lengths) / 1e9
    lines = [
        header(
            "evirank's torch path on the GPU by precision, token budget and batch layout, "
            "next to sentence-transformers",
            f"pairs: {len(lengths):,} from {Path(args.pairs_file).name}, {lengths.mean():.1f} tokens a pair "
            f"(max {lengths.max()}); sentence-transformers timed on the first {st_pairs:,}",
            f"one warm-up call on {args.warmup:,} pairs, then up to {args.rounds} timed calls (calls: "
            f"how many; none after {args.row_seconds:g} s); GPU busy: the mean of nvidia-smi's "
            "utilisation.gpu sampled every 200 ms during the timed calls",
            f"model FLOP/s: {gflop:.2f} GFLOP a pair (forward, real tokens) x best pairs/s; peak: "
            f"{args.peak_tflops:g} TFLOP/s dense bf16 (--peak-tflops)",
            "padding in evirank's padded batches: "
            + ", ".join(f"{share:.1%} at {budget:,} tokens/batch" for budget, share in padding.items()),
            packages=("torch", "transformers", "sentence-transformers", "tokenizers"),
            device=name,
        ),
        *table(rows, peak),
        footer(),
    ]
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
