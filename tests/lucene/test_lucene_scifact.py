"""SciFact test with Anserini's defaults: its published BM25 figures, and BM25+RM3.

Slow (indexes 5,183 abstracts and searches 300 queries twice). Evaluated with ir_measures,
giving each document its rank as the score so that the run's own tie order is evaluated.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evirank.frames import DOCNO, QID, RANK
from evirank.io import read_corpus, read_qrels, read_topics
from evirank.lucene import Bm25, LuceneDocs, Rm3, build_index

pytestmark = [pytest.mark.slow, pytest.mark.lucene]


def evaluate(run: pd.DataFrame, qrels: pd.DataFrame) -> dict[str, float]:
    ir_measures = pytest.importorskip("ir_measures")
    judged = [ir_measures.Qrel(q, d, int(label)) for q, d, label in qrels.itertuples(index=False)]
    scored = [
        ir_measures.ScoredDoc(q, d, -float(r)) for q, d, r in run[[QID, DOCNO, RANK]].itertuples(index=False)
    ]
    result = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.R @ 100], judged, scored)
    return {str(k): float(v) for k, v in result.items()}


@pytest.fixture(scope="module")
def scifact_index(scifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("pyserini")
    path = tmp_path_factory.mktemp("scifact") / "index"
    info = build_index(read_corpus(scifact), path, threads=2)
    assert info.documents == 5183
    return path


def test_bm25_reproduces_anserinis_scifact_figures(scifact: Path, scifact_index: Path) -> None:
    topics = read_topics(scifact, split="test")
    run = Bm25(scifact_index, threads=2)(topics)
    assert len(topics) == 300 and run.groupby(QID).size().max() == 1000
    scores = evaluate(run, read_qrels(scifact / "qrels" / "test.tsv"))
    assert scores["nDCG@10"] == pytest.approx(0.6789, abs=0.002)
    assert scores["R@100"] == pytest.approx(0.9253, abs=0.002)


def test_bm25_rm3_runs_and_matches_the_measured_figure(scifact: Path, scifact_index: Path) -> None:
    topics = read_topics(scifact, split="test")
    run = Bm25(scifact_index, rm3=Rm3(), threads=2)(topics)
    scores = evaluate(run, read_qrels(scifact / "qrels" / "test.tsv"))
    assert scores["nDCG@10"] == pytest.approx(0.6457, abs=0.002)


def test_stored_documents_read_back_as_indexed(scifact: Path, scifact_index: Path) -> None:
    first = next(iter(read_corpus(scifact)))
    assert LuceneDocs(scifact_index)[first.docno] == first
