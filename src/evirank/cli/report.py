"""``evirank report``: runs against a baseline as tables, plots, Markdown and a self-contained HTML page.

Examples:
    $ evirank report --qrels qrels/test.tsv --run bm25=runs/bm25.txt --run birch=runs/birch3-cv \\
        --baseline bm25 --topics queries.jsonl --pruned birch=runs/birch3-cv --output reports/scifact
    $ evirank report --training crop=models/crop --training tsdae=models/tsdae --output reports/adapt
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
(Birch's Table 5.6; no model runs); and with --training NAME=MODEL_DIR, each training run's
steps, seconds and loss at its start and end, and all their loss curves on one plot (a moving mean
over --loss-window steps). --training alone, without --qrels and --run, reports the training runs only.

output folder: report.md, report.html (self-contained, plots embedded), report.json, the PNGs.
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``report`` and its flags."""
    from evirank.cli import CommandHelpFormatter

    parser = subparsers.add_parser(
        "report",
        help="a report of runs against a baseline (significance, plots, query-length and pruned "
        "analyses) and of training runs (loss curves)",
        description="Compare runs with a baseline and write a report (Markdown, self-contained HTML with "
        "plots, JSON): significance table, per-query differences, breakdown by query length, and the "
        "pruned analysis of passages without query terms; and training runs' steps and loss curves.",
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
            "training",
            "loss_window",
            "no_plots",
            "title",
            "output",
            "overwrite",
        ],
        required={"output"},
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
    if not args.run and not args.training:
        raise ReportError("give --qrels and --run (runs to compare), or --training (training runs), or both")
    if bool(args.run) != (args.qrels is not None):
        raise ReportError("--run and --qrels go together: runs are evaluated against the qrels")
    runs = tuple(parse_run_spec(text) for text in args.run or ())
    names = [name for name, _ in runs]
    if len(set(names)) != len(names):
        raise ReportError("several runs have the same name; name them with NAME=PATH")
    if args.baseline is not None and args.baseline not in names:
        raise ReportError(f"--baseline {args.baseline!r} is not one of the runs ({', '.join(names)})")
    pruned = _named_folders("pruned", "TUNE_DIR", args.pruned)
    training = _named_folders("training", "MODEL_DIR", args.training)
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
        pruned=pruned,
        stem=not args.exact_terms,
        title=args.title,
        training=training,
        loss_window=args.loss_window,
    )
    report = build_report(config, plots=not args.no_plots)
    report.write(args.output, overwrite=args.overwrite)
    sys.stdout.write(report.markdown)
    return 0


def _named_folders(flag: str, folder: str, texts: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``NAME=DIR`` flag values as (name, folder) pairs; a malformed or repeated name is an error."""
    from evirank.report import ReportError

    pairs = []
    for text in texts or ():
        name, sep, path = text.partition("=")
        if not sep or not name or not path:
            raise ReportError(f"--{flag.replace('_', '-')} {text!r}: expected NAME={folder}")
        pairs.append((name, path))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ReportError(f"--{flag.replace('_', '-')}: several have the same name")
    return tuple(pairs)
