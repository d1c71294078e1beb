"""Fixtures of the training tests: a tiny random BERT built in a second, toy examples, real data."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from train_helpers import build_tiny_model, toy_examples

REPO_ROOT = Path(__file__).resolve().parents[2]


def find_datasets() -> Path | None:
    """``$EVIRANK_DATASETS``, else the first ``shared/datasets`` beside the repo or one of its parents."""
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


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random encoder without a classification head (like all-MiniLM-L6-v2)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder"), layers=2)


@pytest.fixture(scope="session")
def tiny_encoder_4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random encoder with 4 layers and a head (a teacher for distillation)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder-4"), layers=4, with_head=True)


@pytest.fixture()
def toy() -> pd.DataFrame:
    return toy_examples()
