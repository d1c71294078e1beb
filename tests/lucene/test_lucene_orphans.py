"""A killed indexing run leaves no JVM behind, and what it left on disk is refused and then cleaned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evirank.errors import InputFormatError
from evirank.lucene.index import _java_problem, check_index, clean_stale_collections
from evirank.lucene.java import die_with_parent

LINUX = sys.platform.startswith("linux") and Path("/proc/self/stat").exists()


def _state(pid: int) -> str | None:
    """The process state letter (``Z`` for a zombie), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z")


def _children(pid: int) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat_file.parent.name))
    return found


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.skipif(not LINUX, reason="parent-death signals are Linux-only")
def test_a_child_started_with_die_with_parent_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "from evirank.lucene.java import die_with_parent\n"
        "child = subprocess.Popen(['sleep', '300'], preexec_fn=die_with_parent())\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert die_with_parent() is not None


def test_search_refuses_the_temporary_folder_of_an_interrupted_index(tmp_path: Path) -> None:
    partial = tmp_path / ".tmp-idx-12345"
    partial.mkdir()
    (partial / "segments_1").write_text("")
    with pytest.raises(InputFormatError, match="unfinished or interrupted evirank index"):
        check_index(partial)


def test_collection_copies_of_dead_runs_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f"evirank-collection-{_dead_pid()}-abc"
    live = tmp_path / f"evirank-collection-{os.getpid()}-def"
    other = tmp_path / "evirank-collection-xyz"
    for folder in (dead, live, other):
        folder.mkdir()
    assert clean_stale_collections(tmp_path) == [dead]
    assert live.exists() and other.exists()


def test_a_java_failure_is_reported_without_its_stack_frames() -> None:
    lines = [
        "2026-11-23 INFO [main] IndexCollection - Starting indexer...",
        'Exception in thread "main" java.nio.file.FileSystemException: /ro/.tmp-x-1: Read-only file system',
        "\tat java.base/sun.nio.fs.UnixException.translateToIOException(UnixException.java:100)",
        "\tat org.apache.lucene.store.FSDirectory.open(FSDirectory.java:162)",
    ]
    assert _java_problem(lines) == lines[1]


@pytest.mark.lucene
@pytest.mark.skipif(not LINUX, reason="needs Linux /proc and parent-death signals")
def test_kill_9_of_index_takes_the_jvm_along_and_a_rerun_cleans_up(tmp_path: Path) -> None:
    """SIGKILL evirank while Java indexes: Java dies too; the next build removes the leftovers."""
    pytest.importorskip("pyserini")
    from evirank.frames import Document
    from evirank.lucene import build_index

    code = (
        "from evirank.frames import Document\n"
        "from evirank.lucene import build_index\n"
        "docs = (Document(f'd{i}', '', f'word{i % 5000} other words ' * 40) for i in range(200_000))\n"
        f"build_index(docs, {str(tmp_path / 'idx')!r})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL)
    java: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            java = [p for p in _children(proc.pid) if b"java" in Path(f"/proc/{p}/cmdline").read_bytes()]
            if java and any(tmp_path.glob(".tmp-idx-*/*")):  # Lucene has started writing
                break
            time.sleep(0.05)
        assert java, "the indexer never started"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in java) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in java)
    left = [p.name for p in tmp_path.iterdir()]
    assert left == [f".tmp-idx-{proc.pid}"]  # a partial index under its temporary name only
    copies = list(Path(tempfile.gettempdir()).glob(f"evirank-collection-{proc.pid}-*"))
    assert copies  # the corpus copy Anserini was reading
    build_index([Document("a", "", "cats purr")], tmp_path / "idx")
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    assert not any(p.exists() for p in copies)
