"""Model folders whose config.json lies about their weights are named, with config.json, before
transformers' own errors (or layers initialised at random without a word)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evirank.config import Runtime
from evirank.errors import InputFormatError
from evirank.frames import QUERY, make_passages
from evirank.score import BiEncoder, CrossEncoder
from evirank.score.config_check import check_config

pytest.importorskip("transformers")

LIES = {
    "hidden": ({"hidden_size": 768}, r"hidden size 768 in config.json, 32 in the weights"),
    "vocabulary": ({"vocab_size": 10}, r"vocabulary of 10 in config.json, \d+ in the weights"),
    "layers": ({"num_hidden_layers": 4}, r"4 layers in config.json, 2 in the weights"),
    "t5": (
        {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]},
        r"it names model_type 't5'",
    ),
}


def lying_copy(model: Path, folder: Path, changes: dict[str, object]) -> Path:
    shutil.copytree(model, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


@pytest.mark.parametrize("lie", sorted(LIES))
@pytest.mark.parametrize("family", [BiEncoder, CrossEncoder])
def test_a_config_that_lies_about_the_weights_is_named(
    lie: str, family: type, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    changes, found = LIES[lie]
    folder = lying_copy(tiny_bi_encoder_path, tmp_path / "m", changes)
    message = scoring_refused(family, folder, found)
    assert "put the model's own config.json beside its weights" in message


def scoring_refused(family: type, folder: Path, found: str) -> str:
    """The message of the error that names ``folder``'s config.json when ``family`` scores with it."""
    frame = make_passages([("1", "d1", 0, "the cat sat")])
    frame[QUERY] = "cat"
    with pytest.raises(InputFormatError, match=found) as caught:
        family(folder, Runtime(device="cpu"))(frame)
    assert caught.value.path == str(folder / "config.json")
    return str(caught.value)


def test_a_config_that_describes_its_weights_passes(
    tiny_bi_encoder_path: Path, tiny_cross_encoder_path: Path
) -> None:
    check_config(tiny_bi_encoder_path)
    check_config(tiny_cross_encoder_path)


def test_a_config_that_is_not_json_is_named_with_its_line(tiny_bi_encoder_path: Path, tmp_path: Path) -> None:
    folder = lying_copy(tiny_bi_encoder_path, tmp_path / "m", {})
    (folder / "config.json").write_text('{\n  "hidden_size": 32,\n  oops\n}')
    with pytest.raises(InputFormatError, match=r"config.json:3: expected a JSON model configuration"):
        check_config(folder)


def header_only(path: Path, names: list[str], width: int = 8, vocab: int = 10) -> None:
    """A safetensors file declaring ``names`` (its header only: what the check reads)."""
    import struct

    header = {
        name: {
            "dtype": "F32",
            "shape": [vocab, width]
            if "embed" in name or name.endswith(("shared.weight", "wte.weight"))
            else [width, width],
            "data_offsets": [0, 0],
        }
        for name in names
    }
    data = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(data)) + data)


def layered(template: str, count: int) -> list[str]:
    return [template.format(i) for i in range(count)]


ARCHITECTURES = {
    # name: (tensor names, the config that describes them, a lie, what the error says)
    "t5 encoder": (
        [
            "shared.weight",
            *layered("encoder.block.{}.layer.0.SelfAttention.q.weight", 2),
            *layered("decoder.block.{}.layer.0.SelfAttention.q.weight", 3),
        ],
        {"d_model": 8, "vocab_size": 10, "num_layers": 2, "num_decoder_layers": 3},
        {"num_layers": 6},
        r"6 encoder layers in config.json, 2 in the weights",
    ),
    "t5 decoder": (
        [
            "shared.weight",
            *layered("encoder.block.{}.layer.0.SelfAttention.q.weight", 2),
            *layered("decoder.block.{}.layer.0.SelfAttention.q.weight", 2),
        ],
        {"d_model": 8, "vocab_size": 10, "num_layers": 2},
        {"num_decoder_layers": 4},
        r"4 decoder layers in config.json, 2 in the weights",
    ),
    "qwen": (
        ["model.embed_tokens.weight", *layered("model.layers.{}.self_attn.q_proj.weight", 3)],
        {"hidden_size": 8, "vocab_size": 10, "num_hidden_layers": 3},
        {"num_hidden_layers": 28},
        r"28 layers in config.json, 3 in the weights",
    ),
    "gpt2": (
        ["transformer.wte.weight", *layered("transformer.h.{}.attn.c_attn.weight", 2)],
        {"n_embd": 8, "vocab_size": 10, "n_layer": 2},
        {"n_layer": 12},
        r"12 layers in config.json, 2 in the weights",
    ),
    "distilbert": (
        [
            "distilbert.embeddings.word_embeddings.weight",
            *layered("distilbert.transformer.layer.{}.ffn.lin1.weight", 2),
        ],
        {"dim": 8, "vocab_size": 10, "n_layers": 2},
        {"n_layers": 6},
        r"6 layers in config.json, 2 in the weights",
    ),
    "bart": (
        [
            "model.shared.weight",
            *layered("model.encoder.layers.{}.fc1.weight", 2),
            *layered("model.decoder.layers.{}.fc1.weight", 2),
        ],
        {"d_model": 8, "vocab_size": 10, "encoder_layers": 2, "decoder_layers": 2},
        {"decoder_layers": 12},
        r"12 decoder layers in config.json, 2 in the weights",
    ),
}


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_the_layer_count_is_checked_for_every_layout_the_families_read(
    architecture: str, tmp_path: Path
) -> None:
    names, honest, lie, found = ARCHITECTURES[architecture]
    header_only(tmp_path / "model.safetensors", names)
    (tmp_path / "config.json").write_text(json.dumps(honest))
    check_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**honest, **lie}))
    with pytest.raises(InputFormatError, match=found) as caught:
        check_config(tmp_path)
    assert caught.value.path == str(tmp_path / "config.json")


def test_the_shards_of_a_model_are_checked_together(tmp_path: Path) -> None:
    names = [
        "bert.embeddings.word_embeddings.weight",
        *layered("bert.encoder.layer.{}.output.dense.weight", 4),
    ]
    header_only(tmp_path / "model-00001-of-00002.safetensors", names[:3])
    header_only(tmp_path / "model-00002-of-00002.safetensors", names[3:])
    (tmp_path / "config.json").write_text(
        json.dumps({"hidden_size": 8, "vocab_size": 10, "num_hidden_layers": 4})
    )
    check_config(tmp_path)  # each shard holds two of the four layers: no lie
    (tmp_path / "config.json").write_text(
        json.dumps({"hidden_size": 8, "vocab_size": 10, "num_hidden_layers": 6})
    )
    with pytest.raises(
        InputFormatError,
        match=r"model-00001-of-00002\.safetensors \.\.\. model-00002-of-00002"
        r"\.safetensors \(2 files\), found 6 layers in config.json, 4 in the weights",
    ):
        check_config(tmp_path)


@pytest.mark.parametrize("lie", ["hidden", "layers"])
def test_pickled_weights_are_checked_without_running_or_reading_them(
    lie: str, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    folder = lying_copy(tiny_bi_encoder_path, tmp_path / "m", {})
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")  # the older layout
    (folder / "model.safetensors").unlink()
    assert (folder / "pytorch_model.bin").is_file() and not list(folder.glob("*.safetensors"))
    check_config(folder)
    changes, found = LIES[lie]
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    assert "pytorch_model.bin" in scoring_refused(BiEncoder, folder, found)
