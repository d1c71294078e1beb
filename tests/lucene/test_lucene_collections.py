"""The collection formats indexed: the same BM25 and BM25+RM3 runs as their JSONL form, the same
stored texts, and the same words as Anserini's own collection readers keep."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from collection_writers import WRITERS
from evirank.cli import main
from evirank.frames import DOCNO, QID, RANK, SCORE, Document, make_topics
from evirank.io import read_corpus, write_corpus
from evirank.lucene import Bm25, LuceneDocs, Rm3

pytestmark = pytest.mark.lucene

DOCS = [
    Document("FBIS3-1", "Cats & dogs <together>", "Cats purr when content. Dogs bark at strangers & cats."),
    Document(
        "LA010189-0001", "", "A study of cats found p < 0.05 and p<0.01 for AT&T's rats; see &amp; too."
    ),
    Document("FT911-3", "Goldfish", "Goldfish grow to the size of their bowl. Or so people say, in Zürich."),
    Document("FR940104-0-00001", "Parrots", 'Parrots "mimic" human speech.\nThey learn words; parrots talk.'),
    Document(
        "d5", "Hamsters", "Hamsters store food in their cheek pouches. They sleep by day, cats by night."
    ),
    Document("d6", "Only a title about dogs", ""),
    Document("d7", "Dog shows", "Dogs are judged at shows. Judges look at the coat, the gait and the teeth."),
    Document("d8", "Cat food", "Cats eat fish, and fish food is sold for cats and dogs in every shop."),
    Document("d9", "Speech", "Human speech is learned: children mimic their parents, as parrots do."),
    Document("d10", "Bowls", "A fish bowl is too small for a goldfish; a tank is better for fish."),
]
TOPICS = make_topics(
    [("1", "cats and dogs"), ("2", "parrots mimic speech"), ("3", "goldfish bowl size"), ("4", "zebra")]
)


def runs(index: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    columns = [QID, DOCNO, SCORE, RANK]
    bm25 = Bm25(index, k=100)(TOPICS)[columns]
    rm3 = Bm25(index, k=100, rm3=Rm3(fb_docs=3, fb_terms=5))(TOPICS)[columns]
    return bm25, rm3


@pytest.fixture(scope="module")
def jsonl_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame]:
    pytest.importorskip("pyserini")
    folder = tmp_path_factory.mktemp("jsonl")
    write_corpus(DOCS, folder / "corpus.jsonl")
    assert main(["-q", "index", "--corpus", str(folder), "--index", str(folder / "index")]) == 0
    return runs(folder / "index")


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_each_format_indexes_to_the_runs_of_its_jsonl_form(
    tmp_path: Path, fmt: str, jsonl_runs: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    folder = WRITERS[fmt](DOCS, tmp_path / fmt)
    index = tmp_path / "index"
    flags = ["--corpus-format", fmt] if fmt in ("trec", "wapo") else []  # the others detected
    assert main(["-q", "index", "--corpus", str(folder), "--index", str(index), *flags]) == 0
    bm25, rm3 = runs(index)
    assert len(bm25) == 10 and not bm25.equals(rm3)  # every document with a query word, once
    pd.testing.assert_frame_equal(bm25, jsonl_runs[0])
    pd.testing.assert_frame_equal(rm3, jsonl_runs[1])
    stored = LuceneDocs(index).get([d.docno for d in DOCS])
    for doc in DOCS:
        assert stored[doc.docno].title.split() == doc.title.split()
        assert stored[doc.docno].text.split() == doc.text.split()


# --- the same words as Anserini's readers keep (what its regressions index) --------------------

TREC_DISKS = b"""<DOC>
<DOCNO> FBIS3-10 </DOCNO>
<HT>  "cr00000011094001" </HT>
<HEADER>
<AU>   FBIS-CHI-94-001 </AU>
<H3> <TI>      Header title, which Anserini does not keep </TI></H3>
</HEADER>
<TEXT>
Language: <F P=105> English </F>
Article Type:BFN
[Text] A &amp; B met &hyph; twice; p &lt; 0.05.
</TEXT>
</DOC>
<DOC>
<DOCNO> LA010189-0010 </DOCNO>
<DOCID> 10 </DOCID>
<DATE>
<P>
January 1, 1989, Sunday, Home Edition
</P>
</DATE>
<SECTION>
<P>
Book Review; Page 1
</P>
</SECTION>
<HEADLINE>
<P>
AT THE END, A LOOK AT THE START
</P>
</HEADLINE>
<BYLINE>
<P>
By Somebody
</P>
</BYLINE>
<TEXT>
<P>
First paragraph of the text.
</P>
<P>
Second <B>paragraph</B>.
</P>
</TEXT>
</DOC>
<DOC>
<DOCNO>FT911-10</DOCNO>
<PROFILE>_AN-BEOA7AAIFT</PROFILE>
<DATE>910514
</DATE>
<HEADLINE>
FT  14 MAY 91 / Cats in the City
</HEADLINE>
<TEXT>
Cats roam the City of London.
</TEXT>
<PUB>The Financial Times
</PUB>
</DOC>
"""


def anserini_documents(collection: str, folder: Path) -> Iterator[tuple[str, str]]:
    """(id, contents) of each document Anserini's collection class reads from ``folder``."""
    from evirank.lucene.java import autoclass

    reader = autoclass(f"io.anserini.collection.{collection}")(
        autoclass("java.nio.file.Paths").get(str(folder))
    )
    paths = reader.getSegmentPaths().iterator()
    while paths.hasNext():
        documents = reader.createFileSegment(paths.next()).iterator()
        while documents.hasNext():
            document = documents.next()
            if document is not None and document.id() is not None:
                yield str(document.id()), str(document.contents())


