"""The search service's answer time for new queries: one at a time, and in bursts of concurrent users.

Starts ``evirank serve`` on 127.0.0.1 over a SciFact index, waits until it is healthy (index open,
model loaded), then measures, client-side (the whole HTTP round trip), with queries it has never seen:

* **sequential**: ``--sequential`` distinct test claims, one after another (p50, p95);
* **bursts**: ``--bursts`` times, ``--burst`` distinct claims sent at the same instant (a barrier
  releases them together): every answer's status and time; 503s are counted, never retried.

Every claim is sent once in the whole run, so nothing is answered from a cache (the burst claims are
sent once more at the end, one at a time, to check that each burst answer is byte-identical to the
answer the claim gets alone; those are not timed). With an index built by
``evirank index --embed`` the server reads stored passages and vectors (only the query is embedded);
``--vectors none`` measures the per-query embedding it replaces. ``--scorer cross --model M --prune 3``
measures a cross-encoder cascade. Prints a Markdown table with the targets, headed by the machine.

Example:
    $ evirank index --corpus ../shared/datasets/scifact --index /tmp/scifact --embed
    $ python benchmarks/serve_load.py --index /tmp/scifact
    $ python benchmarks/serve_load.py --index /tmp/scifact --vectors none --sequential 20 --bursts 1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import REPO, datasets, footer, header

from evirank import markdown

#: The server's timings (evirank.rerank.timing.STAGES, "wait", "total") grouped as the table shows them.
SERVER_STEPS = (
    ("first_stage", "text_fetch"),
    ("segmentation",),
    ("pruning",),
    ("model_load", "tokenisation", "model", "scoring_other"),
    ("aggregation",),
    ("wait",),
    ("total",),
)
#: The targets for SciFact, bi-encoder, Birch, depth 20, on a 2-core machine.
TARGET_P50_MS = 150.0
TARGET_BURST_P95_MS = 1000.0


def test_queries(folder: Path) -> list[str]:
    """SciFact's test claims (the queries with test qrels), distinct, in file order."""
    wanted = set()
    with (folder / "qrels" / "test.tsv").open(encoding="utf-8") as lines:
        next(lines)
        for line in lines:
            wanted.add(line.split("\t")[0])
    queries = []
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if str(record["_id"]) in wanted:
                queries.append(str(record["text"]))
    return list(dict.fromkeys(queries))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(args: argparse.Namespace, port: int) -> list[str]:
    command = [
        sys.executable, "-m", "evirank", "-q", "serve",
        "--index", args.index, "--port", str(port), "--host", "127.0.0.1",
        "--scorer", args.scorer, "--depth", str(args.depth), "--timeout", str(args.timeout),
    ]  # fmt: skip
    flags = (
        "model",
        "aggregate",
        "scores",
        "vectors",
        "prune",
        "prune_by",
        "workers",
        "max_pending",
        "batch",
    )
    for flag in (*flags, "model_threads"):
        value = getattr(args, flag)
        if value is not None:
            command += [f"--{flag.replace('_', '-')}", str(value)]
    return command


def start_server(args: argparse.Namespace, port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1")
    return subprocess.Popen(
        server_command(args, port), env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )


def wait_healthy(http: Any, server: subprocess.Popen[bytes], limit_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode} before it was ready")
        try:
            response = http.get("/health")
            if response.status_code == 200:
                return dict(response.json())
        except Exception:  # not listening yet
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server was not healthy within {limit_s:.0f} s")


#: One answer: (HTTP status, seconds, the response body; {} when it failed).
Answer = tuple[int, float, dict[str, Any]]


def ask(http: Any, query: str, top: int, depth: int) -> Answer:
    """One search: (status, seconds, the response body with the server's stage timings)."""
    start = time.perf_counter()
    try:
        response = http.get("/v1/search", params={"q": query, "top": top, "depth": depth})
        status = response.status_code
        body = dict(response.json()) if status == 200 else {}
    except Exception:  # a transport error counts as a failed request
        status, body = 599, {}
    return status, time.perf_counter() - start, body


def without_timings(body: dict[str, Any]) -> str:
    """The answer as canonical JSON, its timings left out (what must not depend on the load)."""
    return json.dumps({key: value for key, value in body.items() if key != "timings"}, sort_keys=True)


def same_answers(
    http: Any, queries: list[str], answers: list[Answer], top: int, depth: int
) -> tuple[int, int]:
    """Ask ``queries`` again one at a time; (answers byte-identical to ``answers``, answers compared).

    The service's batching of concurrent queries must not change any answer: a query answered in a
    burst gets the bytes it gets alone (timings aside).
    """
    compared = same = 0
    for query, (status, _, body) in zip(queries, answers, strict=True):
        if status != 200:
            continue
        again = ask(http, query, top, depth)
        compared += 1
        same += again[0] == 200 and without_timings(again[2]) == without_timings(body)
    return same, compared


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux ``/proc``; ``nan`` elsewhere).

    Unlike answer times, a request's CPU time hardly depends on what else runs on the machine, so
    ``server CPU ms per request`` compares runs made under different loads; on 2 cores a burst of
    20 cannot finish in less than 20 x that / 2.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def sequential(http: Any, queries: list[str], top: int, depth: int) -> list[Answer]:
    return [ask(http, q, top, depth) for q in queries]


