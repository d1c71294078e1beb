"""A real two-node Ray cluster on this machine (``ray start --head`` and a second ``ray start``):
``rerank --ray ADDRESS`` writes the same run as a single process."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_scale_ray import rerank_args

from evirank.cli import main

pytestmark = pytest.mark.slow


def _free_port_block(size: int = 120) -> int:
    """A base port with ``size`` free ports above it."""
    for base in range(41000, 60000, 500):
        ok = True
        for port in (base, base + 1, base + 2):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    ok = False
        if ok:
            return base
    raise RuntimeError("no free port range")


def _node_command(ray: list[str], base: int, temp: Path, head: bool, address: str) -> list[str]:
    ports = [
        "--node-manager-port", str(base + 1),
        "--object-manager-port", str(base + 2),
        "--dashboard-agent-listen-port", str(base + 3),
        "--dashboard-agent-grpc-port", str(base + 4),
        "--runtime-env-agent-port", str(base + 5),
        "--metrics-export-port", str(base + 6),
        "--min-worker-port", str(base + 20),
        "--max-worker-port", str(base + 99),
    ]  # fmt: skip
    where = (
        ["--head", "--port", str(base), "--include-dashboard", "false"] if head else ["--address", address]
    )
    own = ["--num-cpus", "2", "--temp-dir", str(temp), "--node-ip-address", "127.0.0.1"]
    return [*ray, "start", "--block", *where, *ports, *own]


# `ray start --node-ip-address 127.0.0.1` alone: Ray (2.60) replaces a loopback address by the
# machine's reachable one, and its servers listen on every address. The nodes of this test run
# `ray start` with that replacement turned off (as evirank's own local instance does), so the
# cluster listens on and talks to 127.0.0.1 only.
LOOPBACK_RAY = (
    "import sys; from ray._private import services; services.resolve_ip_for_localhost = lambda host: host; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; sys.exit(main())"
)


def _alive_nodes(address: str, env: dict[str, str]) -> int:
    code = (
        "import ray; from evirank.scale.engine import init_on_loopback; "
        f"init_on_loopback(ray, address={address!r}, logging_level='ERROR'); "
        "print(sum(n['Alive'] for n in ray.nodes()))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else 0


def cluster_env() -> dict[str, str]:
    """The environment of the nodes and the driver: this checkout on the path, one auth token."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": TOKEN,
    }


TOKEN = secrets.token_hex(16)


@pytest.fixture
def two_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a head node and a second node, each with its own ports and temp folder."""
    ray = shutil.which("ray", path=os.path.dirname(sys.executable))
    if ray is None:
        pytest.skip("the ray command is not installed")
    env = cluster_env()
    base = _free_port_block()
    address = f"127.0.0.1:{base}"
    nodes: list[subprocess.Popen[bytes]] = []
    folder = Path("/tmp") / f"evirank-ray-{os.getpid()}"  # Ray's socket paths must stay short
    try:
        for number, head in enumerate((True, False)):
            temp = folder / f"node{number}"
            temp.mkdir(parents=True, exist_ok=True)
            command = _node_command(
                [sys.executable, "-c", LOOPBACK_RAY], base + 200 * number, temp, head, address
            )
            log = open(tmp_path_factory.mktemp("ray-logs") / f"node{number}.log", "wb")  # noqa: SIM115
            nodes.append(subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True))
            deadline = time.monotonic() + 180
            while _alive_nodes(address, env) < number + 1:
                assert time.monotonic() < deadline, f"node {number} did not join"
                assert nodes[-1].poll() is None, f"ray start of node {number} ended ({log.name})"
                time.sleep(2)
        yield address
    finally:
        for node in reversed(nodes):  # each node's processes are in its own session
            try:
                os.killpg(node.pid, signal.SIGTERM)
                node.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(node.pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def test_rerank_on_a_two_node_cluster_writes_the_same_run(
    two_node_cluster: str,
    one_thread: None,
    small_collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
) -> None:
    reference = tmp_path / "reference.txt"
    assert main(rerank_args(small_collection, tiny_cross_encoder_path, reference, "--query-block", "2")) == 0
    out = tmp_path / "cluster.txt"
    args = rerank_args(small_collection, tiny_cross_encoder_path, out, "--query-block", "2")
    args += ["--ray", two_node_cluster, "--ray-workers", "2", "--scores", str(tmp_path / "shared")]
    env = cluster_env()
    driver = [sys.executable, "-c", "import sys; from evirank.cli import main; sys.exit(main(sys.argv[1:]))"]
    done = subprocess.run([*driver, *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_bytes() == reference.read_bytes()