def words(text: str) -> list[str]:
    """The words of a text, sorted, without the two characters Jsoup drops and evirank keeps (as the
    JSONL form of the same text keeps them): zero-width spaces and soft hyphens."""
    return sorted(text.replace("\u200b", "").replace("\u00ad", "").split())


def gunzip_all(folder: Path) -> None:
    """Anserini reads neither ``.xml.gz`` nor ``.jl.gz`` files: give it them plain."""
    for path in list(folder.rglob("*.gz")):
        with gzip.open(path, "rb") as source, path.with_suffix("").open("wb") as target:
            shutil.copyfileobj(source, target)
        path.unlink()


@pytest.mark.parametrize(
    ("fmt", "collection"),
    [("trec", "TrecCollection"), ("nyt", "NewYorkTimesCollection"), ("wapo", "WashingtonPostCollection")],
)
def test_the_words_of_each_document_are_those_anserinis_reader_keeps(
    tmp_path: Path, fmt: str, collection: str
) -> None:
    pytest.importorskip("pyserini")
    # The New York Times' ids are integers, and Anserini reads them as such.
    docs = [Document(str(1000001 + i), d.title, d.text) for i, d in enumerate(DOCS)] if fmt == "nyt" else DOCS
    folder = WRITERS[fmt](docs, tmp_path / fmt)
    gunzip_all(folder)
    for readme in folder.rglob("readme.txt"):
        readme.unlink()  # Anserini would read the Washington Post's as articles
    if fmt == "trec":
        (folder / "disks").mkdir()
        (folder / "disks" / "la010189").write_bytes(TREC_DISKS)
    ours = {d.docno: words(d.contents) for d in read_corpus(folder, format=fmt, empty="skip")}
    theirs = {docno: words(contents) for docno, contents in anserini_documents(collection, folder)}
    theirs = {docno: words for docno, words in theirs.items() if words}  # Anserini skips empty ones too
    assert ours == theirs
    assert len(ours) >= len(DOCS) - 1


def test_warc_pages_keep_anserinis_words_without_the_http_headers(tmp_path: Path) -> None:
    pytest.importorskip("pyserini")
    folder = WRITERS["warc"](DOCS, tmp_path / "warc")
    for plain in folder.rglob("*.warc"):  # Anserini reads .warc.gz files only
        plain.with_name(plain.name + ".gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    ours = {d.docno: d.contents.split() for d in read_corpus(folder, empty="skip")}
    theirs = dict(anserini_documents("ClueWeb09Collection", folder))
    for docno, words in ours.items():
        headers, _, page = theirs[docno].partition("Server: Apache ")
        assert headers.startswith("HTTP/1.1 200 OK") and sorted(page.split()) == sorted(words)
