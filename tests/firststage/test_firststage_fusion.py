"""Fusion of two runs: RRF and interpolation arithmetic, the missing-document rule, the tune table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evirank.firststage import Fusion, Hybrid, fusion_table, interpolate, rrf
from evirank.frames import make_qrels, make_run
from evirank.stage import Stage

BM25 = make_run(
    [("1", "a", 12.0), ("1", "b", 10.0), ("1", "c", 8.0), ("2", "x", 5.0), ("2", "y", 3.0), ("2", "z", 1.0)]
)
DENSE = make_run([("1", "b", 0.9), ("1", "d", 0.7), ("1", "a", 0.5), ("2", "z", 0.8), ("2", "w", 0.6)])


def scores(run: pd.DataFrame, qid: str) -> dict[str, float]:
    part = run[run["qid"] == qid]
    return dict(zip(part["docno"], part["score"], strict=True))


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    fused = scores(rrf(BM25, DENSE), "1")
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63)  # BM25 rank 1, dense rank 3
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 63)  # missing from the dense run: nothing from it
    assert fused["d"] == pytest.approx(1 / 62)  # missing from BM25
    assert rrf(BM25, DENSE).query("qid == '1'")["docno"].tolist() == ["b", "a", "d", "c"]


def test_rrf_constant_and_ties_follow_the_run_order_rule() -> None:
    fused = rrf(BM25, DENSE, k=0)
    assert scores(fused, "2") == pytest.approx({"x": 1.0, "z": 1 / 3 + 1.0, "y": 0.5, "w": 0.5})
    # y and w tie at 0.5: docno descending, as everywhere
    assert fused.query("qid == '2'")["docno"].tolist() == ["z", "x", "y", "w"]


def test_rrf_ranks_by_the_run_order_not_by_a_stale_rank_column() -> None:
    shuffled = BM25.sample(frac=1.0, random_state=1).assign(rank=1)
    pd.testing.assert_frame_equal(rrf(shuffled, DENSE), rrf(BM25, DENSE))


def test_interpolation_normalises_each_run_per_query() -> None:
    fused = scores(interpolate(BM25, DENSE, 0.25), "1")
    # BM25 min-max over a, b, c: 1, 0.5, 0; dense over b, d, a: 1, 0.5, 0
    assert fused == pytest.approx(
        {"a": 0.25 * 1 + 0.75 * 0, "b": 0.25 * 0.5 + 0.75 * 1, "c": 0.0, "d": 0.75 * 0.5}
    )
    # query 2: BM25 x 1, y 0.5, z 0; dense z 1, w 0
    assert scores(interpolate(BM25, DENSE, 0.5), "2") == pytest.approx(
        {"x": 0.5, "y": 0.25, "z": 0.5, "w": 0.0}
    )


def test_interpolation_weight_ends_are_the_runs_themselves() -> None:
    only_bm25 = interpolate(BM25, DENSE, 1.0)
    # c (BM25's last) and d (not retrieved by BM25) both get 0: docno descending
    assert only_bm25.query("qid == '1'")["docno"].tolist() == ["a", "b", "d", "c"]
    only_dense = interpolate(BM25, DENSE, 0.0)
    assert only_dense.query("qid == '1'")["docno"].tolist() == ["b", "d", "c", "a"]


def test_missing_documents_get_zero_and_a_constant_run_gives_zero() -> None:
    flat = make_run([("1", "a", 2.0), ("1", "q", 2.0)])
    fused = scores(interpolate(BM25, flat, 0.5), "1")
    assert fused == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.0, "q": 0.0})
    # a query only one run retrieved for
    one_sided = interpolate(BM25, make_run([("1", "a", 1.0)]), 0.5)
    assert scores(one_sided, "2") == pytest.approx({"x": 0.5, "y": 0.25, "z": 0.0})


def test_depth_keeps_each_querys_top_documents() -> None:
    fused = rrf(BM25, DENSE, depth=2)
    assert fused.groupby("qid").size().tolist() == [2, 2]
    assert interpolate(BM25, DENSE, 0.5, depth=1)["docno"].tolist() == ["b", "z"]  # z ties x: docno desc


def test_a_run_with_a_repeated_document_is_refused() -> None:
    twice = pd.concat([BM25, BM25.head(1)], ignore_index=True)
    with pytest.raises(ValueError, match="appears twice"):
        rrf(twice, DENSE)


@pytest.mark.parametrize(
    ("spec", "method", "k", "weight"),
    [
        ("rrf", "rrf", 60, 0.5),
        ("RRF:10", "rrf", 10, 0.5),
        ("interp", "interp", 60, 0.5),
        ("interp:0.3", "interp", 60, 0.3),
    ],
)
def test_fusion_specs(spec: str, method: str, k: int, weight: float) -> None:
    fusion = Fusion.parse(spec)
    assert (fusion.method, fusion.k, fusion.weight) == (method, k, weight)
    assert Fusion.parse(fusion.spec) == fusion


@pytest.mark.parametrize("spec", ["rank", "rrf:x", "interp:1.5", "interp:0.2:1", "rrf:-1"])
def test_bad_fusion_specs_name_the_grammar(spec: str) -> None:
    with pytest.raises(ValueError, match=r"rrf|interp|weight|constant"):
        Fusion.parse(spec)


def test_fusion_table_under_maxp_ranks_exactly_as_interpolate() -> None:
    """evirank tune's maxp with alpha = w over the table is the interpolation with weight w."""
    from evirank.tune import k_folds, parse_aggregate, parse_grid
    from evirank.tune.search import cross_validate

    table = fusion_table(BM25, DENSE)
    assert table[["qid", "docno"]].values.tolist() == [
        ["1", "a"],
        ["1", "b"],
        ["1", "c"],
        ["1", "d"],
        ["2", "w"],
        ["2", "x"],
        ["2", "y"],
        ["2", "z"],
    ]
    # missing scores are that run's own minimum for the query
    row = table.set_index(["qid", "docno"])
    assert row.loc[("1", "c"), "score"] == 0.5 and row.loc[("1", "d"), "first_stage_score"] == 8.0
    qrels = make_qrels([("1", "c", 1), ("2", "w", 1)])
    for weight in (0.0, 0.3, 0.7, 1.0):
        result = cross_validate(
            table,
            qrels,
            parse_aggregate("maxp"),
            parse_grid(f"alpha={weight}"),
            k_folds(["1", "2"], k=2, seed=0),
            metric="AP",
        )
        want = interpolate(BM25, DENSE, weight)
        got = result.run[["qid", "docno", "score"]].reset_index(drop=True)
        assert got[["qid", "docno"]].values.tolist() == want[["qid", "docno"]].values.tolist()
        np.testing.assert_allclose(got["score"], want["score"], atol=1e-12)


def test_hybrid_stage_runs_both_and_fuses() -> None:
    class Fixed(Stage):
        def __init__(self, run: pd.DataFrame) -> None:
            self.run = run

        def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
            return self.run[self.run["qid"].isin(frame["qid"])]

    topics = pd.DataFrame({"qid": ["1", "2"], "query": ["q1", "q2"]})
    hybrid = Hybrid(Fixed(BM25), Fixed(DENSE), "interp:0.25", k=3)
    pd.testing.assert_frame_equal(hybrid(topics), interpolate(BM25, DENSE, 0.25, depth=3))
