"""Rerankers side by side: evirank's backends against sentence-transformers' and FlashRank's.

One model, one pairs file, one thread count, alternating rounds. The same cross-encoder folder
(``--model``, else all-MiniLM-L6-v2 with a seeded one-logit head, saved once), the same SciFact test
(claim, sentence) pairs (a seeded sample of the sentences of BM25's top 100, in re-ranking order),
the same number of threads for every engine, and rounds that alternate between all rerankers (the
order reversed every other round), so load from other work on the machine falls on all of them.

The peers run in their own environment: sentence-transformers' ONNX and OpenVINO backends need
Optimum, which needs transformers < 5, so the benchmark builds a virtual environment once (under
``$EVIRANK_CACHE``, else ``~/.cache/evirank``: ``peers-venv``) with pip from PyPI, reusing this
environment's torch (linked, not downloaded) and pinning ONNX Runtime and OpenVINO to the versions
evirank runs here, so both sides use the same engines. A long-lived worker process
(``benchmarks/_peer_worker.py``) loads the peers and scores the same pairs file when told to; while
it scores, this process waits, and the other way round, so rounds stay fair. Peer exports
(ONNX, its O1-O4 optimisation levels, dynamic int8, OpenVINO IR, NNCF static int8 calibrated on
SciFact *train* claims' pairs) are made once into the work folder.

Reported per reranker: what engine and precision it computes in (as the engine reports it), pairs/s
(median over rounds, and the best), CPU seconds per 1,000 pairs, memory (in a fresh process: what
loading adds to the resident set, and the peak above that while scoring the 256 longest pairs), the
largest score difference from the reference (evirank's fp32 torch path; raw logits on both sides),
and, with a trained model, SciFact nDCG@10 of re-ranking BM25's top ``--ndcg-depth`` by the best
sentence (MaxP) and its change from the reference. Then, per precision class (fp32, bf16, int8), the
fastest evirank path against the fastest peer.

A trained cross-encoder makes the nDCG column meaningful: give ``--model DIR``, or ``--train DIR``
to train one first (``evirank train`` on SciFact train claims, a short recipe; the commands are
printed). A random head is fine for the speed and score-difference columns.

On a CUDA machine the default comparison is evirank's torch path (bf16 autocast, and fp32) against
sentence-transformers' torch backend in fp32, fp16 and bf16 on the same GPU, with the share of the
GPU's dense bf16 peak the model's FLOPs reach.

Usage (from the repository root):
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/peers.py                    # every reranker
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/peers.py --pairs 600 --rounds 2 \\
        --configs evirank-openvino,evirank-openvino-int8,st-openvino,st-openvino-int8
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/peers.py --train models/minilm-scifact-quick
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/peers.py --list               # the names
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scoring
from _common import REPO, datasets, footer, header, load_average

from evirank import markdown
from evirank.config import Runtime
from evirank.frames import DOCNO, QID, QUERY, RANK, SCORE, TEXT

logger = logging.getLogger("peers")

#: evirank's rerankers: name -> (backend, dtype, device kind).
EVIRANK = {
    "evirank-torch": ("torch", "fp32", "cpu"),
    "evirank-torch-bf16": ("torch", "bf16", "cpu"),
    "evirank-onnx": ("onnx", "auto", "cpu"),
    "evirank-onnx-int8": ("onnx-int8", "auto", "cpu"),
    "evirank-openvino": ("openvino", "auto", "cpu"),
    "evirank-openvino-bf16": ("openvino", "bf16", "cpu"),
    "evirank-openvino-int8": ("openvino-int8", "auto", "cpu"),
    "evirank-torch-cuda": ("torch", "auto", "cuda"),
    "evirank-torch-cuda-fp32": ("torch", "fp32", "cuda"),
}
#: The peers the worker runs (benchmarks/_peer_worker.py), with the device kind they run on.
PEERS = {
    "st-torch": "cpu",
    "st-onnx": "cpu",
    "st-onnx-O1": "cpu",
    "st-onnx-O2": "cpu",
    "st-onnx-O3": "cpu",
    "st-onnx-O4": "cpu",
    "st-onnx-int8": "cpu",
    "st-openvino": "cpu",
    "st-openvino-f32": "cpu",
    "st-openvino-int8": "cpu",
    "flashrank": "cpu",
    "flashrank-int8": "cpu",
    "st-torch-cuda": "cuda",
    "st-torch-cuda-fp16": "cuda",
    "st-torch-cuda-bf16": "cuda",
}
#: Peers that sentence-transformers' torch backend runs: any environment with it will do.
TORCH_ONLY = {"st-torch", "st-torch-cuda", "st-torch-cuda-fp16", "st-torch-cuda-bf16"}
#: The bf16 paths, left out of the default set on CPUs without native bf16 (emulated bf16 is slow).
NEEDS_BF16 = {"evirank-torch-bf16", "evirank-openvino-bf16"}
#: The peers calibrated on a set of pairs (static int8): with --pairs-from, only given --calibration-from.
NEEDS_CALIBRATION = {"st-openvino-int8"}
REFERENCE = {"cpu": "evirank-torch", "cuda": "evirank-torch-cuda-fp32"}
#: Scores within this of the reference's count as the same (the fp32 tolerance).
SAME_SCORES = 1e-4
#: The peer environment: sentence-transformers 5 with Optimum (transformers < 5), pinned.
PEER_REQUIREMENTS = (
    "sentence-transformers[onnx,openvino]==5.7.0",
    "transformers==4.57.6",
    "optimum==2.1.0",
    "optimum-onnx==0.1.0",
    "optimum-intel==1.27.0",
    "nncf==3.4.0",
    "flashrank==0.2.10",
)
WORKER = Path(__file__).with_name("_peer_worker.py")


# -- the peer environment ----------------------------------------------------------------------
def peer_venv(folder: Path) -> Path:
    """The peer environment's python: built once in ``folder`` (pip from PyPI), then reused.

    This environment's torch is linked into it (:func:`venv_with_torch`), so the peers run the same
    torch and nothing of torch is downloaded; ONNX Runtime and OpenVINO are pinned to this
    environment's versions, so both sides run the same engines.
    """
    import onnxruntime
    import openvino

    wanted = [
        *PEER_REQUIREMENTS,
        f"onnxruntime=={onnxruntime.__version__}",
        f"openvino=={openvino.__version__.split('-')[0]}",
    ]
    return venv_with_torch(folder, wanted, "evirank-peers.json")


def venv_with_torch(folder: Path, requirements: list[str], marker_name: str) -> Path:
    """A virtual environment's python with ``requirements`` and this environment's torch, built once.

    The torch of the running interpreter is linked in (a ``.pth`` entry after the new environment's
    own packages), so pip sees it installed and downloads nothing of torch (an unpinned torch pulls
    gigabytes of CUDA packages). The environment is built in a temporary folder beside ``folder``
    and renamed into place; a marker file (``marker_name``) records what it was built with, and a
    later call with the same requirements, torch and Python reuses it.

    Example:
        >>> python = venv_with_torch(Path("~/.cache/evirank/x-venv").expanduser(), ["tqdm"], "x.json")
        ... # doctest: +SKIP
    """
    import torch

    spec = {"requirements": requirements, "torch": torch.__version__, "python": sys.version.split()[0]}
    marker = folder / marker_name
    python = folder / "bin" / "python"
    if marker.is_file() and json.loads(marker.read_text()) == spec and python.exists():
        return python
    logging.warning("building a peer environment in %s (once; pip from PyPI, a few minutes)", folder)
    started = time.perf_counter()
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(work)], check=True)
        link = work / "torch-link"
        link.mkdir()
        for item in _torch_files():
            os.symlink(item, link / item.name)
        site = next((work / "lib").glob("python*/site-packages"))
        # relative to site-packages, so the folder can be renamed into place
        (site / "zz-evirank-torch.pth").write_text(os.path.relpath(link, site) + "\n")
        subprocess.run(
            [
                str(work / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *requirements,
            ],
            check=True,
        )
        (work / marker_name).write_text(json.dumps(spec, indent=1))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    logging.warning("peer environment ready in %.0f s", time.perf_counter() - started)
    return python


def _torch_files() -> list[Path]:
    """The top-level files and folders of this environment's torch distribution."""
    from importlib.metadata import distribution

    dist = distribution("torch")
    tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    base = Path(str(dist.locate_file("")))
    return sorted(base / top for top in tops if not top.endswith(".pth") and (base / top).exists())


