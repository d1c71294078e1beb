"""Fixtures shared by every test.

- ``datasets``: where the real data lives (skip when it is absent).
- Tiny random transformers built locally in seconds (no hub, no downloads):
  ``tiny_cross_encoder_path`` (one-logit head), ``tiny_two_logit_path`` (two-logit head) and
  ``tiny_bi_encoder_path`` (a bare encoder), session-scoped folders in the standard Hugging Face
  layout (config.json, model.safetensors, tokenizer files), loadable by ``from_pretrained``;
  ``tiny_bert_builder`` (``build_tiny_bert``) makes more.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def find_datasets() -> Path | None:
    """The datasets folder by evirank's one rule (:func:`evirank.datasets.datasets_folder`)."""
    from evirank.datasets import datasets_folder

    return datasets_folder(REPO_ROOT)


@pytest.fixture(scope="session")
def datasets() -> Path:
    found = find_datasets()
    if found is None:
        pytest.skip("the datasets folder is not here (set EVIRANK_DATASETS; default ../shared/datasets)")
    return found


_WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "the a an of and or to in is are was be for on with by as at from that this it not no bm25 "
    "rank ranking document documents passage passages sentence query evidence relevant model "
    "score scores search retrieval cat cats dog dogs sat mat vaccine virus cell cells"
).split()


def build_tiny_bert(folder: Path, *, head: str = "classify", num_labels: int = 1, seed: int = 0) -> Path:
    """Save a random 2-layer BERT (hidden 32) with a small WordPiece vocabulary in ``folder``.

    Args:
        folder: where to save (created).
        head: ``"classify"`` (BertForSequenceClassification) or ``"embed"`` (BertModel).
        num_labels: logits of the classification head.
        seed: torch seed of the random weights.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    letters = list(string.ascii_lowercase + string.digits)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *letters]
    vocab += [f"##{c}" for c in letters] + [w for w in _WORDS if w not in vocab]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # Built with the tokenizers library: transformers 5 reads a bare vocab.txt as a 5-token vocabulary
    # (every word [UNK]); a tokenizer.json keeps the whole WordPiece vocabulary.
    ids = {token: i for i, token in enumerate(vocab)}
    backend = Tokenizer(models.WordPiece(ids, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    backend.decoder = decoders.WordPiece()
    tokenizer = BertTokenizer(
        tokenizer_object=backend,
        do_lower_case=True,
        model_max_length=128,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    tokenizer.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=num_labels,
        initializer_range=0.5,  # large random weights, so different inputs get clearly different scores
    )
    torch.manual_seed(seed)
    model = (
        BertForSequenceClassification(config)
        if head == "classify"
        else BertModel(config, add_pooling_layer=False)
    )
    model.eval()
    model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_bert_builder() -> Callable[..., Path]:
    """:func:`build_tiny_bert`, for tests that need another tiny model (``from conftest`` is ambiguous
    when sub-folders have their own conftest)."""
    return build_tiny_bert


@pytest.fixture(scope="session")
def tiny_cross_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random one-logit cross-encoder folder."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-cross"), head="classify", num_labels=1)


@pytest.fixture(scope="session")
def tiny_two_logit_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random two-logit cross-encoder folder."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-two"), head="classify", num_labels=2, seed=1)


@pytest.fixture(scope="session")
def tiny_bi_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random encoder (no head) for bi-encoder tests."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bi"), head="embed", seed=2)


#: The file that takes minutes: the docs' examples, after the demo they start from. It is collected
#: first, so that when the suite runs on several workers (``make test`` runs pytest-xdist with
#: ``--dist loadfile``) one worker starts on it while the others take the many short files, instead
#: of one worker being handed it last. (The other files keep their order: the Ray tests, say, start
#: their local Ray where they always did, after the in-process JVM of the Lucene tests.)
LONG_FILES = ("tests/test_docs_examples.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def position(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONG_FILES.index(path) if path in LONG_FILES else len(LONG_FILES)

    items.sort(key=position)  # stable: the order within each file and among the rest is kept
