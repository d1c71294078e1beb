"""Analyses of per-query results: differences from a baseline, and breakdowns by query length.

Everything starts from a :class:`~evirank.evaluate.Comparison` (per-query values of several runs
against one baseline) and follows Birch's thesis: Figure 5.1 plots each query's difference from
the baseline, sorted in descending order; Table 5.4 averages a measure over queries grouped by
their length in words (stopwords excluded), with significance marks per group.

Example:
    >>> import pandas as pd
    >>> from evirank.evaluate import summarize
    >>> table = pd.DataFrame({"run": ["bm25"] * 3 + ["birch"] * 3, "qid": ["1", "2", "3"] * 2,
    ...                       "measure": ["AP"] * 6, "value": [0.2, 0.5, 0.4, 0.6, 0.4, 0.4]})
    >>> per_query_differences(summarize(table, baseline="bm25"), "birch", "AP").round(2).tolist()
    [0.4, 0.0, -0.1]
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evirank.errors import EvirankError
from evirank.evaluate import Comparison, paired_ttest
from evirank.evaluate.significance import Correction, Family
from evirank.frames import MEASURE, QID, RUN, VALUE
from evirank.terms import query_length

logger = logging.getLogger(__name__)

_BIN = re.compile(r"^(?P<low>\d+)(?:(?P<plus>\+)|-(?P<high>\d+))?$")


class ReportError(EvirankError, ValueError):
    """Inputs of a report that do not fit together (unknown run, bad length bins)."""


def per_query_differences(comparison: Comparison, run: str, measure: str) -> pd.Series:
    """qid -> ``run`` minus the baseline on ``measure``, sorted descending (Birch's Figure 5.1).

    Only queries evaluated for both runs count.
    """
    if comparison.baseline is None:
        raise ReportError("per-query differences need a baseline")
    wide = _wide(comparison, measure)
    for name in (run, comparison.baseline):
        if name not in wide.columns:
            raise ReportError(f"run {name!r} is not in the comparison ({', '.join(wide.columns)})")
    pair = wide[[run, comparison.baseline]].dropna()
    diff = (pair[run] - pair[comparison.baseline]).rename(measure)
    order = np.lexsort((pair.index.astype(str).to_numpy(), -diff.to_numpy()))
    return diff.iloc[order]


@dataclass(frozen=True)
class Bucket:
    """A range of query lengths, ``low`` to ``high`` words inclusive (``high`` None: no limit)."""

    low: int
    high: int | None

    @property
    def label(self) -> str:
        """``3``, ``2-4`` or ``5+``."""
        if self.high is None:
            return f"{self.low}+"
        return str(self.low) if self.high == self.low else f"{self.low}-{self.high}"

    def holds(self, length: int) -> bool:
        """Whether a query of ``length`` words falls in this bucket."""
        return length >= self.low and (self.high is None or length <= self.high)


def parse_buckets(spec: str) -> list[Bucket]:
    """Parse ``1,2,3,4+`` or ``1-5,6-10,11+`` into buckets (in order, not overlapping).

    Example:
        >>> [b.label for b in parse_buckets("1,2-3,4+")]
        ['1', '2-3', '4+']
    """
    buckets = []
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        match = _BIN.match(part)
        if match is None:
            raise ReportError(f"length bucket {part!r}: expected N, A-B or N+ (e.g. 1,2,3,4+)")
        low = int(match["low"])
        high = None if match["plus"] else int(match["high"]) if match["high"] else low
        if high is not None and high < low:
            raise ReportError(f"length bucket {part!r}: {high} is below {low}")
        buckets.append(Bucket(low, high))
    if not buckets:
        raise ReportError("expected at least one length bucket, e.g. 1,2,3,4+")
    for a, b in itertools.pairwise(buckets):
        if a.high is None or b.low <= a.high:
            raise ReportError(f"length buckets {a.label} and {b.label} overlap or are out of order")
    return buckets


def auto_buckets(lengths: Sequence[int], most: int = 6) -> list[Bucket]:
    """One bucket per length when there are at most ``most`` lengths, else about four of equal size.

    Example:
        >>> [b.label for b in auto_buckets([1, 2, 2, 3, 4])]
        ['1', '2', '3', '4']
        >>> [b.label for b in auto_buckets(list(range(1, 21)))]
        ['1-5', '6-10', '11-15', '16+']
    """
    values = sorted(int(v) for v in lengths)
    if not values:
        return []
    distinct = sorted(set(values))
    if len(distinct) <= most:
        return [Bucket(v, v) for v in distinct]
    edges = sorted({int(np.quantile(values, q, method="lower")) for q in (0.25, 0.5, 0.75)})
    buckets, low = [], values[0]
    for edge in edges:
        if edge >= low and edge < values[-1]:
            buckets.append(Bucket(low, edge))
            low = edge + 1
    buckets.append(Bucket(low, None))
    return buckets


@dataclass(frozen=True)
class LengthTable:
    """Mean measure per run and query-length bucket (Birch's Table 5.4).

    Attributes:
        measure: the measure.
        means: runs (index) x bucket labels (columns).
        counts: bucket label -> number of queries.
        significance: :func:`~evirank.evaluate.paired_ttest` rows per (run, bucket), or None.
        baseline: the baseline's name.
        lengths: qid -> query length.
    """

    measure: str
    means: pd.DataFrame
    counts: dict[str, int]
    significance: pd.DataFrame | None
    baseline: str | None
    lengths: pd.Series


def length_table(
    comparison: Comparison,
    queries: Mapping[str, str],
    measure: str,
    buckets: Sequence[Bucket] | None = None,
    *,
    correction: Correction = "bonferroni",
    alpha: float = 0.05,
    family: Family = "all",
) -> LengthTable:
    """Average ``measure`` per query-length bucket for every run, testing each against the baseline.

    Args:
        comparison: the runs' per-query values (and baseline).
        queries: qid -> query text (lengths count words, stopwords excluded).
        measure: one of the comparison's measures.
        buckets: length buckets; None chooses them with :func:`auto_buckets`.
        correction: multiple-comparison correction over the table's tests.
        alpha: significance level.
        family: ``"all"`` corrects over every (run, bucket) test; ``"measure"`` within each bucket.
    """
    wide = _wide(comparison, measure)
    known = [q for q in wide.index if str(q) in queries]
    if len(known) < len(wide.index):
        logger.warning(
            "%d evaluated queries have no query text; left out of the length table",
            len(wide.index) - len(known),
        )
    lengths = pd.Series({str(q): query_length(queries[str(q)]) for q in known}, dtype=np.int64)
    chosen = list(buckets) if buckets is not None else auto_buckets(lengths.tolist())
    label_of = {}
    for qid, length in lengths.items():
        for bucket in chosen:
            if bucket.holds(int(length)):
                label_of[qid] = bucket.label
                break
    labels = [b.label for b in chosen]
    counts = {label: sum(1 for v in label_of.values() if v == label) for label in labels}
    means = pd.DataFrame(index=pd.Index(comparison.runs, name=RUN), columns=labels, dtype=np.float64)
    for label in labels:
        qids = [q for q, lab in label_of.items() if lab == label]
        if qids:
            means[label] = wide.loc[qids, comparison.runs].mean(axis=0)
    significance = None
    if comparison.baseline is not None:
        table = comparison.per_query
        rows = table[(table[MEASURE] == measure) & table[QID].astype(str).isin(label_of)].copy()
        rows[MEASURE] = rows[QID].astype(str).map(label_of)
        present = [label for label in labels if counts[label] > 0]
        if present:
            significance = paired_ttest(
                rows,
                comparison.baseline,
                correction=correction,
                alpha=alpha,
                family=family,
                runs=comparison.runs,
                measures=present,
            )
    return LengthTable(measure, means, counts, significance, comparison.baseline, lengths)


def _wide(comparison: Comparison, measure: str) -> pd.DataFrame:
    if measure not in comparison.measures:
        raise ReportError(f"measure {measure!r} is not in the comparison ({', '.join(comparison.measures)})")
    table = comparison.per_query
    rows = table[table[MEASURE] == measure]
    wide = rows.pivot_table(index=QID, columns=RUN, values=VALUE, aggfunc="first")
    wide.index = wide.index.astype(str)
    return wide
