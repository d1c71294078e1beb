"""Fixtures of the io tests: where the real data lives (skip when it is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def find_datasets() -> Path | None:
    """``$EVIRANK_DATASETS``, else the first ``shared/datasets`` beside the repo or beside one of its parents.

    The repository normally sits next to ``shared`` (``<root>/../shared/datasets``); a git
    worktree one level deeper finds it one parent up.
    """
    env = os.environ.get("EVIRANK_DATASETS")
    if env:
        return Path(env) if Path(env).is_dir() else None
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
