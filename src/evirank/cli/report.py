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

from evirank.cli.evaluate import add_significance_arguments

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
    parser = subparsers.add_parser(
        "report",
        help="a report of runs against a baseline: significance, plots, query-length and pruned analyses",
        description="Compare runs with a baseline and write a report (Markdown, self-contained HTML with "
        "plots, JSON): significance table, per-query differences, breakdown by query length, and the "
        "pruned analysis of passages without query terms.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--qrels", required=True, metavar="Q", help="TREC qrels or BEIR qrels TSV")
    parser.add_argument(
        "--run",
        dest="runs",
        action="append",
        required=True,
        metavar="R",
        help="a run (PATH or NAME=PATH; PATH may be a tune folder); repeat",
    )
    parser.add_argument("--baseline", metavar="NAME", help="the run every other is compared with")
    parser.add_argument(
        "--metrics",
        "--measures",
        dest="metrics",
        nargs="+",
        default=list(DEFAULT_MEASURES),
        metavar="M",
        help=f"measures (default: {' '.join(DEFAULT_MEASURES)})",
    )
    add_significance_arguments(parser)
    parser.add_argument(
        "--plot-measures", nargs="+", metavar="M", help="measures plotted per query (default: first)"
    )
    parser.add_argument("--topics", metavar="T", help="topics, for the breakdown by query length")
    parser.add_argument(
        "--length-buckets", metavar="SPEC", help="e.g. 1,2,3,4+ or 1-5,6-10,11+ (default: automatic)"
    )
    parser.add_argument(
        "--length-measure", metavar="M", help="the measure by query length (default: the first)"
    )
    parser.add_argument(
        "--pruned",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="re-tune this tune folder on passages without query terms; repeat",
    )
    parser.add_argument(
        "--exact-terms", action="store_true", help="pruning matches exact tokens (default: plurals folded)"
    )
    parser.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    parser.add_argument("--title", default="evirank report", help="the report's title")
    parser.add_argument("--output", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    return parser


def run(args: argparse.Namespace) -> int:
    """Build the report, write the folder, print the Markdown."""
    from evirank.cli.evaluate import parse_run_spec
    from evirank.outputs import check_output
    from evirank.report import ReportConfig, ReportError, build_report
    from evirank.report.build import RECORD_FILE

    check_output(args.output, args.overwrite, marker=RECORD_FILE)
    runs = tuple(parse_run_spec(text) for text in args.runs)
    names = [name for name, _ in runs]
    if len(set(names)) != len(names):
        raise ReportError("several runs have the same name; name them with NAME=PATH")
    if args.baseline is not None and args.baseline not in names:
        raise ReportError(f"--baseline {args.baseline!r} is not one of the runs ({', '.join(names)})")
    pruned = []
    for text in args.pruned:
        name, sep, folder = text.partition("=")
        if not sep or not name or not folder:
            raise ReportError(f"--pruned {text!r}: expected NAME=TUNE_DIR")
        pruned.append((name, folder))
    config = ReportConfig(
        qrels=args.qrels,
        runs=runs,
        baseline=args.baseline,
        measures=tuple(args.metrics),
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
