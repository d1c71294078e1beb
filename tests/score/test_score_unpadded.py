"""The unpadded (packed) forward computes what the padded model computes, for every supported
encoder, and the batch layout setting is honoured or refused as documented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.config.table import SettingError
from evirank.frames import QID, QUERY, SCORE, make_passages
from evirank.score import BiEncoder, CrossEncoder, unpadded
from evirank.score.backends import TokenBatch, TorchBackend
from evirank.score.unpadded import PackedBatch, UnpaddedModel, pack, packed_batch, unpadded_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ATOL = 1e-5


def right_padded(
    rows: int, width: int, seed: int, *, vocab: int = 90, pad: int = 0, types: bool = True
) -> TokenBatch:
    """Random ids with very different lengths (one row full, one of a single token when rows > 2)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, size=rows)
    lengths[0] = width
    if rows > 2:
        lengths[-1] = 1
    columns = np.arange(width)[None, :]
    mask = (columns < lengths[:, None]).astype(np.int64)
    ids = np.where(mask > 0, rng.integers(5, vocab, size=(rows, width)), pad)
    kinds = (columns >= (lengths[:, None] + 1) // 2).astype(np.int64) * mask if types else None
    return TokenBatch(ids.astype(np.int64), mask, kinds)


def padded_output(model: Any, task: str, batch: TokenBatch) -> np.ndarray:
    from evirank.score.backends import mean_pooled

    inputs = {
        "input_ids": torch.from_numpy(batch.input_ids),
        "attention_mask": torch.from_numpy(batch.attention_mask),
    }
    if batch.token_type_ids is not None:
        inputs["token_type_ids"] = torch.from_numpy(batch.token_type_ids)
    with torch.inference_mode():
        if task == "classify":
            return model(**inputs).logits.float().numpy()
        return mean_pooled(model(**inputs).last_hidden_state.float(), inputs["attention_mask"]).numpy()


def packed_output(fast: UnpaddedModel, batch: TokenBatch) -> np.ndarray:
    packed = packed_batch(batch)
    assert packed.layout is not None
    with torch.inference_mode():
        return fast(packed.tensors, packed.layout).float().numpy()


def tiny(kind: str, task: str, labels: int = 1) -> Any:
    """A random in-memory model of ``kind`` (bert, roberta, electra) for ``task``."""
    common = {
        "vocab_size": 100,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 140,
        "num_labels": labels,
        "initializer_range": 0.5,
    }
    torch.manual_seed(0)
    if kind == "bert":
        config = transformers.BertConfig(**common)
        cls = transformers.BertForSequenceClassification if task == "classify" else transformers.BertModel
    elif kind == "roberta":
        config = transformers.RobertaConfig(**common, pad_token_id=1, type_vocab_size=1)
        cls = (
            transformers.RobertaForSequenceClassification if task == "classify" else transformers.RobertaModel
        )
    else:
        config = transformers.ElectraConfig(**common, embedding_size=16)
        cls = (
            transformers.ElectraForSequenceClassification if task == "classify" else transformers.ElectraModel
        )
    return cls(config).eval()


# -- the packed layout, on the host -----------------------------------------------------------------
def test_pack_keeps_the_real_tokens_with_their_positions_rows_and_boundaries() -> None:
    batch = right_padded(5, 9, seed=3)
    layout = pack(batch)
    mask = batch.attention_mask.astype(bool)
    assert layout.input_ids.tolist() == batch.input_ids[mask].tolist()
    assert layout.token_type_ids.tolist() == batch.token_type_ids[mask].tolist()  # type: ignore[index]
    assert layout.positions.tolist() == np.nonzero(mask)[1].tolist()
    assert layout.rows.tolist() == np.nonzero(mask)[0].tolist()
    lengths = mask.sum(axis=1)
    assert layout.cu_seqlens.dtype == np.int32 and layout.cu_seqlens.tolist() == [0, *np.cumsum(lengths)]
    assert layout.first.tolist() == layout.cu_seqlens[:-1].tolist()
    assert layout.max_len == lengths.max() and layout.n_rows == 5
    padded = np.zeros(5 * layout.max_len, dtype=np.int64)
    padded[layout.slots] = layout.input_ids
    assert (padded.reshape(5, -1) == batch.input_ids[:, : layout.max_len]).all()
    assert layout.padding_fraction == pytest.approx(1 - lengths.sum() / batch.input_ids.size)


def test_pack_without_token_types_gives_type_zero() -> None:
    layout = pack(right_padded(3, 4, seed=1, types=False))
    assert set(layout.token_type_ids.tolist()) == {0}


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        ([[0, 1, 1], [1, 1, 0]], "right-padded"),
        ([[1, 0, 1]], "right-padded"),
        ([[1, 1, 0], [0, 0, 0]], "at least one"),
    ],
)
def test_pack_refuses_batches_that_are_not_right_padded(mask: list[list[int]], message: str) -> None:
    array = np.array(mask)
    with pytest.raises(ValueError, match=message):
        pack(TokenBatch(array * 7, array))


