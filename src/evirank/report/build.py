"""A report of several runs against a baseline: tables, plots, Markdown, HTML and JSON.

Sections (each optional one is skipped, with a note, when its inputs are missing):

1. **Effectiveness**: runs x measures with significance marks
   (:func:`evirank.evaluate.compare`, :func:`evirank.evaluate.markdown_table`).
2. **Per-query differences** from the baseline, sorted descending, one PNG per run and measure
   (Birch's Figure 5.1), with the share of queries improved and hurt.
3. **By query length** (needs query texts: ``topics``, or the queries of the pruned inputs):
   the mean of one measure per length bucket, with significance marks per bucket (Table 5.4).
4. **Pruned** (needs ``tune`` folders with scored passages): each system re-tuned on passages
   holding no query term, beside the baseline (Table 5.6).
5. **Training** (needs model folders of ``evirank train``, ``distill`` or ``adapt``): each run's
   steps, time and loss at its start and end, and their loss curves on one plot.

A report of training runs alone needs no qrels and no runs.

Example:
    >>> config = ReportConfig(qrels="qrels.txt", runs=(("bm25", "bm25.txt"), ("birch", "cv/run.txt")),
    ...                       baseline="bm25")
    >>> config.measures
    ('AP', 'P@20', 'nDCG@20')
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evirank import markdown
from evirank.evaluate import Comparison, compare, markdown_table, to_record
from evirank.evaluate.measures import Missing
from evirank.evaluate.significance import Correction, Family
from evirank.evaluate.tables import BETTER, WORSE, significance_marks
from evirank.frames import QID, QUERY
from evirank.outputs import atomic_output
from evirank.record import compact_json, make_record, plain
from evirank.report.analysis import (
    LengthTable,
    ReportError,
    length_table,
    parse_buckets,
    per_query_differences,
)
from evirank.report.html import markdown_to_html
from evirank.tune.runner import choices_markdown

logger = logging.getLogger(__name__)

MARKDOWN_FILE = "report.md"
HTML_FILE = "report.html"
RECORD_FILE = "report.json"
DEFAULT_TITLE = "evirank report"


@dataclass(frozen=True)
class ReportConfig:
    """What goes into a report (the flags of ``evirank report``).

    Attributes:
        qrels: qrels file (needed with ``runs``).
        runs: (name, path) pairs; a path may be a TREC run or a ``tune`` output folder.
            Without runs the report holds the training section alone.
        baseline: the baseline's name (one of ``runs``), or None.
        measures: the table's measures.
        correction: ``bonferroni``, ``holm`` or ``none``.
        alpha: significance level.
        family: ``all`` or ``measure``.
        relevance_level: trec_eval's ``-l``.
        missing: ``skip`` or ``zero`` for qrels queries absent from a run.
        topics: topics file (query texts for the length breakdown).
        length_buckets: e.g. ``1,2,3,4+``; None: automatic.
        length_measure: the measure of the length breakdown (default: the first measure).
        plot_measures: measures plotted per query (default: the first measure).
        pruned: (name, tune folder) pairs for the pruned analysis.
        stem: fold plurals when matching query terms.
        title: the report's title.
        training: (name, model folder) pairs: training runs whose logs are summed up and drawn.
        loss_window: the loss curves' moving mean in steps (None: a fiftieth of each run).
    """

    qrels: str | Path | None = None
    runs: tuple[tuple[str, str | Path], ...] = ()
    baseline: str | None = None
    measures: tuple[str, ...] = ("AP", "P@20", "nDCG@20")
    correction: Correction = "bonferroni"
    alpha: float = 0.05
    family: Family = "all"
    relevance_level: int | None = None
    missing: Missing = "skip"
    topics: str | Path | None = None
    length_buckets: str | None = None
    length_measure: str | None = None
    plot_measures: tuple[str, ...] | None = None
    pruned: tuple[tuple[str, str | Path], ...] = ()
    stem: bool = True
    title: str = DEFAULT_TITLE
    training: tuple[tuple[str, str | Path], ...] = ()
    loss_window: int | None = None

    def __post_init__(self) -> None:
        if not self.runs and not self.training:
            raise ReportError("nothing to report: give runs (with qrels) or training runs")
        if self.runs and self.qrels is None:
            raise ReportError("runs need qrels to be evaluated against")
        if self.qrels is not None and not self.runs:
            raise ReportError("qrels were given without a run to evaluate")


@dataclass
class Report:
    """A rendered report: Markdown (images by file name), the PNGs, and its JSON-ready record
    (:func:`evirank.record.make_record`: command, config, results, versions)."""

    title: str
    markdown: str
    images: dict[str, bytes]
    record: dict[str, Any] = field(default_factory=dict)

    def html(self) -> str:
        """The report as one self-contained HTML page (images embedded)."""
        return markdown_to_html(self.markdown, title=self.title, images=self.images)

    def write(self, folder: str | Path, *, overwrite: bool = False) -> Path:
        """Write report.md, report.html, report.json and the PNGs into ``folder`` (atomically)."""
        out = Path(folder)
        with atomic_output(out, overwrite=overwrite, marker=RECORD_FILE) as tmp:
            tmp.mkdir(parents=True)
            (tmp / MARKDOWN_FILE).write_text(self.markdown, encoding="utf-8")
            (tmp / HTML_FILE).write_text(self.html(), encoding="utf-8")
            for name, data in self.images.items():
                (tmp / name).write_bytes(data)
            (tmp / RECORD_FILE).write_text(compact_json(self.record) + "\n", encoding="utf-8")
        logger.info("wrote the report to %s", out)
        return out


def run_path(path: str | Path) -> Path:
    """A run file, or the ``run.txt`` of a ``tune`` output folder."""
    candidate = Path(path)
    if candidate.is_dir():
        inside = candidate / "run.txt"
        if not inside.is_file():
            raise FileNotFoundError(
                f"{candidate}: a folder without run.txt (expected a run or a tune folder)"
            )
        return inside
    return candidate


def build_report(config: ReportConfig, *, plots: bool = True) -> Report:
    """Evaluate, analyse and render (see the module docstring)."""
    report = _Draft(config, plots)
    report.add(f"# {config.title}")
    if config.runs:
        _run_sections(report)
    _training_section(report)
    record = make_record("report", config, **report.record, images=sorted(report.images))
    return Report(config.title, "\n".join(report.lines).rstrip() + "\n", report.images, record)


@dataclass
class _Draft:
    """A report being written: its Markdown blocks, images and record."""

    config: ReportConfig
    plots: bool
    lines: list[str] = field(default_factory=list)
    images: dict[str, bytes] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)

    def add(self, *blocks: str) -> None:
        """Append Markdown blocks, each followed by a blank line."""
        for block in blocks:
            self.lines += [block, ""]


def _run_sections(report: _Draft) -> None:
    """The sections about runs: effectiveness, tuned settings, differences, length, pruned."""
    from evirank.io import read_qrels, read_run

    config = report.config
    assert config.qrels is not None  # checked by ReportConfig
    qrels = read_qrels(config.qrels)
    runs = {name: read_run(run_path(path)) for name, path in config.runs}
    comparison = _compare(config, qrels, runs)
    report.record["comparison"] = to_record(comparison)
    report.add(_inputs_note(config, comparison), "## Effectiveness", markdown_table(comparison))
    _tuned_section(report)
    _differences_section(report, comparison)
    pruned_runs = _pruned(config)
    _length_section(report, comparison, _queries(config, pruned_runs))
    _pruned_section(report, qrels, runs, pruned_runs)


def _training_section(report: _Draft) -> None:
    """Each training run's steps, time and loss at its start and end, and the loss curves."""
    config = report.config
    if not config.training:
        return
    from evirank.report.training import auto_window, read_training_log, training_markdown, training_summary

    logs = {name: read_training_log(folder) for name, folder in config.training}
    windows = {name: config.loss_window or auto_window(len(log.steps)) for name, log in logs.items()}
    summaries = {name: training_summary(log, window=windows[name]) for name, log in logs.items()}
    report.record["training"] = {
        name: {**summary, "log": str(logs[name].source)} for name, summary in summaries.items()
    }
    report.add(
        "## Training",
        "Loss at the start and at the end: the mean of each run's first and last steps, as many as "
        "its curve's moving mean spans.",
        training_markdown(summaries),
    )
    if report.plots:
        from evirank.report.plots import loss_curve_plot

        curves = {name: log.steps for name, log in logs.items()}
        title = "Training loss" if config.title == DEFAULT_TITLE else f"Training loss: {config.title}"
        report.images["training-loss.png"] = loss_curve_plot(curves, windows, title=title)
        report.add("![Training loss by step](training-loss.png)")
        validated = {name: s["measure"] for name, s in summaries.items() if "measure" in s}
        if validated:
            from evirank.report.plots import validation_plot

            report.images["training-validation.png"] = validation_plot(
                {name: logs[name].validations for name in validated}, validated
            )
            report.add("![Validation by step](training-validation.png)")


