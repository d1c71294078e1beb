"""evirank's rerank HTTP service against a peer server, infinity: requests/s and latency, then nDCG@10.

Both servers serve the same cross-encoder folder on the CPU with the same number of threads, one at a
time (the other is not running), each warmed up first; the load generator is an asyncio/httpx client
in this process, which only waits on sockets (its CPU time per request is reported).

* **evirank**: ``python -m evirank serve --model NAME=DIR --scorer cross --device cpu`` with no
  ``--index`` (rerank only), asked on ``POST /v1/rerank`` (the Cohere v1 shape).
* **infinity** (``infinity-emb`` from PyPI): ``infinity_emb v2 --model-id DIR --engine torch --device
  cpu --dtype float32 --no-vector-disk-cache --no-compile``, asked on ``POST /rerank``. It runs in its
  own virtual environment, built once under ``$EVIRANK_CACHE`` (else ``~/.cache/evirank``):
  ``infinity-venv``, with this environment's torch linked in (nothing of torch is downloaded; see
  ``peers.venv_with_torch``). Its other settings are its defaults (batch size 32, BetterTransformer
  where possible).

Threads: ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``RAYON_NUM_THREADS`` (the Rust tokenizers) and
evirank's ``--model-threads`` are all ``--threads``, for both servers.

Two parts, both from SciFact (real data, nothing copied into the repository):

* **short**: ``--docs`` short documents per request (sentences of SciFact abstracts: some from the
  claim's relevant abstracts, the rest from random abstracts; seeded), SciFact test claims as queries,
  at each ``--concurrency`` level ``--requests`` requests (the clients take the next request as soon
  as their previous one is answered): requests/s, p50/p95/mean latency, errors (any answer other than
  a well-formed 200), and the server's CPU time per request (when this benchmark started it). The
  two servers get the same requests, so their orderings are compared too (same top document).
* **long**: rank_long.py's SciFact long documents (each candidate's abstract placed among ``--filler``
  other abstracts): each claim's ``--candidates`` documents in one request (title, then text); nDCG@10
  per claim against SciFact's test qrels, latency per request, and a paired t-test evirank against
  infinity. It needs a trained cross-encoder: ``--model DIR``, or ``--train DIR`` to train one first.
  Without either, the short part runs alone on all-MiniLM-L6-v2 with a seeded random one-logit head
  (the speed of a MiniLM cross-encoder does not depend on its weights).

The trained model: ``--train DIR`` runs peers.py's quick SciFact recipe (``evirank train``, listwise,
300 steps of 2 x 8 pairs, max length 128) after making the BM25 run it needs (an index of SciFact in
``--work``, 15 s), and keeps the model in DIR for later runs (``--model DIR``). On the 2-core machine
training ran at about 1 s a step when idle (some 6 minutes) and took 40 minutes with the machine
shared with other work, so train once and pass ``--model``. By hand (``$SF`` the SciFact folder,
``$RUN`` the BM25 run of its train claims)::

    evirank index --corpus $SF --index /tmp/evirank-serve-rerank/scifact-index
    evirank search --index /tmp/evirank-serve-rerank/scifact-index --topics $SF --split train --k 100 \\
        --output $RUN
    evirank train --output DIR --evidence $SF/queries.jsonl $SF/evidence/train.jsonl \\
        $SF/qrels/train.tsv $RUN $SF --documents $SF/queries.jsonl $SF/qrels/train.tsv $RUN $SF \\
        --negatives-per-query 10 --negative-depth 20 --max-passages 1 --evidence-title \\
        --evidence-gold-only --validation-fraction 0 --loss listwise --group-size 8 --batch-size 2 \\
        --epochs 1 --max-steps 300 --max-length 128 --lr 4e-5 --model-threads 2

How long it takes on 2 cores, with the defaults: building infinity's environment 45 s (once); per
server, start-up 6-15 s, the short part 2 minutes, the long part 4 minutes (evirank, which scores
every sentence) or 1 minute (infinity, one truncated input per document): about 12 minutes in all.

Usage (from the repository root):
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/serve_rerank.py --train ~/models/minilm-scifact
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/serve_rerank.py --model DIR --requests 40 --queries 10
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/serve_rerank.py --skip-peer --evirank-url http://127.0.0.1:8000
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/serve_rerank.py --skip-evirank --requests 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import shlex
import signal
import socket
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
from _common import REPO, cores, datasets, footer, header, load_average

from evirank import markdown

logger = logging.getLogger("serve_rerank")

#: The peer server, pinned: the newest infinity-emb, whose torch extra takes this environment's torch.
INFINITY_REQUIREMENTS = ("infinity-emb[server,torch]==0.0.78",)
EVIRANK, INFINITY = "evirank", "infinity"
#: The rerank path of each server.
RERANK_PATH = {EVIRANK: "/v1/rerank", INFINITY: "/rerank"}
#: Thread-count variables both servers start with (torch's OpenMP and MKL pools, the Rust tokenizers).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS")
#: The targets: evirank's requests/s at least this times infinity's at an equal or lower p95 (short),
#: and a higher nDCG@10 with a paired t-test p below this (long).
TARGET_SPEEDUP = 1.5
TARGET_P = 0.05


# -- the data -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One rerank request: a query and its documents (``qid`` and ``ids`` for the long part's nDCG)."""

    query: str
    documents: list[str]
    qid: str = ""
    ids: tuple[str, ...] = ()


