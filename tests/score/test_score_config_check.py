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
    frame = make_passages([("1", "d1", 0, "the cat sat")])
    frame[QUERY] = "cat"
    with pytest.raises(InputFormatError, match=found) as caught:
        family(folder, Runtime(device="cpu"))(frame)
    assert caught.value.path == str(folder / "config.json")
    assert "put the model's own config.json beside its weights" in str(caught.value)


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
