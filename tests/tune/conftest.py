"""Fixtures of the tuning tests: where the real data lives (skip when it is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def find_datasets() -> Path | None:
    """``shared/datasets`` beside the repository or one of its parents."""
    for parent in REPO_ROOT.parents:
        candidate = parent / "shared" / "datasets"
        if candidate.is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def datasets() -> Path:
    found = find_datasets()
    if found is None:
        pytest.skip("the real datasets (../shared/datasets) are not here")
    return found
