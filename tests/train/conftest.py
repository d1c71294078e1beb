"""Fixtures of the training tests: a tiny random BERT built in a second, toy examples, real data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evirank.train.examples import make_examples

REPO_ROOT = Path(__file__).resolve().parents[2]

WORDS = ["good", "bad", "apple", "banana", "cherry", "grape", "lemon", "mango", "about", "the", "fruit", "is"]


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


def build_tiny_model(folder: Path, *, layers: int = 2, with_head: bool = False) -> Path:
    """Save a random BERT (hidden 32, ``layers`` layers) and a WordPiece vocab into ``folder``."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import torch

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    tokenizer = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(vocab)})
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = (
        transformers.BertForSequenceClassification(config) if with_head else transformers.BertModel(config)
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random encoder without a classification head (like all-MiniLM-L6-v2)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder"), layers=2)


@pytest.fixture(scope="session")
def tiny_encoder_4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random encoder with 4 layers and a head (a teacher for distillation)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-encoder-4"), layers=4, with_head=True)


def toy_examples(n_queries: int = 6, per_query: int = 8, seed: int = 0):
    """A separable toy set: relevant texts contain 'good', the others 'bad'."""
    import random

    rng = random.Random(seed)
    fruits = WORDS[2:8]
    rows = []
    for q in range(n_queries):
        query = fruits[q % len(fruits)]
        for i in range(per_query):
            label = i % 2
            filler = rng.sample(fruits, 2)
            text = " ".join([*filler, "good" if label else "bad", "fruit"])
            rows.append((str(q + 1), query, f"d{q}-{i}", 0, text, label, "toy"))
    return make_examples(rows)


@pytest.fixture()
def toy() -> object:
    return toy_examples()
