"""The public collections evirank can fetch: where each file comes from, how it is checked, where it goes.

Each :class:`Dataset` unpacks into one folder of the data home laid out the way evirank's readers
expect (the same layout as the datasets folder, so either can be passed to a command). Every
:class:`RemoteFile` names the checksum it is verified against, in the form ``"md5:<hex>"`` or
``"sha256:<hex>"``, and where that value was published. ``checksum=None`` means no checksum was
published anywhere we could cite: such a file is verified by its size (when that is known) and by
parsing it (a zip's integrity, a topics or qrels file read by evirank's own readers), and a warning
says so. A checksum is never made up.

Example:
    >>> DATASETS["scifact"].folder
    'scifact'
    >>> DATASETS["scifact"].files[0].checksum
    'md5:5f7d1de60b170fc8027bb7898e2efca1'
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from evirank.errors import InputFormatError

#: A JSON file of more entries (or replacements), e.g. for a private mirror: see :func:`load_registry`.
REGISTRY_ENV = "EVIRANK_DATA_REGISTRY"

#: How a downloaded file becomes part of its dataset folder.
Unpack = Literal["zip", "gunzip", "copy"]
#: What a file is, for the integrity check of files without a published checksum.
Kind = Literal["zip", "topics", "qrels"]


@dataclass(frozen=True)
class RemoteFile:
    """One file to download.

    Args:
        url: its public address.
        size: its size in bytes, or ``None`` when not known from a published source.
        checksum: ``"md5:<hex>"`` or ``"sha256:<hex>"`` as published, or ``None`` (see the module).
        source: where ``size`` and ``checksum`` were published (shown by ``evirank data list``).
        unpack: ``"zip"`` (extract; ``strip`` is the archive's top folder), ``"gunzip"`` or ``"copy"``.
        target: for ``gunzip``/``copy``, the file's name inside the dataset folder.
        kind: what the file holds, checked by parsing it.
        strip: for ``zip``, the folder inside the archive whose contents become the dataset folder.
    """

    url: str
    size: int | None
    checksum: str | None
    source: str
    unpack: Unpack = "copy"
    target: str = ""
    kind: Kind = "zip"
    strip: str = ""

    @property
    def name(self) -> str:
        """The file's name at its host (and at a mirror given by ``EVIRANK_DATA_URL``)."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Dataset:
    """A collection, or the public part of one, that unpacks into one folder.

    Args:
        name: the name ``evirank data get`` takes.
        folder: its folder, relative to the data home or the datasets folder.
        description: one line for ``evirank data list``.
        files: what to download.
        expect: files (relative to ``folder``) that must be there for the dataset to count as present.
        irds: the ``ir_datasets`` id that gives the same data (``irds:<id>`` in place of a path).
        note: what is not included, and why.
    """

    name: str
    folder: str
    description: str
    files: tuple[RemoteFile, ...]
    expect: tuple[str, ...]
    irds: str | None = None
    note: str = ""

    @property
    def size(self) -> int | None:
        """Total download size in bytes, or ``None`` when a file's size is not known."""
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


# Checksums and sizes marked "ir_datasets" are the expected_md5 and size_hint of ir_datasets 0.6.3's
# ir_datasets/etc/downloads.json (entries beir/scifact, msmarco-passage/trec-dl-2019/*, trec-dl-2020/*,
# tweets2013-ia/trec-mb-2013/*). The scifact.zip md5 is also the one BEIR's README lists for it.
# The md5 sums of the DL19 qrels and the Microblog 2013 topics and qrels were also checked against
# copies of those files: they match the published values.
_IRDS = "ir_datasets 0.6.3 etc/downloads.json"
_ANSERINI = "https://raw.githubusercontent.com/castorini/anserini-tools/master/topics-and-qrels"
_MSMARCO = "https://msmarco.z22.web.core.windows.net/msmarcoranking"
_NO_CHECKSUM = "no published checksum (verified by parsing)"

_MICROBLOG_NOTE = (
    "topics and qrels only: the tweets themselves are under Twitter's terms and cannot be downloaded "
    "here; put a corpus.jsonl of candidate tweets and a run beside them to re-rank"
)
_DL_NOTE = (
    "topics and qrels only: the passages are MS MARCO's (8.8M, about 1 GB; irds:{irds} gives them "
    "through ir_datasets); a first-stage run with passage text is not included"
)

_DATASETS = (
    Dataset(
        name="scifact",
        folder="scifact",
        description="BEIR SciFact: 5,183 scientific abstracts, claims as queries (train 809, test 300)",
        files=(
            RemoteFile(
                url="https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip",
                size=2_816_079,
                checksum="md5:5f7d1de60b170fc8027bb7898e2efca1",
                source=f"{_IRDS}; BEIR's dataset table",
                unpack="zip",
                kind="zip",
                strip="scifact",
            ),
        ),
        expect=("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/train.tsv"),
        irds="beir/scifact/test",
    ),
    *(
        Dataset(
            name=f"microblog-{year}",
            folder=f"microblog/{year}",
            description=f"TREC {year} Microblog track: topics and official qrels",
            files=(
                RemoteFile(
                    url=f"{_ANSERINI}/topics.microblog{year}.txt",
                    size=None,
                    checksum=None,
                    source=_NO_CHECKSUM,
                    target=f"topics.microblog{year}.txt",
                    kind="topics",
                ),
                RemoteFile(
                    url=f"{_ANSERINI}/qrels.microblog{year}.txt",
                    size=None,
                    checksum=None,
                    source=_NO_CHECKSUM,
                    target=f"qrels.microblog{year}.txt",
                    kind="qrels",
                ),
            ),
            expect=(f"topics.microblog{year}.txt", f"qrels.microblog{year}.txt"),
            note=_MICROBLOG_NOTE,
        )
        for year in (2011, 2012)
    ),
    Dataset(
        name="microblog-2013",
        folder="microblog/2013",
        description="TREC 2013 Microblog track: topics and official qrels",
        files=(
            RemoteFile(
                url="https://trec.nist.gov/data/microblog/2013/topics.MB111-170.txt",
                size=11_471,
                checksum="md5:0b78d99dfa2d655dca7e9f138a93c21a",
                source=_IRDS,
                target="topics.microblog2013.txt",
                kind="topics",
            ),
            RemoteFile(
                url="https://trec.nist.gov/data/microblog/2013/qrels.txt",
                size=1_995_812,
                checksum="md5:4776a5dfd80b3f675184315ec989c02f",
                source=_IRDS,
                target="qrels.microblog2013.txt",
                kind="qrels",
            ),
        ),
        expect=("topics.microblog2013.txt", "qrels.microblog2013.txt"),
        note=_MICROBLOG_NOTE,
    ),
    Dataset(
        name="trec-dl19-passage",
        folder="trec-dl19-passage",
        description="TREC 2019 Deep Learning passage task: test queries (43 judged) and graded qrels",
        files=(
            RemoteFile(
                url=f"{_MSMARCO}/msmarco-test2019-queries.tsv.gz",
                size=4_276,
                checksum="md5:eda71eccbe4d251af83150abe065368c",
                source=_IRDS,
                unpack="gunzip",
                target="topics.dl19-passage.tsv",
                kind="topics",
            ),
            RemoteFile(
                url="https://trec.nist.gov/data/deep/2019qrels-pass.txt",
                size=187_092,
                checksum="md5:2f4be390198da108f6845c822e5ada14",
                source=_IRDS,
                target="qrels.dl19-passage.txt",
                kind="qrels",
            ),
        ),
        expect=("topics.dl19-passage.tsv", "qrels.dl19-passage.txt"),
        irds="msmarco-passage/trec-dl-2019/judged",
        note=_DL_NOTE.format(irds="msmarco-passage/trec-dl-2019/judged"),
    ),
    Dataset(
        name="trec-dl20-passage",
        folder="trec-dl20-passage",
        description="TREC 2020 Deep Learning passage task: test queries (54 judged) and graded qrels",
        files=(
            RemoteFile(
                url=f"{_MSMARCO}/msmarco-test2020-queries.tsv.gz",
                size=4_131,
                checksum="md5:00a406fb0d14ed3752d70d1e4eb98600",
                source=_IRDS,
                unpack="gunzip",
                target="topics.dl20-passage.tsv",
                kind="topics",
            ),
            RemoteFile(
                url="https://trec.nist.gov/data/deep/2020qrels-pass.txt",
                size=218_617,
                checksum="md5:0355ccee7509ac0463e8278186cdd8d1",
                source=_IRDS,
                target="qrels.dl20-passage.txt",
                kind="qrels",
            ),
        ),
        expect=("topics.dl20-passage.tsv", "qrels.dl20-passage.txt"),
        irds="msmarco-passage/trec-dl-2020/judged",
        note=_DL_NOTE.format(irds="msmarco-passage/trec-dl-2020/judged"),
    ),
)

#: Every dataset evirank can fetch, by name.
DATASETS: dict[str, Dataset] = {d.name: d for d in _DATASETS}


def load_registry(path: str | os.PathLike[str]) -> dict[str, Dataset]:
    """Registry entries from a JSON file: ``{name: {folder, description, expect, files: [...]}}``.

    Each file must state its ``checksum`` (``"md5:<hex>"``, ``"sha256:<hex>"``, or ``null`` where
    none is known) and its ``size`` (bytes or ``null``); the other :class:`RemoteFile` fields are optional.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "registry.json"
        >>> entry = {"folder": "mine", "expect": ["topics.txt"], "files": [{
        ...     "url": "https://example.org/topics.txt", "size": None, "checksum": None,
        ...     "target": "topics.txt", "kind": "topics"}]}
        >>> _ = path.write_text(json.dumps({"mine": entry}))
        >>> load_registry(path)["mine"].files[0].name
        'topics.txt'
    """
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputFormatError(
            file, exc.lineno, "a JSON object of datasets", f"invalid JSON ({exc.msg})"
        ) from exc
    if not isinstance(raw, dict):
        raise InputFormatError(file, None, "a JSON object of datasets by name", type(raw).__name__)
    return {name: _entry(file, name, value) for name, value in raw.items()}


def _entry(file: Path, name: str, value: Any) -> Dataset:
    def need(obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict) or key not in obj:
            raise InputFormatError(file, None, f"a {key!r} key in {where}", f"keys {sorted(obj or {})}")
        return obj[key]

    remotes = []
    known = {f.name for f in fields(RemoteFile)}
    for i, item in enumerate(need(value, "files", name)):
        where = f"{name} files[{i}]"
        for key in ("url", "size", "checksum"):
            need(item, key, where)
        unknown = sorted(set(item) - known)
        if unknown:
            raise InputFormatError(file, None, f"keys among {sorted(known)} in {where}", f"{unknown}")
        checksum = item["checksum"]
        if checksum is not None and checksum.partition(":")[0] not in ("md5", "sha256"):
            raise InputFormatError(file, None, f'"md5:<hex>", "sha256:<hex>" or null in {where}', checksum)
        if item.get("unpack", "copy") not in get_args(Unpack) or item.get("kind", "zip") not in get_args(
            Kind
        ):
            raise InputFormatError(
                file, None, f"unpack in {get_args(Unpack)} and kind in {get_args(Kind)} in {where}", str(item)
            )
        remotes.append(RemoteFile(**{"source": f"{file}", **item}))
    return Dataset(
        name=name,
        folder=need(value, "folder", name),
        description=value.get("description", ""),
        files=tuple(remotes),
        expect=tuple(need(value, "expect", name)),
        irds=value.get("irds"),
        note=value.get("note", ""),
    )


def registry() -> dict[str, Dataset]:
    """The built-in entries, with those of ``$EVIRANK_DATA_REGISTRY`` (a JSON file) added or replacing them.

    Example:
        >>> "scifact" in registry()
        True
    """
    extra = os.environ.get(REGISTRY_ENV)
    return {**DATASETS, **load_registry(extra)} if extra else dict(DATASETS)