def _compare(config: ReportConfig, qrels: pd.DataFrame, runs: Mapping[str, pd.DataFrame]) -> Comparison:
    return compare(
        runs,
        qrels,
        config.measures,
        baseline=config.baseline,
        correction=config.correction,
        alpha=config.alpha,
        family=config.family,
        missing=config.missing,
        relevance_level=config.relevance_level,
    )


def _tuned_section(report: _Draft) -> None:
    """For runs given as ``tune`` output folders: each fold's chosen setting."""
    tuned = _tuned_settings(report.config)
    if not tuned:
        return
    report.add("## Tuned settings")
    for name, text in tuned.items():
        report.add(f"{name}: the setting each fold chose on its tuning queries (`evirank tune`).", text)


def _differences_section(report: _Draft, comparison: Comparison) -> None:
    """Per-query differences from the baseline: counts, extremes and one plot per run and measure."""
    report.add("## Per-query differences")
    if comparison.baseline is None:
        report.add("No baseline was given, so there are no per-query differences.")
        return
    differences: dict[str, dict[str, int]] = {}
    report.record["differences"] = differences
    for run in [r for r in comparison.runs if r != comparison.baseline]:
        for measure in list(report.config.plot_measures or comparison.measures[:1]):
            diff = per_query_differences(comparison, run, measure)
            better, worse = int((diff > 0).sum()), int((diff < 0).sum())
            report.add(
                f"{run} vs {comparison.baseline} on {measure}: better on {better} of {len(diff)} queries "
                f"({_pct(better, len(diff))}), worse on {worse} ({_pct(worse, len(diff))}), "
                f"mean difference {diff.mean():+.4f}." + _extremes(diff)
            )
            differences[f"{run}|{measure}"] = {"better": better, "worse": worse, "queries": len(diff)}
            if report.plots:
                from evirank.report.plots import per_query_difference_plot

                name = f"diff-{_slug(run)}-{_slug(measure)}.png"
                report.images[name] = per_query_difference_plot(
                    diff, run=run, baseline=comparison.baseline, measure=measure
                )
                report.add(f"![Per-query difference in {measure}: {run} vs {comparison.baseline}]({name})")


