"""Downloads against a local stand-in host: success, interruption and resume, corrupt files, offline."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
from data_cases import SCIFACT_EXPECT, scifact_entry, scifact_zip

from evirank.data import (
    DATASETS,
    Dataset,
    DownloadError,
    RemoteFile,
    VerificationError,
    find_dataset,
    get_dataset,
)
from evirank.io.corpus import read_corpus
from evirank.io.qrels import read_qrels


def test_download_unpacks_the_beir_layout_into_the_data_home(host, register, isolated: Path) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body

    folder = get_dataset(entry.name, base_url=host.url)

    assert folder == isolated / "scifact"
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == sorted(
        SCIFACT_EXPECT
    )
    assert len(list(read_corpus(folder))) == 40
    assert read_qrels(folder / "qrels" / "test.tsv").values.tolist() == [["1", "3", 1]]
    assert not list((isolated / "downloads").iterdir())  # the archive is gone once unpacked
    assert not [p for p in isolated.iterdir() if p.name.startswith(".tmp-")]


def test_a_second_call_finds_the_dataset_without_asking_the_host(host, register) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    first = get_dataset(entry.name, base_url=host.url)
    asked = len(host.requests)

    assert get_dataset(entry.name, base_url=host.url) == first
    assert len(host.requests) == asked == 1


def test_the_mirror_variable_replaces_every_host(host, register, monkeypatch) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    monkeypatch.setenv("EVIRANK_DATA_URL", host.url + "/")

    assert (get_dataset(entry.name) / "corpus.jsonl").is_file()
    assert host.requests == [("scifact.zip", None)]


def test_the_datasets_folder_comes_first(host, register, tmp_path: Path, monkeypatch) -> None:
    entry = register(scifact_entry(scifact_zip()))
    shared = tmp_path / "shared"
    for rel in SCIFACT_EXPECT:
        (shared / "scifact" / rel).parent.mkdir(parents=True, exist_ok=True)
        (shared / "scifact" / rel).write_text("x\n")
    monkeypatch.setenv("EVIRANK_DATASETS", str(shared))

    assert get_dataset(entry.name, base_url=host.url) == shared / "scifact"
    assert host.requests == []


def test_an_incomplete_datasets_folder_is_passed_over(host, register, tmp_path: Path, monkeypatch) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    (tmp_path / "shared" / "scifact").mkdir(parents=True)
    (tmp_path / "shared" / "scifact" / "corpus.jsonl").write_text("x\n")  # no queries, no qrels
    monkeypatch.setenv("EVIRANK_DATASETS", str(tmp_path / "shared"))

    folder = get_dataset(entry.name, base_url=host.url)

    assert folder.parent != tmp_path / "shared"
    assert len(host.requests) == 1


def test_an_interrupted_download_never_looks_complete_and_a_rerun_resumes_it(
    host, register, isolated: Path
) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    host.cut.add("scifact.zip")

    with pytest.raises(DownloadError, match="broke off"):
        get_dataset(entry.name, base_url=host.url)

    assert find_dataset(entry.name) is None
    assert not (isolated / "scifact").exists()
    part = isolated / "downloads" / "scifact.zip.part"
    kept = part.stat().st_size
    assert 0 < kept < len(body)

    folder = get_dataset(entry.name, base_url=host.url)

    assert host.requests[-1] == ("scifact.zip", f"bytes={kept}-")
    assert (folder / "qrels" / "train.tsv").is_file()
    assert not part.exists()


def test_a_host_without_ranges_restarts_the_download_cleanly(host, register) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    host.cut.add("scifact.zip")
    host.ranges = False
    with pytest.raises(DownloadError):
        get_dataset(entry.name, base_url=host.url)

    folder = get_dataset(entry.name, base_url=host.url)

    assert len(list(read_corpus(folder))) == 40


def test_a_wrong_checksum_is_refused_and_the_file_removed(host, register, isolated: Path) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body, checksum="sha256:" + "0" * 64))
    host.files["scifact.zip"] = body

    with pytest.raises(VerificationError, match=r"expected sha256 0{64}, found [0-9a-f]{64}"):
        get_dataset(entry.name, base_url=host.url)

    assert not (isolated / "scifact").exists()
    assert not list((isolated / "downloads").iterdir())


def test_the_real_scifact_entry_refuses_a_file_of_another_size(host) -> None:
    host.files["scifact.zip"] = scifact_zip()

    with pytest.raises(VerificationError, match=r"expected 2,816,079 bytes"):
        get_dataset("scifact", base_url=host.url)


def test_a_corrupt_file_with_the_right_size_fails_its_md5(host, register) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body, checksum="md5:" + hashlib.md5(body).hexdigest()))
    host.files["scifact.zip"] = body[:100] + b"\x00" + body[101:]

    with pytest.raises(VerificationError, match="expected md5"):
        get_dataset(entry.name, base_url=host.url)


def test_offline_the_message_names_each_file_and_where_to_put_it(dead_url: str, isolated: Path) -> None:
    with pytest.raises(DownloadError) as caught:
        get_dataset("scifact", base_url=dead_url)

    message = str(caught.value)
    assert "refused" in message
    assert "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip" in message
    assert str(isolated / "downloads" / "scifact.zip") in message
    assert str(isolated / "scifact") in message
    assert "corpus.jsonl, queries.jsonl, qrels/test.tsv" in message
    assert not (isolated / "scifact").exists()


def test_a_file_put_where_the_message_said_is_used_without_the_network(
    dead_url: str, register, isolated: Path
) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    (isolated / "downloads").mkdir(parents=True)
    (isolated / "downloads" / "scifact.zip").write_bytes(body)

    folder = get_dataset(entry.name, base_url=dead_url)

    assert (folder / "queries.jsonl").is_file()


def test_a_wrong_file_put_by_hand_is_kept_and_named(dead_url: str, register, isolated: Path) -> None:
    entry = register(scifact_entry(scifact_zip(), checksum="sha256:" + "1" * 64))
    placed = isolated / "downloads" / "scifact.zip"
    placed.parent.mkdir(parents=True)
    placed.write_bytes(scifact_zip())

    with pytest.raises(VerificationError, match=f"delete {placed}"):
        get_dataset(entry.name, base_url=dead_url)
    assert placed.exists()


def _topics_entry() -> Dataset:
    def remote(name: str, kind: str) -> RemoteFile:
        return RemoteFile(
            url=f"https://example.invalid/{name}",
            size=None,
            checksum=None,
            source="none",
            target=name,
            kind=kind,  # type: ignore[arg-type]
        )

    return Dataset(
        name="fake-mb",
        folder="microblog/2099",
        description="fake",
        files=(remote("topics.mb.txt", "topics"), remote("qrels.mb.txt", "qrels")),
        expect=("topics.mb.txt", "qrels.mb.txt"),
    )


TOPICS = "<top>\n<num> Number: MB001 </num>\n<title> BBC World Service staff cuts </title>\n</top>\n"


def test_without_a_published_checksum_files_are_parsed_and_a_warning_says_so(host, register, caplog) -> None:
    entry = register(_topics_entry())
    host.files["topics.mb.txt"] = TOPICS.encode()
    host.files["qrels.mb.txt"] = b"1 0 34952194402811904 1\n"

    with caplog.at_level(logging.WARNING, logger="evirank"):
        folder = get_dataset(entry.name, base_url=host.url)

    assert folder.name == "2099"
    assert (folder / "topics.mb.txt").read_text() == TOPICS
    assert "no published checksum" in caplog.text


def test_without_a_checksum_an_error_page_is_still_refused(host, register, isolated: Path) -> None:
    entry = register(_topics_entry())
    host.files["topics.mb.txt"] = TOPICS.encode()
    host.files["qrels.mb.txt"] = b"<html><body>Rate limit exceeded</body></html>\n"

    with pytest.raises(VerificationError, match="not a valid qrels file"):
        get_dataset(entry.name, base_url=host.url)
    assert not (isolated / "microblog").exists()


def test_a_zip_member_escaping_its_folder_is_refused(host, register, isolated: Path) -> None:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("scifact/../../evil.txt", "x")
    body = buffer.getvalue()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body

    with pytest.raises(VerificationError, match="outside its folder"):
        get_dataset(entry.name, base_url=host.url)
    assert not (isolated.parent / "evil.txt").exists()
    assert not (isolated / "scifact").exists()


def test_force_downloads_again_into_the_home(host, register) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    get_dataset(entry.name, base_url=host.url)

    get_dataset(entry.name, base_url=host.url, force=True)

    assert len(host.requests) == 2
    assert entry.name in DATASETS


def test_an_incomplete_folder_in_the_home_is_not_replaced_unasked(host, register, isolated: Path) -> None:
    from evirank.data import DataFolderError

    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    mine = isolated / "scifact" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("my notes\n")

    with pytest.raises(DataFolderError, match=r"lacks corpus.jsonl, .*--force"):
        get_dataset(entry.name, base_url=host.url)
    assert mine.read_text() == "my notes\n"
    assert host.requests == []

    folder = get_dataset(entry.name, base_url=host.url, force=True)

    assert (folder / "corpus.jsonl").is_file()
    assert not mine.exists()


def test_a_damaged_partial_file_without_a_checksum_is_never_resumed(host, register, isolated: Path) -> None:
    entry = register(_topics_entry())
    host.files["topics.mb.txt"] = TOPICS.encode()
    qrels = b"1 0 34952194402811904 1\n1 0 34952194402811905 0\n"
    host.files["qrels.mb.txt"] = qrels
    downloads = isolated / "downloads"
    downloads.mkdir(parents=True)
    # a partial file whose beginning is not the host's (appending the rest would still parse)
    (downloads / "qrels.mb.txt.part").write_bytes(b"9 0 99999 1\n")

    folder = get_dataset(entry.name, base_url=host.url)

    assert (folder / "qrels.mb.txt").read_bytes() == qrels
    assert ("qrels.mb.txt", None) in host.requests  # downloaded from the start, no Range header
    assert not any(name == "qrels.mb.txt" and wanted for name, wanted in host.requests)