class PeerWorker:
    """The long-lived peer process: one JSON command per line in, one JSON answer per line out."""

    def __init__(
        self,
        python: Path,
        model: Path,
        work: Path,
        threads: int,
        device: str,
        calibration: Path | None,
        batch: int | None = None,
    ) -> None:
        command = [
            str(python),
            str(WORKER),
            "--model",
            str(model),
            "--work",
            str(work),
            "--threads",
            str(threads),
            "--device",
            device,
        ]
        if calibration is not None:
            command += ["--calibration", str(calibration)]
        if batch is not None:
            command += ["--batch", str(batch)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1
        )

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the peer worker exited (code {self.process.wait()}); see its messages above")
        answer = json.loads(line)
        if not answer.pop("ok"):
            raise RuntimeError(f"peer {command.get('name', '')}: {answer['error']}")
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(RuntimeError, BrokenPipeError, json.JSONDecodeError):
                self.ask(op="quit")
            self.process.wait(timeout=60)


# -- rerankers -----------------------------------------------------------------------------------
@dataclass
class Reranker:
    """One reranker under test and what was measured of it."""

    name: str
    label: str = ""
    engine: str = ""
    precision: str = ""
    batch: str = ""
    rates: list[float] = field(default_factory=list)
    cpu_per_k: list[float] = field(default_factory=list)
    load_mb: float = float("nan")
    peak_mb: float = float("nan")
    scores: np.ndarray | None = None
    ndcg: float = float("nan")
    scorer: Any = None

    @property
    def is_peer(self) -> bool:
        return self.name in PEERS

    @property
    def precision_class(self) -> str:
        p = self.precision.lower()
        return (
            "int8" if p.startswith("int8") else "bf16" if "bf16" in p else "fp16" if "fp16" in p else "fp32"
        )