def _length_section(report: _Draft, comparison: Comparison, queries: dict[str, str]) -> None:
    """Means of one measure by query length, with significance per bucket (Birch's Table 5.4)."""
    config = report.config
    report.add("## By query length")
    if not queries:
        report.add("No query texts (give --topics) so there is no breakdown by query length.")
        return
    measure = config.length_measure or comparison.measures[0]
    buckets = parse_buckets(config.length_buckets) if config.length_buckets else None
    table = length_table(
        comparison,
        queries,
        measure,
        buckets,
        correction=config.correction,
        alpha=config.alpha,
        family=config.family,
    )
    report.add(_length_markdown(table, config))
    report.record["by_length"] = _length_record(table)
    if report.plots:
        from evirank.report.plots import length_plot

        report.images["by-length.png"] = length_plot(
            table.means, table.counts, measure=measure, baseline=comparison.baseline
        )
        report.add(f"![Mean {measure} by query length](by-length.png)")


def _pruned_section(
    report: _Draft, qrels: pd.DataFrame, runs: Mapping[str, pd.DataFrame], pruned_runs: list[Any]
) -> None:
    """Each system re-tuned on passages without query terms, beside the baseline (Table 5.6)."""
    config = report.config
    report.add("## Pruned: evidence from passages without query terms")
    if not pruned_runs:
        report.add(
            "No tune folders with scored passages were given (--pruned NAME=DIR), so there is no "
            "pruned analysis."
        )
        return
    table: dict[str, pd.DataFrame] = {}
    if config.baseline is not None:
        table[config.baseline] = runs[config.baseline]
    for p in pruned_runs:
        table[f"{p.name} (pruned)"] = p.run
    pruned_comparison = _compare(config, qrels, table)
    report.add(
        "Each system re-tuned (same folds, grid and metric) on its passages after dropping every passage "
        "that contains a query term (stopwords excluded"
        + (", plurals folded" if config.stem else "")
        + "); documents left without passages keep their first-stage score.",
        markdown_table(pruned_comparison),
        "\n".join(
            f"- {p.name}: {100 * p.dropped:.1f}% of passages dropped; {p.placeholders} documents "
            f"kept only a placeholder; settings {_choices(p)}"
            for p in pruned_runs
        ),
    )
    report.record["pruned"] = {
        "comparison": to_record(pruned_comparison),
        "systems": [
            {
                "name": p.name,
                "dropped": p.dropped,
                "placeholders": p.placeholders,
                "choices": [asdict(c) for c in p.result.choices],
            }
            for p in pruned_runs
        ],
    }