# -- the model: unpadded equals padded --------------------------------------------------------------
SHAPES = [(1, 1), (1, 9), (6, 33), (17, 128)]


@pytest.mark.parametrize(
    ("kind", "task", "labels"),
    [
        ("bert", "classify", 1),
        ("bert", "classify", 2),
        ("bert", "embed", 1),
        ("roberta", "classify", 1),
        ("roberta", "embed", 1),
        ("electra", "classify", 1),
    ],
)
def test_unpadded_equals_padded_for_very_different_lengths(kind: str, task: str, labels: int) -> None:
    model = tiny(kind, task, labels)
    fast = unpadded_model(model, task, device="cpu", precision="fp32")
    pad = int(model.config.pad_token_id or 0)
    for seed, (rows, width) in enumerate(SHAPES):
        batch = right_padded(rows, width, seed, pad=pad, types=kind != "roberta")
        np.testing.assert_allclose(
            packed_output(fast, batch), padded_output(model, task, batch), atol=ATOL, rtol=0
        )


def test_token_types_reach_the_embeddings() -> None:
    model = tiny("bert", "classify")
    fast = unpadded_model(model, "classify", device="cpu", precision="fp32")
    batch = right_padded(4, 12, seed=5)
    flipped = TokenBatch(
        batch.input_ids, batch.attention_mask, (1 - batch.token_type_ids) * batch.attention_mask
    )  # type: ignore[operator]
    one, two = packed_output(fast, batch), packed_output(fast, flipped)
    assert np.abs(one - two).max() > 1e-3  # the types change the scores...
    np.testing.assert_allclose(two, padded_output(model, "classify", flipped), atol=ATOL, rtol=0)  # ...alike


def reference_varlen(
    q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int, max_k: int, *, scale: float
) -> Any:
    """Variable-length attention written as a loop over sequences (what torch's CUDA kernel computes)."""
    out = []
    for i in range(len(cu_q) - 1):
        qs, ks = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
        assert qs.stop - qs.start <= max_q and ks.stop - ks.start <= max_k
        weights = torch.softmax(torch.einsum("qhd,khd->hqk", q[qs], k[ks]) * scale, dim=-1)
        out.append(torch.einsum("hqk,khd->qhd", weights, v[ks]))
    return torch.cat(out)


