"""Paired significance tests of runs against a baseline, with multiple-comparison correction.

Each run is compared with the baseline on each measure by a two-sided paired t-test
(:func:`scipy.stats.ttest_rel`) over the per-query values of the queries both were evaluated
on. The p-values are then corrected for multiple comparisons:

- ``"bonferroni"`` (default): p multiplied by the number of comparisons m, capped at 1.
- ``"holm"``: Holm's step-down version, uniformly more powerful, same family-wise guarantee.
- ``"none"``: raw p-values.

The family (what m counts) is, by default, every comparison in the table: (runs other than the
baseline) x (measures) (``family="all"``). The Birch paper reports "paired t-tests [...] with
appropriate Bonferroni corrections for multiple hypothesis testing" against BM25+RM3 without
naming the family; we take the whole table, the conservative reading, and offer
``family="measure"`` (m = runs compared, separately per measure) as the alternative.
Comparisons whose p-value is undefined (fewer than two paired queries) are not counted in m.

A difference is significant when its adjusted p-value is at most ``alpha`` (0.05 by default;
Birch used 0.01). When a run equals the baseline on every query, t is 0 and p is 1.

Example:
    >>> import pandas as pd
    >>> table = pd.DataFrame({
    ...     "run": ["base"] * 4 + ["new"] * 4,
    ...     "qid": ["1", "2", "3", "4"] * 2,
    ...     "measure": ["AP"] * 8,
    ...     "value": [0.1, 0.2, 0.3, 0.4, 0.3, 0.5, 0.4, 0.7]})
    >>> result = paired_ttest(table, baseline="base")
    >>> result[["run", "measure", "delta", "significant"]].round(3).values.tolist()
    [['new', 'AP', 0.225, True]]
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from evirank.frames import MEASURE, QID, RUN, VALUE, require_columns

logger = logging.getLogger(__name__)

Correction = Literal["bonferroni", "holm", "none"]
Family = Literal["all", "measure"]
CORRECTIONS: tuple[str, ...] = ("bonferroni", "holm", "none")
FAMILIES: tuple[str, ...] = ("all", "measure")

# Columns of the significance frame (besides RUN and MEASURE from evirank.frames).
N = "n"
MEAN = "mean"
BASELINE_MEAN = "baseline_mean"
DELTA = "delta"
T = "t"
P = "p"
P_ADJUSTED = "p_adjusted"
SIGNIFICANT = "significant"
SIGNIFICANCE_COLUMNS = (RUN, MEASURE, N, MEAN, BASELINE_MEAN, DELTA, T, P, P_ADJUSTED, SIGNIFICANT)


def bonferroni(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bonferroni-adjusted p-values: min(1, m * p), m = the number of defined (non-NaN) p-values.

    Example:
        >>> bonferroni([0.01, 0.04, 0.5]).tolist()
        [0.03, 0.12, 1.0]
    """
    p = np.asarray(p_values, dtype=np.float64)
    m = int(np.isfinite(p).sum())
    return np.minimum(1.0, p * m)


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted).

    With the m defined p-values sorted ascending, p(1) <= ... <= p(m), the adjusted value of the
    i-th smallest is max over j <= i of min(1, (m - j + 1) * p(j)); it is significant at level
    alpha exactly when Holm's procedure rejects it.

    Example:
        >>> holm([0.01, 0.04, 0.03]).round(4).tolist()
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    defined = np.flatnonzero(np.isfinite(p))
    m = len(defined)
    if m == 0:
        return out
    order = defined[np.argsort(p[defined], kind="mergesort")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(scaled)
    return out


def adjust(p_values: Sequence[float] | np.ndarray, correction: Correction = "bonferroni") -> np.ndarray:
    """Adjust p-values with ``correction`` (``bonferroni``, ``holm`` or ``none``)."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}, found {correction!r}")
    p = np.asarray(p_values, dtype=np.float64)
    if correction == "bonferroni":
        return bonferroni(p)
    if correction == "holm":
        return holm(p)
    return p.copy()


def paired_ttest(
    per_query: pd.DataFrame,
    baseline: str,
    *,
    correction: Correction = "bonferroni",
    alpha: float = 0.05,
    family: Family = "all",
    runs: Sequence[str] | None = None,
    measures: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Test each run against ``baseline`` on each measure; a tidy frame, one row per (run, measure).

    Args:
        per_query: [run, qid, measure, value], e.g. from :func:`evirank.evaluate.compare.compare`.
        baseline: the name (``run`` value) of the baseline.
        correction: ``"bonferroni"``, ``"holm"`` or ``"none"``.
        alpha: significance level for the adjusted p-values.
        family: ``"all"`` (one family: runs x measures) or ``"measure"`` (one family per measure).
        runs: runs to compare, in order (default: every run but the baseline, first-seen order).
        measures: measures to test, in order (default: first-seen order).

    Returns:
        Columns run, measure, n (paired queries), mean, baseline_mean (over those queries),
        delta (mean - baseline_mean), t (positive when the run is better), p (two-sided),
        p_adjusted, significant (p_adjusted <= alpha).
    """
    require_columns(per_query, (RUN, QID, MEASURE, VALUE), "paired_ttest")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {list(CORRECTIONS)}, found {correction!r}")
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {list(FAMILIES)}, found {family!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, found {alpha!r}")
    seen_runs = list(dict.fromkeys(per_query[RUN].astype(str)))
    if baseline not in seen_runs:
        raise ValueError(f"baseline {baseline!r} is not among the runs {seen_runs}")
    run_names = [r for r in (runs if runs is not None else seen_runs) if r != baseline]
    measure_names = list(measures) if measures is not None else list(dict.fromkeys(per_query[MEASURE]))

    keys = per_query[[RUN, QID, MEASURE]].astype(str)
    if keys.duplicated().any():
        first = keys[keys.duplicated()].iloc[0]
        raise ValueError(
            f"paired_ttest: run {first[RUN]} has several values for query {first[QID]} on {first[MEASURE]}"
        )
    wide = per_query.assign(**{RUN: keys[RUN]}).set_index([MEASURE, QID, RUN])[VALUE].unstack(RUN)
    rows = []
    for measure in measure_names:
        if measure not in wide.index.get_level_values(MEASURE):
            raise ValueError(f"measure {measure!r} is not in the per-query table")
        block = wide.xs(measure, level=MEASURE)
        for run in run_names:
            if run not in block.columns:
                raise ValueError(f"run {run!r} is not in the per-query table")
            pair = block[[run, baseline]].dropna()
            dropped = int(block[[run, baseline]].notna().any(axis=1).sum()) - len(pair)
            if dropped:
                logger.warning(
                    "%s vs %s on %s: %d queries evaluated for only one of the two are left out of the test",
                    run,
                    baseline,
                    measure,
                    dropped,
                )
            t, p = _ttest(pair[run].to_numpy(), pair[baseline].to_numpy())
            mean, base_mean = (
                (float(pair[run].mean()), float(pair[baseline].mean())) if len(pair) else (np.nan,) * 2
            )
            rows.append((run, measure, len(pair), mean, base_mean, mean - base_mean, t, p))
    result = pd.DataFrame(rows, columns=[RUN, MEASURE, N, MEAN, BASELINE_MEAN, DELTA, T, P])
    result[N] = result[N].astype(np.int64)
    if family == "all":
        result[P_ADJUSTED] = adjust(result[P].to_numpy(), correction)
    else:
        result[P_ADJUSTED] = np.nan
        for _, index in result.groupby(MEASURE, sort=False).groups.items():
            result.loc[index, P_ADJUSTED] = adjust(result.loc[index, P].to_numpy(), correction)
    result[SIGNIFICANT] = (result[P_ADJUSTED] <= alpha).fillna(False).astype(bool)
    return result[list(SIGNIFICANCE_COLUMNS)]


def _ttest(values: np.ndarray, baseline: np.ndarray) -> tuple[float, float]:
    """Two-sided paired t-test; (0, 1) when every difference is 0; NaN with fewer than two pairs."""
    from scipy import stats  # scipy.stats takes a while to import; only tests need it

    if len(values) < 2:
        return float("nan"), float("nan")
    diff = values - baseline
    if np.all(diff == 0):
        return 0.0, 1.0
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.ttest_rel(values, baseline)
    return float(result.statistic), float(result.pvalue)
