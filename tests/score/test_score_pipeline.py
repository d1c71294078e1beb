"""The scorers compose with the segmenters and aggregators: run >> Sentences >> scorer >> MaxP."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evirank.aggregate import MaxP
from evirank.config import Runtime
from evirank.frames import DOCNO, QID, QUERY, RANK, SCORE, TEXT
from evirank.score import BiEncoder, CrossEncoder, ScoreStore, explain
from evirank.segment import Sentences


def candidate_run() -> pd.DataFrame:
    return pd.DataFrame(
        {
            QID: ["1", "1", "2"],
            QUERY: ["where did the cat sit", "where did the cat sit", "bm25 ranking"],
            DOCNO: ["d1", "d2", "d1"],
            SCORE: [3.0, 2.0, 1.0],
            RANK: [1, 2, 1],
            TEXT: ["The cat sat on the mat. Dogs bark.", "BM25 ranks documents. It is old.", "The cat sat."],
        }
    )


def test_sentences_then_scorer_then_maxp_gives_a_run(
    tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    store = tmp_path / "s.sqlite"
    for scorer in (
        CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", store=store)),
        BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu", store=store)),
    ):
        run = (Sentences() >> scorer >> MaxP(normalise="none"))(candidate_run())
        assert sorted(zip(run[QID], run[DOCNO], strict=True)) == [("1", "d1"), ("1", "d2"), ("2", "d1")]
        best = explain(store, "1", "d1", fingerprint=scorer.fingerprint)
        doc_score = run[(run[QID] == "1") & (run[DOCNO] == "d1")][SCORE].iloc[0]
        assert best[SCORE].iloc[0] == doc_score  # MaxP: the document's score is its best sentence
    with ScoreStore(store, readonly=True) as opened:
        assert len(opened.fingerprints()) == 2
