"""``evirank report``: runs against a baseline as tables, plots, Markdown and a self-contained HTML page.

Example:
    $ evirank report --qrels qrels/test.tsv --run bm25=runs/bm25.txt --run birch=runs/birch3-cv \\
        --baseline bm25 --topics queries.jsonl --pruned birch=runs/birch3-cv --output reports/scifact
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from evirank.cli.evaluate import SIGNIFICANCE

logger = logging.getLogger(__name__)

DEFAULT_MEASURES = ("AP", "P@20", "nDCG@20")

EPILOG = """\
runs: a TREC run file or a folder written by `evirank tune` (its run.txt), as PATH or NAME=PATH.

sections: the table of runs x measures with significance marks (paired two-sided t-test against
--baseline, Bonferroni over the table by default); per-query differences from the baseline sorted
descending (one PNG per run and --plot-measures measure, as Birch's Figure 5.1); the mean of
--length-measure by query length in words, stopwords excluded (needs --topics; buckets automatic
or --length-buckets 1,2,3,4+; Birch's Table 5.4); and with --pruned NAME=TUNE_DIR, each system
re-tuned from its cached passage scores after dropping every passage that holds a query term
(Birch's Table 5.6; no model runs).

output folder: report.md, report.html (self-contained, plots embedded), report.json, the PNGs.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``report`` and its flags."""
    from evirank.cli import CommandHelpFormatter

    parser = subparsers.add_parser(
        "report",
        help="a report of runs against a baseline: significance, plots, query-length and pruned analyses",
        description="Compare runs with a baseline and write a report (Markdown, self-contained HTML with "
        "plots, JSON): significance table, per-query differences, breakdown by query length, and the "
        "pruned analysis of passages without query terms.",
        epilog=EPILOG,
        formatter_class=CommandHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        [
            "qrels",
            "run",
            "baseline",
            "measures",
            *SIGNIFICANCE,
            "plot_measures",
            "topics",
            "length_buckets",
            "length_measure",
            "pruned",
            "exact_terms",
            "no_plots",
            "title",
            "output",
            "overwrite",
        ],
        required={"qrels", "run", "output"},
        defaults={"measures": DEFAULT_MEASURES},
        helps={
            "run": "a run (PATH or NAME=PATH; PATH may be a tune folder); repeat",
            "baseline": "the run every other is compared with",
            "topics": "topics, for the breakdown by query length",
            "output": "output folder",
            "overwrite": "replace an existing output folder",
        },
        changes={"run": {"action": "append", "metavar": "R"}, "baseline": {"metavar": "NAME"}},
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Build the report, write the folder, print the Markdown."""
    from evirank.cli.evaluate import parse_run_spec
    from evirank.outputs import check_output
    from evirank.report import ReportConfig, ReportError, build_report
    from evirank.report.build import RECORD_FILE

    check_output(args.output, args.overwrite, marker=RECORD_FILE)
    runs = tuple(parse_run_spec(text) for text in args.run)
    names = [name for name, _ in runs]
    if len(set(names)) != len(names):
        raise ReportError("several runs have the same name; name them with NAME=PATH")
    if args.baseline is not None and args.baseline not in names:
        raise ReportError(f"--baseline {args.baseline!r} is not one of the runs ({', '.join(names)})")
    pruned = []
    for text in args.pruned or ():
        name, sep, folder = text.partition("=")
        if not sep or not name or not folder:
            raise ReportError(f"--pruned {text!r}: expected NAME=TUNE_DIR")
        pruned.append((name, folder))
    config = ReportConfig(
        qrels=args.qrels,
        runs=runs,
        baseline=args.baseline,
        measures=tuple(args.measures),
        correction=args.correction,
        alpha=args.significance,
        family=args.family,
        relevance_level=args.relevance_level,
        missing=args.missing,
        topics=args.topics,
        length_buckets=args.length_buckets,
        length_measure=args.length_measure,
        plot_measures=tuple(args.plot_measures) if args.plot_measures else None,
        pruned=tuple(pruned),
        stem=not args.exact_terms,
        title=args.title,
    )
    report = build_report(config, plots=not args.no_plots)
    report.write(args.output, overwrite=args.overwrite)
    sys.stdout.write(report.markdown)
    return 0
