"""The [CLS]-only last layer computes the same logits as the full model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evirank.config import Runtime
from evirank.score import CrossEncoder, cls_only


def random_batch(vocab: int, rows: int, width: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab, size=(rows, width))
    lengths = rng.integers(3, width + 1, size=rows)
    lengths[0] = width
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    types = (np.arange(width)[None, :] >= lengths[:, None] // 2).astype(np.int64) * mask
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": types}


@pytest.mark.parametrize("fixture", ["tiny_cross_encoder_path", "tiny_two_logit_path"])
def test_cls_only_logits_equal_the_full_model(fixture: str, request: pytest.FixtureRequest) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    path: Path = request.getfixturevalue(fixture)
    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    fast = cls_only.cls_only_model(model)
    assert fast is not None
    for seed, (rows, width) in enumerate([(1, 5), (7, 33), (16, 128)]):
        batch = {
            k: torch.from_numpy(v)
            for k, v in random_batch(model.config.vocab_size, rows, width, seed).items()
        }
        with torch.inference_mode():
            np.testing.assert_allclose(
                fast(**batch).numpy(), model(**batch).logits.numpy(), atol=1e-5, rtol=0
            )


def test_torch_backend_uses_it_for_bert_classifiers_only(
    tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path
) -> None:
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    backend = scorer.load()
    assert backend.cls_only is not None
    from evirank.score import BiEncoder

    assert BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")).load().cls_only is None


def test_it_can_be_switched_off_and_skips_other_models(
    tiny_cross_encoder_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_cross_encoder_path)).eval()
    monkeypatch.setattr(cls_only, "ENABLED", False)
    assert cls_only.cls_only_model(model) is None
    monkeypatch.setattr(cls_only, "ENABLED", True)
    assert cls_only.cls_only_model(object()) is None
    model.config.position_embedding_type = "relative_key"  # a layout it does not handle
    assert cls_only.cls_only_model(model) is None


@pytest.mark.gpu
def test_cuda_scores_in_bf16_match_cpu_fp32(tiny_cross_encoder_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from evirank.frames import QID, QUERY, SCORE, make_passages

    texts = ["the cat sat on the mat", "bm25 ranks documents", "a vaccine trains cells", "dogs", "x " * 60]
    frame = make_passages([("1", f"d{i}", i, t) for i, t in enumerate(texts)])
    frame[QUERY] = frame[QID].map({"1": "where did the cat sit"})
    cpu = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))(frame)[SCORE].to_numpy()
    gpu_scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cuda", batch_layout="padded"))
    gpu = gpu_scorer(frame)[SCORE].to_numpy()
    assert gpu_scorer.precision_ in ("bf16", "fp16")
    np.testing.assert_allclose(gpu, cpu, atol=0.1 * max(1.0, float(np.abs(cpu).max())))
    assert gpu_scorer.stats_.tokens % 8 == 0  # padded to multiples of 8 for tensor cores