def burst(http: Any, queries: list[str], top: int, depth: int) -> list[Answer]:
    """All of ``queries`` at the same instant, one thread each."""
    gate = threading.Barrier(len(queries))

    def one(query: str) -> Answer:
        gate.wait()
        return ask(http, query, top, depth)

    with ThreadPoolExecutor(max_workers=len(queries)) as pool:
        return list(pool.map(one, queries))


def summarise(name: str, answers: list[Answer], cpu_s: float = float("nan")) -> dict[str, Any]:
    ok = [seconds for status, seconds, _ in answers if status == 200]
    stages = [b["timings"] for status, _, b in answers if status == 200 and b.get("timings")]
    statuses: dict[int, int] = {}
    for status, _, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    q = statistics.quantiles(ok, n=100, method="inclusive") if len(ok) >= 2 else ok * 99
    return {
        "scenario": name,
        "requests": len(answers),
        "ok": len(ok),
        "503": statuses.get(503, 0),
        "other_errors": sum(n for s, n in statuses.items() if s not in (200, 503)),
        "p50_ms": 1000 * q[49] if ok else float("nan"),
        "p95_ms": 1000 * q[94] if ok else float("nan"),
        "max_ms": 1000 * max(ok) if ok else float("nan"),
        "cpu_ms_per_request": 1000 * cpu_s / len(answers) if answers else float("nan"),
        "stages": {key: statistics.fmean(s.get(key, 0.0) for s in stages) for key in stages[0]}
        if stages
        else {},
    }


def verdict(row: dict[str, Any], targets: bool) -> str:
    if not targets:
        return "(measured)"
    if row["scenario"].startswith("sequential"):
        return "met" if row["p50_ms"] < TARGET_P50_MS else "missed"
    good = row["503"] == 0 and row["other_errors"] == 0 and row["p95_ms"] < TARGET_BURST_P95_MS
    return "met" if good else "missed"