def load_evirank(name: str, model_dir: Path) -> Reranker:
    """Load one of evirank's rerankers (its CrossEncoder with one backend and dtype)."""
    import torch

    from evirank.score import CrossEncoder

    backend, dtype, kind = EVIRANK[name]
    scorer = CrossEncoder(model_dir, Runtime(backend=backend, dtype=dtype, device=kind))
    scorer.load()
    engine = {
        "torch": lambda: f"PyTorch {torch.__version__.split('+')[0]}",
        "onnx": lambda: f"ONNX Runtime {_version('onnxruntime')}",
        "openvino": lambda: f"OpenVINO {_version('openvino')}",
    }[backend.split("-")[0]]()
    return Reranker(
        name,
        label=f"evirank CrossEncoder backend={backend}" + (f" dtype={dtype}" if dtype != "auto" else ""),
        engine=engine,
        precision=scorer.precision_,
        batch=f"{scorer.batch_tokens_:,} tokens",
        scorer=scorer,
    )


def model_digest(model_dir: Path) -> str:
    """A short digest of a model folder's weights and config (its peer exports are kept under it)."""
    import hashlib

    from evirank.score.fingerprint import file_sha256, weight_files

    files = sorted([*weight_files(model_dir), model_dir / "config.json"])
    return hashlib.sha256("".join(file_sha256(p) for p in files if p.is_file()).encode()).hexdigest()[:16]


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package).split("+")[0].split("-")[0]


def score_evirank(reranker: Reranker, frame: pd.DataFrame) -> tuple[np.ndarray, float, float]:
    """(scores, wall seconds, CPU seconds) of one call."""
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    scores = reranker.scorer(frame)[SCORE].to_numpy()
    if reranker.scorer.device_.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return scores, time.perf_counter() - wall0, time.process_time() - cpu0


# -- data ----------------------------------------------------------------------------------------
def bm25_runs(args: argparse.Namespace) -> tuple[Path, Path]:
    """BM25 runs of SciFact's test and train claims: given, or made once in the work folder."""
    work = Path(args.work)
    data = datasets() / "scifact"
    index = Path(args.index) if args.index else work / "scifact-index"
    runs = []
    for split, given in (("test", args.run), ("train", args.train_run)):
        if given:
            runs.append(Path(given))
            continue
        path = work / f"scifact-{split}.bm25.txt"
        if not path.is_file():
            if not index.exists():
                _evirank("index", "--corpus", str(data), "--index", str(index))
            _evirank(
                "search", "--index", str(index), "--topics", str(data), "--split", split,
                "--k", "100", "--output", str(path),
            )  # fmt: skip
        runs.append(path)
    return runs[0], runs[1]


def _evirank(*argv: str) -> None:
    logging.warning("evirank %s", " ".join(argv))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    subprocess.run([sys.executable, "-m", "evirank", *argv], check=True, env=env)


def sentence_pairs(run: Path, split: str, depth: int, segment: str) -> tuple[pd.DataFrame, Any, Any]:
    """Passages (``segment``) of BM25's top ``depth`` for every claim of ``split``, with topics and qrels."""
    from evirank.io import read_qrels, read_run, read_topics
    from evirank.rerank import AddQueries, FetchText, parse_segment

    data = datasets() / "scifact"
    topics = read_topics(data, split=split)
    qrels = read_qrels(data / "qrels" / f"{split}.tsv")
    first = read_run(run)
    first = first[first[QID].isin(set(topics[QID])) & (first[RANK] <= depth)].reset_index(drop=True)
    head = FetchText(corpus=data)(AddQueries(topics)(first))
    return parse_segment(segment)(head), topics, qrels


def write_pairs(frame: pd.DataFrame, path: Path) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for query, text in zip(frame[QUERY], frame[TEXT], strict=True):
            handle.write(json.dumps({"query": query, "text": text}) + "\n")
    return path


# -- the trained model -------------------------------------------------------------------------
def train_model(folder: Path, train_run: Path, threads: int) -> Path:
    """A SciFact cross-encoder trained quickly with ``evirank train`` (kept; reused when there)."""
    if (folder / "config.json").is_file():
        return folder
    sf = str(datasets() / "scifact")
    _evirank(*train_command(folder, sf, str(train_run), threads))
    return folder


