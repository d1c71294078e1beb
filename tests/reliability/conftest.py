"""Fixtures of the reliability tests: a small file system the test may fill or turn read-only."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def mount_tmpfs(folder: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` at ``folder``; False where that is not allowed (not root, a container)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs the test may fill (a full disk) or remount read-only; skipped without root.

    Without root, the full-disk cases still run through ``RLIMIT_FSIZE`` (``ulimit -f``) in a
    subprocess (tests/reliability/test_write_failures.py).
    """
    folder = tmp_path / "tmpfs"
    if not mount_tmpfs(folder, "16m"):
        pytest.skip("mounting a tmpfs needs root")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` until at most ``leave`` bytes are free."""
    with open(folder / "filler", "wb") as handle:
        while True:
            free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
            if free <= leave:
                break
            try:
                handle.write(b"\0" * min(free - leave, 1 << 20))
                handle.flush()
            except OSError:
                break


def read_only(folder: Path) -> None:
    """Remount the tmpfs at ``folder`` read-only."""
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
