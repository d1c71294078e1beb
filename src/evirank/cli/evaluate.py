"""``evirank evaluate``: mean and per-query tables of runs, and t-tests against a baseline.

Example:
    $ evirank evaluate --qrels qrels.dl19-passage.txt \\
        --run bm25=run.dl19-passage.bm25.txt --run rm3=run.dl19-passage.bm25-rm3.txt \\
        --baseline bm25 --metrics nDCG@10 "AP(rel=2)" "R(rel=2)@100"
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[^=/\\]+$")

EPILOG = """\
runs are named after their file (run.bm25.txt -> run.bm25), or NAME=PATH.
measures are ir_measures names (AP, MAP, P@20, nDCG@10, RR@10, R@1000, AP(rel=2), R(rel=2)@1000)
or single trec_eval names (map, ndcg_cut.10, P.20, recall.1000).

semantics (trec_eval's): documents are ranked by score (single precision), ties by docno
descending, exactly as trec_eval reads the run file (evirank writes runs in that same
order); --ties rank follows each run file's own rank column instead. Queries of the qrels
missing from a run are skipped (trec_eval's default); --missing zero counts them as 0
(trec_eval -c). For TREC DL, Anserini evaluates AP and recall with --relevance-level 2
(trec_eval -l 2) and nDCG with the default.

examples:
  evirank evaluate --qrels qrels.txt --run run.bm25.txt
  evirank evaluate --qrels qrels.txt --run bm25=a.txt --run birch=b.txt --baseline bm25 \\
      --measures AP P@20 nDCG@20 --correction holm --significance 0.01 --format json --output report.json
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``evaluate`` and its flags."""
    from evirank.cli import CommandHelpFormatter

    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate runs against qrels (trec_eval semantics), with paired t-tests",
        description="Evaluate TREC runs against qrels: a table of means, per-query values, and paired "
        "t-tests of each run against a baseline with Bonferroni (or Holm) correction.",
        epilog=EPILOG,
        formatter_class=CommandHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        [
            "qrels",
            "run",
            "measures",
            "per_query",
            "baseline",
            *SIGNIFICANCE,
            "ties",
            "format",
            "digits",
            "output",
            "overwrite",
        ],
        required={"qrels", "run"},
        defaults={"format": "markdown"},
        helps={
            "run": "a TREC run, PATH or NAME=PATH (repeat for several runs)",
            "output": "write here instead of standard output",
            "overwrite": "replace an existing --output file",
        },
        changes={"run": {"action": "append", "metavar": "R"}, "format": {"choices": ("markdown", "json")}},
    )
    return parser


#: The settings ``evaluate`` and ``report`` share: relevance level, missing queries, and the t-tests'
#: correction, family and significance level.
SIGNIFICANCE = ["relevance_level", "missing", "correction", "family", "significance"]


def run(args: argparse.Namespace) -> int:
    """Read the qrels and runs, compare them, and write the report."""
    from evirank.evaluate import compare, markdown_report, parse_measures, to_record
    from evirank.evaluate.measures import EvaluationError
    from evirank.io import read_qrels, read_run
    from evirank.outputs import atomic_outputs, check_output
    from evirank.record import compact_json, make_record, sidecar

    if args.output:
        check_output(args.output, args.overwrite)  # fail before any work
        check_output(sidecar(args.output), args.overwrite)
    measures = parse_measures(args.measures, args.relevance_level)
    specs = [parse_run_spec(text) for text in args.run]
    baseline_name = None
    if args.baseline:
        baseline_name, extra = resolve_baseline(args.baseline, specs)
        if extra is not None:
            specs.insert(0, extra)
    names = [name for name, _ in specs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise EvaluationError(
            f"evaluate: several runs are named {', '.join(repeated)}; name them with NAME=PATH"
        )

    for _, path in specs:
        if not str(path).startswith("irds:"):
            from evirank.io.files import input_file

            input_file(path, "a TREC run file")
    qrels = read_qrels(args.qrels)
    logger.info("read %d judgements for %d queries from %s", len(qrels), qrels["qid"].nunique(), args.qrels)
    runs = {}
    for name, path in specs:
        # --ties rank needs the file's own rank column (read_run renumbers from the scores otherwise);
        # infinite scores are accepted as trec_eval accepts them
        runs[name] = read_run(path, ranks="file" if args.ties == "rank" else "scores", finite=False)
        logger.info("read run %s: %d rows from %s", name, len(runs[name]), path)
        if not set(runs[name]["qid"]) & set(qrels["qid"]):
            raise EvaluationError(
                f"{path}: no query of this run is judged in {args.qrels} "
                f"(run queries: {_some(runs[name]['qid'])}; judged: {_some(qrels['qid'])}); "
                "are the run and the qrels of the same collection and split?"
            )
    comparison = compare(
        runs,
        qrels,
        measures,
        baseline=baseline_name,
        correction=args.correction,
        alpha=args.significance,
        family=args.family,
        ties=args.ties,
        missing=args.missing,
        relevance_level=args.relevance_level,
    )
    if args.format == "json":
        import json

        record = to_record(comparison, per_query=args.per_query)
        record["qrels"] = str(args.qrels)
        paths = dict(specs)
        for entry in record["runs"]:
            entry["path"] = str(paths[entry["name"]])
        text = json.dumps(record, indent=2, allow_nan=False) + "\n"
    else:
        text = markdown_report(comparison, per_query=args.per_query, digits=args.digits)
    if args.output:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        record = make_record("evaluate", config, runs=dict(specs), qrels=args.qrels)
        outputs = ((args.output, None), (sidecar(args.output), None))
        with atomic_outputs(*outputs, overwrite=args.overwrite) as (tmp, tmp_record):
            tmp.write_text(text, encoding="utf-8")
            tmp_record.write_text(compact_json(record) + "\n", encoding="utf-8")
        logger.info("wrote %s and its record %s", args.output, sidecar(args.output))
    else:
        sys.stdout.write(text)
    return 0


def _some(qids: Any, shown: int = 5) -> str:
    """A few distinct qids for a message: ``'1', '2', ... (300 in all)``."""
    distinct = list(dict.fromkeys(str(q) for q in qids))
    text = ", ".join(repr(q) for q in distinct[:shown])
    return text + (f", ... ({len(distinct)} in all)" if len(distinct) > shown else "")


def parse_run_spec(text: str) -> tuple[str, Path]:
    """``PATH`` -> (file stem, PATH); ``NAME=PATH`` -> (NAME, PATH). An existing file wins over NAME=PATH.

    Example:
        >>> parse_run_spec("runs/run.bm25.txt")
        ('run.bm25', PosixPath('runs/run.bm25.txt'))
        >>> parse_run_spec("bm25=runs/a.txt")
        ('bm25', PosixPath('runs/a.txt'))
    """
    path = Path(text)
    if "=" in text and not path.exists():
        name, _, rest = text.partition("=")
        if _NAME.match(name) and rest:
            return name, Path(rest)
    return run_name(path), path


def run_name(path: Path) -> str:
    """A run's default name: its file name without ``.gz`` and the last suffix.

    Example:
        >>> run_name(Path("run.dl19.bm25.txt.gz"))
        'run.dl19.bm25'
    """
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return Path(name).stem or name


def resolve_baseline(text: str, specs: list[tuple[str, Path]]) -> tuple[str, tuple[str, Path] | None]:
    """The baseline's name, and a run to add when ``text`` names none of ``specs``.

    ``text`` may be a run's name, the path of one of the runs, or a new PATH / NAME=PATH.
    """
    for name, _ in specs:
        if text == name:
            return name, None
    candidate = Path(text)
    if candidate.exists():
        for name, path in specs:
            if path.exists() and path.resolve() == candidate.resolve():
                return name, None
    spec = parse_run_spec(text)
    return spec[0], spec
