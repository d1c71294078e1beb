"""Paired t-tests against a baseline, Bonferroni and Holm corrections."""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evirank.evaluate.significance import (
    BASELINE_MEAN,
    DELTA,
    MEAN,
    P_ADJUSTED,
    SIGNIFICANT,
    N,
    P,
    T,
    adjust,
    bonferroni,
    holm,
    paired_ttest,
)
from evirank.frames import MEASURE, QID, RUN, VALUE

RNG = np.random.default_rng(3)
QIDS = [str(q) for q in range(1, 31)]
BASE = {"AP": RNG.uniform(0.1, 0.5, 30), "P@20": RNG.uniform(0.2, 0.6, 30)}
# "better" gains a lot, "same" equals the baseline, "noisy" has a small random difference, "worse" loses
SYSTEMS = {
    "better": {m: v + 0.1 + RNG.normal(0, 0.02, 30) for m, v in BASE.items()},
    "same": {m: v.copy() for m, v in BASE.items()},
    "noisy": {m: v + RNG.normal(0, 0.05, 30) for m, v in BASE.items()},
    "worse": {m: v - 0.08 + RNG.normal(0, 0.03, 30) for m, v in BASE.items()},
}


def long_table() -> pd.DataFrame:
    rows = []
    for run, by_measure in {"base": BASE, **SYSTEMS}.items():
        for measure, values in by_measure.items():
            rows += [(run, q, measure, float(v)) for q, v in zip(QIDS, values, strict=True)]
    return pd.DataFrame(rows, columns=[RUN, QID, MEASURE, VALUE])


def hand_holm(p: list[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure, written out: reject p(i) while p(i) <= alpha / (m - i + 1)."""
    m = len(p)
    reject = [False] * m
    for step, index in enumerate(sorted(range(m), key=lambda i: p[i])):
        if p[index] <= alpha / (m - step):
            reject[index] = True
        else:
            break
    return reject


def test_t_and_p_equal_scipy_paired_two_sided_ttest() -> None:
    result = paired_ttest(long_table(), "base", correction="none")
    assert result[[RUN, MEASURE]].values.tolist() == [
        [r, m] for m in ("AP", "P@20") for r in ("better", "same", "noisy", "worse")
    ]
    for row in result.itertuples(index=False):
        record = row._asdict()
        run, measure = record[RUN], record[MEASURE]
        if run == "same":
            continue
        expected = stats.ttest_rel(SYSTEMS[run][measure], BASE[measure])
        assert record[T] == pytest.approx(expected.statistic)
        assert record[P] == pytest.approx(expected.pvalue)
        assert record[P_ADJUSTED] == record[P]
        assert record[N] == 30
        assert record[MEAN] == pytest.approx(SYSTEMS[run][measure].mean())
        assert record[BASELINE_MEAN] == pytest.approx(BASE[measure].mean())
        assert record[DELTA] == pytest.approx(SYSTEMS[run][measure].mean() - BASE[measure].mean())


def test_identical_runs_give_t_zero_p_one() -> None:
    result = paired_ttest(long_table(), "base")
    same = result[result[RUN] == "same"]
    assert same[T].tolist() == [0.0, 0.0]
    assert same[P].tolist() == [1.0, 1.0]
    assert not same[SIGNIFICANT].any()


def test_bonferroni_counts_runs_times_measures_by_default_and_runs_per_measure_optionally() -> None:
    raw = paired_ttest(long_table(), "base", correction="none")
    table_wide = paired_ttest(long_table(), "base")  # bonferroni, family "all": 4 runs x 2 measures
    np.testing.assert_allclose(table_wide[P_ADJUSTED], np.minimum(1, raw[P] * 8))
    per_measure = paired_ttest(long_table(), "base", family="measure")
    np.testing.assert_allclose(per_measure[P_ADJUSTED], np.minimum(1, raw[P] * 4))
    assert (table_wide[SIGNIFICANT] == (table_wide[P_ADJUSTED] <= 0.05)).all()
    # the big gain and the loss are significant, in the right direction
    better = table_wide[table_wide[RUN] == "better"]
    worse = table_wide[table_wide[RUN] == "worse"]
    assert better[SIGNIFICANT].all() and (better[DELTA] > 0).all() and (better[T] > 0).all()
    assert worse[SIGNIFICANT].all() and (worse[DELTA] < 0).all()


def test_holm_matches_a_hand_computation_of_the_step_down() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.04*1, 0.06) = 0.06
    assert holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    for alpha in (0.01, 0.025, 0.05, 0.07):
        assert (holm(p) <= alpha).tolist() == hand_holm(p, alpha)
    assert bonferroni(p).tolist() == pytest.approx([0.04, 0.16, 0.12, 0.02])


def test_holm_on_random_p_values_agrees_with_the_procedure_and_is_never_above_bonferroni() -> None:
    rng = np.random.default_rng(11)
    for _ in range(50):
        p = rng.uniform(0, 0.1, size=int(rng.integers(1, 12))).tolist()
        adjusted = holm(p)
        assert (adjusted <= bonferroni(p) + 1e-15).all()
        assert (adjusted <= 0.05).tolist() == hand_holm(p, 0.05)


def test_holm_correction_in_paired_ttest() -> None:
    raw = paired_ttest(long_table(), "base", correction="none")
    corrected = paired_ttest(long_table(), "base", correction="holm")
    np.testing.assert_allclose(corrected[P_ADJUSTED], holm(raw[P].to_numpy()))


def test_undefined_p_values_stay_nan_and_are_not_counted() -> None:
    assert bonferroni([0.01, math.nan]).tolist()[0] == pytest.approx(0.01)
    assert math.isnan(holm([math.nan, 0.2])[0])
    assert adjust([0.02, 0.5], "none").tolist() == [0.02, 0.5]
    with pytest.raises(ValueError, match="correction"):
        adjust([0.1], "sidak")  # type: ignore[arg-type]
    one_query = pd.DataFrame({RUN: ["base", "x"], QID: ["1", "1"], MEASURE: ["AP", "AP"], VALUE: [0.1, 0.9]})
    result = paired_ttest(one_query, "base")
    assert math.isnan(result[P].iloc[0]) and not result[SIGNIFICANT].iloc[0]


def test_only_queries_evaluated_for_both_runs_are_paired(caplog: pytest.LogCaptureFixture) -> None:
    table = long_table()
    table = table[~((table[RUN] == "better") & (table[QID].isin(["1", "2"])))]
    with caplog.at_level(logging.WARNING):
        result = paired_ttest(table, "base", correction="none")
    row = result[(result[RUN] == "better") & (result[MEASURE] == "AP")].iloc[0]
    assert row[N] == 28
    expected = stats.ttest_rel(SYSTEMS["better"]["AP"][2:], BASE["AP"][2:])
    assert row[P] == pytest.approx(expected.pvalue)
    assert "2 queries evaluated for only one" in caplog.text


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="baseline"):
        paired_ttest(long_table(), "nope")
    with pytest.raises(ValueError, match="alpha"):
        paired_ttest(long_table(), "base", alpha=5)
    with pytest.raises(ValueError, match="family"):
        paired_ttest(long_table(), "base", family="run")  # type: ignore[arg-type]