def train_command(folder: Path, sf: str, train_run: str, threads: int) -> list[str]:
    """The ``evirank train`` arguments of a quick SciFact recipe: docs/train.md's listwise recipe
    (each gold sentence or relevant abstract against 7 negatives of its claim), 300 steps."""
    return [
        "train", "--output", str(folder),
        "--evidence", f"{sf}/queries.jsonl", f"{sf}/evidence/train.jsonl", f"{sf}/qrels/train.tsv",
        train_run, sf,
        "--documents", f"{sf}/queries.jsonl", f"{sf}/qrels/train.tsv", train_run, sf,
        "--negatives-per-query", "10", "--negative-depth", "20", "--max-passages", "1",
        "--evidence-title", "--evidence-gold-only", "--validation-fraction", "0",
        "--loss", "listwise", "--group-size", "8", "--batch-size", "2",
        "--epochs", "1", "--max-steps", "300", "--max-length", "128", "--lr", "4e-5",
        "--model-threads", str(threads),
    ]  # fmt: skip


# -- measuring -----------------------------------------------------------------------------------
def run_rounds(
    rerankers: list[Reranker],
    frame: pd.DataFrame,
    pairs_file: Path,
    worker: PeerWorker | None,
    rounds: int,
    work: Path,
) -> None:
    """Score the pairs with every reranker in alternating rounds (reversed every other round), after
    one untimed warm-up round: engines that compile kernels per input shape (OpenVINO) meet every
    batch shape of the pairs once before the clock runs, and so do all the others."""
    for round_no in range(-1, rounds):
        order = rerankers if round_no % 2 == 0 else rerankers[::-1]
        for r in order:
            if r.is_peer:
                assert worker is not None
                out = work / f"scores-{r.name}.npy"
                answer = worker.ask(op="score", name=r.name, pairs=str(pairs_file), out=str(out))
                wall, cpu, scores = answer["seconds"], answer["cpu_seconds"], np.load(out)
            else:
                scores, wall, cpu = score_evirank(r, frame)
            if round_no < 0:
                logging.info("warm-up %s: %.1f pairs/s", r.name, len(frame) / wall)
                continue
            r.rates.append(len(frame) / wall)
            r.cpu_per_k.append(1000 * cpu / len(frame))
            if r.scores is None:
                r.scores = np.asarray(scores, dtype=np.float64)
            logging.info(
                "round %d %s: %.1f pairs/s (load %s)", round_no + 1, r.name, len(frame) / wall, load_average()
            )


def measure_memory(
    r: Reranker, args: argparse.Namespace, model_dir: Path, longest: Path, peer_python: Path | None
) -> None:
    """Memory of one reranker in a fresh process (a fresh peer worker for a peer)."""
    if r.is_peer:
        assert peer_python is not None
        worker = PeerWorker(
            peer_python,
            model_dir,
            args.peer_work,
            args.threads,
            args.device_kind,
            Path(args.calibration_file) if args.calibration_file else None,
            args.st_batch,
        )
        try:
            answer = worker.ask(op="memory", name=r.name, pairs=str(longest))
        except RuntimeError as exc:
            logging.warning("memory of %s not measured: %s", r.name, exc)
            return
        finally:
            worker.close()
    else:
        command = [
            sys.executable,
            __file__,
            "--memory-child",
            r.name,
            "--model",
            str(model_dir),
            "--pairs-file",
            str(longest),
        ]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "EVIRANK_NUM_THREADS": str(args.threads)},
        )
        try:
            answer = json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            logging.warning("memory of %s not measured: %s", r.name, done.stderr[-500:])
            return
    r.load_mb, r.peak_mb = float(answer["load_mb"]), float(answer["peak_mb"])


def memory_child(name: str, model_dir: Path, pairs_file: Path) -> None:
    """(child process) Load one evirank reranker, score the pairs, print its memory as JSON."""
    import torch
    import transformers  # noqa: F401  (imports are not the reranker's memory)

    torch.set_num_threads(int(os.environ.get("EVIRANK_NUM_THREADS", torch.get_num_threads())))

    frame = _frame(read_pairs(pairs_file))
    gc.collect()
    before = scoring.status_kb().get("VmRSS", 0)
    r = load_evirank(name, model_dir)
    r.scorer(frame.head(4))
    gc.collect()
    loaded = scoring.status_kb().get("VmRSS", 0)
    scoring.reset_peak()
    r.scorer(frame)
    peak = scoring.status_kb().get("VmHWM", loaded)
    print(json.dumps({"load_mb": (loaded - before) / 1024, "peak_mb": (peak - loaded) / 1024}))


