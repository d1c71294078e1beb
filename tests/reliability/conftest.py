"""Fixtures of the reliability tests: a small file system the test may fill or turn read-only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fs_faults import mount_tmpfs, unmount


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
    unmount(folder)
