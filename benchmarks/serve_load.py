"""Bounded load on the search service: latency and throughput at concurrency 1, 4 and 16.

Starts ``evirank serve`` on 127.0.0.1 over a SciFact index (build it first with
``evirank index --corpus ../shared/datasets/scifact --index /tmp/scifact-idx``), waits until it is
healthy (the model loads once, before the first request), then, for each concurrency level, sends a
fixed number of ``GET /v1/search`` requests (distinct SciFact test claims, depth 20) from that many
client threads, stopping early at a time cap. Prints a Markdown table: p50 and p95 latency, requests
per second, errors, and the server's own mean per-stage times, headed by the machine it ran on.

Example:
    $ python benchmarks/serve_load.py --index /tmp/scifact-idx --requests 40 --time-cap 120
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


def test_queries(folder: Path) -> list[str]:
    """SciFact's test claims (the queries with test qrels), in file order."""
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
    return queries


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(args: argparse.Namespace, port: int) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "evirank", "-q", "serve",
        "--index", args.index, "--port", str(port), "--host", "127.0.0.1",
        "--scorer", args.scorer, "--depth", str(args.depth),
        "--timeout", str(args.timeout), "--max-pending", str(max(64, 4 * max(args.levels))),
    ]  # fmt: skip
    if args.model:
        command += ["--model", args.model]
    if args.aggregate:
        command += ["--aggregate", args.aggregate]
    if args.scores:
        command += ["--scores", args.scores]
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), HF_HUB_OFFLINE="1")
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, start_new_session=True)


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


def run_level(
    http: Any, queries: list[str], concurrency: int, requests: int, time_cap: float, k: int, depth: int
) -> dict[str, Any]:
    """Send ``requests`` searches from ``concurrency`` threads; stop starting new ones after ``time_cap``."""
    latencies: list[float] = []
    stages: list[dict[str, float]] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    todo = iter(queries[:requests])
    began = time.perf_counter()

    def worker() -> None:
        while True:
            with lock:
                query = next(todo, None)
            if query is None or time.perf_counter() - began > time_cap:
                return
            start = time.perf_counter()
            try:
                response = http.get("/v1/search", params={"q": query, "k": k, "depth": depth})
                status = response.status_code
            except Exception:  # a transport error counts as a failed request
                status, response = 599, None
            elapsed = time.perf_counter() - start
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status == 200 and response is not None:
                    latencies.append(elapsed)
                    stages.append(response.json()["timings"])

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for _ in range(concurrency):
            pool.submit(worker)
    wall = time.perf_counter() - began
    ok = len(latencies)
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive") if ok >= 2 else latencies * 99
    return {
        "concurrency": concurrency,
        "ok": ok,
        "errors": sum(n for s, n in statuses.items() if s != 200),
        "statuses": statuses,
        "p50_ms": 1000 * quantiles[49] if ok else float("nan"),
        "p95_ms": 1000 * quantiles[94] if ok else float("nan"),
        "rps": ok / wall if wall else 0.0,
        "wall_s": wall,
        "stages": {key: statistics.fmean(s[key] for s in stages) for key in stages[0]} if stages else {},
    }


def table(rows: list[dict[str, Any]]) -> str:
    columns = ["concurrency", "requests ok", "errors", "p50 ms", "p95 ms", "requests/s"]
    columns.append("server mean ms: retrieve / segment / score / queue / total")
    lines = []
    for r in rows:
        s = r["stages"]
        server = " / ".join(
            f"{s.get(key, 0):.0f}" for key in ("retrieve", "segment", "score", "wait", "total")
        )
        ok, errors, p50, p95 = r["ok"], r["errors"], f"{r['p50_ms']:.0f}", f"{r['p95_ms']:.0f}"
        lines.append([r["concurrency"], ok, errors, p50, p95, f"{r['rps']:.2f}", server])
    return markdown.table(columns, lines, align="rrrrrrl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="/tmp/scifact-idx", help="SciFact Lucene index")
    parser.add_argument(
        "--data", default=None, help="SciFact BEIR folder (default: scifact in the datasets folder)"
    )
    parser.add_argument("--levels", nargs="+", type=int, default=[1, 4, 16], help="concurrency levels")
    parser.add_argument("--requests", type=int, default=40, help="requests per level")
    parser.add_argument("--time-cap", type=float, default=120.0, help="seconds per level before stopping")
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--scorer", default="bi", choices=("bi", "cross"))
    parser.add_argument("--model", default=None)
    parser.add_argument("--aggregate", default=None, help="the server's --aggregate (default: its own)")
    parser.add_argument("--scores", default=None, help="score store for the server (off by default)")
    parser.add_argument("--timeout", type=float, default=120.0, help="the server's --timeout")
    parser.add_argument("--startup", type=float, default=300.0, help="seconds to wait for the server")
    parser.add_argument("--json", default=None, help="also write the raw results to this JSON file")
    args = parser.parse_args(argv)
    args.data = args.data or str(datasets() / "scifact")

    import httpx

    if not Path(args.index).is_dir():
        raise SystemExit(
            f"no index at {args.index}: run `evirank index --corpus {args.data} --index {args.index}`"
        )
    queries = test_queries(Path(args.data))
    needed = args.requests * len(args.levels) + 2
    if len(queries) < needed:
        queries = (queries * (needed // len(queries) + 1))[:needed]
    port = free_port()
    top = header(
        "Search service under load",
        f"SciFact test claims, depth {args.depth}, k {args.k}, scorer {args.scorer}"
        + (f" ({args.model})" if args.model else "")
        + f", {args.requests} requests per level, time cap {args.time_cap:.0f} s, score store "
        f"{'on' if args.scores else 'off'}",
        packages=("torch", "transformers", "fastapi", "uvicorn"),
    )
    server = start_server(args, port)
    rows = []
    try:
        limits = httpx.Limits(
            max_connections=max(args.levels) + 4, max_keepalive_connections=max(args.levels) + 4
        )
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=args.timeout + 30, limits=limits
        ) as http:
            began = time.monotonic()
            info = wait_healthy(http, server, args.startup)
            print(f"server ready in {time.monotonic() - began:.1f} s: {info['info']}", file=sys.stderr)
            run_level(http, queries[-2:], 1, 2, args.time_cap, args.k, args.depth)  # warm-up, not measured
            for i, level in enumerate(args.levels):
                # distinct claims per level, so no level profits from another's cached work
                chunk = queries[i * args.requests : (i + 1) * args.requests]
                row = run_level(http, chunk, level, args.requests, args.time_cap, args.k, args.depth)
                print(f"concurrency {level}: {row['ok']} ok in {row['wall_s']:.1f} s", file=sys.stderr)
                rows.append(row)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    print(top)
    print(f"server: {info['info']}\n")
    print(table(rows))
    print(footer())
    if args.json:
        Path(args.json).write_text(json.dumps({"header": top, "rows": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
