"""The service with several scorers' evidence: a cross-encoder and a bi-encoder reading stored vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from evirank.aggregate import MultiEvidence
from evirank.score.multi import Scorers
from evirank.serve.build import build_searcher


def test_a_service_combines_a_cross_encoder_and_a_bi_encoder_by_lookup(
    embedded_index: Path, tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path
) -> None:
    searcher = build_searcher(
        embedded_index,
        device="cpu",
        aggregate="maxp",
        alpha=0.2,
        scorers=[f"cross:{tiny_cross_encoder_path}", f"bi:{tiny_bi_encoder_path}"],
        scorer_weights=["bi=0.4"],
    )
    assert isinstance(searcher.scorer, Scorers) and isinstance(searcher.aggregator, MultiEvidence)
    assert searcher.aggregator.evidence_weights() == {"cross": pytest.approx(0.6), "bi": pytest.approx(0.4)}
    assert searcher.info["scorer"] == "cross+bi" and "vectors" in searcher.info
    result = searcher.search("where did the cat sit", top=3, depth=4)
    assert 1 <= len(result.candidates) <= 3
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    cross, bi = searcher.scorer.scorers
    assert bi.stats_.cached == result.passages  # the bi-encoder scored every passage by lookup
    assert cross.stats_.rows == result.passages


def test_bad_scorer_specs_of_the_service_are_refused(
    embedded_index: Path, tiny_bi_encoder_path: Path
) -> None:
    with pytest.raises(ValueError, match="needs its model"):
        build_searcher(embedded_index, device="cpu", scorers=["cross", "bi"])
    with pytest.raises(ValueError, match="no scorer labelled"):
        build_searcher(
            embedded_index,
            device="cpu",
            scorers=[f"bi:{tiny_bi_encoder_path}", f"b2=bi:{tiny_bi_encoder_path}"],
            scorer_weights="b3=0.5",
        )