@pytest.mark.parametrize(("kind", "task"), [("bert", "classify"), ("bert", "embed"), ("roberta", "classify")])
def test_the_variable_length_attention_path_gets_the_right_boundaries(
    kind: str, task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CUDA path's arguments (cumulative lengths of every token, and of [CLS] alone), checked on
    the CPU with a loop standing in for torch's kernel."""
    model = tiny(kind, task)
    fast = UnpaddedModel(model, task)
    fast._varlen_attn = reference_varlen
    monkeypatch.setattr(unpadded._Context, "_use_varlen", lambda self, q: True)
    pad = int(model.config.pad_token_id or 0)
    batch = right_padded(7, 30, seed=2, pad=pad, types=kind != "roberta")
    np.testing.assert_allclose(
        packed_output(fast, batch), padded_output(model, task, batch), atol=ATOL, rtol=0
    )


def test_models_it_cannot_run_are_named() -> None:
    distil = transformers.DistilBertForSequenceClassification(
        transformers.DistilBertConfig(vocab_size=50, dim=32, n_layers=1, n_heads=2, hidden_dim=64)
    )
    assert "distilbert" in str(unpadded.why_not(distil, "classify"))
    bert = tiny("bert", "classify")
    bert.config.position_embedding_type = "relative_key"
    assert "relative_key" in str(unpadded.why_not(bert, "classify"))
    assert "head" in str(unpadded.why_not(tiny("bert", "embed"), TokenVectorsLike()))
    with pytest.raises(ValueError, match="distilbert"):
        unpadded_model(distil, "classify", device="cpu", precision="fp32")


class TokenVectorsLike:
    name = "token-vectors"


# -- the setting ------------------------------------------------------------------------------------
def test_the_setting_takes_three_values_and_refuses_others() -> None:
    assert Runtime().batch_layout == "auto"
    assert Runtime.from_mapping({"batch_layout": "unpadded"}).batch_layout == "unpadded"
    with pytest.raises(SettingError, match="--batch-layout"):
        Runtime(batch_layout="packed-ish")


def test_unpadded_asked_of_a_model_that_cannot_is_refused_naming_the_setting() -> None:
    distil = transformers.DistilBertForSequenceClassification(
        transformers.DistilBertConfig(vocab_size=50, dim=32, n_layers=1, n_heads=2, hidden_dim=64)
    ).eval()
    backend = TorchBackend(distil, "classify", "cpu", "fp32")
    with pytest.raises(ValueError, match=r"batch_layout='unpadded' \(--batch-layout\).*distilbert"):
        backend.use_layout("unpadded")
    backend.use_layout("auto")  # falls back quietly
    assert backend.unpadded is None


def test_other_backends_refuse_unpadded_naming_the_setting() -> None:
    from evirank.score.backends import Backend, get_backend

    onnx = get_backend("onnx")
    with pytest.raises(ValueError, match=r"--batch-layout.*'onnx' backend runs padded"):
        Backend.use_layout(onnx.__new__(onnx), "unpadded")


def test_auto_on_a_cpu_follows_the_measured_choice(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for choice in (None, 0.05):
        monkeypatch.setattr(unpadded, "CPU_PACK_FROM", choice)
        backend = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu")).load()
        assert (backend.unpadded is not None) is (choice is not None)
    padded = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_layout="padded")).load()
    assert padded.unpadded is None and padded.cls_only is not None


def test_auto_on_a_cpu_packs_only_the_batches_that_are_mostly_padding(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unpadded, "CPU_PACK_FROM", 0.2)
    backend = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu")).load()
    even = TokenBatch(np.full((4, 10), 5), np.ones((4, 10), dtype=np.int64))
    ragged_mask = np.ones((4, 10), dtype=np.int64)
    ragged_mask[1:, 4:] = 0  # 18 of 40 slots are padding
    ragged = TokenBatch(np.where(ragged_mask > 0, 5, 0), ragged_mask)
    assert not backend.packs(even) and backend.packs(ragged)
    assert not isinstance(backend.prepare(even), PackedBatch)
    assert isinstance(backend.prepare(ragged), PackedBatch)
    forced = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_layout="unpadded")).load()
    assert forced.packs(even) and forced.pack_from == 0
    # either way the scores are the model's: packed and padded agree within fp32 rounding
    padded = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_layout="padded")).load()
    for batch in (even, ragged):
        np.testing.assert_allclose(backend.forward(backend.prepare(batch)), padded.forward(batch), atol=1e-5)


# -- the scorers, end to end ------------------------------------------------------------------------
def frame_of(texts: list[str], query: str) -> pd.DataFrame:
    frame = make_passages([("1", f"d{i}", i, t) for i, t in enumerate(texts)])
    frame[QUERY] = frame[QID].map({"1": query})
    return frame


TEXTS = [
    "the cat sat on the mat",
    "bm25 ranks documents",
    "a",
    "vaccine virus cells " * 40,  # truncated at max_length
    "evidence of relevant passages in documents is scored by the model with a query",
]


