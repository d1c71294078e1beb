"""Fixtures of the training tests: tiny random BERTs built in a second (``datasets`` comes from
the root conftest).

They are built here rather than with the root ``build_tiny_bert`` because training needs a
small init range (that one is deliberately large, for well-separated random scores), a vocabulary
holding the toy set's words, and a choice of depth (a 4-layer teacher for distillation).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from train_helpers import build_tiny_model


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random encoder without a classification head (like all-MiniLM-L6-v2)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder"), layers=2)


@pytest.fixture(scope="session")
def tiny_encoder_4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random 4-layer classifier with a one-logit head (a teacher for distillation)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder-4"), layers=4, with_head=True)
