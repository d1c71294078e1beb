"""Specs of the real pipeline: aggregators, segmenters, and the first stage's depth buckets (no JVM)."""

from __future__ import annotations

import pytest

from evirank.aggregate import Birch, MaxP, SumP
from evirank.segment import Sentences, Windows
from evirank.serve.build import BucketedBm25, parse_aggregate, parse_segment


def test_birch_spec_takes_top_n_alpha_and_weights() -> None:
    birch = parse_aggregate("birch:2", alpha=0.3, weights="1,0.5")
    assert isinstance(birch, Birch)
    assert (birch.top_n, birch.alpha, birch.weights, birch.normalise) == (2, 0.3, (1.0, 0.5), "minmax")
    default = parse_aggregate("birch")
    assert (default.top_n, default.alpha, default.weights) == (3, 0.5, (1.0, 0.5, 0.25))


def test_other_aggregators_use_evidence_only_unless_alpha_is_given() -> None:
    maxp = parse_aggregate("MaxP")
    assert isinstance(maxp, MaxP) and (maxp.alpha, maxp.normalise) == (0.0, "none")
    sump = parse_aggregate("sump", alpha=0.2)
    assert isinstance(sump, SumP) and (sump.alpha, sump.normalise) == (0.2, "minmax")


@pytest.mark.parametrize("spec", ["best", "maxp:3", "birch:x", "birch:2:1"])
def test_bad_aggregate_specs_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="aggregate"):
        parse_aggregate(spec)


def test_segment_specs() -> None:
    assert isinstance(parse_segment("sentences", "prepend"), Sentences)
    windows = parse_segment("windows:100:50", "segment")
    assert isinstance(windows, Windows) and (windows.length, windows.stride) == (100, 50)
    assert parse_segment("sentences", "skip").title == "skip"
    assert parse_segment("windows", "skip").title is False and parse_segment("windows", "prepend").title
    assert parse_segment("whole", "prepend").title == "prepend"
    assert parse_segment("whole", "skip").title == "skip"
    with pytest.raises(ValueError, match="segment"):
        parse_segment("paragraphs", "prepend")
    with pytest.raises(ValueError, match="title"):
        parse_segment("sentences", "first")


def test_depths_round_up_to_a_few_buckets() -> None:
    first = BucketedBm25("/nonexistent", max_depth=100)
    assert first.buckets == (10, 20, 50, 100)
    stages = {depth: first.stage(depth) for depth in (1, 10, 11, 20, 37, 100)}
    assert {d: s.config.k for d, s in stages.items()} == {1: 10, 10: 10, 11: 20, 20: 20, 37: 50, 100: 100}
    assert stages[1] is stages[10] and all(s.config.fetch_text == s.config.k for s in stages.values())
    assert BucketedBm25("/x", max_depth=30).buckets == (10, 20, 30)
