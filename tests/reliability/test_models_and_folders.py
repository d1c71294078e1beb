"""Models, vector folders and shards that are not what a command expects: refused and named, and a
user's folder is never emptied by ``--overwrite``."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.errors import EvirankError, InputFormatError, UnsafeOverwriteError
from evirank.score.stores import open_store


def _error(caplog: pytest.LogCaptureFixture) -> str:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    return errors[0].getMessage()


def _user_folder(path: Path) -> Path:
    path.mkdir()
    (path / "thesis.tex").write_text("precious")
    return path


def test_embed_overwrite_never_empties_a_users_folder(
    tmp_path: Path, tiny_bi_encoder_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "d1", "title": "Cats", "text": "Cats purr. They sleep."}\n')
    mine = _user_folder(tmp_path / "mine")
    args = ["-q", "embed", "--corpus", str(corpus), "--model", str(tiny_bi_encoder_path), "--device", "cpu"]
    assert main([*args, "--output", str(mine), "--overwrite"]) == 2
    assert "--overwrite replaces only a folder this command wrote (holding manifest.json)" in _error(caplog)
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    # a vector folder it made is replaced
    vectors = tmp_path / "vectors"
    assert main([*args, "--output", str(vectors)]) == 0
    assert main([*args, "--output", str(vectors), "--overwrite"]) == 0
    assert (vectors / "manifest.json").is_file()


def test_a_users_folder_named_like_a_partial_build_is_left_alone(tmp_path: Path) -> None:
    from evirank.vectors import ShardWriter, VectorsIdentity

    _user_folder(tmp_path / "vectors.partial")
    writer = ShardWriter(tmp_path / "vectors", VectorsIdentity("f" * 64, "sentences:segment"), overwrite=True)
    with pytest.raises(
        EvirankError, match=r"without a vector-build manifest holding thesis\.tex; it was left unchanged"
    ):
        writer.open()
    assert (tmp_path / "vectors.partial" / "thesis.tex").read_text() == "precious"
    with pytest.raises(UnsafeOverwriteError):
        ShardWriter(
            _user_folder(tmp_path / "v2"), VectorsIdentity("f" * 64, "sentences:segment"), overwrite=True
        ).open()


def test_distilling_from_a_model_without_a_trained_relevance_head_is_refused(
    tmp_path: Path, tiny_bi_encoder_path: Path, tiny_cross_encoder_path: Path
) -> None:
    from evirank.train.distillation import _load_teacher

    with pytest.raises(
        InputFormatError, match=r"a teacher with a trained relevance head .* classifier\.bias"
    ):
        _load_teacher(tiny_bi_encoder_path, "cpu")
    model, _ = _load_teacher(tiny_cross_encoder_path, "cpu")  # a cross-encoder is a teacher
    assert model.config.num_labels == 1


def test_distill_cli_refuses_a_bi_encoder_teacher_and_writes_nothing(
    tmp_path: Path, tiny_bi_encoder_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cats purr\tcats purr when content\t1\ncats purr\tdogs bark\t0\n" * 4)
    out = tmp_path / "student"
    args = [
        "-q",
        "distill",
        "--teacher",
        str(tiny_bi_encoder_path),
        "--output",
        str(out),
        "--pairs",
        str(pairs),
    ]
    assert main([*args, "--validation-fraction", "0", "--speed-pairs", "0", "--device", "cpu"]) == 2
    assert "expected a teacher with a trained relevance head" in _error(caplog)
    assert not out.exists() or not (out / "evirank-train.json").exists()


@pytest.mark.parametrize("damage", ["header", "cut"])
def test_damaged_weights_are_named_with_their_file(
    tmp_path: Path, tiny_cross_encoder_path: Path, damage: str
) -> None:
    from evirank.score import CrossEncoder

    model = tmp_path / "model"
    shutil.copytree(tiny_cross_encoder_path, model)
    weights = model / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "header":
        data[10:20] = b"xxxxxxxxxx"
    else:
        del data[len(data) // 2 :]
    weights.write_bytes(bytes(data))
    with pytest.raises(InputFormatError, match=rf"{weights}: expected model weights that can be read"):
        CrossEncoder(str(model), Runtime(device="cpu")).load()


def test_a_damaged_parquet_shard_is_named_never_read_as_other_scores(tmp_path: Path) -> None:
    store = open_store(tmp_path / "shards")
    fp = store.register("ab" * 32, kind="cross", description={})
    store.put_scores(fp, ["q"] * 50, [f"passage {i}" for i in range(50)], [float(i) for i in range(50)])
    shard = next((tmp_path / "shards" / "scores").rglob("*.parquet"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte: still a readable Parquet file, other numbers
    shard.write_bytes(bytes(data))
    with pytest.raises(InputFormatError, match=rf"{shard.name}: expected a shard whose bytes match its name"):
        open_store(tmp_path / "shards", readonly=True).count_scores()
    shard.write_bytes(bytes(data[:100]))
    with pytest.raises(InputFormatError, match="damaged or cut short"):
        open_store(tmp_path / "shards", readonly=True).get_scores(fp, ["q"], ["passage 1"])


def test_a_vector_manifest_that_is_not_json_is_named(tmp_path: Path) -> None:
    from evirank.vectors import read_manifest

    folder = tmp_path / "vectors"
    folder.mkdir()
    (folder / "manifest.json").write_text("{not json")
    with pytest.raises(InputFormatError, match=r"manifest\.json"):
        read_manifest(folder)
    (folder / "manifest.json").write_text(json.dumps([1, 2]))
    with pytest.raises(InputFormatError, match=r"manifest\.json"):
        read_manifest(folder)