def read_pairs(path: Path) -> pd.DataFrame:
    """(query, text) pairs from a JSONL file of ``{"query": ..., "text": ...}`` lines (as written here)."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            try:
                row = json.loads(line)
                rows.append({QUERY: str(row["query"]), TEXT: str(row["text"])})
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise SystemExit(
                    f"{path}:{number}: expected a JSON object with query and text ({error})"
                ) from error
    if not rows:
        raise SystemExit(f"{path}: no pairs")
    return pd.DataFrame(rows)


def _frame(pairs: pd.DataFrame) -> pd.DataFrame:
    """A Passages frame of (query, text) rows: one qid per distinct query."""
    codes = {q: str(i) for i, q in enumerate(dict.fromkeys(pairs[QUERY]))}
    return pd.DataFrame(
        {
            QID: pairs[QUERY].map(codes),
            DOCNO: [f"p{i}" for i in range(len(pairs))],
            "pid": 0,
            TEXT: pairs[TEXT].to_numpy(),
            QUERY: pairs[QUERY].to_numpy(),
        }
    )


def measure_ndcg(
    rerankers: list[Reranker],
    reference: Reranker,
    args: argparse.Namespace,
    test_run: Path,
    worker: PeerWorker | None,
) -> tuple[int, int, float]:
    """SciFact test nDCG@10 of MaxP re-ranking of BM25's top ``--ndcg-depth`` with each reranker.

    Returns (queries, sentences, BM25's nDCG@10 over the same documents)."""
    from evirank.aggregate import MaxP
    from evirank.evaluate import evaluate
    from evirank.io import read_run

    passages, topics, qrels = sentence_pairs(test_run, "test", args.ndcg_depth, args.ndcg_segment)
    if args.ndcg_queries and args.ndcg_queries < topics[QID].nunique():
        keep = np.random.default_rng(args.seed).choice(
            sorted(topics[QID]), size=args.ndcg_queries, replace=False
        )
        passages = passages[passages[QID].isin(set(keep))].reset_index(drop=True)
    qids = set(passages[QID])
    qrels = qrels[qrels[QID].isin(qids)]
    pairs_file = write_pairs(passages, Path(args.work) / "ndcg-pairs.jsonl")
    first = read_run(test_run)
    first = first[first[QID].isin(qids) & (first[RANK] <= args.ndcg_depth)]
    bm25 = evaluate(first, qrels, ["nDCG@10"])["nDCG@10"]
    for r in rerankers:
        if not (args.ndcg_all or r is reference or _max_diff(r, reference) > SAME_SCORES):
            continue  # scores within 1e-4 of the reference's: the same ranking up to near-ties
        started = time.perf_counter()
        if r.is_peer:
            assert worker is not None
            out = Path(args.work) / f"ndcg-{r.name}.npy"
            worker.ask(op="score", name=r.name, pairs=str(pairs_file), out=str(out))
            scores = np.load(out)
        else:
            scores = r.scorer(passages)[SCORE].to_numpy()
        run = MaxP()(passages.assign(**{SCORE: scores}))
        r.ndcg = float(evaluate(run, qrels, ["nDCG@10"])["nDCG@10"])
        logging.info("nDCG@10 %s: %.4f (%.0f s)", r.name, r.ndcg, time.perf_counter() - started)
    return len(qids), len(passages), float(bm25)


# -- the report ----------------------------------------------------------------------------------
def report(
    rerankers: list[Reranker],
    reference: Reranker,
    frame: pd.DataFrame,
    lengths: np.ndarray,
    args: argparse.Namespace,
    flops: float | None,
    peak: float | None,
) -> list[str]:
    has_ndcg = any(np.isfinite(r.ndcg) for r in rerankers)
    cols = [
        "reranker",
        "engine",
        "computes in",
        "batch",
        "pairs/s median",
        "best",
        "CPU s / 1k pairs",
        "load MB",
        "peak MB",
        f"max abs diff vs {reference.name}",
    ]
    if flops is not None and peak is not None:
        cols.insert(6, "% bf16 peak")
    if has_ndcg:
        cols += ["nDCG@10", "change"]
    rows = []
    for r in rerankers:
        rate = statistics.median(r.rates)
        row = [
            f"{r.name}: {r.label}",
            r.engine,
            r.precision,
            r.batch,
            f"{rate:,.1f}",
            f"{max(r.rates):,.1f}",
            f"{statistics.median(r.cpu_per_k):.2f}",
            _mb(r.load_mb),
            _mb(r.peak_mb),
            "-" if r is reference else f"{_max_diff(r, reference):.1e}",
        ]
        if flops is not None and peak is not None:
            row.insert(6, f"{100 * flops / len(frame) * rate / peak:.1f}")
        if has_ndcg:
            row += [_ndcg(r.ndcg), "-" if r is reference else _change(r, reference)]
        rows.append(row)
    lines = [markdown.table(cols, rows), ""]
    if has_ndcg:
        lines.append(
            f'- nDCG@10 "=": scores within {SAME_SCORES:g} of {reference.name}\'s, so the same ranking '
            "up to near-ties (not re-ranked again; --ndcg-all does)"
        )
    for cls in ("fp32", "bf16", "fp16", "int8"):
        ours = [r for r in rerankers if not r.is_peer and r.precision_class == cls]
        theirs = [r for r in rerankers if r.is_peer and r.precision_class == cls]
        if not ours or not theirs:
            continue
        best = max(ours, key=lambda r: statistics.median(r.rates))
        rival = max(theirs, key=lambda r: statistics.median(r.rates))
        a, b = statistics.median(best.rates), statistics.median(rival.rates)
        diff = 0.0 if best is reference else _max_diff(best, reference)
        line = (
            f"- **{cls}**: fastest evirank path {best.name} {a:,.1f} pairs/s, fastest peer {rival.name} "
            f"{b:,.1f} pairs/s: **{a / b:.2f}x**; {best.name}'s scores within {diff:.1e} of the reference's"
        )
        if has_ndcg:
            line += f", nDCG@10 change {_change(best, reference)} ({rival.name}: {_change(rival, reference)})"
        lines.append(line)
    return lines


def _ndcg(value: float) -> str:
    return f"{value:.4f}" if np.isfinite(value) else "="


def _change(r: Reranker, reference: Reranker) -> str:
    if r is reference:
        return "+0.0000"
    return f"{r.ndcg - reference.ndcg:+.4f}" if np.isfinite(r.ndcg) else "="


def _max_diff(r: Reranker, reference: Reranker) -> float:
    if r.scores is None or reference.scores is None:
        return float("nan")
    return float(np.max(np.abs(r.scores - reference.scores)))


def _mb(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:,.0f}"


def native_bf16() -> bool:
    """Whether the CPU has native bf16 arithmetic (AMX or AVX512_BF16)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


# -- main ----------------------------------------------------------------------------------------
def parse_configs(values: list[str] | None, parser: argparse.ArgumentParser, device_kind: str) -> list[str]:
    """Rerankers named in ``--configs`` (comma- or space-separated); unknown names are refused."""
    known = [n for n, (_, _, kind) in EVIRANK.items() if kind == device_kind] + [
        n for n, kind in PEERS.items() if kind == device_kind
    ]
    if not values:
        names = known
        if device_kind == "cpu" and not native_bf16():
            names = [n for n in names if n not in NEEDS_BF16]
        return names
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in EVIRANK and n not in PEERS]
    if unknown:
        parser.error(
            f"unknown --configs {', '.join(unknown)}; expected names from: {', '.join([*EVIRANK, *PEERS])}"
        )
    wrong = [n for n in names if (EVIRANK[n][2] if n in EVIRANK else PEERS[n]) != device_kind]
    if wrong:
        parser.error(f"--configs {', '.join(wrong)} do not run on {device_kind}")
    return list(dict.fromkeys(names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--configs", nargs="+", help="rerankers, comma- or space-separated (--list shows them)"
    )
    parser.add_argument("--list", action="store_true", help="print the rerankers' names and exit")
    parser.add_argument(
        "--model", help="cross-encoder folder (default: all-MiniLM-L6-v2 + a seeded random head)"
    )
    parser.add_argument(
        "--train", metavar="DIR", help="train a SciFact cross-encoder into DIR first (kept) and use it"
    )
    parser.add_argument("--pairs", type=int, default=2000, help="SciFact test (claim, sentence) pairs timed")
    parser.add_argument(
        "--pairs-from",
        metavar="JSONL",
        help="time these (query, text) pairs instead (a pairs.jsonl this benchmark wrote; no BM25, no nDCG)",
    )
    parser.add_argument(
        "--st-batch", type=int, default=None, help="sentence-transformers' batch size (default: its own, 32)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=None, help="threads of every engine (default: the usable cores)"
    )
    parser.add_argument("--device", default="auto", help="auto (cuda when there is one, else cpu), cpu, cuda")
    parser.add_argument(
        "--segment", default="sentences", help="how documents become passages (evirank rerank --segment)"
    )
    parser.add_argument(
        "--ndcg",
        choices=("auto", "yes", "no"),
        default="auto",
        help="the nDCG@10 columns (auto: with --model or --train)",
    )
    parser.add_argument(
        "--ndcg-queries", type=int, default=None, help="test claims for nDCG@10 (default all 300)"
    )
    parser.add_argument("--ndcg-depth", type=int, default=10, help="BM25 documents re-ranked for nDCG@10")
    parser.add_argument(
        "--ndcg-segment", default="sentences:prepend", help="passages for nDCG@10 (default: titled sentences)"
    )
    parser.add_argument(
        "--ndcg-all",
        action="store_true",
        help="nDCG@10 of every reranker (default: the reference and those whose scores differ from it by "
        "more than 1e-4)",
    )
    parser.add_argument(
        "--calibration-pairs",
        type=int,
        default=300,
        help="SciFact train pairs calibrating the peers' static int8",
    )
    parser.add_argument(
        "--calibration-from",
        metavar="JSONL",
        help="calibrate the peers' static int8 on these (query, text) pairs (with --pairs-from; default: "
        "SciFact train pairs, or, with --pairs-from, no calibrated peer)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the per-reranker memory processes")
    parser.add_argument(
        "--run", help="BM25 run of SciFact test (default: made in --work with evirank index/search)"
    )
    parser.add_argument("--train-run", help="BM25 run of SciFact train (default: made in --work)")
    parser.add_argument("--index", help="a Lucene index of SciFact (default: made in --work)")
    parser.add_argument("--peer-venv", help="the peer environment (default: CACHE/peers-venv)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak, TFLOP/s")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "evirank-peers"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--pairs-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(message)s",
    )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.memory_child:
        memory_child(args.memory_child, Path(args.model), Path(args.pairs_file))
        return
    import torch

    device = scoring.resolve_device(args.device)
    args.device_kind = "cuda" if device.startswith("cuda") else "cpu"
    if args.list:
        for name in [*EVIRANK, *PEERS]:
            print(name)
        return
    if args.calibration_from and not args.pairs_from:
        parser.error("--calibration-from goes with --pairs-from (otherwise SciFact train pairs calibrate)")
    names = parse_configs(args.configs, parser, args.device_kind)
    args.threads = args.threads or scoring.ort_threads()
    os.environ["EVIRANK_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    if args.pairs_from:  # pairs made elsewhere: no BM25, no nDCG; calibration only if given
        if args.train or args.ndcg == "yes":
            parser.error("--pairs-from times given pairs only: it takes neither --train nor --ndcg yes")
        args.ndcg = "no"
        given = _frame(read_pairs(Path(args.pairs_from)))
        frame = scoring.sample_pairs(given, args.pairs, args.seed)
        test_run = train_run = None
        args.calibration_file = args.calibration_from
        if not args.calibration_file:
            names = without_calibration(names, explicit=bool(args.configs), parser=parser)
        model_dir = Path(args.model) if args.model else scoring.minilm_cross(work / "minilm-cross", args.seed)
    else:
        test_run, train_run = bm25_runs(args)
        if args.train:
            args.model = str(train_model(Path(args.train), train_run, args.threads))
        model_dir = Path(args.model) if args.model else scoring.minilm_cross(work / "minilm-cross", args.seed)
        passages, _, _ = sentence_pairs(test_run, "test", 100, args.segment)
        frame = scoring.sample_pairs(passages, args.pairs, args.seed)
        calibration, _, _ = sentence_pairs(train_run, "train", 10, args.segment)
        args.calibration_file = str(
            write_pairs(
                scoring.sample_pairs(calibration, args.calibration_pairs, args.seed),
                work / "calibration-pairs.jsonl",
            )
        )
    pairs_file = write_pairs(frame, work / "pairs.jsonl")
    lengths = scoring.pair_lengths(model_dir, frame)
    args.peer_work = work / "peers" / model_digest(model_dir)  # the peers' exports of this model

    peers = [n for n in names if n in PEERS]
    peer_python: Path | None = None
    worker = None
    if peers:
        needs_venv = any(n not in TORCH_ONLY for n in peers)
        if needs_venv:
            from evirank.score.onnx_backend import cache_dir

            peer_python = peer_venv(Path(args.peer_venv) if args.peer_venv else cache_dir() / "peers-venv")
        else:
            peer_python = Path(sys.executable)
        worker = PeerWorker(
            peer_python,
            model_dir,
            args.peer_work,
            args.threads,
            device,
            Path(args.calibration_file) if args.calibration_file else None,
            args.st_batch,
        )
    try:
        rerankers = []
        warm = frame.head(16).assign(**{TEXT: lambda f: f[TEXT] + " (warm-up)"})
        for name in names:
            if name in PEERS:
                assert worker is not None
                info = worker.ask(op="load", name=name)
                r = Reranker(
                    name,
                    label=info["label"],
                    engine=info["engine"],
                    precision=info["precision"],
                    batch=info["batch"],
                )
            else:
                r = load_evirank(name, model_dir)
                r.scorer(warm)
            rerankers.append(r)
            logging.info("loaded %s", name)
        versions = worker.ask(op="versions") if worker is not None else {}
        reference = next((r for r in rerankers if r.name == REFERENCE[args.device_kind]), rerankers[0])
        if not args.no_memory:
            longest = frame.assign(_n=frame[TEXT].str.len() + frame[QUERY].str.len()).nlargest(256, "_n")
            longest_file = write_pairs(longest, work / "longest-pairs.jsonl")
            for r in rerankers:
                measure_memory(r, args, model_dir, longest_file, peer_python)
        started = time.perf_counter()
        run_rounds(rerankers, frame, pairs_file, worker, args.rounds, work)
        rounds_s = time.perf_counter() - started
        ndcg_note = (
            "nDCG@10: not measured (given pairs)"
            if args.pairs_from
            else "nDCG@10: not measured (--ndcg no)"
            if args.ndcg == "no"
            else "nDCG@10: not measured (a random head; give --model with a trained model, or --train DIR)"
        )
        if args.ndcg == "yes" or (args.ndcg == "auto" and (args.model or args.train)):
            queries, sentences, bm25 = measure_ndcg(rerankers, reference, args, test_run, worker)
            ndcg_note = (
                f"nDCG@10: SciFact test, {queries} claims, BM25's top {args.ndcg_depth} re-ranked by their "
                f"best sentence (MaxP) over {sentences:,} sentences; BM25 alone {bm25:.4f}"
            )
    finally:
        if worker is not None:
            worker.close()

    peak = scoring.bf16_peak(device, args.peak_tflops)
    flops = scoring.flops_per_pair(model_dir, lengths) if peak else None
    details = describe(args, model_dir, frame, lengths, rounds_s, versions, ndcg_note)
    title = (
        "Rerankers side by side on "
        + ("the GPU" if args.device_kind == "cuda" else "the CPU")
        + ": evirank against sentence-transformers and FlashRank"
    )
    out = header(
        title,
        *details,
        packages=("torch", "transformers", "onnxruntime", "openvino"),
        device=(torch.cuda.get_device_name(0) if args.device_kind == "cuda" else None),
    ).splitlines()
    out += ["", *report(rerankers, reference, frame, lengths, args, flops, peak)]
    out.append(footer())
    print("\n".join(out), flush=True)


def describe(
    args: argparse.Namespace,
    model_dir: Path,
    frame: pd.DataFrame,
    lengths: np.ndarray,
    rounds_s: float,
    versions: dict[str, str],
    ndcg_note: str,
) -> list[str]:
    """The header's lines about this run: threads, model, pairs, rounds, peers, calibration, nDCG."""
    streams = _streams(args.threads)
    threads = f"threads per engine: {args.threads}"
    if args.device_kind == "cpu":
        threads += (
            f"; evirank's ONNX Runtime and OpenVINO paths run each batch as {streams} concurrent "
            f"requests of {max(1, args.threads // streams)} thread(s)"
        )
    if args.train:
        recipe = " ".join(train_command(Path(args.train), "$SF", "$SF_TRAIN_RUN", args.threads))
        model = f"model: {model_dir.name}, trained here (evirank {recipe})"
    elif args.model:
        model = f"model: {model_dir.name}"
    else:
        model = f"model: {model_dir.name} (all-MiniLM-L6-v2 with a seeded random one-logit head)"
    peers = ", ".join(f"{k} {v}" for k, v in versions.items())
    return [
        threads,
        model,
        f"pairs: {len(frame):,} "
        + (
            f"(query, text) pairs from {Path(args.pairs_from).name}"
            if args.pairs_from
            else "SciFact test (claim, sentence) pairs from BM25's top 100"
        )
        + ", "
        f"{lengths.mean():.1f} tokens mean (max {lengths.max()}); one untimed warm-up round, then "
        f"{args.rounds} timed rounds, alternating (reversed every other round), {rounds_s:.0f} s in all",
        f"peers' environment (built by this benchmark): {peers}" if peers else "peers: none",
        _calibration_line(args),
        ndcg_note,
    ]


def _calibration_line(args: argparse.Namespace) -> str:
    ours = "evirank's openvino-int8 on its own built-in calibration set"
    if args.calibration_from:
        return f"peers' static int8 calibrated on the pairs of {Path(args.calibration_from).name}; {ours}"
    if args.calibration_file:
        return (
            f"peers' static int8 calibrated on {args.calibration_pairs} SciFact train (claim, sentence) "
            f"pairs; {ours}"
        )
    return "no calibration set for the peers (given pairs, no --calibration-from): no peer static int8"


def without_calibration(names: list[str], *, explicit: bool, parser: argparse.ArgumentParser) -> list[str]:
    """``names`` less the peers that need a calibration set, which --pairs-from alone does not give.

    Named in ``--configs``, such a peer is an error; in the default set it is left out.
    """
    needing = [n for n in names if n in NEEDS_CALIBRATION]
    if needing and explicit:
        parser.error(
            f"{', '.join(needing)} calibrate(s) on a set of pairs: with --pairs-from, give "
            "--calibration-from JSONL too (or leave them out of --configs)"
        )
    if needing:
        logger.warning("left out (no calibration set with --pairs-from): %s", ", ".join(needing))
    return [n for n in names if n not in NEEDS_CALIBRATION]


def _streams(threads: int) -> int:
    from evirank.score.streams import default_streams

    return default_streams(threads)


if __name__ == "__main__":
    main()