def short_requests(folder: Path, count: int, docs: int, seed: int) -> list[Request]:
    """``count`` requests of ``docs`` SciFact sentences each, for SciFact test claims in turn.

    Each request holds up to half its documents from the claim's relevant abstracts, the rest from
    random abstracts, shuffled; the seed makes the list the same for both servers and every run.

    Example:
        >>> reqs = short_requests(Path("../shared/datasets/scifact"), 2, 20, 0)  # doctest: +SKIP
        >>> len(reqs[0].documents)  # doctest: +SKIP
        20
    """
    from evirank.frames import DOCNO, QID
    from evirank.io import read_corpus, read_qrels, read_topics
    from evirank.segment.sentences import Sentences

    rng = random.Random(seed)
    corpus = {d.docno: d for d in read_corpus(folder)}
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    relevant = qrels[qrels["label"] > 0].groupby(QID)[DOCNO].apply(list).to_dict()
    topics = read_topics(folder, split="test")
    claims = [(str(q), str(t)) for q, t in zip(topics[QID], topics["query"], strict=True) if q in relevant]
    split = Sentences(title="skip")
    cache: dict[str, list[str]] = {}

    def sentences(docno: str) -> list[str]:
        if docno not in cache:
            cache[docno] = [s for s in split.segments("", corpus[docno].text) if len(s.split()) >= 3]
        return cache[docno]

    ids = sorted(corpus)
    out = []
    for i in range(count):
        qid, query = claims[i % len(claims)]
        own = [s for docno in relevant[qid] for s in sentences(docno)]
        chosen = rng.sample(own, min(len(own), docs // 2))
        while len(chosen) < docs:
            pool = sentences(rng.choice(ids))
            if pool:
                chosen.append(rng.choice(pool))
        rng.shuffle(chosen)
        out.append(Request(query, chosen, qid))
    return out


def long_requests(
    folder: Path, queries: int, candidates: int, filler: int, seed: int
) -> tuple[list[Request], pd.DataFrame, float]:
    """rank_long.py's long SciFact documents as requests: (requests, test qrels, mean words per document)."""
    from rank_long import long_collection

    cases, qrels = long_collection(folder, queries, candidates, filler, seed)
    requests = [
        Request(query, [f"{d['title']} {d['text']}".strip() for d in docs], qid, tuple(d["id"] for d in docs))
        for qid, query, docs in cases
    ]
    words = statistics.fmean(len(text.split()) for r in requests for text in r.documents)
    return requests, qrels, words


# -- the servers -----------------------------------------------------------------------------------
def infinity_python(folder: Path) -> Path:
    """infinity's environment's python, built once in ``folder`` (pip from PyPI, this torch linked)."""
    from peers import venv_with_torch

    return venv_with_torch(folder, list(INFINITY_REQUIREMENTS), "evirank-infinity.json")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def thread_env(threads: int) -> dict[str, str]:
    """This environment with every thread-count variable set to ``threads`` and the Hub offline."""
    return {
        **os.environ,
        **dict.fromkeys(THREAD_VARIABLES, str(threads)),
        "TOKENIZERS_PARALLELISM": "true",
        "HF_HUB_OFFLINE": "1",
    }


def evirank_command(args: argparse.Namespace, model: Path, port: int) -> list[str]:
    """``evirank serve`` over no index: the rerank endpoints only."""
    command = [
        sys.executable, "-m", "evirank", "-q", "serve",
        "--model", f"{args.model_name}={model}", "--scorer", "cross", "--device", "cpu",
        "--model-threads", str(args.threads), "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    if args.segment:
        command += ["--segment", args.segment]
    return command + shlex.split(args.evirank_args or "")


def infinity_command(python: Path, args: argparse.Namespace, model: Path, port: int) -> list[str]:
    """``infinity_emb v2`` serving ``model`` on the CPU with the torch engine in fp32, no result cache."""
    command = [
        str(python), "-m", "infinity_emb.cli", "v2",
        "--model-id", str(model), "--served-model-name", args.model_name,
        "--engine", "torch", "--device", "cpu", "--dtype", "float32",
        "--no-vector-disk-cache", "--no-compile",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    return command + shlex.split(args.infinity_args or "")


@dataclass
class Server:
    """A server under test: where it answers, and its process when this benchmark started it."""

    name: str
    url: str
    command: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    info: str = ""

    def stop(self) -> None:
        """Stop the process group this benchmark started (TERM, then KILL after 20 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)

    def log_tail(self, chars: int = 3000) -> str:
        if self.log is None or not self.log.is_file():
            return ""
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def start(name: str, command: list[str], url: str, env: dict[str, str], work: Path) -> Server:
    """Start ``command`` in its own process group, its output in a log file in ``work``."""
    log = work / f"{name}-server.log"
    logger.info("starting %s: %s", name, shlex.join(command))
    with log.open("wb") as handle:
        process = subprocess.Popen(
            command, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Server(name, url, command, process, log)


async def wait_healthy(server: Server, limit_s: float) -> float:
    """Seconds until ``GET /health`` answers 200; a server that exits or stays silent is an error."""
    import httpx

    began = time.monotonic()
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
        while time.monotonic() - began < limit_s:
            if server.process is not None and server.process.poll() is not None:
                raise SystemExit(
                    f"the {server.name} server exited with status {server.process.returncode} before it "
                    f"was ready; its log ({server.log}) ends:\n{server.log_tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                response = await http.get("/health")
                if response.status_code == 200:
                    server.info = health_summary(response.text)
                    return time.monotonic() - began
            await asyncio.sleep(0.5)
    raise SystemExit(
        f"the {server.name} server at {server.url} was not healthy within {limit_s:.0f} s"
        + (f"; its log ends:\n{server.log_tail()}" if server.log else "")
    )


def health_summary(text: str) -> str:
    """What a ``/health`` answer says about the models served (evirank's ``rerank_models``), else its
    first 160 characters.

    Example:
        >>> health_summary('{"info": {"rerank_models": {"m": {"scorer": "cross"}}}, "limits": {}}')
        '{"m": {"scorer": "cross"}}'
    """
    try:
        return json.dumps(json.loads(text)["info"]["rerank_models"])
    except (ValueError, KeyError, TypeError):
        return text.strip()[:160]


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of ``root`` and its live descendants (Linux ``/proc``; nan elsewhere)."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
    if root not in cpu:
        return float("nan")
    total, todo = 0.0, [root]
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def peak_rss_mb(root: int) -> float:
    """The peak resident set (VmHWM) of ``root``, in MB (nan where unknown)."""
    try:
        for line in Path(f"/proc/{root}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# -- the client ------------------------------------------------------------------------------------
@dataclass
class Answer:
    """One request's outcome: HTTP status (599: no answer; 598: a 200 with a malformed body),
    seconds, the scores by document index (empty unless it succeeded), and the model inputs the
    server reports (evirank's ``passages`` per result; one per document where it says nothing)."""

    status: int
    seconds: float
    scores: dict[int, float]
    inputs: int = 0


def payload(model: str, request: Request) -> dict[str, Any]:
    """The Cohere-shaped body both servers take: every document back, no document text."""
    return {
        "model": model,
        "query": request.query,
        "documents": request.documents,
        "top_n": len(request.documents),
        "return_documents": False,
    }


def parse(body: Any, n: int) -> tuple[dict[int, float], int] | None:
    """(scores by document index, model inputs) from a rerank answer; None when it is not a ranking
    of all ``n`` documents.

    Example:
        >>> parse({"results": [{"index": 1, "relevance_score": 0.9, "passages": 3},
        ...                    {"index": 0, "relevance_score": 0.1}]}, 2)
        ({1: 0.9, 0: 0.1}, 4)
    """
    try:
        results = body["results"]
        scores = {int(r["index"]): float(r["relevance_score"]) for r in results}
        inputs = sum(int(r.get("passages", 1)) for r in results)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return (scores, inputs) if sorted(scores) == list(range(n)) else None


async def ask(http: Any, path: str, body: dict[str, Any]) -> Answer:
    """One POST; transport errors and malformed answers count as failures, never retried."""
    import httpx

    began = time.perf_counter()
    try:
        response = await http.post(path, json=body)
        status = response.status_code
        parsed = parse(response.json(), len(body["documents"])) if status == 200 else None
    except (httpx.HTTPError, ValueError):
        status, parsed = 599, None
    seconds = time.perf_counter() - began
    if parsed is None:
        return Answer(598 if status == 200 else status, seconds, {})
    return Answer(status, seconds, *parsed)


async def load(
    http: Any, path: str, bodies: list[dict[str, Any]], clients: int
) -> tuple[list[Answer], float]:
    """Send ``bodies`` with ``clients`` concurrent clients, each taking the next body as soon as its
    previous one is answered: (answers in body order, wall seconds)."""
    answers: list[Answer | None] = [None] * len(bodies)
    queue = iter(enumerate(bodies))

    async def client() -> None:
        for i, body in queue:  # one shared iterator: each body is sent once
            answers[i] = await ask(http, path, body)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - began
    return [a for a in answers if a is not None], wall


# -- measuring one server --------------------------------------------------------------------------
@dataclass
class Row:
    """One line of the table: a part, a server, a concurrency level, and what was measured."""

    part: str
    server: str
    clients: int
    answers: list[Answer]
    wall_s: float
    server_cpu_s: float
    client_cpu_s: float
    ndcg: float = float("nan")

    @property
    def ok(self) -> list[float]:
        return [a.seconds for a in self.answers if a.status == 200]

    @property
    def errors(self) -> int:
        return sum(a.status != 200 for a in self.answers)

    @property
    def inputs(self) -> float:
        """Mean model inputs per answered request (passages scored; documents for infinity)."""
        done = [a.inputs for a in self.answers if a.status == 200]
        return statistics.fmean(done) if done else float("nan")

    @property
    def rate(self) -> float:
        return len(self.ok) / self.wall_s if self.wall_s > 0 else float("nan")

    def quantile(self, q: float) -> float:
        ok = self.ok
        if not ok:
            return float("nan")
        return float(np.quantile(ok, q))


@dataclass
class Measured:
    """Everything measured of one server."""

    name: str
    rows: list[Row] = field(default_factory=list)
    long_run: pd.DataFrame | None = None
    short_scores: list[dict[int, float]] = field(default_factory=list)
    startup_s: float = float("nan")
    peak_mb: float = float("nan")
    short_s: float = float("nan")
    long_s: float = float("nan")
    load_at_start: str = ""
    info: str = ""


async def measure(
    server: Server,
    args: argparse.Namespace,
    short: dict[int, list[Request]],
    warm: list[Request],
    long: list[Request],
    long_warm: Request | None,
) -> Measured:
    """Warm ``server`` up, then the short part at every concurrency level and the long part."""
    import httpx

    out = Measured(server.name, load_at_start=load_average())
    out.startup_s = await wait_healthy(server, args.startup)
    out.info = server.info
    path = RERANK_PATH[server.name]
    top = max(args.concurrency)
    limits = httpx.Limits(max_connections=top, max_keepalive_connections=top)
    pid = server.process.pid if server.process is not None else None

    def server_cpu() -> float:
        return tree_cpu_seconds(pid) if pid is not None else float("nan")

    async with httpx.AsyncClient(base_url=server.url, timeout=args.timeout, limits=limits) as http:
        bodies = [payload(args.model_name, r) for r in warm]
        answers, _ = await load(http, path, bodies, top)  # warm-up: every connection, batch shapes
        failed = [a.status for a in answers if a.status != 200]
        if failed:
            raise SystemExit(
                f"{server.name}: {len(failed)} of {len(answers)} warm-up requests failed (statuses "
                f"{sorted(set(failed))}); its log ends:\n{server.log_tail()}"
            )
        began = time.perf_counter()
        for clients in args.concurrency if "short" in args.parts else []:
            bodies = [payload(args.model_name, r) for r in short[clients]]
            cpu0, client0 = server_cpu(), time.process_time()
            answers, wall = await load(http, path, bodies, clients)
            row = Row(
                "short",
                server.name,
                clients,
                answers,
                wall,
                server_cpu() - cpu0,
                time.process_time() - client0,
            )
            out.rows.append(row)
            if clients == args.concurrency[0]:
                out.short_scores = [a.scores for a in answers]
            logger.warning(
                "%s short, %d clients: %.2f requests/s, p95 %.0f ms, %d errors",
                server.name, clients, row.rate, 1000 * row.quantile(0.95), row.errors,
            )  # fmt: skip
        if "short" in args.parts:
            out.short_s = time.perf_counter() - began
        if long:
            began = time.perf_counter()
            assert long_warm is not None
            await load(http, path, [payload(args.model_name, long_warm)], 1)
            bodies = [payload(args.model_name, r) for r in long]
            cpu0, client0 = server_cpu(), time.process_time()
            answers, wall = await load(http, path, bodies, 1)
            row = Row(
                "long", server.name, 1, answers, wall, server_cpu() - cpu0, time.process_time() - client0
            )
            out.long_run = long_run(long, answers)
            out.rows.append(row)
            out.long_s = time.perf_counter() - began
            logger.warning(
                "%s long: %.2f s per request, %d errors",
                server.name,
                statistics.fmean(row.ok or [0]),
                row.errors,
            )
    if pid is not None:
        out.peak_mb = peak_rss_mb(pid)
    return out


def long_run(requests: list[Request], answers: list[Answer]) -> pd.DataFrame:
    """A run frame [qid, docno, score] of the long part's answers (failed requests leave their claim out)."""
    from evirank.frames import DOCNO, QID, SCORE

    rows = [
        (r.qid, docno, a.scores[i])
        for r, a in zip(requests, answers, strict=True)
        if a.status == 200
        for i, docno in enumerate(r.ids)
    ]
    return pd.DataFrame(rows, columns=[QID, DOCNO, SCORE])


# -- the report ------------------------------------------------------------------------------------
def ndcg_table(measured: list[Measured], qrels: pd.DataFrame) -> pd.DataFrame | None:
    """Per-claim nDCG@10 [run, qid, measure, value] of every server's long run (None: no long part)."""
    from evirank.evaluate import nDCG, per_query

    tables = [
        per_query(m.long_run, qrels, [nDCG @ 10]).assign(run=m.name)
        for m in measured
        if m.long_run is not None and len(m.long_run)
    ]
    return pd.concat(tables, ignore_index=True) if tables else None


def _ms(seconds: float) -> str:
    return "-" if np.isnan(seconds) else f"{1000 * seconds:,.0f}"


def table(measured: list[Measured], ndcg: pd.DataFrame | None) -> str:
    """The Markdown table: short rows by concurrency (evirank, then infinity), then the long rows."""
    means = ndcg.groupby("run")["value"].mean().to_dict() if ndcg is not None else {}
    rows = [r for m in measured for r in m.rows]
    rows.sort(key=lambda r: (r.part != "short", r.clients, r.server != EVIRANK))
    columns = [
        "part", "server", "clients", "requests", "errors", "requests/s", "p50 ms", "p95 ms", "mean ms",
        "model inputs / request", "server CPU ms / request", "client CPU ms / request", "nDCG@10",
    ]  # fmt: skip
    lines = []
    for r in rows:
        n = len(r.answers)
        ok = r.ok
        lines.append(
            [
                r.part,
                r.server,
                r.clients,
                n,
                r.errors,
                f"{r.rate:.2f}",
                _ms(r.quantile(0.5)),
                _ms(r.quantile(0.95)),
                _ms(statistics.fmean(ok)) if ok else "-",
                f"{r.inputs:,.0f}" if ok else "-",
                _ms(r.server_cpu_s / n) if n else "-",
                f"{1000 * r.client_cpu_s / n:.1f}" if n else "-",
                f"{means[r.server]:.4f}" if r.part == "long" and r.server in means else "",
            ]
        )
    return markdown.table(columns, lines, align="llrrrrrrrrrrr")


def verdicts(measured: list[Measured], ndcg: pd.DataFrame | None) -> list[str]:
    """The targets, met or missed, from the measured rows (nothing when a side is missing)."""
    by = {(r.part, r.server, r.clients): r for m in measured for r in m.rows}
    lines = []
    levels = sorted({c for (part, _, c) in by if part == "short"})
    cells, met = [], True
    for c in levels:
        ours, theirs = by.get(("short", EVIRANK, c)), by.get(("short", INFINITY, c))
        if ours is None or theirs is None:
            continue
        speedup = ours.rate / theirs.rate if theirs.rate > 0 else float("nan")
        p95_ok = ours.quantile(0.95) <= theirs.quantile(0.95)
        good = speedup >= TARGET_SPEEDUP and p95_ok and ours.errors == 0
        met &= good
        cells.append(
            f"{c} client(s) {speedup:.2f}x, p95 {_ms(ours.quantile(0.95))} vs "
            f"{_ms(theirs.quantile(0.95))} ms "
            f"({'met' if good else 'missed'})"
        )
    if cells:
        lines.append(
            f"- short, target evirank >= {TARGET_SPEEDUP}x infinity's requests/s at an equal or lower p95, "
            f"no errors: **{'met' if met else 'missed'}**; " + "; ".join(cells)
        )
    if ndcg is not None and {EVIRANK, INFINITY} <= set(ndcg["run"]):
        from evirank.evaluate import paired_ttest

        test = paired_ttest(ndcg, INFINITY, correction="none").set_index("run").loc[EVIRANK]
        good = test["delta"] > 0 and test["p"] < TARGET_P
        lines.append(
            f"- long, target a clearly higher nDCG@10 (paired t-test, p < {TARGET_P}): "
            f"**{'met' if good else 'missed'}**; evirank {test['mean']:.4f} vs infinity "
            f"{test['baseline_mean']:.4f} over {int(test['n'])} claims: {test['delta']:+.4f}, "
            f"t {test['t']:.2f}, p {test['p']:.2g}"
        )
    return lines


def agreement(measured: list[Measured]) -> str | None:
    """How often the two servers put the same document first on the short requests (same model)."""
    sides = {m.name: m.short_scores for m in measured if m.short_scores}
    if set(sides) != {EVIRANK, INFINITY}:
        return None
    pairs = [(a, b) for a, b in zip(sides[EVIRANK], sides[INFINITY], strict=True) if a and b]
    same = sum(max(a, key=a.__getitem__) == max(b, key=b.__getitem__) for a, b in pairs)
    return f"same top document from both servers on {same} of {len(pairs)} short requests (one model on both)"


# -- main ------------------------------------------------------------------------------------------
def concurrency_levels(text: str) -> list[int]:
    """``"1,8,32"`` -> [1, 8, 32] (positive, in the given order, duplicates dropped)."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, found {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, found {text!r}")
    return list(dict.fromkeys(levels))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--model", help="a cross-encoder folder (default: MiniLM with a seeded random head)")
    parser.add_argument("--train", metavar="DIR", help="train a SciFact cross-encoder into DIR first (kept)")
    parser.add_argument("--model-name", default="minilm-cross", help="the name both servers serve it under")
    parser.add_argument(
        "--parts", default=None, help="short,long (default: both with a trained model, else short)"
    )
    parser.add_argument("--requests", type=int, default=200, help="short requests per concurrency level")
    parser.add_argument("--docs", type=int, default=20, help="short documents (sentences) per request")
    parser.add_argument(
        "--concurrency", type=concurrency_levels, default=[1, 8, 32], help="concurrent clients (1,8,32)"
    )
    parser.add_argument("--queries", type=int, default=50, help="SciFact test claims of the long part")
    parser.add_argument("--candidates", type=int, default=20, help="long documents per claim (one request)")
    parser.add_argument("--filler", type=int, default=3, help="other abstracts around each candidate's own")
    parser.add_argument("--threads", type=int, default=None, help="threads of each server (default: cores)")
    parser.add_argument("--segment", default=None, help="evirank serve --segment (default: its own)")
    parser.add_argument("--evirank-args", default=None, help="more flags for evirank serve (one string)")
    parser.add_argument("--infinity-args", default=None, help="more flags for infinity_emb v2 (one string)")
    parser.add_argument("--evirank-url", default=None, help="an evirank server already running (not started)")
    parser.add_argument("--infinity-url", default=None, help="an infinity server already running")
    parser.add_argument("--skip-peer", action="store_true", help="measure evirank only")
    parser.add_argument("--skip-evirank", action="store_true", help="measure infinity only (a harness check)")
    parser.add_argument(
        "--infinity-venv", default=None, help="infinity's environment (default: CACHE/infinity-venv)"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a request may take")
    parser.add_argument("--startup", type=float, default=300.0, help="seconds a server may take to start")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "evirank-serve-rerank"))
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--json", default=None, help="also write the raw measurements to this file")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.model and args.train:
        parser.error("give --model or --train, not both")
    if args.requests < 1 or args.docs < 1 or args.queries < 1 or args.candidates < 1:
        parser.error("--requests, --docs, --queries and --candidates must be positive")
    trained = bool(args.model or args.train)
    parts = [
        p.strip() for p in (args.parts or ("short,long" if trained else "short")).split(",") if p.strip()
    ]
    if not parts or set(parts) - {"short", "long"}:
        parser.error(f"--parts takes short and/or long, found {args.parts!r}")
    if "long" in parts and not trained:
        parser.error(
            "the long part measures nDCG@10: give a trained cross-encoder (--model DIR or --train DIR)"
        )
    if args.skip_peer and args.skip_evirank:
        parser.error("--skip-peer and --skip-evirank leave nothing to measure")
    args.parts = parts
    args.threads = args.threads or cores()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    folder = datasets() / "scifact"
    trained_s = None
    if args.train:
        import peers

        began = time.perf_counter()
        runs = argparse.Namespace(work=str(work), index=None, run=None, train_run=None)
        _, train_run = peers.bm25_runs(runs)
        args.model = str(peers.train_model(Path(args.train).expanduser(), train_run, args.threads))
        trained_s = time.perf_counter() - began
    if args.model:
        model = Path(args.model).expanduser()
        if not (model / "config.json").is_file():
            raise SystemExit(f"--model {model}: no config.json there; expected a cross-encoder folder")
    else:
        import scoring

        model = scoring.minilm_cross(work / "minilm-cross", 0)

    # the same requests for both servers: every level its own, warm-ups apart from all of them
    total = args.requests * len(args.concurrency) + 2 * max(args.concurrency)
    pool = short_requests(folder, total, args.docs, args.seed) if "short" in args.parts else []
    warm, rest = pool[: 2 * max(args.concurrency)], pool[2 * max(args.concurrency) :]
    short = {c: rest[i * args.requests : (i + 1) * args.requests] for i, c in enumerate(args.concurrency)}
    long: list[Request] = []
    qrels = None
    words = float("nan")
    long_warm = None
    if "long" in args.parts:
        long, qrels, words = long_requests(folder, args.queries, args.candidates, args.filler, args.seed)
        long_warm = Request("warm-up: " + long[0].query, long[0].documents)

    names = ([] if args.skip_evirank else [EVIRANK]) + ([] if args.skip_peer else [INFINITY])
    python = None
    args.peer_versions = ""
    if INFINITY in names and not args.infinity_url:
        from evirank.score.onnx_backend import cache_dir

        python = infinity_python(
            Path(args.infinity_venv) if args.infinity_venv else cache_dir() / "infinity-venv"
        )
        args.peer_versions = venv_versions(python)
    plans = {name: plan(name, args, model, python) for name in names}
    top = header(
        "The rerank service against infinity (SciFact, CPU)",
        *describe(args, model, plans, words, trained_s),
        packages=("torch", "transformers", "fastapi", "uvicorn", "httpx"),
    )
    measured: list[Measured] = []
    for name, (url, command, env) in plans.items():  # one at a time: each stops before the next starts
        server = Server(name, url) if command is None else start(name, command, url, env, work)
        try:
            measured.append(asyncio.run(measure(server, args, short, warm, long, long_warm)))
        finally:
            server.stop()

    ndcg = ndcg_table(measured, qrels) if qrels is not None else None
    lines = [top.rstrip("\n"), *(f"- {line}" for line in server_lines(measured)), ""]
    lines += [table(measured, ndcg), ""]
    lines += verdicts(measured, ndcg)
    same = agreement(measured)
    if same:
        lines.append(f"- {same}")
    lines.append(footer())
    print("\n".join(lines), flush=True)
    if args.json:
        raw: dict[str, Any] = {
            m.name: {
                "rows": [
                    {"part": r.part, "clients": r.clients, "wall_s": r.wall_s,
                     "seconds": [a.seconds for a in r.answers], "statuses": [a.status for a in r.answers],
                     "server_cpu_s": r.server_cpu_s}
                    for r in m.rows
                ],
                "startup_s": m.startup_s, "peak_mb": m.peak_mb, "info": m.info,
            }
            for m in measured
        }  # fmt: skip
        if ndcg is not None:
            raw["ndcg"] = ndcg.to_dict(orient="records")
        Path(args.json).write_text(json.dumps(raw, indent=1), encoding="utf-8")
    return 0


#: Where a server answers, the command that starts it (None: already running), and its environment.
Plan = tuple[str, list[str] | None, dict[str, str]]


def plan(name: str, args: argparse.Namespace, model: Path, python: Path | None) -> Plan:
    """How to reach ``name``: the URL given, or a command on a free port of 127.0.0.1 to start it."""
    url = args.evirank_url if name == EVIRANK else args.infinity_url
    if url:
        return url.rstrip("/"), None, {}
    port = free_port()
    env = thread_env(args.threads)
    if name == EVIRANK:
        return (
            f"http://127.0.0.1:{port}",
            evirank_command(args, model, port),
            {
                **env,
                "PYTHONPATH": str(REPO / "src"),
            },
        )
    assert python is not None
    quiet = {"PYTHONPATH": "", "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}
    return f"http://127.0.0.1:{port}", infinity_command(python, args, model, port), {**env, **quiet}


def describe(
    args: argparse.Namespace, model: Path, plans: dict[str, Plan], words: float, trained_s: float | None
) -> list[str]:
    """The header's lines about the settings: model, threads, server commands, client, data."""
    if args.train:
        what = f"{model.name}, trained here in {trained_s:.0f} s (peers.py's quick SciFact recipe)"
    elif args.model:
        what = model.name
    else:
        what = f"{model.name} (all-MiniLM-L6-v2 with a seeded random one-logit head)"
    details = [
        f"model: {what}, the same folder on both servers; CPU, fp32; {args.threads} thread(s) per server "
        f"({', '.join(THREAD_VARIABLES)} = {args.threads}; evirank --model-threads {args.threads})",
    ]
    for name, (url, command, _) in plans.items():
        shown = (
            shlex.join(command).replace(str(REPO) + "/", "").replace(str(Path.home()), "~")
            if command
            else f"already running at {url}"
        )
        details.append(f"{name}: `{shown}`")
    if args.peer_versions:
        details.append(
            f"infinity's environment (built by this benchmark, this torch linked in): {args.peer_versions}"
        )
    details.append(
        "one server at a time, each warmed up first (2 x the top concurrency of short requests, then one "
        "long request, untimed); client: asyncio + httpx in the benchmark's process, keep-alive, one "
        f"connection per concurrent client, request timeout {args.timeout:.0f} s"
    )
    if "short" in args.parts:
        details.append(
            f"short: {args.requests} requests per level of {args.docs} SciFact sentences each (up to half "
            "from the claim's relevant abstracts, the rest random; seeded), SciFact test claims as queries; "
            "every request asks for all documents back (top_n = all, no document text)"
        )
    if "long" in args.parts:
        details.append(
            f"long: {args.queries} SciFact test claims x {args.candidates} candidates, one request per "
            f"claim; each candidate's abstract placed among {args.filler} other abstracts (rank_long.py's "
            f"builder, mean {words:.0f} words per document, title first); nDCG@10 against SciFact test qrels"
        )
    return details


def server_lines(measured: list[Measured]) -> list[str]:
    """One line per server: start-up time, peak memory, how long each part took, the load then."""
    lines = []
    for m in measured:
        parts = [f"{part} part {t:.0f} s" for part, t in (("short", m.short_s), ("long", m.long_s)) if t == t]
        times = ", ".join(parts) or "nothing measured"
        rss = f", peak RSS {m.peak_mb:,.0f} MB" if not np.isnan(m.peak_mb) else ""
        lines.append(
            f"{m.name}: healthy after {m.startup_s:.1f} s{rss}; {times}; load average when it started "
            f"{m.load_at_start}; /health: {m.info.replace(str(Path.home()), '~')}"
        )
    return lines


def venv_versions(python: Path) -> str:
    """``infinity-emb 0.0.78, sentence-transformers 3.4.1, ...`` as installed in ``python``'s environment."""
    code = (
        "from importlib.metadata import version as v; "
        "print(', '.join(f'{p} {v(p)}' for p in ('infinity-emb', 'sentence-transformers', 'transformers', "
        "'torch', 'uvicorn', 'numpy')))"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"unknown ({done.stderr.strip()[-200:]})"


if __name__ == "__main__":
    sys.exit(main())
