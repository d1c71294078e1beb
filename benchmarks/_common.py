"""What every benchmark shares: the machine header above its table, and where the datasets are.

Every benchmark prints a Markdown table headed by :func:`header`: the CPU (or GPU), cores, memory,
operating system, load average at the start, Python, evirank and the libraries it measures, and
the date. :func:`load_average` gives the load again at the end, so a reader can tell an idle
machine from a busy one.

Run the benchmarks from the repository root with ``PYTHONPATH=src python benchmarks/NAME.py``.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:  # run from a checkout: its own evirank first
    sys.path.insert(0, str(REPO / "src"))


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def memory_gib() -> float | None:
    """Physical memory in GiB (``None`` where the platform cannot tell)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, OSError, ValueError):
        return None


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, ``"1.2 0.9 0.7"`` (``"?"`` where unknown)."""
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "?"


def machine() -> str:
    """One line: CPU, usable cores, memory, operating system.

    Example:
        >>> "cores" in machine()
        True
    """
    memory = memory_gib()
    ram = f", {memory:.0f} GiB RAM" if memory is not None else ""
    return f"{cpu_model()}, {cores()} cores usable{ram}, {platform.system()} {platform.release()}"


def versions(*packages: str) -> str:
    """``python 3.11.7, evirank 0.1.0, numpy 2.1.0, ...`` for the installed ``packages``
    (:func:`evirank.record.versions`)."""
    from evirank.record import versions as installed

    found = installed(*packages)
    return ", ".join(f"{name} {found[name]}" for name in ("python", "evirank", *packages) if name in found)


def header(title: str, *details: str, packages: tuple[str, ...] = (), device: str | None = None) -> str:
    """The header every benchmark prints above its table.

    Args:
        title: what was measured.
        details: more lines (settings, data sizes), one bullet each.
        packages: libraries whose versions matter to the figures.
        device: the device the figures were measured on, where it is not the CPU (a GPU's name).

    Example:
        >>> print(header("Demo", "300 queries").splitlines()[0])
        ### Demo
    """
    lines = [
        f"### {title}",
        "",
        f"- machine: {machine()}" + (f"; device: {device}" if device else ""),
        f"- load average (1, 5, 15 min) at the start: {load_average()}",
        f"- {versions(*packages)}",
        *[f"- {d}" for d in details],
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
        "",
    ]
    return "\n".join(lines)


def footer() -> str:
    """The line every benchmark prints under its table: the load average at the end."""
    return f"\nload average (1, 5, 15 min) at the end: {load_average()}"


def datasets(required: bool = True) -> Path | None:
    """The datasets folder: ``$EVIRANK_DATASETS``, else ``$DATA``, else ``../shared/datasets``
    beside the repository.

    Raises:
        SystemExit: when ``required`` and the folder is not there (naming the variables to set).
    """
    from evirank.datasets import datasets_folder

    found = datasets_folder(REPO)
    if found is None and required:
        raise SystemExit(
            "the datasets folder is not here: set EVIRANK_DATASETS (or DATA) to it "
            "(default: ../shared/datasets beside the repository)"
        )
    return found
