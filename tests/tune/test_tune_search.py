"""The cross-validated grid search: planted parameters recovered, no leak from test queries,
the run equals the aggregator stage with each fold's setting, and the stated tie rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from tune_cases import PLANTED, planted_case

from evirank.evaluate import Evaluator
from evirank.frames import QID, SCORE
from evirank.tune import CrossValidatedTuner, cross_validate, k_folds, parse_aggregate, parse_grid
from evirank.tune.synthetic import synthetic_passages

BIRCH_GRID = "alpha=0:1:0.1 w1=1 w2=0:1:0.1 w3=0:1:0.1"


def test_planted_birch_parameters_are_recovered_in_every_fold() -> None:
    passages, qrels, folds = planted_case()
    result = cross_validate(
        passages, qrels, parse_aggregate("birch:3", "none"), parse_grid(BIRCH_GRID), folds
    )
    for choice in result.choices:
        assert choice.params == {
            "alpha": 0.3,
            "w1": 1.0,
            **{k: v for k, v in PLANTED.items() if k != "alpha"},
        }
        assert choice.tune_mean == 1.0 and choice.test_mean == 1.0
        assert choice.tied == 1  # the planted setting is the only perfect one
    assert result.cv_mean == 1.0
    # Without the bracketing queries of w3, w3 is free: the tie rule picks its smallest value.
    keep = passages[
        ~passages[QID].astype(int).isin(range(5, 31, 6)) & ~passages[QID].astype(int).isin(range(6, 31, 6))
    ]
    loose = cross_validate(
        keep,
        qrels,
        parse_aggregate("birch:3", "none"),
        parse_grid(BIRCH_GRID),
        folds.restrict(keep[QID].unique()),
    )
    assert {c.params["w3"] for c in loose.choices} == {0.0}
    assert all(c.tied > 1 for c in loose.choices)


def test_a_folds_test_queries_never_influence_its_own_parameters() -> None:
    passages, qrels = synthetic_passages(n_queries=40, depth=20, sentences=4, seed=5)
    folds = k_folds(sorted(passages[QID].unique()), k=4, seed=2)
    grid = parse_grid("alpha=0:1:0.1 w2=0:1:0.25 w3=0:1:0.25")
    aggregator = parse_aggregate("birch:3")
    before = cross_validate(passages, qrels, aggregator, grid, folds)

    test = set(folds[0].test)
    rng = np.random.default_rng(0)
    changed = passages.copy()
    in_test = changed[QID].isin(test).to_numpy()
    changed.loc[in_test, SCORE] = rng.normal(0, 5, size=int(in_test.sum()))  # new passage scores
    changed.loc[in_test, "first_stage_score"] = rng.normal(0, 5, size=int(in_test.sum()))
    docs = changed.loc[in_test, [QID, "docno"]].drop_duplicates()
    new_qrels = pd.concat(  # other relevant documents for the test queries
        [qrels[~qrels[QID].isin(test)], docs.groupby(QID).tail(3).assign(label=1)], ignore_index=True
    )
    after = cross_validate(changed, new_qrels, aggregator, grid, folds)

    assert after.choices[0].index == before.choices[0].index
    assert after.choices[0].tune_mean == before.choices[0].tune_mean
    # ... while the perturbation did change what the test queries score, and the other folds' means.
    assert after.choices[0].test_mean != before.choices[0].test_mean
    assert any(a.tune_mean != b.tune_mean for a, b in zip(after.choices[1:], before.choices[1:], strict=True))


def test_cv_run_is_each_folds_aggregator_stage_on_its_test_queries() -> None:
    passages, qrels = synthetic_passages(n_queries=30, depth=15, sentences=5, seed=2)
    aggregator = parse_aggregate("birch:2")
    result = cross_validate(passages, qrels, aggregator, parse_grid("alpha=0:1:0.2 w2=0,0.5,1"), k=3, seed=4)
    for fold, choice in zip(result.folds, result.choices, strict=True):
        stage = aggregator.stage(choice.params)
        expected = stage(passages[passages[QID].isin(fold.test)])
        got = result.run[result.run[QID].isin(fold.test)]
        assert got["docno"].tolist() == expected["docno"].tolist()
        np.testing.assert_allclose(got[SCORE].to_numpy(), expected[SCORE].to_numpy(), rtol=1e-12)
    exact = Evaluator(qrels, ["AP"]).mean(result.run)["AP"]
    assert exact == pytest.approx(result.cv_mean, abs=1e-12)
    assert sorted(result.run[QID].unique()) == sorted(result.folds.qids)


@pytest.mark.parametrize("kind", ["maxp", "firstp", "sump", "meanp"])
def test_other_aggregators_tune_their_first_stage_weight(kind: str) -> None:
    passages, qrels = synthetic_passages(n_queries=20, depth=10, sentences=3, seed=1)
    result = cross_validate(passages, qrels, parse_aggregate(kind), parse_grid("alpha=0:1:0.25"), k=2, seed=0)
    for fold, choice in zip(result.folds, result.choices, strict=True):
        expected = parse_aggregate(kind).stage(choice.params)(passages[passages[QID].isin(fold.test)])
        got = result.run[result.run[QID].isin(fold.test)]
        np.testing.assert_allclose(got[SCORE].to_numpy(), expected[SCORE].to_numpy(), rtol=1e-12)


def test_ties_between_settings_go_to_the_first_in_grid_order() -> None:
    passages, qrels = synthetic_passages(n_queries=10, depth=5, sentences=2, seed=3)
    flat = passages.assign(score=1.0, first_stage_score=2.0)  # every setting ranks alike
    result = cross_validate(
        flat, qrels, parse_aggregate("birch:3"), parse_grid("alpha=0.5,0.2 w2=0.3,0.1"), k=2
    )
    assert all(c.index == 0 and c.tied == 4 for c in result.choices)
    assert result.choices[0].params["alpha"] == 0.5 and result.choices[0].params["w2"] == 0.3


def test_tuner_estimator_uses_fold_settings_and_the_overall_best_for_new_queries() -> None:
    passages, qrels = synthetic_passages(n_queries=12, depth=8, sentences=3, seed=9)
    tuner = CrossValidatedTuner(parse_aggregate("maxp"), parse_grid("alpha=0:1:0.5"), k=3, random_state=1)
    tuner.fit(passages, qrels)
    run = tuner.transform(passages)
    cv = tuner.result_.run
    merged = run.merge(cv, on=[QID, "docno"], suffixes=("", "_cv"))
    np.testing.assert_allclose(merged[SCORE], merged[f"{SCORE}_cv"])
    new = passages[passages[QID] == "1"].assign(qid="new")
    expected = parse_aggregate("maxp").stage(tuner.result_.best.params)(new)
    np.testing.assert_allclose(tuner.transform(new)[SCORE].to_numpy(), expected[SCORE].to_numpy())


def test_unknown_parameters_and_no_judged_queries_are_clear_errors() -> None:
    passages, qrels = synthetic_passages(n_queries=4, depth=3, sentences=2, seed=0)
    with pytest.raises(ValueError, match="has no parameter 'w4'"):
        cross_validate(passages, qrels, parse_aggregate("birch:3"), parse_grid("w4=0,1"), k=2)
    with pytest.raises(ValueError, match="no query has both"):
        cross_validate(
            passages, qrels.assign(qid="other"), parse_aggregate("maxp"), parse_grid("alpha=0,1"), k=2
        )
