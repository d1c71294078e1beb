"""The late-interaction (ColBERT) family: a tiny PyLate-style folder, scores against an independent
MaxSim written here with transformers and torch, detection, the CLI, the store, serve and explain."""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

QUERY_LENGTH = 12
DOCUMENT_LENGTH = 24


WORDS = (
    "the a an of and or to in is are was what bm25 ranks documents by their terms cat cats sat on mat dog "
    "dogs too vaccine virus cells query model score evidence relevant passages search retrieval"
).split()


def build_colbert(folder: Path, *, bias: bool = True, seed: int = 5) -> Path:
    """A tiny random BERT (hidden 16) with a WordPiece vocabulary holding PyLate's marker tokens, a
    Dense projection (16 -> 8) and the sentence-transformers files PyLate writes."""
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder.mkdir(parents=True, exist_ok=True)
    letters = list(string.ascii_lowercase + string.digits)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *letters]
    vocab += [f"##{c}" for c in letters] + [w for w in WORDS if w not in vocab]
    backend = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    tokenizer.add_tokens(["[Q] ", "[D] "])  # as PyLate adds them
    tokenizer.save_pretrained(str(folder))
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    torch.manual_seed(seed)
    transformers.BertModel(config, add_pooling_layer=False).eval().save_pretrained(str(folder))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    dense = folder / "1_Dense"
    dense.mkdir()
    (dense / "config.json").write_text(
        json.dumps(
            {
                "in_features": 16,
                "out_features": 8,
                "bias": bias,
                "activation_function": "torch.nn.modules.linear.Identity",
                "use_residual": False,
            }
        )
    )
    generator = torch.Generator().manual_seed(7)
    weights = {"linear.weight": torch.randn(8, 16, generator=generator)}
    if bias:
        weights["linear.bias"] = torch.randn(8, generator=generator)
    save_file(weights, str(dense / "model.safetensors"))
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "query_prefix": "[Q] ",
                "document_prefix": "[D] ",
                "query_length": QUERY_LENGTH,
                "document_length": DOCUMENT_LENGTH,
                "do_query_expansion": True,
                "attend_to_expansion_tokens": False,
                "skiplist_words": list(string.punctuation),
            }
        )
    )
    return folder


@pytest.fixture(scope="module")
def colbert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_colbert(tmp_path_factory.mktemp("tiny-colbert"))


def reference_scores(folder: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """MaxSim as PyLate computes it, written directly: each text tokenised by the tokenizer alone
    (one model call each), the marker id after [CLS], queries padded with [MASK] to query_length
    (not attended), passages' punctuation left out, the projection, L2 normalisation."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.BertModel.from_pretrained(str(folder)).eval()
    from safetensors.torch import load_file

    dense = load_file(str(folder / "1_Dense" / "model.safetensors"))
    skip = {tokenizer.convert_tokens_to_ids(c) for c in string.punctuation}

    def vectors(text: str, marker: str, length: int, expand: bool) -> tuple[torch.Tensor, list[int]]:
        encoded = tokenizer(text, truncation=True, max_length=length - 1)
        ids = encoded["input_ids"]
        ids = [ids[0], tokenizer.convert_tokens_to_ids(marker), *ids[1:]]
        mask = [1] * len(ids)
        if expand:
            mask += [0] * (length - len(ids))
            ids += [tokenizer.mask_token_id] * (length - len(ids))
        with torch.no_grad():
            hidden = model(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.tensor([mask]),
                token_type_ids=torch.zeros(1, len(ids), dtype=torch.long),
            ).last_hidden_state[0]
        projected = hidden @ dense["linear.weight"].T + dense["linear.bias"]
        return torch.nn.functional.normalize(projected, dim=-1), ids

    out = []
    for query, passage in pairs:
        q, _ = vectors(query, "[Q] ", QUERY_LENGTH, True)
        d, ids = vectors(passage, "[D] ", DOCUMENT_LENGTH, False)
        d = d[[i for i, t in enumerate(ids) if t not in skip]]
        out.append(float((q @ d.T).max(dim=1).values.sum()))
    return out


PASSAGES = [
    ("1", "what is bm25", "d1", 0, "BM25 ranks documents by their terms."),
    ("1", "what is bm25", "d1", 1, "A cat sat on the mat, and the dog sat too!"),
    ("1", "what is bm25", "d2", 0, "the vaccine virus cells and the query model score evidence of relevant passages"),
    ("2", "cats and dogs", "d1", 1, "A cat sat on the mat, and the dog sat too!"),
    ("2", "cats and dogs", "d3", 0, "search retrieval"),
]


def passages() -> pd.DataFrame:
    return pd.DataFrame(PASSAGES, columns=["qid", "query", "docno", "pid", "text"])


def test_scores_equal_an_independent_maxsim(colbert_path: Path) -> None:
    from evirank.score.families.colbert import ColBERT

    scorer = ColBERT(colbert_path, device="cpu", batch_tokens=40)
    scored = scorer(passages())
    expected = reference_scores(colbert_path, [(q, t) for _, q, _, _, t in PASSAGES])
    np.testing.assert_allclose(scored["score"].to_numpy(), expected, atol=1e-5, rtol=0)
    assert len(set(np.round(expected, 4))) == len(expected)  # the random model tells them apart
