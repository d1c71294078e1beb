"""Passage-vector folders: build, resume, compaction, identity checks and lookups."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evirank.config import Runtime
from evirank.errors import InputFormatError, OutputExistsError
from evirank.frames import Document
from evirank.vectors import (
    IncompleteBuildError,
    PassageVectors,
    ShardWriter,
    VectorBuilder,
    VectorsIdentity,
    VectorsMismatchError,
    read_manifest,
)

DOCS = [
    Document("d1", "Cats", "Cats purr. They sleep a lot."),
    Document("d2", "", "Dogs bark."),
    Document("d3", "Birds", "Birds sing. Birds fly. Some swim."),
    Document("d4", "Fish", ""),
    Document("d5", "", "Snakes hiss quietly."),
]


class FakeEncoder:
    """A deterministic stand-in for a bi-encoder: unit vectors from a hash of the text."""

    passage_prefix = "passage: "

    def __init__(self, name: str = "fake", fail_on: str | None = None) -> None:
        self.name = name
        self.fail_on = fail_on
        self.embedded: list[str] = []

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.name.encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        return {"model": self.name}

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.fail_on is not None and any(self.fail_on in t for t in texts):
            raise RuntimeError("killed mid-build")
        self.embedded.extend(texts)
        return np.stack([unit(t) for t in texts])


def unit(text: str, dim: int = 8) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)


def build(path: Path, encoder: Any = None, **kwargs: Any) -> PassageVectors:
    builder = VectorBuilder(path, encoder or FakeEncoder(), "sentences:prepend", block_size=2, **kwargs)
    return builder.build(DOCS)


def test_a_built_folder_holds_every_passage_in_corpus_order_with_its_vector(tmp_path: Path) -> None:
    vectors = build(tmp_path / "v")
    manifest = read_manifest(tmp_path / "v")
    assert manifest["complete"] is True
    assert manifest["segment"] == "sentences:prepend"
    assert (manifest["documents"], manifest["dim"], manifest["dtype"]) == (5, 8, "float16")
    assert manifest["passages"] == len(vectors) == 2 + 1 + 3 + 1 + 1
    assert not (tmp_path / "v.partial").exists()
    rows = vectors.lookup(["d3", "d3", "d1", "d9", "d1"], [2, 0, 1, 0, 7])
    assert rows.tolist() == [5, 3, 1, -1, -1]
    assert vectors.texts(rows[:3]).tolist() == [
        "Birds Some swim.",
        "Birds Birds sing.",
        "Cats They sleep a lot.",
    ]
    got = vectors.vectors(rows[:3])
    assert got.dtype == np.float32
    expected = np.stack([unit("passage: " + t) for t in vectors.texts(rows[:3])])
    np.testing.assert_allclose(got, expected, atol=2e-3)
    frame = vectors.passages(["d2", "nope", "d1"])
    assert frame[["docno", "pid", "text"]].values.tolist() == [
        ["d2", 0, "Dogs bark."],
        ["d1", 0, "Cats Cats purr."],
        ["d1", 1, "Cats They sleep a lot."],
    ]


def test_an_interrupted_build_resumes_and_embeds_only_the_missing_blocks(tmp_path: Path) -> None:
    out = tmp_path / "v"
    with pytest.raises(RuntimeError, match="killed"):
        build(out, FakeEncoder(fail_on="Snakes"))  # block 2 (d5) fails
    assert not out.exists()
    shards = sorted(p.name for p in (tmp_path / "v.partial" / "shards").iterdir())
    assert shards == [
        "part-000000.parquet",
        "part-000000.parquet.sha256",
        "part-000001.parquet",
        "part-000001.parquet.sha256",
    ]
    with pytest.raises(FileNotFoundError, match="unfinished build"):
        PassageVectors.open(out)
    again = FakeEncoder()
    vectors = build(out, again)
    assert again.embedded == ["passage: Snakes hiss quietly."]
    fresh = build(tmp_path / "fresh")
    np.testing.assert_array_equal(vectors.vectors(np.arange(8)), fresh.vectors(np.arange(8)))


def test_a_partial_build_of_another_model_is_refused_unless_overwriting(tmp_path: Path) -> None:
    out = tmp_path / "v"
    with pytest.raises(RuntimeError):
        build(out, FakeEncoder("model-a", fail_on="Snakes"))
    with pytest.raises(VectorsMismatchError, match=r"model-a.*model-b"):
        build(out, FakeEncoder("model-b"))
    other = FakeEncoder("model-b")
    vectors = build(out, other, overwrite=True)
    assert len(other.embedded) == 8  # started afresh
    assert vectors.manifest["model"] == {"model": "model-b"}


def test_an_existing_folder_is_never_overwritten_silently(tmp_path: Path) -> None:
    build(tmp_path / "v")
    before = (tmp_path / "v" / "vectors.npy").read_bytes()
    with pytest.raises(OutputExistsError):
        build(tmp_path / "v", FakeEncoder("other"))
    assert (tmp_path / "v" / "vectors.npy").read_bytes() == before
    assert build(tmp_path / "v", FakeEncoder("other"), overwrite=True).identity.model == {"model": "other"}


def test_a_query_with_another_model_or_segmenter_is_refused_with_both_named(tmp_path: Path) -> None:
    vectors = build(tmp_path / "v", FakeEncoder("minilm"))
    vectors.check(fingerprint=FakeEncoder("minilm").fingerprint, segment="sentences:prepend")
    vectors.check_scorer(FakeEncoder("minilm"), "sentences:prepend")
    with pytest.raises(VectorsMismatchError) as err:
        vectors.check_scorer(FakeEncoder("mpnet"), "windows")
    message = str(err.value)
    for part in ("minilm", "mpnet", "sentences:prepend", "windows:150:75", "model and segmenter differ"):
        assert part in message
    with pytest.raises(VectorsMismatchError, match="segmenter differs"):
        vectors.check(segment="sentences")


def test_compaction_refuses_missing_blocks_and_documents_split_over_blocks(tmp_path: Path) -> None:
    identity = VectorsIdentity("f" * 64, "sentences:segment", {"model": "fake"})
    writer = ShardWriter(tmp_path / "v", identity, block_size=1)
    writer.open()
    writer.write(0, ["a"], [0], ["x"], np.ones((1, 4)))
    writer.write(2, ["c"], [0], ["z"], np.ones((1, 4)))
    with pytest.raises(IncompleteBuildError, match=r"1 of 3 block"):
        writer.finish()
    writer.write(1, ["a"], [1], ["y"], np.ones((1, 4)))
    with pytest.raises(InputFormatError, match="'a' again"):
        writer.finish()
    assert not (tmp_path / "v").exists()


def test_shards_are_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    identity = VectorsIdentity("f" * 64, "sentences:segment")
    writer = ShardWriter(tmp_path / "v", identity)
    writer.open()

    def broken(table: Any, where: Any, **_: Any) -> None:
        Path(where).write_bytes(b"half a shard")
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", broken)
    with pytest.raises(OSError, match="disk full"):
        writer.write(0, ["a"], [0], ["x"], np.ones((1, 4)))
    assert writer.done() == set()
    assert list((tmp_path / "v.partial" / "shards").iterdir()) == []


def test_a_pickled_builder_writes_blocks_elsewhere_and_any_process_can_finish(tmp_path: Path) -> None:
    builder = VectorBuilder(tmp_path / "v", FakeEncoder(), "sentences", block_size=3)
    assert builder.open() == set()
    copy = pickle.loads(pickle.dumps(builder))
    assert copy.build_block(1, DOCS[3:]) == 2
    assert builder.build_block(0, DOCS[:3]) == 8  # titles are segments of their own
    assert builder.pending_done() == {0, 1}
    vectors = VectorBuilder(tmp_path / "v", FakeEncoder(), "sentences", block_size=3).finish(blocks=2)
    assert vectors.lookup(["d5"], [0]).tolist() == [9]


def test_a_manifest_of_another_format_is_a_clear_error(tmp_path: Path) -> None:
    build(tmp_path / "v")
    manifest = tmp_path / "v" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "version": 99}))
    with pytest.raises(InputFormatError, match=r'manifest\.json: expected "version": 1, found 99'):
        PassageVectors.open(tmp_path / "v")


def test_stored_vectors_equal_the_bi_encoders_own_embeddings(
    tmp_path: Path, tiny_bi_encoder_path: Path
) -> None:
    from evirank.score import BiEncoder

    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    vectors = VectorBuilder(tmp_path / "v", scorer, "sentences:prepend", block_size=2).build(DOCS)
    vectors.check_scorer(BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")), "sentences:prepend")
    rows = np.arange(len(vectors))
    expected = scorer.embed(vectors.texts(rows).tolist())
    np.testing.assert_allclose(vectors.vectors(rows), expected, atol=2e-3)
    assert vectors.manifest["model"]["model"] == str(tiny_bi_encoder_path)


def test_stored_segments_read_passages_and_split_only_documents_not_stored(tmp_path: Path) -> None:
    import pandas as pd

    from evirank.segment.segment_spec import parse_segment
    from evirank.vectors.segments import StoredSegments

    vectors = build(tmp_path / "v")
    segmenter = parse_segment("sentences:prepend")
    new = Document("d9", "New", "Not stored. At all.")
    docs = {d.docno: d for d in [*DOCS, new]}
    order = [("1", "d3"), ("1", "d9"), ("1", "d1"), ("2", "d1"), ("2", "d2")]
    run = pd.DataFrame(
        {
            "qid": [q for q, _ in order],
            "query": ["q"] * len(order),
            "docno": [d for _, d in order],
            "score": [5.0, 4.0, 3.0, 2.0, 1.0],
            "rank": [1, 2, 3, 1, 2],
            "title": [docs[d].title for _, d in order],
            "text": [docs[d].text for _, d in order],
        }
    )
    stored = StoredSegments(vectors, fallback=segmenter)(run)
    expected = segmenter(run)
    pd.testing.assert_frame_equal(stored.reset_index(drop=True), expected[list(stored.columns)])


@pytest.mark.parametrize("name", ["vectors.npy", "passages.parquet"])
def test_a_damaged_vector_folder_is_named_never_read(tmp_path: Path, name: str) -> None:
    from evirank.checksums import DamagedArtefactError

    build(tmp_path / "v")
    assert (tmp_path / "v" / "checksums.json").is_file()
    path = tmp_path / "v" / name
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x01  # one bit of the last vector (or of the table's footer), same size
    path.write_bytes(bytes(data))
    with pytest.raises(
        DamagedArtefactError, match=rf"v: this passage-vector folder is damaged \({name}: other"
    ):
        PassageVectors.open(tmp_path / "v")
    path.write_bytes(bytes(data[:100]))  # cut short
    with pytest.raises(DamagedArtefactError, match=rf"{name}: 100 bytes, [\d,]+ when it was made"):
        PassageVectors.open(tmp_path / "v")


def test_a_vector_folder_without_checksums_is_still_read(tmp_path: Path) -> None:
    build(tmp_path / "v")
    (tmp_path / "v" / "checksums.json").unlink()  # as an older evirank made it
    assert len(PassageVectors.open(tmp_path / "v")) == 8


def _interrupted_build(out: Path) -> Path:
    """A build of DOCS stopped at its last block: shards 0 and 1 written; returns the shards' folder."""
    with pytest.raises(RuntimeError, match="killed"):
        build(out, FakeEncoder(fail_on="Snakes"))
    return out.with_name(out.name + ".partial") / "shards"