def table(rows: list[dict[str, Any]], targets: bool) -> str:
    columns = ["scenario", "requests", "ok", "503", "p50 ms", "p95 ms", "max ms", "target", "verdict"]
    columns.append("server CPU ms per request")
    columns.append(
        "server mean ms: first stage / segmentation / pruning / scoring / aggregation / queue / total"
    )
    lines = []
    for r in rows:
        s = r["stages"]
        server = " / ".join(f"{sum(s.get(key, 0) for key in keys):.0f}" for keys in SERVER_STEPS)
        target = (
            f"p50 < {TARGET_P50_MS:.0f} ms"
            if r["scenario"].startswith("sequential")
            else f"no 503, p95 < {TARGET_BURST_P95_MS:.0f} ms"
        )
        lines.append(
            [
                r["scenario"],
                r["requests"],
                r["ok"],
                r["503"],
                f"{r['p50_ms']:.0f}",
                f"{r['p95_ms']:.0f}",
                f"{r['max_ms']:.0f}",
                target if targets else "",
                verdict(r, targets),
                f"{r.get('cpu_ms_per_request', float('nan')):.0f}",
                server,
            ]
        )
    return markdown.table(columns, lines, align="lrrrrrrllrl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="SciFact Lucene index (evirank index [--embed])")
    parser.add_argument(
        "--data", default=None, help="SciFact BEIR folder (default: scifact in the datasets folder)"
    )
    parser.add_argument("--sequential", type=int, default=50, help="new queries sent one at a time")
    parser.add_argument("--burst", type=int, default=20, help="new queries sent at the same instant")
    parser.add_argument("--bursts", type=int, default=3, help="how many bursts (distinct queries each)")
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--top", type=int, default=10, help="results per request")
    parser.add_argument("--scorer", default="bi", choices=("bi", "cross"))
    parser.add_argument("--model", default=None, help="the server's --model")
    parser.add_argument("--aggregate", default=None, help="the server's --aggregate (default: birch:3)")
    parser.add_argument("--vectors", default=None, help="the server's --vectors (default: the index's)")
    parser.add_argument("--prune", type=int, default=None, help="the server's --prune (cross-encoder)")
    parser.add_argument("--prune-by", default=None, choices=("bm25", "bi"), help="the server's --prune-by")
    parser.add_argument("--workers", type=int, default=None, help="the server's --workers")
    parser.add_argument("--model-threads", type=int, default=None, help="the server's --model-threads")
    parser.add_argument("--max-pending", type=int, default=None, help="the server's --max-pending")
    parser.add_argument(
        "--batch", type=int, default=None, help="the server's --batch (1: each query embedded alone)"
    )
    parser.add_argument("--scores", default=None, help="score store for the server (off by default)")
    parser.add_argument("--timeout", type=float, default=30.0, help="the server's --timeout")
    parser.add_argument("--startup", type=float, default=300.0, help="seconds to wait for the server")
    parser.add_argument("--json", default=None, help="also write the raw results to this JSON file")
    args = parser.parse_args(argv)
    if args.data is None:
        folder = datasets()
        assert folder is not None  # datasets() exits when the folder is not there
        args.data = str(folder / "scifact")

    import httpx

    if not Path(args.index).is_dir():
        raise SystemExit(
            f"no index at {args.index}: run `evirank index --corpus {args.data} --index {args.index} --embed`"
        )
    queries = test_queries(Path(args.data))
    needed = 2 + args.sequential + args.burst * args.bursts
    if len(queries) < needed:
        raise SystemExit(
            f"{needed} distinct claims needed (2 warm-up + {args.sequential} + {args.bursts} x "
            f"{args.burst}), SciFact's test set has {len(queries)}: lower --sequential, --burst or --bursts"
        )
    warm, queries = queries[:2], queries[2:]
    # the targets are for the offline default bi-encoder at depth 20
    targets = args.scorer == "bi" and args.model is None and args.depth == 20 and args.prune is None
    top = header(
        "Search service: new queries, one at a time and in bursts",
        f"SciFact test claims never sent before, depth {args.depth}, top {args.top}, scorer {args.scorer}"
        + (f" ({args.model})" if args.model else "")
        + (f", --prune {args.prune} by {args.prune_by or 'bm25'}" if args.prune else "")
        + f", vectors {args.vectors or 'the index own (if any)'}"
        + f", score store {'on' if args.scores else 'off'}"
        + (f", --batch {args.batch}" if args.batch is not None else ""),
        packages=("torch", "transformers", "fastapi", "uvicorn"),
    )
    port = free_port()
    server = start_server(args, port)
    rows = []
    identical: tuple[int, int] | None = None
    try:
        limits = httpx.Limits(max_connections=args.burst + 4, max_keepalive_connections=args.burst + 4)
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=args.timeout + 30, limits=limits
        ) as http:
            began = time.monotonic()
            info = wait_healthy(http, server, args.startup)
            print(f"server ready in {time.monotonic() - began:.1f} s: {info['info']}", file=sys.stderr)
            sequential(http, warm, args.top, args.depth)  # first requests after start-up, not measured
            seq = queries[: args.sequential]
            cpu = cpu_seconds(server.pid)
            answered = sequential(http, seq, args.top, args.depth)
            rows.append(
                summarise(f"sequential ({len(seq)} queries)", answered, cpu_seconds(server.pid) - cpu)
            )
            print(f"sequential: p50 {rows[-1]['p50_ms']:.0f} ms", file=sys.stderr)
            answers: list[Answer] = []
            rest = queries[args.sequential :]
            burst_cpu = 0.0
            for b in range(args.bursts):
                chunk = rest[b * args.burst : (b + 1) * args.burst]
                cpu = cpu_seconds(server.pid)
                answers += burst(http, chunk, args.top, args.depth)
                burst_cpu += cpu_seconds(server.pid) - cpu
                time.sleep(1.0)  # let the server drain between bursts
            if answers:
                name = f"{args.bursts} bursts of {args.burst} at once"
                rows.append(summarise(name, answers, burst_cpu))
                asked = rest[: args.bursts * args.burst]
                identical = same_answers(http, asked, answers, args.top, args.depth)
                print(f"bursts: {rows[-1]['503']} x 503, p95 {rows[-1]['p95_ms']:.0f} ms", file=sys.stderr)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    print(top)
    print(f"server: {info['info']}\n")
    print(table(rows, targets))
    if identical is not None:
        print(
            f"\nburst answers byte-identical (timings aside) to the same claims asked again one at a "
            f"time: {identical[0]} of {identical[1]}"
        )
    print(footer())
    if args.json:
        raw = {"header": top, "rows": rows, "identical": identical}
        Path(args.json).write_text(json.dumps(raw, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
