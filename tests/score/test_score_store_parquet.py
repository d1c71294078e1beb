"""The Parquet-shard score store behaves as the SQLite one, on a folder and on an fsspec URL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.errors import InputFormatError
from evirank.frames import make_passages
from evirank.score import CrossEncoder, ParquetScoreStore, ScoreStore, Store, explain, open_store, text_hash
from evirank.score.store import FingerprintError

FP = "ab12" * 16


@pytest.fixture(params=["sqlite", "folder", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """The same empty store in each kind."""
    if request.param == "sqlite":
        opened: Store = open_store(tmp_path / "scores.sqlite")
    elif request.param == "folder":
        opened = open_store(tmp_path / "shards")
    else:
        opened = open_store(f"memory://evirank-test-{uuid.uuid4().hex}/scores")
    with opened:
        yield opened


def test_open_store_picks_the_kind_from_the_location(tmp_path: Path) -> None:
    assert isinstance(open_store(tmp_path / "a.sqlite"), ScoreStore)
    assert isinstance(open_store(tmp_path / "b"), ParquetScoreStore)
    assert isinstance(open_store(tmp_path.as_uri() + "/c"), ParquetScoreStore)
    # an existing folder is a Parquet store, whatever its name
    assert isinstance(open_store(tmp_path / "b"), ParquetScoreStore)
    with pytest.raises(FileNotFoundError):
        open_store(tmp_path / "absent", readonly=True)


def test_scores_embeddings_and_segments_read_back_the_same_in_every_kind(store: Store) -> None:
    store.register(FP, kind="cross", description={"model": "demo"})
    store.put_scores(FP, ["q1", "q1"], ["p1", "p2"], [1.5, -2.0])
    assert store.get_scores(FP, ["q1", "q1", "q2"], ["p2", "p1", "p1"]).tolist()[:2] == [-2.0, 1.5]
    assert np.isnan(store.get_scores(FP, ["q2"], ["p1"])[0])
    store.put_scores(FP, ["q1"], ["p1"], [1.5])  # again: still one score
    assert store.count_scores(FP) == 2

    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    store.put_embeddings(FP, [text_hash("a"), text_hash("b")], vectors)
    found = store.get_embeddings(FP, [text_hash("x"), text_hash("b")])
    assert list(found) == [1] and found[1].tolist() == [3.0, 4.0, 5.0]

    passages = make_passages([("7", "d1", 0, "p1"), ("7", "d1", 1, "p2")]).assign(query="q1")
    store.record_segments(FP, passages)
    table = store.passages_scores(FP[:6], qids=["7"])
    assert table[["qid", "docno", "pid", "text", "score"]].values.tolist() == [
        ["7", "d1", 0, "p1", 1.5],
        ["7", "d1", 1, "p2", -2.0],
    ]
    # a document re-segmented later replaces its earlier segments as a whole
    store.record_segments(FP, make_passages([("7", "d1", 0, "p2")]).assign(query="q1"))
    assert store.passages_scores(FP, docnos=["d1"])["text"].tolist() == ["p2"]

    info = store.fingerprints()
    assert info[["fingerprint", "kind", "scores"]].values.tolist() == [[FP, "cross", 2]]
    with pytest.raises(FingerprintError):
        store.resolve_fingerprint("ff")


def test_a_shard_is_named_by_its_content_so_writing_it_twice_keeps_one(tmp_path: Path) -> None:
    store = ParquetScoreStore(tmp_path / "s")
    store.put(FP, [text_hash("q")], [text_hash("p")], [0.25])
    store.put(FP, [text_hash("q")], [text_hash("p")], [0.25])
    assert len(store.shards(f"scores/{FP}")) == 1
    # a temporary file left by a killed writer is never read
    (tmp_path / "s" / "scores" / FP / ".tmp-dead-part.parquet").write_bytes(b"partial")
    assert store.count_scores(FP) == 1


def test_a_folder_with_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputFormatError):
        ParquetScoreStore(tmp_path)


def test_a_scorer_resumes_from_a_parquet_store_and_explain_reads_it(
    tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    location = tmp_path / "shards"
    passages = make_passages(
        [("1", "d1", 0, "cats purr"), ("1", "d1", 1, "dogs bark"), ("2", "d2", 0, "cats purr")]
    )
    passages["query"] = passages["qid"].map({"1": "cats", "2": "pets"})
    first = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=location))(passages)
    again = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=str(location)))
    second = again(passages)
    assert again.stats_.cached == 3 and again.stats_.computed == 0
    np.testing.assert_array_equal(first["score"], second["score"])
    rows = explain(location, "1", "d1")
    assert sorted(rows["text"]) == ["cats purr", "dogs bark"]
    assert main(["explain", "--scores", str(location), "--qid", "1", "--docno", "d1", "--format", "tsv"]) == 0
    assert isinstance(pd.read_parquet(next((location / "scores").rglob("*.parquet"))), pd.DataFrame)


def test_store_commands_convert_sqlite_to_shards_and_back_and_merge(
    tiny_cross_encoder_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sqlite = tmp_path / "a.sqlite"
    passages = make_passages([("1", "d1", 0, "cats purr"), ("1", "d1", 1, "dogs bark")]).assign(query="cats")
    scored = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=sqlite))(passages)
    other = ScoreStore(tmp_path / "b.sqlite")
    other.put_scores(other.register(FP, kind="bi", description={"model": "m"}), ["q"], ["p"], [0.5])
    other.close()

    shards = tmp_path / "shards"
    assert main(["store", "export", str(sqlite), str(shards)]) == 0
    assert main(["store", "export", str(sqlite), str(shards)]) != 0  # never over an existing store
    back = tmp_path / "back.sqlite"
    assert main(["store", "merge", str(shards), str(tmp_path / "b.sqlite"), "--into", str(back)]) == 0
    capsys.readouterr()
    assert main(["store", "info", str(back), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert sorted((f["kind"], f["scores"], f["segments"]) for f in info["fingerprints"]) == [
        ("bi", 1, 0),
        ("cross", 2, 2),
    ]
    for location in (shards, back):
        rows = explain(location, "1", "d1").sort_values("pid")
        np.testing.assert_array_equal(rows["score"], scored.sort_values("pid")["score"])
