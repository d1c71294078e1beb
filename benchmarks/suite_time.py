"""How long the default test suite takes, on one worker and on several (pytest-xdist).

``make test`` runs the suite on two pytest-xdist workers, each file on one worker
(``--dist loadfile``), the file that takes minutes first (``tests/conftest.py``, ``LONG_FILES``),
and each worker computing on one thread (``conftest.py``). This benchmark runs the same suite with
each worker count asked for and prints the wall time, the CPU time of the processes it started,
and the test counts, so the effect of the workers is measured on the machine at hand.

Usage (from the repository root, after ``make install``; one suite run per worker count):
    python benchmarks/suite_time.py                  # 1 and 2 workers
    python benchmarks/suite_time.py --workers 2 4    # other counts
"""

from __future__ import annotations

import argparse
import logging
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass

from _common import REPO, footer, header

#: pytest's closing line, e.g. ``1886 passed, 62 skipped, 3 warnings in 349.58s (0:05:49)``.
SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ \w+.*) in [\d.]+s")


@dataclass
class SuiteRun:
    """One run of the suite: worker count, wall and CPU seconds, pytest's counts, exit status."""

    workers: int
    wall_s: float
    cpu_s: float
    counts: str
    status: int


def run_suite(workers: int, extra: list[str]) -> SuiteRun:
    """Run the default suite (``-m 'not slow and not gpu'``) on ``workers`` pytest-xdist workers
    (1: no xdist), as ``make test`` does."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra]
    if workers > 1:
        command += ["-n", str(workers), "--dist", "loadfile", "--no-loadscope-reorder"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [m.group("counts") for line in done.stdout.splitlines() if (m := SUMMARY.match(line.strip()))]
    if done.returncode != 0:
        logging.getLogger("suite_time").warning(
            "the suite on %d worker(s) exited with %d; its output ends:\n%s",
            workers,
            done.returncode,
            (done.stdout + done.stderr)[-3000:],
        )
    return SuiteRun(workers, wall, cpu, lines[-1] if lines else "no summary", done.returncode)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts to run")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    print(header("Default test suite: wall time by pytest-xdist workers", packages=("torch", "pytest")))
    print("| workers | wall (m:s) | CPU of its processes (m:s) | exit | tests |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for workers in args.workers:
        run = run_suite(workers, args.pytest_args)
        wall, cpu = _minutes(run.wall_s), _minutes(run.cpu_s)
        print(f"| {run.workers} | {wall} | {cpu} | {run.status} | {run.counts} |")
        sys.stdout.flush()
    print()
    print(footer())
    return 0


if __name__ == "__main__":
    sys.exit(main())
