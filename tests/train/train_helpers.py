"""Helpers of the training tests: a tiny random BERT built in a second, a separable toy set."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from evirank.train.examples import make_examples

WORDS = ["good", "bad", "apple", "banana", "cherry", "grape", "lemon", "mango", "about", "the", "fruit", "is"]


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
        num_labels=1,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = (
        transformers.BertForSequenceClassification(config) if with_head else transformers.BertModel(config)
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def toy_examples(n_queries: int = 6, per_query: int = 8, seed: int = 0) -> pd.DataFrame:
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


def toy_collection(folder: Path) -> dict[str, Path]:
    """8 queries, 10 documents each (d0 relevant), a 'given' run and a 'mined' run in reverse order."""
    corpus, topics, qrels, given, mined = [], [], [], [], []
    for q in range(1, 9):
        topics.append(f"{q}\tapple fruit {q}\n")
        qrels.append(f"{q} 0 q{q}-d0 1\n")
        for d in range(10):
            corpus.append(
                json.dumps({"_id": f"q{q}-d{d}", "title": "", "text": f"the fruit {d} is good"}) + "\n"
            )
            given.append(f"{q} Q0 q{q}-d{d} {d + 1} {10 - d} given\n")
            mined.append(f"{q} Q0 q{q}-d{9 - d} {d + 1} {10 - d} mined\n")
    paths = {"topics": "topics.tsv", "qrels": "qrels.txt", "given": "given.txt", "mined": "mined.txt"}
    out = {k: folder / v for k, v in paths.items()}
    out["corpus"] = folder / "corpus.jsonl"
    for key, lines in (
        ("topics", topics),
        ("qrels", qrels),
        ("given", given),
        ("mined", mined),
        ("corpus", corpus),
    ):
        out[key].write_text("".join(lines))
    return out