@pytest.mark.parametrize("damage", ["flip", "cut", "no-checksum", "bad-checksum"])
def test_a_damaged_shard_of_an_unfinished_build_is_named_and_embedded_again(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    shards = _interrupted_build(tmp_path / "v")
    shard = shards / "part-000001.parquet"
    data = bytearray(shard.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
        shard.write_bytes(bytes(data))
    elif damage == "cut":
        shard.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "no-checksum":
        (shards / "part-000001.parquet.sha256").unlink()
    else:
        (shards / "part-000001.parquet.sha256").write_text("not a checksum")
    again = FakeEncoder()
    with caplog.at_level("WARNING"):
        vectors = build(tmp_path / "v", again)
    assert "part-000001.parquet: this vector shard is damaged" in caplog.text
    assert "block 1 is embedded again" in caplog.text
    assert again.embedded == [
        "passage: Birds Birds sing.",
        "passage: Birds Birds fly.",
        "passage: Birds Some swim.",
        "passage: Fish",
        "passage: Snakes hiss quietly.",
    ]  # block 1 (d3, d4) and block 2
    fresh = build(tmp_path / "fresh")
    np.testing.assert_array_equal(vectors.vectors(np.arange(8)), fresh.vectors(np.arange(8)))


def test_a_shard_damaged_before_compaction_is_named_and_the_rerun_embeds_it_again(tmp_path: Path) -> None:
    from evirank.checksums import DamagedArtefactError

    builder = VectorBuilder(tmp_path / "v", FakeEncoder(), "sentences:prepend", block_size=2)
    builder.open()
    for number in range(3):
        builder.build_block(number, DOCS[2 * number : 2 * number + 2])
    shard = tmp_path / "v.partial" / "shards" / "part-000002.parquet"
    shard.write_bytes(shard.read_bytes()[:-10] + bytes(10))  # the same size, other bytes
    with pytest.raises(
        DamagedArtefactError,
        match=r"v\.partial: this unfinished vector build is damaged "
        r"\(shards/part-000002\.parquet: other bytes",
    ):
        builder.finish(blocks=3)
    assert not (tmp_path / "v").exists() and not shard.exists()
    again = FakeEncoder()
    build(tmp_path / "v", again)
    assert again.embedded == ["passage: Snakes hiss quietly."]


def test_an_unfinished_build_begun_without_shard_checksums_is_resumed(tmp_path: Path) -> None:
    shards = _interrupted_build(tmp_path / "v")
    for record in shards.glob("*.sha256"):
        record.unlink()
    manifest = shards.parent / "manifest.json"
    data = json.loads(manifest.read_text())
    del data["shard_checksums"]
    manifest.write_text(json.dumps(data))
    again = FakeEncoder()
    vectors = build(tmp_path / "v", again)
    assert again.embedded == ["passage: Snakes hiss quietly."]
    assert len(vectors) == 8
