"""Reports of experiments: significance tables, per-query difference plots, query length, pruned evidence.

The analyses follow Birch's thesis (Figure 5.1, Tables 5.4 and 5.6); the report is written as
Markdown and as one self-contained HTML page with its plots embedded.

Example:
    >>> from evirank.report import ReportConfig, build_report
    >>> runs = (("bm25", "bm25.txt"), ("birch", "runs/birch3-cv"))
    >>> config = ReportConfig(qrels="qrels.txt", runs=runs, baseline="bm25")
    >>> report = build_report(config)  # doctest: +SKIP
    >>> report.write("report/")  # doctest: +SKIP
"""

from __future__ import annotations

from evirank.report.analysis import (
    Bucket,
    LengthTable,
    ReportError,
    auto_buckets,
    length_table,
    parse_buckets,
    per_query_differences,
)
from evirank.report.build import Report, ReportConfig, build_report, run_path
from evirank.report.html import markdown_to_html
from evirank.terms import STOPWORDS, contains_any, query_length, query_terms, s_stem, tokens

__all__ = [
    "STOPWORDS",
    "Bucket",
    "LengthTable",
    "Report",
    "ReportConfig",
    "ReportError",
    "auto_buckets",
    "build_report",
    "contains_any",
    "length_table",
    "markdown_to_html",
    "parse_buckets",
    "per_query_differences",
    "query_length",
    "query_terms",
    "run_path",
    "s_stem",
    "tokens",
]
