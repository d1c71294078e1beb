"""Reports of a :class:`~evirank.evaluate.compare.Comparison`: Markdown tables and JSON.

The mean table has one row per run and one column per measure, values to 4 decimals (as
trec_eval prints them). With a baseline, a value marked ``†`` is significantly better than the
baseline's and one marked ``‡`` significantly worse (adjusted p <= alpha); a legend under the
table says which test, correction and family produced the marks.

Example:
    >>> from evirank.evaluate.compare import summarize
    >>> import pandas as pd
    >>> table = pd.DataFrame({"run": ["bm25", "bm25", "new", "new"], "qid": ["1", "2", "1", "2"],
    ...                       "measure": ["AP"] * 4, "value": [0.5, 0.25, 1.0, 0.5]})
    >>> print(markdown_table(summarize(table)))
    | run | queries | AP |
    | --- | ---: | ---: |
    | bm25 | 2 | 0.3750 |
    | new | 2 | 0.7500 |
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from evirank import markdown
from evirank.evaluate.compare import Comparison
from evirank.evaluate.significance import DELTA, SIGNIFICANCE_COLUMNS, SIGNIFICANT
from evirank.frames import MEASURE, QID, RUN, VALUE, natural_order
from evirank.record import plain

BETTER = "†"
WORSE = "‡"


def markdown_table(comparison: Comparison, digits: int = 4) -> str:
    """The mean table as Markdown, with significance marks and a legend when there is a baseline."""
    marks = significance_marks(comparison.significance)
    rows = []
    for run in comparison.runs:
        label = f"{run} (baseline)" if run == comparison.baseline else run
        cells = [label, str(comparison.queries.get(run, 0))]
        for measure in comparison.measures:
            value = comparison.means.loc[run, measure]
            cells.append(_number(value, digits) + marks.get((run, measure), ""))
        rows.append(cells)
    lines = markdown.table(["run", "queries", *comparison.measures], rows)
    legend = _legend(comparison)
    return lines + (f"\n\n{legend}" if legend else "")


def per_query_markdown(comparison: Comparison, digits: int = 4) -> str:
    """Per-query values as Markdown: one section per measure, one row per query, one column per run."""
    sections = []
    table = comparison.per_query
    for measure in comparison.measures:
        wide = table[table[MEASURE] == measure].set_index([QID, RUN])[VALUE].unstack(RUN)
        runs = [r for r in comparison.runs if r in wide.columns]
        rows = [
            [str(qid), *[_number(wide.loc[qid, run], digits) for run in runs]]
            for qid in natural_order(wide.index)
        ]
        sections.append(f"### {measure}\n\n" + markdown.table(["qid", *runs], rows))
    return "\n\n".join(sections)


def markdown_report(comparison: Comparison, *, per_query: bool = False, digits: int = 4) -> str:
    """The mean table, and the per-query tables when ``per_query`` is true."""
    text = markdown_table(comparison, digits)
    if per_query:
        text += "\n\n## Per-query values\n\n" + per_query_markdown(comparison, digits)
    return text + "\n"


def to_record(comparison: Comparison, *, per_query: bool = False) -> dict[str, Any]:
    """A JSON-ready dict: measures, settings, runs with means, significance, per-query values.

    Undefined numbers (NaN) become ``null``.

    Example:
        >>> import pandas as pd
        >>> from evirank.evaluate.compare import summarize
        >>> table = pd.DataFrame({"run": ["a"], "qid": ["1"], "measure": ["AP"], "value": [0.5]})
        >>> to_record(summarize(table))["runs"]
        [{'name': 'a', 'queries': 1, 'means': {'AP': 0.5}}]
    """
    record: dict[str, Any] = {
        "measures": comparison.measures,
        "settings": {k: plain(v) for k, v in comparison.settings.items()},
        "baseline": comparison.baseline,
        "runs": [
            {
                "name": run,
                "queries": comparison.queries.get(run, 0),
                "means": {m: plain(comparison.means.loc[run, m]) for m in comparison.measures},
            }
            for run in comparison.runs
        ],
    }
    if comparison.significance is not None:
        record["significance"] = [
            {column: plain(value) for column, value in zip(SIGNIFICANCE_COLUMNS, row, strict=True)}
            for row in comparison.significance[list(SIGNIFICANCE_COLUMNS)].itertuples(index=False)
        ]
    if per_query:
        record["per_query"] = [
            {RUN: run, QID: qid, MEASURE: measure, VALUE: plain(value)}
            for run, qid, measure, value in comparison.per_query[[RUN, QID, MEASURE, VALUE]].itertuples(
                index=False
            )
        ]
    return record


def to_json(comparison: Comparison, *, per_query: bool = False, indent: int = 2) -> str:
    """:func:`to_record` as JSON text (strict JSON: no NaN)."""
    return json.dumps(to_record(comparison, per_query=per_query), indent=indent, allow_nan=False) + "\n"


def significance_marks(significance: pd.DataFrame | None) -> dict[tuple[str, str], str]:
    """``(run, measure) -> †/‡`` for each significant difference of a significance table.

    Example:
        >>> import pandas as pd
        >>> table = pd.DataFrame({"run": ["a", "b"], "measure": ["AP", "AP"], "delta": [0.1, -0.2],
        ...                       "significant": [True, False]})
        >>> significance_marks(table)
        {('a', 'AP'): '†'}
    """
    if significance is None:
        return {}
    marks = {}
    for run, measure, delta, significant in significance[[RUN, MEASURE, DELTA, SIGNIFICANT]].itertuples(
        index=False
    ):
        if significant:
            marks[(str(run), str(measure))] = BETTER if delta > 0 else WORSE
    return marks


def _legend(comparison: Comparison) -> str:
    if comparison.significance is None or comparison.baseline is None:
        return ""
    settings = comparison.settings
    correction = settings.get("correction", "bonferroni")
    family = settings.get("family", "all")
    tests = len(comparison.significance)
    if correction == "none":
        how = "no correction for multiple comparisons"
    else:
        scope = f"over all {tests} comparisons" if family == "all" else "within each measure"
        how = f"{'Bonferroni' if correction == 'bonferroni' else 'Holm'} correction {scope}"
    return (
        f"{BETTER} significantly better, {WORSE} significantly worse than {_escape(comparison.baseline)} "
        f"(paired two-sided t-test over the queries both runs were evaluated on, {how}, "
        f"adjusted p <= {settings.get('alpha', 0.05)})."
    )


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _number(value: Any, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{float(value):.{digits}f}"
