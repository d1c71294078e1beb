"""The one-query fast paths a search request takes give the same frames as the general paths."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import evirank.aggregate.tail as tail_module
from evirank.aggregate.tail import merge_tail
from evirank.frames import DOCNO, QID, QUERY, RANK, SCORE, make_run, sort_run


def one_query(seed: int, n: int = 25) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            QID: "7",
            DOCNO: [f"d{i}" for i in rng.integers(0, n // 2, n)],  # repeated docnos
            SCORE: rng.integers(0, 4, n).astype(float),  # many tied scores
            "text": [f"t{i}" for i in range(n)],  # rows otherwise identical stay in input order
        }
    )


@pytest.mark.parametrize("seed", range(20))
def test_one_query_sorts_as_it_does_among_others(seed: int) -> None:
    run = one_query(seed)
    other = one_query(seed + 100).assign(**{QID: "10"})
    among = sort_run(pd.concat([other, run], ignore_index=True))
    expected = among[among[QID] == "7"].reset_index(drop=True)
    alone = sort_run(run)
    pd.testing.assert_frame_equal(alone, expected, check_exact=True)
    assert alone[RANK].tolist() == list(range(1, len(run) + 1))


def test_an_empty_run_sorts_to_an_empty_run_with_ranks() -> None:
    empty = sort_run(make_run([]).drop(columns=RANK))
    assert empty.empty and empty[RANK].dtype == np.int64


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("with_query", [True, False])
def test_merge_tail_without_a_tail_equals_the_general_path(
    seed: int, with_query: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    docnos = [f"d{i}" for i in rng.permutation(12)]
    original = make_run([("q1", d, float(s)) for d, s in zip(docnos, rng.integers(0, 5, 12), strict=True)])
    if with_query:
        original = original.assign(**{QUERY: "cats"})
    reranked = make_run([("q1", d, float(s)) for d, s in zip(docnos, rng.random(12), strict=True)])
    if seed % 2:
        reranked = reranked.assign(first_stage_score=0.5)  # kept as given, as the general path does
    fast = merge_tail(reranked, original)
    monkeypatch.setattr(tail_module, "_without_tail", lambda head, first: None)
    general = merge_tail(reranked, original)
    pd.testing.assert_frame_equal(fast, general, check_exact=True)


def test_merge_tail_with_documents_below_the_depth_takes_the_general_path() -> None:
    original = make_run([("1", "a", 9.0), ("1", "b", 8.0), ("1", "c", 7.0)])
    reranked = make_run([("1", "b", 0.9), ("1", "a", 0.1)])
    assert merge_tail(reranked, original)[DOCNO].tolist() == ["b", "a", "c"]


def test_merge_tail_with_a_reranked_document_the_run_lacks_equals_the_general_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = make_run([("1", "a", 9.0), ("1", "b", 8.0)])
    reranked = make_run([("1", "b", 0.9), ("1", "zz", 0.5), ("1", "a", 0.1)])
    fast = merge_tail(reranked, original)
    monkeypatch.setattr(tail_module, "_without_tail", lambda head, first: None)
    pd.testing.assert_frame_equal(fast, merge_tail(reranked, original), check_exact=True)


def test_one_query_with_nan_scores_or_number_docnos_sorts_as_among_others() -> None:
    run = pd.DataFrame({QID: "7", DOCNO: ["b", "a", "c", "a"], SCORE: [1.0, np.nan, 1.0, 2.0]})
    numbers = pd.DataFrame({QID: "7", DOCNO: [3, 1, 2], SCORE: [1.0, 1.0, 0.5]})
    for frame in (run, numbers):
        other = frame.assign(**{QID: "10"})
        among = sort_run(pd.concat([other, frame], ignore_index=True))
        expected = among[among[QID] == "7"].reset_index(drop=True)
        pd.testing.assert_frame_equal(sort_run(frame), expected, check_exact=True)
