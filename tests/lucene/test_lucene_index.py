"""build_index: what an index records, and that failures never leave a complete-looking index."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evirank.errors import InputFormatError, OutputExistsError
from evirank.frames import Document
from evirank.lucene import index as lucene_index
from evirank.lucene.index import INFO_FILE, IndexingError, build_index, read_index_info


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_an_exception_while_reading_documents_leaves_no_index(
    tiny_corpus: list[Document], tmp_path: Path
) -> None:
    def corpus() -> Iterator[Document]:
        yield from tiny_corpus[:3]
        raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError, match="disk gone"):
        build_index(corpus(), tmp_path / "idx")
    assert leftovers(tmp_path) == []


def test_an_interrupted_indexer_leaves_no_index(
    tiny_corpus: list[Document], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyserini")

    def interrupted(command: list[str]) -> None:
        index = Path(command[command.index("-index") + 1])
        index.mkdir()
        (index / "segments_1").write_text("half an index")  # Lucene had started writing
        raise KeyboardInterrupt

    monkeypatch.setattr(lucene_index, "_run_indexer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index(tiny_corpus, tmp_path / "idx")
    assert leftovers(tmp_path) == []


def test_a_failing_indexer_process_raises_and_leaves_no_index(
    tiny_corpus: list[Document], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyserini")
    script = "import sys; print('Exception in thread main: out of luck'); sys.exit(3)"
    monkeypatch.setattr(lucene_index, "java_command", lambda *a, **k: [sys.executable, "-c", script])
    with pytest.raises(IndexingError, match=r"(?s)status 3.*out of luck"):
        build_index(tiny_corpus, tmp_path / "idx")
    assert leftovers(tmp_path) == []


def test_duplicate_document_ids_are_rejected_before_indexing(tmp_path: Path) -> None:
    docs = [Document("a", "", "one"), Document("b", "", "two"), Document("a", "", "three")]
    with pytest.raises(InputFormatError, match=r"document.*3.*unique document ids.*'a' again"):
        build_index(docs, tmp_path / "idx")
    assert leftovers(tmp_path) == []


def test_threads_must_be_positive(tiny_corpus: list[Document], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="threads"):
        build_index(tiny_corpus, tmp_path / "idx", threads=0)


def test_existing_output_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "idx").mkdir()
    (tmp_path / "idx" / "keep.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="--overwrite"):
        build_index(iter(()), tmp_path / "idx")
    assert (tmp_path / "idx" / "keep.txt").read_text() == "mine"


@pytest.mark.lucene
def test_index_records_its_config_versions_and_count(tiny_corpus: list[Document], tiny_index: Path) -> None:
    info = read_index_info(tiny_index)
    assert info is not None
    assert info["documents"] == len(tiny_corpus) and info["skipped_empty"] == 0
    assert (
        info["config"]["store_raw"] and info["config"]["store_docvectors"] and info["config"]["threads"] == 2
    )
    assert int(info["versions"]["java"].split(".")[0]) >= 21
    assert info["indexer_peak_rss"] > 0
    assert any(tiny_index.glob("segments_*"))
    assert not [p for p in tiny_index.parent.iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.lucene
def test_overwrite_replaces_and_empty_documents_are_skipped(
    tiny_corpus: list[Document], tmp_path: Path
) -> None:
    pytest.importorskip("pyserini")
    path = tmp_path / "idx"
    path.mkdir()
    (path / INFO_FILE).write_text("{}")  # an older evirank index
    (path / "old.txt").write_text("an older index")
    info = build_index([*tiny_corpus[:3], Document("empty", "", "  ")], path, overwrite=True)
    assert (info.documents, info.skipped_empty) == (3, 1)
    assert json.loads((path / INFO_FILE).read_text())["documents"] == 3
    assert not (path / "old.txt").exists()


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


def _is_java(pid: int) -> bool:
    try:
        return b"java" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# slow: timing-dependent (a child process, a JVM, a signal); it passes alone but once saw exit 0
# after the signal inside the full suite on an idle machine, which is still to be explained
@pytest.mark.slow
@pytest.mark.lucene
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_ctrl_c_while_java_indexes_leaves_no_index_and_no_jvm(tmp_path: Path) -> None:
    """A separate Python process indexes; Ctrl-C (SIGINT) arrives while Java runs; nothing remains."""
    pytest.importorskip("pyserini")
    # far more documents than Java can index before the signal lands (an idle machine once indexed
    # 30,000 before it did), yet few enough to be written out in seconds
    code = (
        "from evirank.frames import Document\n"
        "from evirank.lucene import build_index\n"
        "docs = (Document(f'd{i}', '', f'word{i % 5000} other words ' * 40) for i in range(200_000))\n"
        f"build_index(docs, {str(tmp_path / 'idx')!r})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    java_pids: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            java_pids = _children(proc.pid)
            if java_pids and any(p.name.startswith(".tmp-idx") for p in tmp_path.iterdir()):
                break
            time.sleep(0.05)
        assert java_pids, "the indexer never started"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in stderr
    assert leftovers(tmp_path) == []
    assert not [pid for pid in java_pids if Path(f"/proc/{pid}").exists()]
