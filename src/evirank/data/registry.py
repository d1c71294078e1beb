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

from dataclasses import dataclass
from typing import Literal

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
