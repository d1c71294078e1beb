"""Specs of the real pipeline: aggregators, segmenters, and one opened index for every stage (no JVM)."""

from __future__ import annotations

import pytest

from evirank.aggregate import Birch, MaxP, SumP, parse_aggregate


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


def test_one_collection_opens_one_searcher_for_every_depth_and_the_document_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from evirank.lucene import search
    from evirank.pipeline import Collection

    opened: list[tuple[str, float, float, object]] = []

    class FakeSearcher:
        closed = False

        def close(self) -> None:
            self.closed = True

    def open_searcher(index: object, k1: float = 0.9, b: float = 0.4, rm3: object = None) -> FakeSearcher:
        opened.append((str(index), k1, b, rm3))
        return FakeSearcher()

    monkeypatch.setattr(search, "open_searcher", open_searcher)
    collection = Collection("/indexes/demo")
    stages = [collection.bm25(k=depth, fetch_text=depth) for depth in (5, 20, 100)]
    searchers = {id(stage._open()) for stage in stages}
    docs = collection.docs
    assert docs._shared is not None and id(docs._shared()) in searchers
    assert len(searchers) == 1 and len(opened) == 1
    assert [s.config.k for s in stages] == [5, 20, 100]
    for stage in stages:
        stage.close()  # a stage lets go of a shared searcher without closing it
    shared = stages[0]._shared()
    assert not shared.closed
    collection.close()
    assert shared.closed
