"""Scale-out: pairs/s of one process versus Ray Data workers, Ray's fixed costs, driver memory.

On a fixed seeded sample of SciFact test (query, sentence) pairs (the sentences of BM25's top
100), with all-MiniLM-L6-v2 under a fresh seeded one-logit head (the same model as
``benchmarks/scoring.py``), each configuration runs in its own process (Ray is never reused
between configurations, and a process's peak memory is its own):

- ``single``: today's single process (``CrossEncoder``, torch, all cores);
- ``ray-1`` / ``ray-2``: Ray on this machine (``--ray local``) with 1 and 2 one-thread workers;
- ``gpu`` / ``ray-gpu``: one GPU, single process and one Ray GPU worker (only where CUDA is).

For each: wall seconds of the scoring call (the model load included, as a job pays it), pairs/s,
and the process's peak resident memory. Ray's fixed costs are measured separately: cluster
start (``ray.init``), the overhead of a job (a 50-pair job: actor start, model load, first
task), and the overhead per task (the same pairs in small blocks minus in one block, per extra
block). From the measured one-worker rate, the time of two paper-sized jobs is projected
(marked as a projection): Robust04 Birch (250 x 1,000 x ~25 sentences) and MS MARCO document
dev (5,193 x 100 x ~15 windows) on 1, 8 and 64 workers of this kind, scaled by the measured
2-worker efficiency.

Usage (from the repository root; needs a SciFact Lucene index, ``evirank index``):
    evirank index --corpus DATASETS/scifact --index indexes/scifact
    PYTHONPATH=src python benchmarks/scale.py --index indexes/scifact --pairs 4000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from _common import footer, header
from scoring import minilm_cross, sample_pairs, scifact_passages

from evirank import markdown
from evirank.config import Runtime

JOBS = {
    "Robust04 Birch (250 x 1,000 x ~25 sentences)": 250 * 1000 * 25,
    "MS MARCO doc dev (5,193 x 100 x ~15 windows)": 5193 * 100 * 15,
}
WORKERS = (1, 8, 64)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB: ``VmHWM`` (``ru_maxrss`` would include the
    parent's peak, which Linux keeps across fork and exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_phase(args: argparse.Namespace) -> dict[str, Any]:
    """One configuration, in this process; returns its measurements."""
    import torch

    from evirank.scale import RayOptions
    from evirank.scale.engine import connect
    from evirank.score import CrossEncoder

    frame = pd.read_parquet(args.frame)
    phase = args.phase
    out: dict[str, Any] = {"phase": phase, "pairs": len(frame)}
    device = "cuda" if phase in ("gpu", "ray-gpu") else "cpu"
    if phase in ("single", "gpu"):
        scorer = CrossEncoder(args.model, Runtime(device=device))
        scorer.chunk_items = args.block_pairs  # the same chunks, so the same batches, as the Ray runs
        started = time.perf_counter()
        scorer.transform(frame)
        out["wall_s"] = time.perf_counter() - started
        out["threads"] = torch.get_num_threads()
    else:
        workers = {"ray-1": 1, "ray-2": 2, "ray-gpu": 1}[phase]
        gpus = 1.0 if phase == "ray-gpu" else 0.0
        options = RayOptions("local", workers=workers, cpus_per_worker=1, gpus_per_worker=gpus)
        started = time.perf_counter()
        connect(options)
        out["cluster_start_s"] = time.perf_counter() - started
        # a 50-pair job: what any job pays before its first result (actors, model load, a task)
        small = CrossEncoder(args.model, Runtime(device=device, ray=options))
        started = time.perf_counter()
        small.transform(frame.head(50))
        out["job_50_s"] = time.perf_counter() - started
        scorer = CrossEncoder(args.model, Runtime(device=device, ray=options))
        scorer.chunk_items = args.block_pairs  # a task per block: enough blocks for every worker
        started = time.perf_counter()
        scorer.transform(frame)
        out["wall_s"] = time.perf_counter() - started
        out["model_s"] = scorer.stats_.model_s
        if phase == "ray-1":  # the cost of a task: the same pairs in many small blocks
            blocks = -(-len(frame) // args.task_items)
            chopped = CrossEncoder(args.model, Runtime(device=device, ray=options))
            chopped.chunk_items = args.task_items
            started = time.perf_counter()
            chopped.transform(frame)
            out["small_blocks"] = blocks
            out["small_blocks_wall_s"] = time.perf_counter() - started
    out["pairs_per_s"] = len(frame) / out["wall_s"]
    out["driver_peak_mb"] = peak_rss_mb()
    return out


def child(args: argparse.Namespace, phase: str, frame: Path) -> dict[str, Any]:
    """Run ``phase`` in a new process and read its JSON line."""
    command = [sys.executable, __file__, "--phase", phase, "--frame", str(frame), "--model", str(args.model)]
    command += ["--task-items", str(args.task_items), "--block-pairs", str(args.block_pairs)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def hours(pairs: int, rate: float) -> str:
    seconds = pairs / rate
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--index", help="Lucene index of SciFact (BM25's top 100 of the test queries)")
    parser.add_argument("--run", help="or a BM25 run of SciFact test instead of --index")
    parser.add_argument("--pairs", type=int, default=4000, help="pairs in the sample (default 4000)")
    parser.add_argument("--segment", default="sentences", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task-items", type=int, default=256, help="items per block in the per-task test")
    parser.add_argument(
        "--block-pairs",
        type=int,
        default=1000,
        help="pairs per block (one Ray task each) in the throughput runs; the single process chunks alike",
    )
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "evirank-bench"))
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    parser.add_argument("--frame", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print(json.dumps(run_phase(args)))
        return

    import torch

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    args.model = minilm_cross(work / "minilm-cross", args.seed)
    passages, _, _ = scifact_passages(args, None, 100)
    frame = sample_pairs(passages, args.pairs, args.seed)
    path = work / f"scale-pairs-{len(frame)}.parquet"
    frame[["qid", "query", "docno", "pid", "text"]].to_parquet(path)
    phases = ["single", "ray-1", "ray-2"]
    gpu = torch.cuda.is_available()
    if gpu:
        phases += ["gpu", "ray-gpu"]
    results = {phase: child(args, phase, path) for phase in phases}

    labels = {
        "single": "single process (all cores)",
        "ray-1": "Ray, 1 one-thread worker",
        "ray-2": "Ray, 2 one-thread workers",
        "gpu": "single process, 1 GPU",
        "ray-gpu": "Ray, 1 GPU worker",
    }
    rows = [
        [
            labels[p],
            f"{r['wall_s']:.1f}",
            f"{r['pairs_per_s']:.0f}",
            f"{r['cluster_start_s']:.1f}" if "cluster_start_s" in r else "",
            f"{r['job_50_s']:.1f}" if "job_50_s" in r else "",
            f"{r['driver_peak_mb']:.0f}",
        ]
        for p, r in results.items()
    ]
    device = torch.cuda.get_device_name(0) if gpu else None
    print(
        header(
            "Scale-out: one process versus Ray Data workers",
            f"{len(frame)} SciFact test (query, sentence) pairs: a seeded sample (seed {args.seed}) "
            "of the sentences of BM25's top 100",
            "all-MiniLM-L6-v2 with a fresh seeded one-logit head, torch fp32 on CPU",
            "each configuration in its own process; wall includes the model load (a job pays it)",
            f"blocks of {args.block_pairs} pairs: one Ray task each, and the single process's chunks",
            packages=("torch", "transformers", "ray"),
            device=device,
        )
    )
    print(
        markdown.table(
            ["configuration", "wall s", "pairs/s", "cluster start s", "50-pair job s", "driver peak MB"], rows
        )
    )
    one, two = results["ray-1"], results["ray-2"]
    speedup = two["pairs_per_s"] / one["pairs_per_s"]
    per_task = (one["small_blocks_wall_s"] - one["wall_s"]) / max(1, one["small_blocks"] - 1)
    print()
    print(f"- Ray 2 workers / 1 worker: {speedup:.2f}x (target: at least 1.6x on 2 cores)")
    print(
        f"- Ray's fixed cost of a 50-query-sized job: cluster start {one['cluster_start_s']:.1f} s + "
        f"job {one['job_50_s']:.1f} s = {one['cluster_start_s'] + one['job_50_s']:.1f} s (target: under 15 s)"
    )
    print(f"- per task: {per_task * 1000:.0f} ms ({one['small_blocks']} blocks of {args.task_items} pairs)")

    # Projection from the measured one-worker rate, without the job's fixed cost.
    rate = len(frame) / max(1e-9, one["wall_s"] - one["job_50_s"])
    efficiency = min(1.0, speedup / 2)
    print()
    print(
        f"**Projection** (not measured): {rate:.0f} pairs/s per one-thread worker of this machine, "
        f"{efficiency:.0%} parallel efficiency as measured with 2 workers, fixed costs left out."
    )
    print()
    proj_rows = [
        [name, f"{pairs / 1e6:.2f} M"]
        + [hours(pairs, rate * n * (efficiency if n > 1 else 1)) for n in WORKERS]
        for name, pairs in JOBS.items()
    ]
    if gpu:
        gpu_rate = results["ray-gpu"]["pairs_per_s"]
        proj_rows += [
            [f"{name}, GPU workers", f"{pairs / 1e6:.2f} M"] + [hours(pairs, gpu_rate * n) for n in WORKERS]
            for name, pairs in JOBS.items()
        ]
    names = [f"{n} worker{'s' if n > 1 else ''}" for n in WORKERS]
    print(markdown.table(["job", "pairs", *names], proj_rows))
    print(footer())


if __name__ == "__main__":
    main()
