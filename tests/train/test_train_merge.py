"""``evirank merge`` / :func:`merge_models`: weighted averages of models' weights (WiSE-FT, soups)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from train_helpers import build_tiny_model

from evirank.cli import main
from evirank.errors import OutputExistsError, UsageError
from evirank.train.merge import MERGE_MARKER, load_state, merge_models, parse_weighted_model

pytest.importorskip("torch")


@pytest.fixture()
def two_encoders(tmp_path: Path) -> tuple[Path, Path]:
    """Two tiny encoders of one architecture with different weights, the second with training files."""
    import torch

    first = build_tiny_model(tmp_path / "first", layers=2)
    second = tmp_path / "second"
    shutil.copytree(first, second)
    state = load_state(second)
    torch.manual_seed(7)
    changed = {k: (v + torch.randn_like(v) if v.is_floating_point() else v) for k, v in state.items()}
    from safetensors.torch import save_file

    save_file(changed, str(second / "model.safetensors"), metadata={"format": "pt"})
    (second / "evirank-train.json").write_text("{}")
    (second / "train-log.jsonl").write_text("")
    (second / "2_Normalize").mkdir()
    (second / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16}))
    return first, second


def test_merge_writes_the_weighted_average_with_the_first_models_files(
    two_encoders: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = two_encoders
    out = tmp_path / "merged"
    provenance = merge_models([(second, 0.25), (first, 0.75)], out)

    a, b, merged = load_state(first), load_state(second), load_state(out)
    assert set(merged) == set(b)
    for key, tensor in merged.items():
        if tensor.is_floating_point():
            expected = 0.25 * b[key].numpy() + 0.75 * a[key].numpy()
            np.testing.assert_allclose(tensor.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(
        merged["encoder.layer.0.attention.self.query.weight"].numpy(),
        a["encoder.layer.0.attention.self.query.weight"].numpy(),
    )
    # configuration and sentence-transformers files from the first model; its training records are not copied
    assert json.loads((out / "sentence_bert_config.json").read_text()) == {"max_seq_length": 16}
    assert (out / "2_Normalize").is_dir() and (out / "config.json").is_file()
    assert not (out / "evirank-train.json").exists() and not (out / "train-log.jsonl").exists()
    recorded = json.loads((out / MERGE_MARKER).read_text())
    assert recorded == json.loads(json.dumps(provenance))
    assert [m["weight"] for m in recorded["models"]] == [0.25, 0.75]
    assert all(len(sha) == 64 for m in recorded["models"] for sha in m["weights_sha256"].values())


def test_a_merged_bi_encoder_embeds_like_a_model_of_its_own(
    two_encoders: tuple[Path, Path], tmp_path: Path
) -> None:
    from evirank.score import BiEncoder

    first, second = two_encoders
    out = tmp_path / "merged"
    merge_models([(first, 0.5), (second, 0.5)], out)
    vectors = BiEncoder(str(out)).embed(["good apple", "bad banana"])
    assert vectors.shape == (2, 32)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vectors, BiEncoder(str(first)).embed(["good apple", "bad banana"]))


def test_merge_refuses_weights_that_are_not_an_average_and_models_that_differ(
    two_encoders: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = two_encoders
    with pytest.raises(UsageError, match=r"sum to 1\.1"):
        merge_models([(first, 0.5), (second, 0.6)], tmp_path / "m")
    with pytest.raises(UsageError, match="positive"):
        merge_models([(first, 1.5), (second, -0.5)], tmp_path / "m")
    with pytest.raises(UsageError, match="at least two"):
        merge_models([(first, 1.0)], tmp_path / "m")
    deeper = build_tiny_model(tmp_path / "deeper", layers=3)
    with pytest.raises(UsageError, match=r"deeper: has tensor 'encoder\.layer\.2\..*differ in architecture"):
        merge_models([(first, 0.5), (deeper, 0.5)], tmp_path / "m")
    with pytest.raises(UsageError, match=r"first: has no tensor 'encoder\.layer\.2\."):
        merge_models([(deeper, 0.5), (first, 0.5)], tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_merge_never_replaces_what_it_did_not_write(two_encoders: tuple[Path, Path], tmp_path: Path) -> None:
    first, second = two_encoders
    with pytest.raises(OutputExistsError):
        merge_models([(first, 0.5), (second, 0.5)], second, overwrite=False)
    with pytest.raises(OutputExistsError):  # a trained model is not a merge: never replaced
        merge_models([(first, 0.5), (second, 0.5)], second, overwrite=True)
    assert (second / "evirank-train.json").is_file()
    out = tmp_path / "merged"
    merge_models([(first, 0.5), (second, 0.5)], out)
    merge_models([(first, 0.25), (second, 0.75)], out, overwrite=True)
    assert [m["weight"] for m in json.loads((out / MERGE_MARKER).read_text())["models"]] == [0.25, 0.75]


def test_parse_weighted_model_reads_the_weight_after_the_last_equals_sign() -> None:
    assert parse_weighted_model("runs/a=b/model=0.3") == ("runs/a=b/model", 0.3)
    with pytest.raises(UsageError, match="MODEL=WEIGHT"):
        parse_weighted_model("models/bi")
    with pytest.raises(UsageError, match="not a number"):
        parse_weighted_model("models/bi=half")


def test_merge_cli_prints_the_models_and_weights(
    two_encoders: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = two_encoders
    out = tmp_path / "wise"
    assert (
        main(["-q", "merge", "--model", f"{second}=0.5", "--model", f"{first}=0.5", "--output", str(out)])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["models"] == [{"model": str(second), "weight": 0.5}, {"model": str(first), "weight": 0.5}]
    assert (out / "model.safetensors").is_file()
    assert (
        main(["-q", "merge", "--model", f"{first}=0.7", "--model", f"{second}=0.7", "--output", str(out)])
        == 2
    )
    assert "must sum to 1" in caplog.text


def test_merge_reads_pytorch_bin_weights_too(two_encoders: tuple[Path, Path], tmp_path: Path) -> None:
    import torch

    first, second = two_encoders
    legacy = tmp_path / "legacy"  # an older checkpoint: config.json and pytorch_model.bin
    legacy.mkdir()
    shutil.copy2(second / "config.json", legacy / "config.json")
    torch.save(load_state(second), legacy / "pytorch_model.bin")
    out = tmp_path / "merged"
    merge_models([(first, 0.5), (legacy, 0.5)], out)
    a, b, merged = load_state(first), load_state(second), load_state(out)
    key = "encoder.layer.1.output.dense.weight"
    np.testing.assert_allclose(merged[key].numpy(), 0.5 * a[key].numpy() + 0.5 * b[key].numpy(), atol=1e-6)