@pytest.mark.parametrize("max_length", [16, 128])
def test_cross_encoder_scores_agree_between_layouts(tiny_cross_encoder_path: Path, max_length: int) -> None:
    frame = frame_of(TEXTS, "where did the cat sit")
    scores, slots = {}, {}
    for layout in ("padded", "unpadded"):
        scorer = CrossEncoder(
            tiny_cross_encoder_path,
            Runtime(device="cpu", max_length=max_length, batch_layout=layout),
            query_max_tokens=6,
        )
        scores[layout] = scorer(frame)[SCORE].to_numpy()
        slots[layout] = scorer.stats_.tokens
        assert (scorer.load().unpadded is not None) is (layout == "unpadded")
    np.testing.assert_allclose(scores["unpadded"], scores["padded"], atol=ATOL, rtol=0)
    assert slots["unpadded"] < slots["padded"]  # the stats count what the model computed
    one = CrossEncoder(
        tiny_cross_encoder_path,
        Runtime(device="cpu", max_length=max_length, batch_layout="unpadded"),
        query_max_tokens=6,
    )
    np.testing.assert_allclose(one(frame.head(1))[SCORE].to_numpy(), scores["padded"][:1], atol=ATOL, rtol=0)


def test_bi_encoder_scores_agree_between_layouts(tiny_bi_encoder_path: Path) -> None:
    frame = frame_of(TEXTS, "where did the cat sit")
    scores = [
        BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", batch_layout=layout))(frame)[SCORE].to_numpy()
        for layout in ("padded", "unpadded")
    ]
    np.testing.assert_allclose(scores[1], scores[0], atol=ATOL, rtol=0)


def test_the_layout_does_not_change_the_fingerprint(tiny_cross_encoder_path: Path) -> None:
    prints = {
        CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_layout=layout)).fingerprint
        for layout in ("auto", "padded", "unpadded")
    }
    assert len(prints) == 1


def test_prepare_hands_the_model_a_packed_batch(tiny_cross_encoder_path: Path) -> None:
    backend = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", batch_layout="unpadded")).load()
    assert backend.pad_multiple == 1
    prepared = backend.prepare(right_padded(3, 7, seed=0))
    assert isinstance(prepared, PackedBatch) and prepared.layout is not None
    assert backend.forward(prepared).shape == (3, 1)


# -- the real model -------------------------------------------------------------------------------
REAL_MODEL = Path("~/.cache/evirank/models/minilm-scifact-cross").expanduser()


def test_the_trained_minilm_cross_encoder_agrees_on_real_scifact_pairs(datasets: Path) -> None:
    if not (REAL_MODEL / "config.json").is_file():
        pytest.skip(f"no trained cross-encoder at {REAL_MODEL}")
    scifact = datasets / "scifact"
    claims = [json.loads(line)["text"] for line in (scifact / "queries.jsonl").open(encoding="utf-8")][:20]
    sentences: list[str] = []
    with (scifact / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line, _ in zip(handle, range(25), strict=False):
            sentences.extend(s for s in json.loads(line)["text"].split(". ") if s)
    rows = [(f"q{i % 20}", f"d{i}", 0, sentences[i % len(sentences)]) for i in range(200)]
    frame = make_passages(rows)
    frame[QUERY] = frame[QID].map({f"q{i}": c for i, c in enumerate(claims)})
    scorer = CrossEncoder(REAL_MODEL, Runtime(device="cpu", batch_layout="padded"))
    padded = scorer(frame)[SCORE].to_numpy()
    scorer.load().use_layout("unpadded")  # the same loaded model, now unpadded
    assert scorer.load().unpadded is not None
    assert np.abs(scorer(frame)[SCORE].to_numpy() - padded).max() < 1e-4


# -- CUDA -------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cuda_unpadded_matches_padded(tiny_cross_encoder_path: Path, dtype: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    frame = frame_of(TEXTS, "where did the cat sit")
    runs: dict[str, np.ndarray] = {}
    for layout in ("padded", "unpadded"):
        scorer = CrossEncoder(
            tiny_cross_encoder_path, Runtime(device="cuda", dtype=dtype, batch_layout=layout)
        )
        runs[layout] = scorer(frame)[SCORE].to_numpy()
    tolerance = 1e-4 if dtype == "fp32" else 0.05 * max(1.0, float(np.abs(runs["padded"]).max()))
    np.testing.assert_allclose(runs["unpadded"], runs["padded"], atol=tolerance, rtol=0)
