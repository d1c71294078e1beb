"""Aggregators: hand-checked arithmetic, normalisation, ties, determinism, vectorised core, tail merging."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from evirank.aggregate import (
    Birch,
    FirstP,
    MaxP,
    MeanP,
    RerankTop,
    SumP,
    birch_scores,
    merge_tail,
    minmax_by_group,
    top_passage_matrix,
)
from evirank.errors import ColumnsError
from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    TEXT,
    make_run,
)
from evirank.stage import Stage


def passages_frame(rows: list[tuple[str, str, int, float, float]]) -> pd.DataFrame:
    """Rows (qid, docno, pid, passage score, first-stage score)."""
    frame = pd.DataFrame(rows, columns=[QID, DOCNO, PID, SCORE, FIRST_STAGE_SCORE])
    frame[QUERY] = "query " + frame[QID]
    frame[TEXT] = "passage"
    ranks = frame.drop_duplicates([QID, DOCNO]).copy()
    ranks[RANK] = ranks.groupby(QID)[FIRST_STAGE_SCORE].rank(ascending=False, method="first").astype(int)
    return frame.merge(ranks[[QID, DOCNO, RANK]], on=[QID, DOCNO]).rename(columns={RANK: FIRST_STAGE_RANK})


# doc a: passages 0.2 (pid 0), 0.9, 0.4; doc b: 0.5 (pid 0), 0.5; doc c: one passage 0.95
PASSAGES = passages_frame(
    [
        ("1", "a", 0, 0.2, 10.0),
        ("1", "a", 1, 0.9, 10.0),
        ("1", "a", 2, 0.4, 10.0),
        ("1", "b", 0, 0.5, 12.0),
        ("1", "b", 1, 0.5, 12.0),
        ("1", "c", 0, 0.95, 4.0),
        ("2", "a", 0, -1.0, 3.0),
        ("2", "x", 0, 2.0, 1.0),
    ]
)


def scores_of(run: pd.DataFrame, qid: str = "1") -> dict[str, float]:
    part = run[run[QID] == qid]
    return dict(zip(part[DOCNO], part[SCORE], strict=True))


def test_maxp_firstp_sump_meanp_arithmetic() -> None:
    assert scores_of(MaxP(normalise="none")(PASSAGES)) == pytest.approx({"a": 0.9, "b": 0.5, "c": 0.95})
    assert scores_of(FirstP(normalise="none")(PASSAGES)) == pytest.approx({"a": 0.2, "b": 0.5, "c": 0.95})
    assert scores_of(SumP(normalise="none")(PASSAGES)) == pytest.approx({"a": 1.5, "b": 1.0, "c": 0.95})
    assert scores_of(MeanP(normalise="none")(PASSAGES)) == pytest.approx({"a": 0.5, "b": 0.5, "c": 0.95})
    assert scores_of(MaxP(normalise="none")(PASSAGES), "2") == pytest.approx({"a": -1.0, "x": 2.0})


def test_firstp_takes_the_smallest_pid_whatever_the_row_order() -> None:
    shuffled = PASSAGES.sample(frac=1.0, random_state=0)
    assert scores_of(FirstP(normalise="none")(shuffled)) == pytest.approx({"a": 0.2, "b": 0.5, "c": 0.95})
    no_pid_zero = PASSAGES[~((PASSAGES[DOCNO] == "a") & (PASSAGES[PID] == 0))]
    assert scores_of(FirstP(normalise="none")(no_pid_zero))["a"] == pytest.approx(0.9)


def test_birch_raw_scores_with_fewer_passages_than_n_counting_zero() -> None:
    run = Birch(top_n=3, alpha=0.3, weights=(1.0, 0.5, 0.25), normalise="none")(PASSAGES)
    expected = {
        "a": 0.3 * 10 + 0.7 * (0.9 + 0.5 * 0.4 + 0.25 * 0.2),
        "b": 0.3 * 12 + 0.7 * (0.5 + 0.5 * 0.5 + 0.0),
        "c": 0.3 * 4 + 0.7 * 0.95,
    }
    assert scores_of(run) == pytest.approx(expected)
    assert scores_of(run, "2") == pytest.approx({"a": 0.3 * 3 + 0.7 * -1.0, "x": 0.3 * 1 + 0.7 * 2.0})


def test_birch_minmax_normalises_first_stage_and_all_passages_per_query() -> None:
    run = Birch(top_n=2, alpha=0.5, weights=(1.0, 0.5), normalise="minmax")(PASSAGES)
    # query 1: first stage 4..12; passages 0.2..0.95 (all passages of the query)
    fs = {"a": (10 - 4) / 8, "b": 1.0, "c": 0.0}
    p = {s: (s - 0.2) / 0.75 for s in (0.2, 0.9, 0.4, 0.5, 0.95)}
    expected = {
        "a": 0.5 * fs["a"] + 0.5 * (p[0.9] + 0.5 * p[0.4]),
        "b": 0.5 * fs["b"] + 0.5 * (p[0.5] + 0.5 * p[0.5]),
        "c": 0.5 * fs["c"] + 0.5 * p[0.95],
    }
    assert scores_of(run) == pytest.approx(expected)
    # query 2: two documents, one passage each: normalised to 1 (x) and 0 (a) on both sides
    assert scores_of(run, "2") == pytest.approx({"a": 0.5 * 1.0 + 0.0, "x": 0.0 + 0.5 * 1.0})


def test_minmax_maps_constant_groups_to_zero() -> None:
    out = minmax_by_group(np.array([2.0, 2.0, 1.0, 3.0]), np.array([0, 0, 1, 1]))
    assert out.tolist() == [0.0, 0.0, 0.0, 1.0]


def test_interpolation_option_on_simple_aggregators() -> None:
    run = MaxP(alpha=0.25, normalise="none")(PASSAGES)
    assert scores_of(run) == pytest.approx({"a": 2.5 + 0.675, "b": 3.0 + 0.375, "c": 1.0 + 0.7125})
    assert scores_of(MaxP(alpha=1.0, normalise="none")(PASSAGES)) == pytest.approx(
        {"a": 10.0, "b": 12.0, "c": 4.0}
    )


def test_ties_follow_the_project_rule_docno_descending_and_output_is_a_sorted_run() -> None:
    tied = passages_frame([("1", "m", 0, 0.5, 2.0), ("1", "b", 0, 0.5, 3.0), ("1", "z", 0, 0.5, 1.0)])
    run = MaxP()(tied)
    assert run[DOCNO].tolist() == ["z", "m", "b"]  # evirank.frames.sort_run: trec_eval's tie rule
    assert run[RANK].tolist() == [1, 2, 3]
    assert run.columns.tolist() == [QID, QUERY, DOCNO, SCORE, RANK, FIRST_STAGE_SCORE, FIRST_STAGE_RANK]
    assert run[FIRST_STAGE_SCORE].tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("stage", [MaxP(), FirstP(), SumP(), MeanP(), Birch(), Birch(normalise="none")])
def test_aggregation_is_deterministic_under_row_order(stage: Stage) -> None:
    reference = stage(PASSAGES)
    for seed in range(3):
        shuffled = PASSAGES.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        pd.testing.assert_frame_equal(stage(shuffled), reference)


def test_aggregators_do_not_mutate_their_input() -> None:
    before = PASSAGES.copy()
    Birch()(PASSAGES)
    pd.testing.assert_frame_equal(PASSAGES, before)


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ColumnsError, match=FIRST_STAGE_SCORE):
        Birch()(PASSAGES.drop(columns=[FIRST_STAGE_SCORE]))
    assert len(MaxP()(PASSAGES.drop(columns=[FIRST_STAGE_SCORE]))) == 5  # alpha = 0 needs no first stage
    with pytest.raises(ValueError, match="finite"):
        MaxP()(PASSAGES.assign(**{SCORE: np.nan}))
    with pytest.raises(ValueError, match="weights"):
        Birch(top_n=3, weights=(1.0, 0.5))
    with pytest.raises(ValueError, match="alpha"):
        Birch(alpha=1.5)
    with pytest.raises(ValueError, match="normalise"):
        MaxP(normalise="zscore")  # type: ignore[arg-type]


# --- the vectorised core ------------------------------------------------------------------
def test_top_passage_matrix_pads_sorts_and_orders_keys() -> None:
    table = top_passage_matrix(PASSAGES, n=3)
    keys = table.keys[[QID, DOCNO]].values.tolist()
    assert keys == [["1", "a"], ["1", "b"], ["1", "c"], ["2", "a"], ["2", "x"]]
    assert table.top.tolist() == [
        [0.9, 0.4, 0.2],
        [0.5, 0.5, 0.0],
        [0.95, 0.0, 0.0],
        [-1.0, 0.0, 0.0],
        [2.0, 0.0, 0.0],
    ]
    assert table.s_doc.tolist() == [10.0, 12.0, 4.0, 3.0, 1.0]
    assert table.n_passages.tolist() == [3, 2, 1, 1, 1]


def test_birch_scores_broadcasts_over_settings_like_a_loop() -> None:
    table = top_passage_matrix(PASSAGES, n=3, normalise="minmax")
    alphas = np.round(np.arange(0, 1.01, 0.1), 1)
    grid = np.array([(1.0, w2, w3) for w2, w3 in itertools.product(alphas, alphas)])
    full = birch_scores(table.s_doc, table.top, alphas[:, None], grid)
    assert full.shape == (len(alphas), len(grid), len(table.s_doc))
    pair_alphas = alphas[:, None].repeat(len(grid), 1).ravel()
    paired = birch_scores(table.s_doc, table.top, pair_alphas, np.tile(grid, (len(alphas), 1)))
    assert paired.shape == (len(alphas) * len(grid), len(table.s_doc))
    for i, j in [(0, 0), (3, 17), (10, 120)]:
        loop = alphas[i] * table.s_doc + (1 - alphas[i]) * (table.top @ grid[j])
        np.testing.assert_allclose(full[i, j], loop)
        np.testing.assert_allclose(paired[i * len(grid) + j], loop)


def test_birch_stage_and_core_share_the_arithmetic() -> None:
    stage = Birch(top_n=3, alpha=0.7, weights=(1.0, 0.2, 0.9), normalise="minmax")
    table = top_passage_matrix(PASSAGES, n=3, normalise="minmax")
    by_core = table.keys.assign(score=birch_scores(table.s_doc, table.top, 0.7, [1.0, 0.2, 0.9]))
    merged = stage(PASSAGES).merge(by_core, on=[QID, DOCNO], suffixes=("", "_core"))
    np.testing.assert_array_equal(merged[SCORE], merged["score_core"])


def test_birch_scores_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="weights"):
        birch_scores(np.zeros(2), np.zeros((2, 3)), 0.5, [1.0, 0.5])
    with pytest.raises(ValueError, match="s_doc"):
        birch_scores(np.zeros(3), np.zeros((2, 3)), 0.5, [1.0, 0.5, 0.2])


# --- the tail beyond the re-rank depth ----------------------------------------------------
ORIGINAL = make_run(
    [
        ("1", "a", 9.0),
        ("1", "b", 8.0),
        ("1", "c", 7.0),
        ("1", "d", 7.0),
        ("1", "e", 5.0),
        ("2", "x", 3.0),
        ("2", "y", 2.0),
    ]
)


def test_merge_tail_keeps_first_stage_order_strictly_below_the_reranked() -> None:
    reranked = make_run([("1", "b", 0.8), ("1", "a", 0.1)])
    merged = merge_tail(reranked, ORIGINAL)
    q1 = merged[merged[QID] == "1"]
    tail_order = ORIGINAL[(ORIGINAL[QID] == "1") & ~ORIGINAL[DOCNO].isin(["a", "b"])][DOCNO].tolist()
    assert q1[DOCNO].tolist() == ["b", "a", *tail_order]
    # strictly below 0.1; c and d (tied first-stage scores) stay apart, in first-stage rank order
    assert q1[SCORE].tolist()[2:] == [-0.9, -1.9, -2.9]
    assert q1[FIRST_STAGE_SCORE].tolist() == [8.0, 9.0, 7.0, 7.0, 5.0]
    assert q1[FIRST_STAGE_RANK].tolist() == [2, 1, 3, 4, 5]
    q2 = merged[merged[QID] == "2"]  # no re-ranked document: original scores kept
    assert q2[[DOCNO, SCORE, RANK]].values.tolist() == [["x", 3.0, 1], ["y", 2.0, 2]]


def test_merge_tail_follows_the_original_ranks_even_against_docno_order() -> None:
    original = pd.DataFrame({QID: ["1"] * 3, DOCNO: ["z", "a", "m"], SCORE: [5.0, 5.0, 5.0], RANK: [1, 2, 3]})
    merged = merge_tail(make_run([("1", "z", 1.0)]), original)
    assert merged[DOCNO].tolist() == ["z", "a", "m"]


def test_rerank_top_rescores_only_the_top_depth() -> None:
    seen: list[int] = []

    class Reverse(Stage):
        def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
            seen.append(len(frame))
            return make_run(frame.assign(**{SCORE: -frame[SCORE]}))

    out = RerankTop(Reverse(), depth=2)(ORIGINAL)
    assert seen == [4]
    first_stage = ORIGINAL[ORIGINAL[QID] == "1"][DOCNO].tolist()
    assert out[out[QID] == "1"][DOCNO].tolist() == ["b", "a", *first_stage[2:]]
    assert out[out[QID] == "2"][DOCNO].tolist() == ["y", "x"]
    assert (out.groupby(QID)[RANK].apply(list) == pd.Series({"1": [1, 2, 3, 4, 5], "2": [1, 2]})).all()


def test_segment_score_aggregate_pipeline_keeps_every_document() -> None:
    from evirank.segment import Sentences

    class TermOverlap(Stage):
        """A stand-in scorer: how many query words a passage contains."""

        def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
            overlap = [
                len(set(q.lower().split()) & set(t.lower().replace(".", "").split()))
                for q, t in zip(frame[QUERY], frame[TEXT], strict=True)
            ]
            return frame.assign(**{SCORE: np.asarray(overlap, dtype=float)})

    run = make_run([("1", "d1", 3.0), ("1", "d2", 2.0), ("1", "d3", 1.0), ("1", "d4", 0.5)])
    run[QUERY] = "solar wind"
    run[TEXT] = ["Nothing here. Still nothing.", "The solar wind blows. Other text.", "", "Wind only."]
    pipeline = RerankTop(Sentences() >> TermOverlap() >> Birch(top_n=2, alpha=0.0, weights=(1, 1)), depth=3)
    out = pipeline(run)
    # d2 matches; d1 and d3 (no text) tie at 0 and follow the tie rule; d4 is beyond the depth
    assert out[DOCNO].tolist() == ["d2", "d3", "d1", "d4"]
    assert out[SCORE].tolist()[-1] < out[SCORE].tolist()[-2]
