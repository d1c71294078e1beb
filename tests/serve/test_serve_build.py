"""Specs of the real pipeline: aggregators, segmenters, and the first stage's depth buckets (no JVM)."""

from __future__ import annotations

import pytest

from evirank.aggregate import Birch, MaxP, SumP, parse_aggregate
from evirank.serve.build import BucketedBm25, serve_segmenter


def test_serve_parses_aggregates_with_the_shared_parser_and_default_normalisation() -> None:
    birch = parse_aggregate("birch:2", alpha=0.3, weights="1,0.5")
    assert isinstance(birch, Birch)
    assert (birch.top_n, birch.alpha, birch.weights, birch.normalise) == (2, 0.3, (1.0, 0.5), "minmax")
    default = parse_aggregate("birch")
    assert (default.top_n, default.alpha, default.weights) == (3, 0.5, (1.0, 0.5, 0.25))
    maxp = parse_aggregate("MaxP")
    assert isinstance(maxp, MaxP) and (maxp.alpha, maxp.normalise) == (0.0, "minmax")
    sump = parse_aggregate("sump", alpha=0.2)
    assert isinstance(sump, SumP) and (sump.alpha, sump.normalise) == (0.2, "minmax")


@pytest.mark.parametrize("spec", ["best", "maxp:3", "birch:x", "birch:2:1"])
def test_bad_aggregate_specs_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match=r"aggregat|birch"):
        parse_aggregate(spec)


def test_segment_specs_are_rerank_grammar_and_title_is_a_deprecated_override(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert serve_segmenter("sentences:prepend").spec == "sentences:prepend"
    assert serve_segmenter("windows:100:50").spec == "windows:100:50"
    assert serve_segmenter("whole:skip").spec == "whole:skip"
    with caplog.at_level("WARNING"):
        assert serve_segmenter("sentences", "prepend").spec == "sentences:prepend"
    assert "--segment sentences:prepend" in caplog.text
    assert serve_segmenter("sentences", "skip").spec == "sentences:skip"
    assert serve_segmenter("windows:100:50", "segment").spec == "windows:100:50"
    assert serve_segmenter("windows", "skip").spec == "windows:150:75:skip"
    assert serve_segmenter("whole", "skip").spec == "whole:skip"
    with pytest.raises(ValueError, match="segment"):
        serve_segmenter("paragraphs")
    with pytest.raises(ValueError, match="title"):
        serve_segmenter("sentences", "first")


def test_depths_round_up_to_a_few_buckets() -> None:
    first = BucketedBm25("/nonexistent", max_depth=100)
    assert first.buckets == (10, 20, 50, 100)
    stages = {depth: first.stage(depth) for depth in (1, 10, 11, 20, 37, 100)}
    assert {d: s.config.k for d, s in stages.items()} == {1: 10, 10: 10, 11: 20, 20: 20, 37: 50, 100: 100}
    assert stages[1] is stages[10] and all(s.config.fetch_text == s.config.k for s in stages.values())
    assert BucketedBm25("/x", max_depth=30).buckets == (10, 20, 30)
