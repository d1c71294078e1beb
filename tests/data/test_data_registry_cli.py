"""The registry's entries are well formed; ``evirank data list|get`` on a stand-in host."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from data_cases import scifact_entry, scifact_zip

from evirank.cli import main
from evirank.data import DATASETS

_HEX = {"md5": 32, "sha256": 64}


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_entry_declares_a_published_checksum_or_none(name: str) -> None:
    entry = DATASETS[name]
    assert entry.expect and entry.files
    for remote in entry.files:
        assert remote.url.startswith("https://")
        assert remote.source
        if remote.checksum is None:
            assert "no published checksum" in remote.source
        else:
            algorithm, _, digest = remote.checksum.partition(":")
            assert re.fullmatch(f"[0-9a-f]{{{_HEX[algorithm]}}}", digest)
        if remote.unpack != "zip":
            assert remote.target in entry.expect


def test_file_names_are_unique_so_one_mirror_folder_holds_them_all() -> None:
    names = [remote.name for entry in DATASETS.values() for remote in entry.files]
    assert len(names) == len(set(names))


def test_data_list_shows_every_entry_and_where_it_is(
    host, register, isolated: Path, capsys, monkeypatch
) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    monkeypatch.setenv("EVIRANK_DATA_URL", host.url)
    assert main(["-q", "data", "get", entry.name]) == 0
    capsys.readouterr()

    assert main(["data", "list"]) == 0

    out = capsys.readouterr().out
    assert re.search(rf"^{entry.name}\s+.*\s+{re.escape(str(isolated / 'scifact'))}\s+fake$", out, re.M)
    for name in set(DATASETS) - {entry.name, "scifact"}:
        assert re.search(rf"^{re.escape(name)}\s+.*\s+-\s+", out, re.M), name
    assert re.search(r"^scifact\s+2\.8 MB\s+md5\s", out, re.M)


def test_data_get_prints_the_folder_on_stdout(host, register, isolated: Path, capsys, monkeypatch) -> None:
    body = scifact_zip()
    entry = register(scifact_entry(body))
    host.files["scifact.zip"] = body
    monkeypatch.setenv("EVIRANK_DATA_URL", host.url)

    assert main(["-q", "data", "get", entry.name]) == 0

    assert capsys.readouterr().out == f"{isolated / 'scifact'}\n"
    assert (isolated / "scifact" / "corpus.jsonl").is_file()


def test_data_get_offline_exits_2_naming_the_file(dead_url: str, isolated: Path, caplog, monkeypatch) -> None:
    monkeypatch.setenv("EVIRANK_DATA_URL", dead_url)

    assert main(["-q", "data", "get", "scifact"]) == 2

    assert str(isolated / "downloads" / "scifact.zip") in caplog.text


def test_data_get_an_unknown_name_lists_the_known_ones(caplog) -> None:
    assert main(["-q", "data", "get", "scifakt"]) == 2
    assert "no dataset named 'scifakt'; known: microblog-2011" in caplog.text


def test_a_registry_file_adds_a_collection_with_its_checksum(host, tmp_path: Path, monkeypatch) -> None:
    import hashlib
    import json

    body = scifact_zip()
    path = tmp_path / "registry.json"
    remote = {"url": "https://example.invalid/scifact.zip", "size": len(body), "checksum": None}
    remote |= {"unpack": "zip", "strip": "scifact"}
    entry = {"folder": "mine/scifact", "expect": ["corpus.jsonl"], "files": [remote]}
    path.write_text(json.dumps({"mine": entry}))
    monkeypatch.setenv("EVIRANK_DATA_REGISTRY", str(path))
    host.files["scifact.zip"] = body
    monkeypatch.setenv("EVIRANK_DATA_URL", host.url)

    assert main(["-q", "data", "get", "mine"]) == 0  # no checksum: checked as a zip, with a warning

    remote["checksum"] = "sha256:" + hashlib.sha256(b"other").hexdigest()
    path.write_text(json.dumps({"mine": entry}))
    assert main(["-q", "data", "get", "mine", "--force"]) == 2


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([{"url": "https://x/a.txt", "size": None}], "'checksum' key in mine files"),
        (
            [{"url": "https://x/a.txt", "size": 1, "checksum": "crc32:00"}],
            '"md5:<hex>", "sha256:<hex>" or null',
        ),
        ([{"url": "https://x/a.txt", "size": 1, "checksum": None, "md5": "x"}], "keys among"),
    ],
)
def test_a_registry_file_without_a_checksum_field_is_refused(tmp_path: Path, files, message) -> None:
    import json

    from evirank.data import load_registry
    from evirank.errors import InputFormatError

    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"mine": {"folder": "m", "expect": ["a.txt"], "files": files}}))

    with pytest.raises(InputFormatError, match=re.escape(message)):
        load_registry(path)
