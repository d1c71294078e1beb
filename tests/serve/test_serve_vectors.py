"""The service over an index with stored passage vectors: passages and vectors by lookup, the cascade."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from evirank.serve.app import create_app
from evirank.serve.build import build_searcher
from evirank.vectors import VectorsMismatchError
from evirank.vectors.segments import StoredSegments


@pytest.fixture(scope="module")
def searcher(embedded_index: Path, tiny_bi_encoder_path: Path) -> Any:
    return build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu", aggregate="maxp")


def test_a_bi_encoder_service_reads_stored_passages_and_vectors(searcher: Any) -> None:
    assert isinstance(searcher.segmenter, StoredSegments)
    result = searcher.search("where did the cat sit", top=2, depth=4)
    assert len(result.candidates) == 2
    assert searcher.scorer.stats_.cached == result.passages  # every passage by lookup
    assert searcher.scorer.stats_.computed == 1  # the query alone went through the model
    best = result.candidates[0].evidence[0]
    assert best.start is not None  # located in the document for highlighting
    assert "stored passage vectors" in searcher.info["evidence"]


def test_vectors_of_another_segmenter_or_model_are_refused(
    embedded_index: Path, tiny_bi_encoder_path: Path
) -> None:
    with pytest.raises(VectorsMismatchError, match=r"sentences:segment.*--vectors none"):
        build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu", segment="sentences")
    with pytest.raises(VectorsMismatchError, match="the model differs"):
        build_searcher(embedded_index, device="cpu")
    plain = build_searcher(
        embedded_index, model=str(tiny_bi_encoder_path), device="cpu", segment="sentences", vectors="none"
    )
    assert not isinstance(plain.segmenter, StoredSegments)


def test_a_cross_encoder_cascade_scores_only_the_kept_passages(
    embedded_index: Path, tiny_cross_encoder_path: Path
) -> None:
    with pytest.raises(ValueError, match="--prune 2 keeps only 2"):
        build_searcher(
            embedded_index, model=str(tiny_cross_encoder_path), scorer="cross", aggregate="birch:3", prune=2
        )
    searcher = build_searcher(
        embedded_index, model=str(tiny_cross_encoder_path), scorer="cross", prune=1, aggregate="maxp"
    )
    result = searcher.search("cat mat", top=3, depth=4)
    assert result.passages == len(result.candidates) == 2  # one per document reached the model
    assert all(len(c.evidence) == 1 for c in result.candidates)
    assert "1 best passages by bm25" in searcher.info["evidence"]


def test_the_page_says_which_model_made_the_evidence_and_how_long_it_took(searcher: Any) -> None:
    from fastapi.testclient import TestClient

    page = TestClient(create_app(searcher)).get("/", params={"q": "cat mat", "depth": 4, "top": 2}).text
    assert "evidence by" in page and "tiny-bi" in page and "stored passage vectors" in page
    assert "answered in" in page and "<mark" in page


def test_a_service_that_embeds_only_queries_runs_its_model_on_one_thread() -> None:
    torch = pytest.importorskip("torch")
    from evirank.cli.serve import set_model_threads

    before = torch.get_num_threads()
    try:
        stored = {"scorer": "bi", "evidence": "stored passage vectors: only the query is embedded"}
        assert set_model_threads(None, stored) == 1 and torch.get_num_threads() == 1
        assert set_model_threads(None, {"scorer": "cross", "evidence": "cross-encoder on ..."}) is None
        assert set_model_threads(2, {"scorer": "cross"}) == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_without_segment_the_service_follows_the_stored_vectors_segmenter(
    embedded_index: Path, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    from evirank.cli import main

    whole = tmp_path / "whole-vectors"
    args = ["-q", "embed", "--index", str(embedded_index), "--segment", "whole", "--output", str(whole)]
    assert main([*args, "--model", str(tiny_bi_encoder_path), "--device", "cpu"]) == 0
    model = str(tiny_bi_encoder_path)
    searcher = build_searcher(embedded_index, model=model, device="cpu", vectors=str(whole))
    assert isinstance(searcher.segmenter, StoredSegments)
    assert searcher.info["segment"] == "whole:prepend"
    with pytest.raises(VectorsMismatchError, match="segmenter differs"):
        build_searcher(
            embedded_index, model=model, device="cpu", vectors=str(whole), segment="sentences:prepend"
        )