def _tuned_settings(config: ReportConfig) -> dict[str, str]:
    """For runs given as ``tune`` folders: each fold's chosen setting as a Markdown table."""
    out = {}
    for name, path in config.runs:
        record_file = Path(path) / "tune.json"
        if not record_file.is_file():
            continue
        record = json.loads(record_file.read_text(encoding="utf-8"))
        varying = [n for n, values in _grid_axes(record["grid"]).items() if len(values) > 1]
        table = choices_markdown(record["choices"], varying, record["metric"])
        out[name] = (
            f"{record['aggregate']} (normalise {record['normalise']}), {record['settings']:,} "
            f"setting{'s' if record['settings'] != 1 else ''}, folds {record['folds_source']}.\n\n{table}"
        )
    return out


def _grid_axes(spec: list[str]) -> dict[str, list[str]]:
    axes = {}
    for token in spec:
        name, _, values = token.partition("=")
        axes[name] = values.split(",")
    return axes


def _pruned(config: ReportConfig) -> list[Any]:
    if not config.pruned:
        return []
    from evirank.report.pruned import pruned_run

    return [pruned_run(name, folder, stem=config.stem) for name, folder in config.pruned]


def _queries(config: ReportConfig, pruned: list[Any]) -> dict[str, str]:
    if config.topics is not None:
        from evirank.io import read_topics

        topics = read_topics(config.topics)
        return dict(zip(topics[QID].astype(str), topics[QUERY].astype(str), strict=True))
    out: dict[str, str] = {}
    for p in pruned:
        if QUERY in p.run.columns:
            out.update(p.run.drop_duplicates(QID).set_index(QID)[QUERY].astype(str).to_dict())
    return out


def _length_markdown(table: LengthTable, config: ReportConfig) -> str:
    marks = significance_marks(table.significance)
    labels = list(table.means.columns)
    rows = []
    for run in table.means.index:
        cells = [f"{run} (baseline)" if run == table.baseline else str(run)]
        for label in labels:
            value = table.means.loc[run, label]
            cells.append("–" if pd.isna(value) else f"{value:.4f}{marks.get((str(run), label), '')}")
        rows.append(cells)
    lines = [
        f"Mean {table.measure} by query length in words (stopwords excluded); the number of queries in "
        "parentheses.",
        "",
        markdown.table(["run", *[f"{label} ({table.counts[label]})" for label in labels]], rows),
    ]
    if table.significance is not None and table.baseline is not None:
        scope = "over all runs and buckets" if config.family == "all" else "within each bucket"
        how = (
            "no correction"
            if config.correction == "none"
            else f"{config.correction.capitalize()} correction {scope}"
        )
        lines += [
            "",
            f"{BETTER} significantly better, {WORSE} significantly worse than {table.baseline} within the "
            f"bucket (paired two-sided t-test, {how}, adjusted p <= {config.alpha}).",
        ]
    return "\n".join(lines)


def _length_record(table: LengthTable) -> dict[str, Any]:
    means = {
        str(run): {str(k): (None if pd.isna(v) else float(v)) for k, v in row.items()}
        for run, row in table.means.iterrows()
    }
    significance = None
    if table.significance is not None:
        significance = plain(table.significance.to_dict(orient="records"))
    return {"measure": table.measure, "counts": table.counts, "means": means, "significance": significance}


def _inputs_note(config: ReportConfig, comparison: Comparison) -> str:
    runs = ", ".join(f"{name} (`{run_path(path)}`)" for name, path in config.runs)
    base = f" Baseline: {comparison.baseline}." if comparison.baseline else ""
    return f"Qrels `{config.qrels}`; runs: {runs}.{base}"


def _choices(p: Any) -> str:
    names = [n for n, axis in zip(p.result.grid.names, p.result.grid.axes, strict=True) if len(axis) > 1]
    return "; ".join(
        f"fold {c.fold}: " + " ".join(f"{n}={c.params[n]:g}" for n in names) for c in p.result.choices
    )


def _extremes(diff: pd.Series, most: int = 3) -> str:
    """`` Largest gains: q1 (+0.50), ...; largest losses: ...`` (only nonzero differences)."""
    gains = [f"{q} ({v:+.2f})" for q, v in diff.head(most).items() if v > 0]
    losses = [f"{q} ({v:+.2f})" for q, v in diff.iloc[::-1].head(most).items() if v < 0]
    parts = []
    if gains:
        parts.append("largest gains: " + ", ".join(gains))
    if losses:
        parts.append("largest losses: " + ", ".join(losses))
    text = "; ".join(parts)
    return f" {text[0].upper()}{text[1:]}." if text else ""


def _pct(count: int, total: int) -> str:
    return f"{100.0 * count / total:.0f}%" if total else "0%"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"
