"""The papers' collections: what each is, where evirank expects its files, and where to get them.

The collections of Birch (Robust04, Core17, Core18), Dai & Callan (Robust04, ClueWeb09-B) and
Steensland (MS MARCO documents) are licensed or too large to ship. Each lives in its own folder
under a *collections folder* (``COLLECTIONS`` in ``conditions/papers.yaml``; by default
``../collections`` beside the repository), as distributed: :func:`missing_files` says which of
its files are absent, and :func:`describe_missing` says it in a sentence, for the conditions
that need the collection (``needs: [robust04]``) to skip with. The topics, Core17/18 qrels and
Robust04 folds come with the datasets folder (``trec-newswire-topics``).

Example:
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> missing_files("core18", root)
    ['WashingtonPost.v2/data']
    >>> print(describe_missing("core18", "collections"))  # doctest: +NORMALIZE_WHITESPACE
    the Core18 collection (TREC Washington Post Corpus v2): put WashingtonPost.v2/data (the .jl file
    of WashingtonPost.v2.tar.gz, unpacked) in collections/core18 (set COLLECTIONS to use another
    folder); it comes from NIST under a data agreement: https://trec.nist.gov/data/wapost/
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PaperCollection:
    """A collection of the papers and the files evirank needs of it.

    Attributes:
        name: the name conditions use in ``needs`` (``robust04``).
        title: what it is, for people.
        format: the corpus format its documents are read in.
        folder: its folder under the collections folder.
        files: what must be in that folder: each entry a tuple of alternative paths (any one
            will do) and a description for the message.
        source: where to obtain it.
        documents: the number of documents Anserini indexes from it (its regression pages).
    """

    name: str
    title: str
    format: str
    folder: str
    files: tuple[tuple[tuple[str, ...], str], ...]
    source: str
    documents: int | None = None


PAPER_COLLECTIONS: dict[str, PaperCollection] = {
    c.name: c
    for c in (
        PaperCollection(
            "robust04",
            "Robust04 collection (TREC disks 4 and 5, without the Congressional Record)",
            "trec",
            "robust04",
            (
                (("disk45/fbis",), "the fbis folder of TREC disk 5"),
                (("disk45/fr94",), "the fr94 folder of TREC disk 4"),
                (("disk45/ft",), "the ft folder of TREC disk 4"),
                (("disk45/latimes",), "the latimes folder of TREC disk 5"),
                (("qrels.robust04.txt",), "the Robust04 qrels, NIST's qrels.robust2004.txt"),
            ),
            "NIST: the disks under a data agreement (https://trec.nist.gov/data/cd45/), the qrels "
            "from https://trec.nist.gov/data/robust/qrels.robust2004.txt",
            528_030,
        ),
        PaperCollection(
            "core17",
            "Core17 collection (The New York Times Annotated Corpus, LDC2008T19)",
            "nyt",
            "core17",
            ((("nyt_corpus/data",), "the data folder of nyt_corpus_LDC2008T19.tgz, unpacked"),),
            "the LDC: https://catalog.ldc.upenn.edu/LDC2008T19",
            1_855_650,
        ),
        PaperCollection(
            "core18",
            "Core18 collection (TREC Washington Post Corpus v2)",
            "wapo",
            "core18",
            ((("WashingtonPost.v2/data",), "the .jl file of WashingtonPost.v2.tar.gz, unpacked"),),
            "NIST under a data agreement: https://trec.nist.gov/data/wapost/",
            595_031,
        ),
        PaperCollection(
            "clueweb09b",
            "ClueWeb09-B collection (ClueWeb09 Category B: the first English segment) and the Web "
            "track topics 1-200",
            "warc",
            "clueweb09b",
            (
                (("ClueWeb09_English_1",), "the first English segment: en0000-en0011, enwp00-enwp03"),
                (("topics.web.1-200.txt",), "the TREC 2009-2012 Web track topics 1-200 in one file"),
                (("qrels.web.1-200.txt",), "their qrels in one file"),
            ),
            "the Lemur project under a licence: https://lemurproject.org/clueweb09/; topics and qrels "
            "from https://trec.nist.gov/data/webmain.html",
            50_220_423,
        ),
        PaperCollection(
            "msmarco-docs",
            "MS MARCO document ranking collection and its dev queries",
            "msmarco-docs",
            "msmarco-docs",
            (
                (("msmarco-docs.tsv", "msmarco-docs.tsv.gz"), "the documents"),
                (("msmarco-docdev-queries.tsv", "msmarco-docdev-queries.tsv.gz"), "the 5,193 dev queries"),
                (("msmarco-docdev-qrels.tsv", "msmarco-docdev-qrels.tsv.gz"), "their qrels"),
            ),
            "https://microsoft.github.io/msmarco/ (non-commercial research terms)",
            3_213_835,
        ),
    )
}
"""The papers' collections by name."""


def missing_files(name: str, root: str | os.PathLike[str]) -> list[str]:
    """The files (paths relative to the collection's folder) of collection ``name`` absent under ``root``.

    Example:
        >>> missing_files("msmarco-docs", "/nonexistent")[0]
        'msmarco-docs.tsv'
    """
    collection = PAPER_COLLECTIONS[name]
    folder = Path(root) / collection.folder
    return [
        alternatives[0]
        for alternatives, _ in collection.files
        if not any((folder / path).exists() for path in alternatives)
    ]


def describe_missing(name: str, root: str | os.PathLike[str]) -> str:
    """What to put where so that collection ``name`` is complete under ``root``, in a sentence."""
    collection = PAPER_COLLECTIONS[name]
    absent = set(missing_files(name, root)) or {alternatives[0] for alternatives, _ in collection.files}
    wanted = [
        " or ".join(alternatives) + f" ({what})"
        for alternatives, what in collection.files
        if alternatives[0] in absent
    ]
    return (
        f"the {collection.title}: put {', '.join(wanted)} in {Path(root) / collection.folder} "
        f"(set COLLECTIONS to use another folder); it comes from {collection.source}"
    )
