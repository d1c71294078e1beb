"""Ray processes of a local instance end with the command that started them, however it ends.

``ray.init()`` starts its processes (GCS, raylet, dashboard, log monitor) as children of the driver
and ties their fate to it; but the raylet's own children, Ray's ``DashboardAgent`` and
``RuntimeEnvAgent``, notice that the raylet is gone only after a long wait on the dead GCS: after a
``kill -9`` or a Ctrl-C of the driver they stay up for minutes, listening on their ports. Ray offers
no setting for this (Ray 2.60).

So a driver that starts a local instance also starts a small watcher (:func:`watch_ray_processes`,
this module run as ``python -m evirank.scale.reaper PID``) in its own session, where no Ctrl-C of the
terminal reaches it. While the driver lives, the watcher notes every Ray process below it (by
process id and start time, so a recycled id is never mistaken for one of them); when the driver
ends (its pipe to the watcher closes, whatever ended it, ``kill -9`` included), the watcher stops
those still running (SIGTERM, then SIGKILL after a grace period) and exits. Only Ray's processes
are touched, never other children of the driver. Linux only (it reads ``/proc``); elsewhere nothing
is started.

Example:
    >>> watcher = watch_ray_processes()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

logger = logging.getLogger(__name__)

#: Seconds between two looks at the driver's processes.
INTERVAL = 0.25
#: Seconds Ray's processes get to end after SIGTERM before SIGKILL.
GRACE = 3.0

_watcher: subprocess.Popen[bytes] | None = None


def watch_ray_processes() -> subprocess.Popen[bytes] | None:
    """Start (once per process) the watcher that ends this process's Ray processes when it ends.

    Returns the watcher, or ``None`` where ``/proc`` is not there to read.
    """
    global _watcher
    if _watcher is not None and _watcher.poll() is None:
        return _watcher
    if not Path("/proc/self/stat").exists():
        return None
    _watcher = subprocess.Popen(
        [sys.executable, "-m", "evirank.scale.reaper", str(os.getpid())],
        stdin=subprocess.PIPE,  # its write end is ours: closed by the kernel when we end
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C of the terminal does not reach it
        close_fds=True,
    )
    logger.debug("Ray processes of %d are watched by %d", os.getpid(), _watcher.pid)
    return _watcher


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent id, state, start time in clock ticks) of a process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0], int(fields[19])


def is_ray_process(pid: int) -> bool:
    """Whether ``pid`` runs a part of Ray (a ``ray::`` worker or agent, or a program of the ray package)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return command.startswith("ray::") or f"{os.sep}ray{os.sep}" in command


def _descendants(owner: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                children.setdefault(stat[0], []).append(int(entry.name))
    found: set[int] = set()
    frontier = [owner]
    while frontier:
        below = [child for pid in frontier for child in children.get(pid, ()) if child not in found]
        found.update(below)
        frontier = below
    return found


def _running(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == started and stat[1] != "Z"


def _watch(owner: int) -> None:
    """Note the Ray processes below ``owner`` until its pipe closes, then end those still running."""
    known: dict[int, int] = {}  # pid -> start time
    me = os.getpid()
    stdin = sys.stdin.fileno()
    while True:
        for pid in _descendants(owner) - {me}:
            if pid not in known and is_ray_process(pid):
                stat = _stat(pid)
                if stat is not None:
                    known[pid] = stat[2]
        ready, _, _ = select.select([stdin], [], [], INTERVAL)
        if ready and not os.read(stdin, 4096):
            break  # the owner ended (or closed the pipe on purpose)
        owner_stat = _stat(owner)
        if owner_stat is None or owner_stat[1] == "Z":
            break
    alive = {pid: started for pid, started in known.items() if _running(pid, started)}
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while time.monotonic() < deadline and any(_running(p, s) for p, s in alive.items()):
        time.sleep(0.05)
    for pid, started in alive.items():
        if _running(pid, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    """``python -m evirank.scale.reaper OWNER_PID``: watch OWNER_PID's Ray processes (see the module)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # it must outlive the Ctrl-C that ends its owner
    _watch(int(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
