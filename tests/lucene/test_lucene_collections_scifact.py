"""SciFact written out in each of the papers' formats indexes to the runs of its JSONL form.

Slow: SciFact (5,183 abstracts) is written as TREC SGML (four files, two gzipped), New York
Times XML (one file per article, a third of them in a .tgz archive), Washington Post JSON lines
and MS MARCO documents TSV; each is indexed and searched with BM25 and BM25+RM3 over the 300 test
claims. Every run must be the JSONL index's run, document for document and score for score, so
BM25 reproduces Anserini's published nDCG@10 of 0.6789.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collection_writers import write_msmarco_docs, write_nyt, write_trec, write_wapo
from evirank.cli import main
from evirank.frames import DOCNO, QID, RANK, SCORE
from evirank.io import read_corpus, read_qrels, read_topics
from evirank.lucene import Bm25, Rm3

pytestmark = [pytest.mark.slow, pytest.mark.lucene]

WRITE = {
    "trec": lambda docs, folder: write_trec(docs, folder, files=4),
    "nyt": write_nyt,
    "wapo": write_wapo,
    "msmarco-docs": write_msmarco_docs,
}


def ndcg10(run: pd.DataFrame, qrels: pd.DataFrame) -> float:
    ir_measures = pytest.importorskip("ir_measures")
    judged = [ir_measures.Qrel(q, d, int(label)) for q, d, label in qrels.itertuples(index=False)]
    scored = [
        ir_measures.ScoredDoc(q, d, -float(r)) for q, d, r in run[[QID, DOCNO, RANK]].itertuples(index=False)
    ]
    return float(ir_measures.calc_aggregate([ir_measures.nDCG @ 10], judged, scored)[ir_measures.nDCG @ 10])


def search(index: Path, topics: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    columns = [QID, DOCNO, SCORE, RANK]
    return (
        Bm25(index, threads=2)(topics)[columns],
        Bm25(index, rm3=Rm3(), threads=2)(topics)[columns],
    )


@pytest.fixture(scope="module")
def jsonl_runs(scifact: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame]:
    pytest.importorskip("pyserini")
    index = tmp_path_factory.mktemp("scifact-jsonl") / "index"
    assert main(["-q", "index", "--corpus", str(scifact), "--index", str(index), "--threads", "2"]) == 0
    return search(index, read_topics(scifact, split="test"))


def test_the_jsonl_index_reproduces_anserinis_figure(
    scifact: Path, jsonl_runs: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    assert ndcg10(jsonl_runs[0], read_qrels(scifact / "qrels" / "test.tsv")) == pytest.approx(
        0.6789, abs=5e-5
    )


@pytest.mark.parametrize("fmt", sorted(WRITE))
def test_scifact_in_each_format_indexes_to_the_jsonl_runs(
    scifact: Path, tmp_path: Path, fmt: str, jsonl_runs: tuple[pd.DataFrame, pd.DataFrame]
) -> None:
    folder = WRITE[fmt](list(read_corpus(scifact)), tmp_path / fmt)
    index = tmp_path / "index"
    argv = [
        "-q",
        "index",
        "--corpus",
        str(folder),
        "--corpus-format",
        fmt,
        "--index",
        str(index),
        "--threads",
        "2",
    ]
    assert main(argv) == 0
    bm25, rm3 = search(index, read_topics(scifact, split="test"))
    pd.testing.assert_frame_equal(bm25, jsonl_runs[0])
    pd.testing.assert_frame_equal(rm3, jsonl_runs[1])
    assert ndcg10(bm25, read_qrels(scifact / "qrels" / "test.tsv")) == pytest.approx(0.6789, abs=5e-5)


@pytest.mark.parametrize(
    ("fmt", "collection"),
    [("trec", "TrecCollection"), ("nyt", "NewYorkTimesCollection"), ("wapo", "WashingtonPostCollection")],
)
def test_every_scifact_document_keeps_the_words_of_anserinis_reader(
    scifact: Path, tmp_path: Path, fmt: str, collection: str
) -> None:
    from test_lucene_collections import anserini_documents, gunzip_all, words

    folder = WRITE[fmt](list(read_corpus(scifact)), tmp_path / fmt)
    gunzip_all(folder)  # Anserini reads neither .xml.gz nor .jl.gz
    for readme in folder.rglob("readme.txt"):
        readme.unlink()
    ours = {d.docno: words(d.contents) for d in read_corpus(folder, format=fmt)}
    theirs = {docno: words(contents) for docno, contents in anserini_documents(collection, folder)}
    assert len(ours) == 5183 and ours == theirs
