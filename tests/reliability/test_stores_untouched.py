"""Score stores: a file that is not ours is never changed, reading leaves nothing behind, copies are
idempotent and atomic, and a model's cached hash never outlives a change of its bytes."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from fs_faults import read_only

from evirank.cli import main
from evirank.config import Runtime
from evirank.errors import InputFormatError
from evirank.score.store import ScoreStore
from evirank.score.stores import check_store_path, copy_store, open_store

FP = "ab" * 32


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _store(path: Path, documents: int = 3) -> Path:
    """A small SQLite store with scores and segments (closed, so no -wal is left)."""
    rows = pd.DataFrame(
        {
            "qid": "1",
            "query": "cats",
            "docno": [f"d{i // 2}" for i in range(2 * documents)],
            "pid": [i % 2 for i in range(2 * documents)],
            "text": [f"passage {i}" for i in range(2 * documents)],
        }
    )
    with ScoreStore(path) as store:
        store.register(FP, kind="cross", description={"model": "demo"})
        store.record_segments(FP, rows)
        store.put_scores(
            FP, rows["query"].tolist(), rows["text"].tolist(), [float(i) for i in range(len(rows))]
        )
    return path


def _user_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE addresses (name TEXT, street TEXT)")
    conn.execute("INSERT INTO addresses VALUES ('Ada', 'Analytical Street')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("how", ["write", "read"])
def test_a_users_sqlite_database_given_as_a_store_is_refused_unchanged(tmp_path: Path, how: str) -> None:
    db = _user_database(tmp_path / "mine.db")
    before = _md5(db)
    with pytest.raises(
        InputFormatError, match=r"another SQLite database .tables: addresses.; it was left unchanged"
    ):
        ScoreStore(db, readonly=how == "read")
    assert _md5(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.db"]  # no -wal, no -shm
    with sqlite3.connect(db) as conn:  # still in its own journal mode
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_file_that_is_not_sqlite_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    notes = tmp_path / "notes.sqlite"
    notes.write_text("my notes, not a database\n")
    with pytest.raises(InputFormatError, match="a file that is not a SQLite database"):
        check_store_path(notes)
    assert notes.read_text() == "my notes, not a database\n"


def test_rerank_refuses_a_users_database_as_scores_and_leaves_it_as_it_was(
    tmp_path: Path, tiny_cross_encoder_path: Path
) -> None:
    db = _user_database(tmp_path / "mine.db")
    before = _md5(db)
    (tmp_path / "r.txt").write_text("1 Q0 d1 1 2.0 r\n")
    (tmp_path / "t.tsv").write_text("1\tcats\n")
    (tmp_path / "c.jsonl").write_text('{"_id": "d1", "title": "Cats", "text": "Cats purr."}\n')
    args = ["-q", "rerank", "--run", str(tmp_path / "r.txt"), "--topics", str(tmp_path / "t.tsv")]
    args += ["--corpus", str(tmp_path / "c.jsonl"), "--output", str(tmp_path / "o.txt"), "--scores", str(db)]
    assert main([*args, "--model", str(tiny_cross_encoder_path)]) == 2
    assert _md5(db) == before and not (tmp_path / "mine.db-wal").exists()


def test_read_only_commands_leave_no_wal_or_shm_beside_the_store(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.sqlite")
    before = _md5(store)
    assert main(["-q", "store", "info", str(store)]) == 0
    assert main(["-q", "explain", "--scores", str(store), "--qid", "1", "--docno", "d0", "--no-matches"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]
    assert _md5(store) == before


def test_a_reader_sees_the_scores_a_running_writer_keeps_in_its_wal(tmp_path: Path) -> None:
    writer = ScoreStore(tmp_path / "s.sqlite")
    writer.register(FP, kind="cross", description={})
    writer.put_scores(FP, ["q"], ["p"], [1.5])  # committed to the WAL, not checkpointed: the writer is open
    assert (tmp_path / "s.sqlite-wal").exists()
    with ScoreStore(tmp_path / "s.sqlite", readonly=True) as reader:
        assert reader.get_scores(FP, ["q"], ["p"]).tolist() == [1.5]
    writer.close()


def test_stores_are_read_on_a_read_only_file_system(tmpfs: Path, tmp_path: Path) -> None:
    _store(tmpfs / "s.sqlite")
    open_store(tmpfs / "shards").put_scores(
        open_store(tmpfs / "shards").register(FP, kind="cross", description={}), ["q"], ["p"], [2.0]
    )
    read_only(tmpfs)
    assert main(["-q", "store", "info", str(tmpfs / "s.sqlite")]) == 0
    assert (
        main(
            [
                "-q",
                "explain",
                "--scores",
                str(tmpfs / "s.sqlite"),
                "--qid",
                "1",
                "--docno",
                "d1",
                "--no-matches",
            ]
        )
        == 0
    )
    assert main(["-q", "store", "info", str(tmpfs / "shards")]) == 0
    assert sorted(p.name for p in tmpfs.iterdir()) == ["s.sqlite", "shards"]


def test_merging_a_store_twice_adds_nothing_the_second_time(tmp_path: Path) -> None:
    source = _store(tmp_path / "a.sqlite")
    assert main(["-q", "store", "export", str(source), str(tmp_path / "A")]) == 0
    assert main(["-q", "store", "export", str(tmp_path / "A"), str(tmp_path / "B")]) == 0
    shards = sorted(p.relative_to(tmp_path / "B") for p in (tmp_path / "B").rglob("*.parquet"))
    for _ in range(2):
        assert main(["-q", "store", "merge", str(tmp_path / "A"), "--into", str(tmp_path / "B")]) == 0
        assert sorted(p.relative_to(tmp_path / "B") for p in (tmp_path / "B").rglob("*.parquet")) == shards
    table = open_store(tmp_path / "B", readonly=True).fingerprints()
    assert table["segments"].tolist() == [6] and table["scores"].tolist() == [6]


def test_a_merge_keeps_the_more_recent_segmentation_of_a_document(tmp_path: Path) -> None:
    old, new = _store(tmp_path / "old.sqlite"), tmp_path / "new.sqlite"
    shutil.copy(old, new)
    with ScoreStore(new) as store:  # d0 segmented anew, later
        store.record_segments(
            FP,
            pd.DataFrame({"qid": "1", "query": "cats", "docno": "d0", "pid": [0], "text": ["one passage"]}),
        )
    with ScoreStore(old, readonly=True) as a, ScoreStore(new) as b:
        assert copy_store(a, b)["segments"] == 0
        assert b.segment_table(FP).query("docno == 'd0'")["pid"].tolist() == [0]


def test_a_failed_export_leaves_nothing_at_the_destination_and_the_rerun_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _store(tmp_path / "a.sqlite")
    import evirank.score.stores as store_module

    real = store_module.copy_store

    def failing(src, dest, fingerprints=None):  # type: ignore[no-untyped-def]
        dest.register("cd" * 32, kind="cross", description={})  # something written, then the failure
        raise OSError(28, "No space left on device")

    for dest in (tmp_path / "out.sqlite", tmp_path / "out-shards"):
        monkeypatch.setattr(store_module, "copy_store", failing)
        assert main(["-q", "store", "export", str(source), str(dest)]) == 2
        assert not dest.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
        monkeypatch.setattr(store_module, "copy_store", real)
        assert main(["-q", "store", "export", str(source), str(dest)]) == 0
        assert open_store(dest, readonly=True).count_scores() == 6


def test_a_missing_source_creates_no_destination(tmp_path: Path) -> None:
    assert main(["-q", "store", "export", str(tmp_path / "none.sqlite"), str(tmp_path / "out.sqlite")]) == 2
    assert main(["-q", "store", "merge", str(tmp_path / "none.sqlite"), "--into", str(tmp_path / "m")]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_weights_replaced_by_others_of_the_same_size_with_their_time_put_back_change_the_fingerprint(
    tmp_path: Path, tiny_cross_encoder_path: Path
) -> None:
    from evirank.score import CrossEncoder

    model = tmp_path / "model"
    shutil.copytree(tiny_cross_encoder_path, model)
    store = tmp_path / "s.sqlite"
    before = CrossEncoder(str(model), Runtime(store=str(store))).fingerprint
    weights = model / "model.safetensors"
    stat = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-64] ^= 0x5A  # one weight byte, same size
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the time put back
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    # in this process (its memory cache) and in a new one (the store's cache)
    assert CrossEncoder(str(model), Runtime(store=str(store))).fingerprint != before
    code = (
        "from evirank.config import Runtime; from evirank.score import CrossEncoder; "
        f"print(CrossEncoder({str(model)!r}, Runtime(store={str(store)!r})).fingerprint)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() != before
    assert CrossEncoder(str(model), Runtime(store=str(store))).fingerprint == done.stdout.strip()
