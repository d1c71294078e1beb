"""A local Ray started by ``rerank --ray local`` listens on the loopback address only, and leaves no
process behind when its driver is killed, interrupted or terminated."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_scale_ray import rerank_args

from process_tree import alive, command_line, descendants

pytestmark = pytest.mark.slow  # Ray starts in every case: a minute each on a busy machine


def listening(pids: set[int]) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The local addresses ``pids`` listen on (TCP, from /proc/net/tcp and tcp6)."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                hexed = fields[1].split(":")[0]  # 32-bit words, each little-endian
                raw = b"".join(bytes.fromhex(hexed[i : i + 8])[::-1] for i in range(0, len(hexed), 8))
                address = ipaddress.ip_address(raw)
                if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                    address = address.ipv4_mapped
                found.add(address)
    return found


@pytest.mark.parametrize("how", ["kill -9", "ctrl-c", "sigterm"])
def test_a_local_ray_listens_on_loopback_and_ends_with_its_driver(
    how: str, small_collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    args = rerank_args(small_collection, tiny_cross_encoder_path, tmp_path / "out.txt", "--query-block", "1")
    args += ["--ray", "local", "--ray-workers", "1", "--scores", str(tmp_path / "scores")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    driver = subprocess.Popen(
        [sys.executable, "-m", "evirank", *args],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen: set[int] = set()
    addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            seen |= descendants(driver.pid)
            agents = [
                p for p in seen if command_line(p).startswith(("ray::DashboardAgent", "ray::RuntimeEnvAgent"))
            ]
            if len(agents) == 2 and (tmp_path / "scores").exists():
                time.sleep(1.0)  # the agents bind their ports once up
                seen |= descendants(driver.pid)
                addresses = listening(seen)
                break
            time.sleep(0.1)
        assert driver.poll() is None, "the driver ended before Ray's agents were up"
        if how == "kill -9":
            driver.send_signal(signal.SIGKILL)
        elif how == "ctrl-c":
            os.killpg(driver.pid, signal.SIGINT)  # as a terminal sends it
        else:
            driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    stderr = driver.stderr.read().decode(errors="replace") if driver.stderr else ""
    assert addresses and all(a.is_loopback for a in addresses), (
        f"Ray listened on {sorted(map(str, addresses))}"
    )
    if how != "kill -9":
        assert "interrupted; the scores computed so far are kept" in stderr, stderr[-2000:]
        assert driver.returncode == (130 if how == "ctrl-c" else 143)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(p) for p in seen):
        time.sleep(0.2)
    left = {p: command_line(p)[:80] for p in seen if alive(p)}
    assert not left, f"left behind after {how}: {left}"
