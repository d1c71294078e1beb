"""Measures with trec_eval semantics: hand-computed values, ties, missing queries, bad input."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.evaluate import (
    EvaluationError,
    Evaluator,
    MeasureError,
    evaluate,
    parse_measure,
    parse_measures,
    per_query,
)
from evirank.frames import DOCNO, LABEL, MEASURE, QID, RANK, SCORE, VALUE, make_qrels, make_run

# q1: d1 (1), d3 (2), d5 (1) relevant, d2 judged non-relevant; q2: x1 relevant.
QRELS = make_qrels([("1", "d1", 1), ("1", "d2", 0), ("1", "d3", 2), ("1", "d5", 1), ("2", "x1", 1)])
# q1 ranks d1 d2 d3 d4 d5; q2 ranks y then x1.
RUN = make_run(
    [
        ("1", "d1", 5.0),
        ("1", "d2", 4.0),
        ("1", "d3", 3.0),
        ("1", "d4", 2.0),
        ("1", "d5", 1.0),
        ("2", "y", 2.0),
        ("2", "x1", 1.0),
    ]
)
LOG2_3 = math.log2(3)


def values(table: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {(q, m): v for q, m, v in table[[QID, MEASURE, VALUE]].itertuples(index=False)}


def test_hand_computed_ap_precision_ndcg_rr_recall_per_query() -> None:
    table = per_query(RUN, QRELS, ["AP", "P@2", "P@20", "nDCG@3", "RR@10", "R@2"])
    got = values(table)
    # q1: relevant at ranks 1, 3, 5 of 3 relevant -> (1/1 + 2/3 + 3/5) / 3
    assert got[("1", "AP")] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert got[("1", "P@2")] == pytest.approx(0.5)
    assert got[("1", "P@20")] == pytest.approx(3 / 20)  # trec_eval divides by k, not by the docs retrieved
    # DCG@3 = 1/log2(2) + 0 + 2/log2(4) = 2; ideal gains 2, 1, 1 -> 2 + 1/log2(3) + 1/2
    assert got[("1", "nDCG@3")] == pytest.approx(2 / (2 + 1 / LOG2_3 + 0.5))
    assert got[("1", "RR@10")] == pytest.approx(1.0)
    assert got[("1", "R@2")] == pytest.approx(1 / 3)
    # q2: the only relevant document at rank 2
    assert got[("2", "AP")] == pytest.approx(0.5)
    assert got[("2", "nDCG@3")] == pytest.approx(1 / LOG2_3)
    assert got[("2", "RR@10")] == pytest.approx(0.5)
    assert table[QID].tolist() == ["1"] * 6 + ["2"] * 6
    assert table[MEASURE].tolist()[:6] == ["AP", "P@2", "P@20", "nDCG@3", "RR@10", "R@2"]


def test_evaluate_returns_means_keyed_by_canonical_names_in_order() -> None:
    means = evaluate(RUN, QRELS, ["nDCG@3", "MAP"])
    assert list(means) == ["nDCG@3", "AP"]
    assert means["AP"] == pytest.approx(((1 + 2 / 3 + 3 / 5) / 3 + 0.5) / 2)


def test_relevance_level_applies_to_binary_measures_but_not_ndcg() -> None:
    means = evaluate(RUN.query("qid == '1'"), QRELS, ["AP", "nDCG@3", "AP(rel=1)"], relevance_level=2)
    # only d3 (label 2) is relevant at level 2, found at rank 3
    assert means["AP(rel=2)"] == pytest.approx(1 / 3)
    assert means["nDCG@3"] == pytest.approx(2 / (2 + 1 / LOG2_3 + 0.5))
    assert means["AP"] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)  # an explicit rel wins


def test_measure_names_aliases_and_trec_eval_names() -> None:
    assert [str(m) for m in parse_measures(["MAP", "AP", "P@20", "ndcg_cut.10", "recall.1000"])] == [
        "AP",
        "P@20",
        "nDCG@10",
        "R@1000",
    ]
    assert str(parse_measure("R(rel=2)@1000")) == "R(rel=2)@1000"
    assert str(parse_measure("recip_rank")) == "RR"
    for bad in ("NDCG10", "P@", "all_trec", ""):
        with pytest.raises(MeasureError):
            parse_measure(bad)


def test_ties_trec_eval_sorts_docno_descending_and_rank_mode_follows_the_rank_column() -> None:
    qrels = make_qrels([("1", "a", 1)])
    run = make_run([("1", "a", 1.0), ("1", "b", 1.0), ("1", "c", 1.0)])
    assert run[DOCNO].tolist() == ["c", "b", "a"]  # our order is trec_eval's: docno descending on ties
    # trec_eval reads the scores and orders ties by docno descending: c, b, a
    assert evaluate(run, qrels, ["P@1", "RR"]) == {"P@1": 0.0, "RR": pytest.approx(1 / 3)}
    # ties="rank" follows a run's own rank column, whatever order it states
    reordered = run.assign(rank=[3, 2, 1])
    assert evaluate(reordered, qrels, ["P@1", "RR"], ties="rank") == {"P@1": 1.0, "RR": 1.0}
    # RR@10 comes from another ir_measures provider; it must see the same order
    assert evaluate(run, qrels, ["RR@10"])["RR@10"] == pytest.approx(1 / 3)


def test_rank_mode_uses_the_rank_column_and_ignores_scores() -> None:
    qrels = make_qrels([("1", "b", 1)])
    run = pd.DataFrame({QID: ["1", "1"], DOCNO: ["a", "b"], SCORE: [2.0, 1.0], RANK: [2, 1]})
    assert evaluate(run, qrels, ["P@1"], ties="rank")["P@1"] == 1.0
    assert evaluate(run, qrels, ["P@1"])["P@1"] == 0.0


def test_scores_equal_in_single_precision_tie_like_trec_eval() -> None:
    qrels = make_qrels([("1", "a", 1)])
    run = make_run([("1", "a", 1.00000001), ("1", "b", 1.0)])
    assert run[DOCNO].tolist() == ["a", "b"]
    # as C floats the two scores are equal, so trec_eval puts b (larger docno) first
    assert evaluate(run, qrels, ["P@1"])["P@1"] == 0.0
    assert evaluate(run, qrels, ["P@1"], ties="rank")["P@1"] == 1.0


def test_missing_queries_skipped_by_default_and_zero_like_trec_eval_c() -> None:
    run = RUN.query("qid == '1'")
    skip = per_query(run, QRELS, ["AP"])
    assert skip[QID].tolist() == ["1"]
    zero = per_query(run, QRELS, ["AP"], missing="zero")
    assert values(zero) == {("1", "AP"): pytest.approx((1 + 2 / 3 + 3 / 5) / 3), ("2", "AP"): 0.0}
    ap1 = (1 + 2 / 3 + 3 / 5) / 3
    assert evaluate(run, QRELS, ["AP"])["AP"] == pytest.approx(ap1)
    assert evaluate(run, QRELS, ["AP"], missing="zero")["AP"] == pytest.approx(ap1 / 2)


def test_run_queries_without_qrels_are_ignored() -> None:
    run = pd.concat([RUN, make_run([("99", "z", 1.0)])], ignore_index=True)
    assert evaluate(run, QRELS, ["AP"]) == evaluate(RUN, QRELS, ["AP"])
    assert set(per_query(run, QRELS, ["AP"])[QID]) == {"1", "2"}


def test_queries_with_only_nonrelevant_judgments_count_as_zero() -> None:
    qrels = make_qrels([("1", "a", 1), ("2", "b", 0)])
    run = make_run([("1", "a", 1.0), ("2", "b", 1.0)])
    assert values(per_query(run, qrels, ["AP"])) == {("1", "AP"): 1.0, ("2", "AP"): 0.0}


def test_empty_run_gives_no_rows_or_zeros() -> None:
    empty = make_run([])
    assert per_query(empty, QRELS, ["AP"]).empty
    assert math.isnan(evaluate(empty, QRELS, ["AP"])["AP"])
    assert evaluate(empty, QRELS, ["AP"], missing="zero")["AP"] == 0.0


def test_evaluator_is_reusable_across_runs_and_aggregates_subsets() -> None:
    evaluator = Evaluator(QRELS, ["AP"])
    first = evaluator.per_query(RUN)
    second = evaluator.per_query(RUN.assign(**{SCORE: -RUN[SCORE]}))
    assert values(first) != values(second)
    assert evaluator.per_query(RUN).equals(first)
    assert evaluator.aggregate(first[first[QID] == "2"]) == {"AP": 0.5}
    assert evaluator.qids == ["1", "2"]


def test_bad_inputs_raise_clear_errors() -> None:
    dup = pd.concat([RUN, RUN.head(1)], ignore_index=True)
    with pytest.raises(EvaluationError, match="more than once for query 1"):
        evaluate(dup, QRELS, ["AP"])
    nan = RUN.assign(**{SCORE: RUN[SCORE].where(RUN[DOCNO] != "d2")})
    with pytest.raises(EvaluationError, match="d2"):
        evaluate(nan, QRELS, ["AP"])
    dup_qrels = pd.concat([QRELS, QRELS.head(1)], ignore_index=True)
    with pytest.raises(EvaluationError, match="more than once"):
        evaluate(RUN, dup_qrels, ["AP"])
    with pytest.raises(ValueError, match="ties"):
        evaluate(RUN, QRELS, ["AP"], ties="docno")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing"):
        evaluate(RUN, QRELS, ["AP"], missing="drop")  # type: ignore[arg-type]
    with pytest.raises(EvaluationError, match="empty"):
        evaluate(RUN, make_qrels([]), ["AP"])


def test_integer_qids_and_docnos_are_compared_as_strings() -> None:
    run = pd.DataFrame({QID: [1, 1], DOCNO: [10, 20], SCORE: [2.0, 1.0]})
    qrels = pd.DataFrame({QID: [1], DOCNO: [20], LABEL: [1]})
    assert evaluate(run, qrels, ["RR"])["RR"] == 0.5


# --- agreement with the real trec_eval binary ------------------------------------------


@pytest.mark.parametrize("complete", [False, True])
@pytest.mark.parametrize("level", [1, 2])
def test_per_query_values_equal_trec_eval_on_the_written_run_file(
    trec_eval: Callable[[list[str], Path, Path], dict[tuple[str, str], float]],
    tmp_path: Path,
    complete: bool,
    level: int,
) -> None:
    rng = np.random.default_rng(7 + level)
    rows = []
    for q in range(1, 9):
        n = int(rng.integers(5, 40))
        # coarse scores tie a lot; a few differ only beyond single precision
        scores = rng.integers(0, 6, size=n).astype(float)
        scores[: n // 4] += 1e-9
        rows += [(str(q), f"D{rng.integers(0, 60):03d}x{i}", s) for i, s in enumerate(scores)]
    run = make_run(rows)
    judged = run.sample(frac=0.6, random_state=1)
    qrels = make_qrels(
        pd.DataFrame({QID: judged[QID], DOCNO: judged[DOCNO], LABEL: rng.integers(0, 3, size=len(judged))})
    )
    qrels = pd.concat([qrels, make_qrels([("100", "nowhere", 1)])], ignore_index=True)  # not in the run
    run_file, qrels_file = tmp_path / "run.txt", tmp_path / "qrels.txt"
    run_file.write_text(
        "".join(
            f"{q} Q0 {d} {r} {s!r} test\n"
            for q, d, s, r in run[[QID, DOCNO, SCORE, RANK]].itertuples(index=False)
        )
    )
    qrels_file.write_text("".join(f"{q} 0 {d} {label}\n" for q, d, label in qrels.itertuples(index=False)))

    args = [
        "-m",
        "map",
        "-m",
        "P.5",
        "-m",
        "ndcg_cut.10",
        "-m",
        "recall.20",
        "-m",
        "recip_rank",
        "-l",
        str(level),
    ]
    if complete:
        args.append("-c")
    expected = trec_eval(args, qrels_file, run_file)
    names = {"map": "AP", "P_5": "P@5", "ndcg_cut_10": "nDCG@10", "recall_20": "R@20", "recip_rank": "RR"}
    ours = Evaluator(
        qrels, list(names.values()), missing="zero" if complete else "skip", relevance_level=level
    )
    table = ours.per_query(run)
    got = values(table)
    renamed = {(q, str(parse_measure(names[m], level))): v for (q, m), v in expected.items()}
    per_q = {k: v for k, v in renamed.items() if k[0] != "all"}
    # trec_eval -c -q prints no line for a query missing from the run; it counts it as 0 in "all"
    assert {k for k in got if k not in per_q} == (
        {(q, m) for q, m in got if q == "100"} if complete else set()
    )
    assert all(got[k] == 0.0 for k in got if k not in per_q)
    assert set(per_q) <= set(got)
    for key, value in per_q.items():
        assert got[key] == pytest.approx(value, abs=5e-5), key  # trec_eval prints 4 decimals
    means = ours.aggregate(table)
    for (q, name), value in renamed.items():
        if q == "all":
            assert means[name] == pytest.approx(value, abs=5e-5), name
