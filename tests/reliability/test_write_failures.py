"""Writes that fail on the way (a full disk, a file-size limit, a file system turned read-only) name the
output and leave nothing partial there; nothing is ever reported as a bare ``[Errno 28]``."""

from __future__ import annotations

import errno
import logging
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fs_faults import fill, read_only

from evirank.cli import main
from evirank.errors import OutputNotWritableError, OutputWriteError
from evirank.frames import make_run
from evirank.io import write_run
from evirank.outputs import atomic_file, atomic_output, naming_write_failures, write_failure
from evirank.score.store import ScoreStore
from evirank.score.stores import open_store

FP = "ab" * 32
QRELS = "".join(f"{q} 0 d{d} {d % 2}\n" for q in range(1, 40) for d in range(20))
RUN = "".join(f"{q} Q0 d{d} {d + 1} {20.0 - d} r\n" for q in range(1, 40) for d in range(20))


def _error(caplog: pytest.LogCaptureFixture) -> str:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    return errors[0].getMessage()


def _no_temporaries(folder: Path) -> None:
    assert not [p.name for p in folder.rglob(".tmp-*")], sorted(p.name for p in folder.rglob(".tmp-*"))


def test_a_failing_write_names_the_output_not_its_temporary(tmp_path: Path) -> None:
    out = tmp_path / "run.txt"
    with pytest.raises(OutputWriteError) as info, atomic_output(out) as tmp:
        tmp.write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")
    assert str(info.value).startswith(
        f"{out}: could not be written (No space left on device); nothing was left"
    )
    assert not out.exists() and sorted(tmp_path.iterdir()) == []
    for failure, reason in (
        (RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"), "a full disk"),
        (RuntimeError('IoError(Os { code: 28, kind: StorageFull, message: "No space" })'), "No space left"),
        (OSError(errno.EROFS, "Read-only file system"), "Read-only file system"),
        (OSError(errno.EFBIG, "File too large"), "File too large"),
    ):
        assert reason in (write_failure(failure) or "")
        with pytest.raises(OutputWriteError, match=reason), naming_write_failures(out):
            raise failure
    assert write_failure(ValueError("a bad value")) is None  # other errors go on unchanged


def test_internal_files_are_whole_or_absent_after_a_failed_write(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text('{"complete": false}')
    with (
        pytest.raises(OutputWriteError, match=r"manifest\.json: could not be written"),
        atomic_file(manifest) as tmp,
    ):
        tmp.write_text('{"compl')
        raise OSError(errno.ENOSPC, "No space left on device")
    assert manifest.read_text() == '{"complete": false}' and sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json"
    ]


# --- a real full disk (a small tmpfs, root only) ------------------------------------------------


def test_evaluate_output_on_a_full_disk(
    tmpfs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    fill(tmpfs)
    out = tmpfs / "report.md"
    args = ["-q", "evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt")]
    assert main([*args, "--per-query", "--output", str(out)]) == 2
    message = _error(caplog)
    assert message.startswith(f"{out}") and "No space left on device" in message and "Errno" not in message
    assert not out.exists() and not (tmpfs / "report.md.json").exists()
    _no_temporaries(tmpfs)


def test_a_run_written_to_a_full_disk(tmpfs: Path) -> None:
    fill(tmpfs)
    run = make_run([(str(q), f"d{d}", float(d)) for q in range(50) for d in range(50)])
    with pytest.raises(OutputWriteError, match=rf"{tmpfs}/run.txt: could not be written \(No space left"):
        write_run(run, tmpfs / "run.txt")
    assert not (tmpfs / "run.txt").exists()
    _no_temporaries(tmpfs)


def test_score_stores_on_a_full_disk_name_the_store_and_keep_what_was_committed(tmpfs: Path) -> None:
    texts = [f"passage {i} " + "x" * 200 for i in range(20_000)]
    for location in (tmpfs / "s.sqlite", tmpfs / "shards"):
        store = open_store(location)
        fp = store.register(FP, kind="cross", description={})
        store.put_scores(fp, ["q"], ["first"], [1.0])
        fill(tmpfs, leave=64 * 1024)
        with pytest.raises(OutputWriteError) as info:
            for start in range(0, len(texts), 2000):
                store.put_scores(fp, ["q"] * 2000, texts[start : start + 2000], np.arange(2000.0).tolist())
        message = str(info.value)
        assert message.startswith(f"{location}: could not be written (No space left on device)")
        assert "kept (a rerun resumes)" in message
        (tmpfs / "filler").unlink()
        assert store.get_scores(fp, ["q"], ["first"]).tolist() == [1.0]
        store.close()


def test_store_export_to_a_full_disk_leaves_no_store(
    tmpfs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ScoreStore(tmp_path / "a.sqlite") as source:
        source.register(FP, kind="cross", description={})
        texts = [f"passage {i} " + "y" * 300 for i in range(30_000)]
        source.put_scores(FP, ["q"] * len(texts), texts, np.arange(len(texts), dtype=float).tolist())
    fill(tmpfs, leave=256 * 1024)
    for dest in (tmpfs / "b.sqlite", tmpfs / "b-shards"):
        assert main(["-q", "store", "export", str(tmp_path / "a.sqlite"), str(dest)]) == 2
        assert "No space left on device" in caplog.records[-1].getMessage()
        assert not dest.exists()
        _no_temporaries(tmpfs)


def test_outputs_on_a_read_only_file_system_are_refused_before_any_work(
    tmpfs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    read_only(tmpfs)
    args = ["-q", "evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt")]
    assert main([*args, "--output", str(tmpfs / "report.md")]) == 2
    assert "read-only file system" in _error(caplog)
    with pytest.raises(OutputNotWritableError):
        ScoreStore(tmpfs / "s.sqlite")


# --- a file-size limit (ulimit -f): any user, any system ------------------------------------------


def _limited(limit: int) -> None:  # runs in the child
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("limit", [0, 512, 4096])
def test_outputs_cut_by_a_file_size_limit_are_named_and_never_left_half_written(
    tmp_path: Path, limit: int
) -> None:
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    out = tmp_path / "out" / "report.md"
    command = [sys.executable, "-m", "evirank", "-q", "evaluate", "--qrels", str(tmp_path / "q.txt")]
    command += ["--run", str(tmp_path / "r.txt"), "--per-query", "--output", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, preexec_fn=lambda: _limited(limit), timeout=300
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        f"{out}, {out}.json: could not be written (File too large); nothing was left at these paths"
        in done.stderr
    )
    assert "Traceback" not in done.stderr and "Errno" not in done.stderr
    assert not out.exists()
    _no_temporaries(tmp_path)


def test_a_score_store_cut_by_a_file_size_limit_is_named(tmp_path: Path) -> None:
    code = f"""
import numpy as np
from evirank.score.store import ScoreStore
store = ScoreStore({str(tmp_path / "s.sqlite")!r})
fp = store.register({FP!r}, kind="cross", description={{}})
texts = [f"passage {{i}} " + "z" * 300 for i in range(20000)]
store.put_scores(fp, ["q"] * len(texts), texts, np.arange(len(texts), dtype=float).tolist())
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: _limited(1 << 20),
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("evirank.errors.OutputWriteError: " + str(tmp_path / "s.sqlite")), last
    assert "disk I/O error" in last or "File too large" in last


def test_a_vector_shard_on_a_full_disk_is_named(tmpfs: Path) -> None:
    from evirank.vectors import ShardWriter, VectorsIdentity

    writer = ShardWriter(tmpfs / "vectors", VectorsIdentity("f" * 64, "sentences:segment"), block_size=2)
    writer.open()
    fill(tmpfs)
    rows = 4000
    with pytest.raises(OutputWriteError, match=r"part-000000\.parquet: could not be written"):
        writer.write(
            0, ["d"] * rows, list(range(rows)), ["text " * 20] * rows, np.ones((rows, 64), dtype=np.float32)
        )
    assert not (tmpfs / "vectors.partial" / "shards" / "part-000000.parquet").exists()
    _no_temporaries(tmpfs)
