"""Starting Ray keeps a JVM's signal handlers: Lucene's JVM and a Ray driver can share a process.

The JVM handles SIGSEGV itself in normal operation. Ray's ``init`` installs a failure handler of
its own (and enables Python's ``faulthandler``) over it; a JVM started before Ray then hung in
that handler the next time it raised one (a test process that ran the Lucene tests, then the Ray
tests, then a search). Each case runs in a fresh process, where nothing else has touched them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads sigaction through glibc")

SCRIPT = """
import ctypes, faulthandler, json, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
FATAL = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT)

def handlers():
    out = []
    for sig in FATAL:
        action = ctypes.create_string_buffer(512)  # larger than any struct sigaction
        assert libc.sigaction(int(sig), None, action) == 0
        out.append(action.raw[:8].hex())  # its first member: the handler's address
    return out

if sys.argv[1] == "faulthandler":
    faulthandler.enable()
if sys.argv[2] == "jvm":
    from evirank.lucene.java import start_jvm
    start_jvm()
if sys.argv[3] == "cli":  # the CLI's own SIGTERM handler
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
before = handlers()
from evirank.scale import RayOptions
from evirank.scale.engine import connect
ray = connect(RayOptions(address="local", workers=1))
after = handlers()
ray.shutdown()
print(json.dumps({"before": before, "after": after, "faulthandler": faulthandler.is_enabled()}))
"""


def handlers_around_ray(*case: str) -> dict[str, object]:
    """The fatal signals' handlers before and after ``connect`` starts a local Ray, in a new process."""
    pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    with tempfile.TemporaryDirectory(prefix="evirank-ray-", dir="/tmp") as short:  # Ray's socket paths
        env = {**os.environ, "RAY_TMPDIR": short, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, *case], env=env, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_jvm_started_before_ray_keeps_its_fatal_signal_handlers() -> None:
    pytest.importorskip("jnius")
    found = handlers_around_ray("plain", "jvm", "library")
    assert found["before"][0] != "00" * 8  # the JVM handles SIGSEGV
    assert found["after"] == found["before"]
    assert found["faulthandler"] is False


@pytest.mark.slow  # the same guarantee without a JVM, and with faulthandler and the CLI's SIGTERM handler
@pytest.mark.parametrize("case", [("plain", "none", "library"), ("faulthandler", "none", "cli")])
def test_ray_leaves_the_fatal_signal_handlers_and_faulthandler_as_found(case: tuple[str, ...]) -> None:
    found = handlers_around_ray(*case)
    assert found["after"] == found["before"]
    assert found["faulthandler"] is (case[0] == "faulthandler")


def test_the_script_reads_handlers_ray_would_change(tmp_path: Path) -> None:
    """The check can fail: Python's faulthandler, enabled, changes what it reads."""
    script = tmp_path / "probe.py"
    probe = "a = handlers(); faulthandler.enable(); print(a != handlers())"
    script.write_text(SCRIPT.split("if sys.argv[1]")[0] + probe)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True", done.stderr[-2000:]
