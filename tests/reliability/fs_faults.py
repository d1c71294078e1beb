"""A small file system the reliability tests may fill or turn read-only (a tmpfs, where root may mount it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def mount_tmpfs(folder: Path, size: str) -> bool:
    """Mount a tmpfs of ``size`` at ``folder``; False where that is not allowed (not root, a container)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    return done.returncode == 0


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of ``folder`` until at most ``leave`` bytes are free."""
    with open(folder / "filler", "wb") as handle:
        while True:
            stat = os.statvfs(folder)
            free = stat.f_bavail * stat.f_frsize
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
