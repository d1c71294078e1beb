"""One tuning job from files to an output folder: what ``evirank tune`` runs.

:class:`TuneConfig` mirrors the command's flags; :func:`run_tune` reads the inputs, runs
:func:`~evirank.tune.search.cross_validate`, and writes the folder atomically:

- ``run.txt``: the cross-validated run (TREC format); with a first-stage run, its documents
  without passages follow in first-stage order (:func:`evirank.aggregate.merge_tail`);
- ``params.tsv``: each fold's chosen setting, tuning and test means, ties;
- ``grid.tsv``: every setting's mean over each fold's tuning queries and over all queries;
- ``folds.json``: the folds used (Robust04 JSON shape);
- ``tune.json``: the config, versions, input sizes, timings, choices, the best setting over all
  queries, and the evaluation of ``run.txt`` by :class:`~evirank.evaluate.Evaluator`.

Example:
    >>> config = TuneConfig(qrels="qrels.txt", passages="passages.parquet", k_folds=5, seed=1)
    >>> config.aggregate, config.metric
    ('maxp', 'AP')
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evirank import markdown
from evirank.aggregate.registry import AggregateSpec
from evirank.config import SETTINGS
from evirank.frames import QID
from evirank.outputs import atomic_output
from evirank.record import write_record
from evirank.tune.errors import TuneError
from evirank.tune.folds import Folds, k_folds, read_folds, write_folds
from evirank.tune.grid import Grid, parse_grid
from evirank.tune.search import TuneResult, cross_validate

logger = logging.getLogger(__name__)

RUN_FILE = "run.txt"
PARAMS_FILE = "params.tsv"
GRID_FILE = "grid.tsv"
FOLDS_FILE = "folds.json"
RECORD_FILE = "tune.json"


@dataclass(frozen=True)
class TuneConfig:
    """The inputs and settings of one tuning job (the flags of ``evirank tune``).

    Attributes:
        qrels: qrels file.
        aggregate: ``birch:N``, ``maxp``, ``firstp``, ``sump`` or ``meanp``.
        normalise: ``"minmax"`` or ``"none"``; None is every aggregator's default (``"minmax"``).
        scores: a score store (needs ``run``), or None.
        fingerprint: the scorer's fingerprint (prefix) in the store.
        passages: a scored-passages file, or None.
        run: the first-stage run (first-stage scores and the tail below the re-ranked documents).
        depth: the run's top ``depth`` documents per query are the re-ranked ones.
        folds: a folds file, or None for ``k_folds`` seeded folds.
        tune_on: which lists of the JSON folds tune a fold.
        k_folds: number of random folds.
        seed: seed of the random folds.
        metric: the measure maximised.
        relevance_level: trec_eval's ``-l``.
        grid: axes (``alpha=0:1:0.1``...), or None for the aggregator's default grid.
        measures: measures reported for the cross-validated run.
        tag: run tag.
        evidence: several scorers' sources instead of ``scores`` / ``passages``:
            ``LABEL=STORE[#FINGERPRINT]`` or ``LABEL=FILE`` each
            (:class:`~evirank.tune.inputs.EvidenceSource`); the first scorer's weight is 1 minus the
            others', which the grid searches by label.
    """

    qrels: str | Path
    aggregate: str = SETTINGS.default("aggregate")
    normalise: str | None = None
    scores: str | Path | None = None
    fingerprint: str | None = None
    passages: str | Path | None = None
    run: str | Path | None = None
    depth: int | None = None
    folds: str | Path | None = None
    tune_on: tuple[str, ...] = SETTINGS.default("tune_on")
    k_folds: int = SETTINGS.default("k_folds")
    seed: int = SETTINGS.default("seed")
    metric: str = SETTINGS.default("metric")
    relevance_level: int | None = None
    grid: tuple[str, ...] | None = None
    measures: tuple[str, ...] = ("AP", "P@20", "nDCG@20", "nDCG@10")
    tag: str | None = None
    evidence: tuple[str, ...] | None = None

    def sources(self) -> list[Any]:
        """The parsed :attr:`evidence` sources (empty without them)."""
        from evirank.tune.inputs import EvidenceSource

        return [EvidenceSource.parse(text) for text in self.evidence or ()]

    def aggregate_spec(self) -> AggregateSpec:
        """The aggregator to tune, with the scorers' labels when there are several."""
        labels = tuple(source.label for source in self.sources())
        return AggregateSpec.parse(
            self.aggregate,
            self.normalise,  # type: ignore[arg-type]
            scorers=labels if len(labels) > 1 else (),
        )


@dataclass
class TuneOutcome:
    """The result of :func:`run_tune`: the search's result, the written run and its evaluation."""

    config: TuneConfig
    result: TuneResult
    run: pd.DataFrame
    evaluation: dict[str, Any]
    output: Path
    record: dict[str, Any] = field(default_factory=dict)

    def summary_markdown(self) -> str:
        """Each fold's setting and the cross-validated scores, as Markdown."""
        result = self.result
        names = [n for n in result.grid.names if len(result.grid.axes[result.grid.names.index(n)]) > 1]
        names = names or list(result.grid.names)
        if result.aggregator.multi:  # every scorer's weight, the first one's implied, in their order
            names = [n for n in names if n not in result.aggregator.scorers] + list(result.aggregator.scorers)
        choices = [asdict(c) for c in [*result.choices, result.best]]
        lines = [choices_markdown(choices, names, result.metric)]
        means = self.evaluation["means"]
        scores = ", ".join(f"{k} {v:.4f}" for k, v in means.items())
        return (
            f"{result.aggregator.name} tuned on {result.metric} over {len(result.grid):,} settings x "
            f"{len(result.folds)} folds in {result.timings.get('grid', 0.0):.2f} s\n\n"
            + "\n".join(lines)
            + f"\n\ncross-validated run ({self.evaluation['queries']} queries): {scores}\n"
            f"written to {self.output}\n"
        )


def choices_markdown(choices: Sequence[Mapping[str, Any]], names: Sequence[str], metric: str) -> str:
    """The setting each fold chose, as a Markdown table (one :class:`FoldChoice` record per row).

    The fold named ``all`` is the best setting over all queries (not cross-validated).

    Example:
        >>> choice = {"fold": "1", "n_tune": 8, "n_test": 2, "params": {"alpha": 0.3},
        ...           "tune_mean": 0.5, "test_mean": 0.25}
        >>> print(choices_markdown([choice], ["alpha"], "AP"))
        | fold | tuning queries | test queries | alpha | tuning AP | test AP |
        | --- | ---: | ---: | ---: | ---: | ---: |
        | 1 | 8 | 2 | 0.3 | 0.5000 | 0.2500 |
    """
    header = ["fold", "tuning queries", "test queries", *names, f"tuning {metric}", f"test {metric}"]
    rows = [
        [
            c["fold"] if c["fold"] != "all" else "all (not CV)",
            c["n_tune"],
            c["n_test"],
            *[f"{c['params'][n]:g}" for n in names],
            f"{c['tune_mean']:.4f}",
            f"{c['test_mean']:.4f}" if c["n_test"] else "–",
        ]
        for c in choices
    ]
    return markdown.table(header, rows)


def default_grid(aggregator: AggregateSpec) -> Grid:
    """Birch's grid: alpha and w2..wN in 0:1:0.1, w1 = 1; alpha in 0:1:0.1 for the others.

    With several scorers, each extra scorer's weight (named by its label) in 0:1:0.1 too, where
    they sum to 1 or less.

    Example:
        >>> len(default_grid(AggregateSpec.parse("birch:2"))), len(default_grid(AggregateSpec.parse("meanp")))
        (121, 11)
        >>> len(default_grid(AggregateSpec.parse("birch:2", scorers=("cross", "bi"))))
        1331
    """
    axes = ["alpha=0:1:0.1"]
    if aggregator.stage_class.numbered:
        axes += ["w1=1"] + [f"w{i}=0:1:0.1" for i in range(2, aggregator.top_n + 1)]
    axes += [f"{label}=0:1:0.1" for label in aggregator.evidence_parameters]
    grid = parse_grid(axes)
    return grid.on_simplex(aggregator.evidence_parameters) if aggregator.multi else grid


def load_passages(config: TuneConfig) -> tuple[Any, pd.DataFrame | None, Any]:
    """The scored passages of ``config`` (with first-stage scores), the first-stage run, the fingerprint.

    With :attr:`TuneConfig.evidence`, the passages are ``{label: frame}`` and the fingerprints
    ``{label: fingerprint or None}`` (one source: its frame and fingerprint, as with ``scores``).
    """
    from evirank.io import read_run
    from evirank.tune.inputs import attach_first_stage, load_evidence, passages_from_store, read_passages

    first_stage = read_run(config.run) if config.run else None
    if config.evidence:
        if config.scores is not None or config.passages is not None:
            raise TuneError(
                "give the scorers' sources either as --evidence or as --scores/--passages, not both"
            )
        if config.fingerprint is not None:
            raise TuneError("with --evidence, give each store's fingerprint as LABEL=STORE#FINGERPRINT")
        frames, fingerprints = load_evidence(config.sources(), first_stage, config.depth)
        if len(frames) == 1:
            return next(iter(frames.values())), first_stage, next(iter(fingerprints.values()))
        return frames, first_stage, fingerprints
    if (config.scores is None) == (config.passages is None):
        raise TuneError("give exactly one source of scored passages: a score store or a passages file")
    if config.scores is not None:
        if first_stage is None:
            raise TuneError("a score store needs the first-stage run that was re-ranked (--run)")
        passages, fingerprint = passages_from_store(
            config.scores, first_stage, fingerprint=config.fingerprint, depth=config.depth
        )
        return passages, first_stage, fingerprint
    passages = read_passages(config.passages)  # type: ignore[arg-type]
    if first_stage is not None:
        passages = attach_first_stage(passages, first_stage, config.depth)
    return passages, first_stage, None


def run_tune(config: TuneConfig, output: str | Path, *, overwrite: bool = False) -> TuneOutcome:
    """Read, tune, evaluate and write the output folder (see the module docstring)."""
    from evirank.aggregate import merge_tail
    from evirank.evaluate import Evaluator
    from evirank.io import read_qrels, write_run

    started = time.perf_counter()
    out = Path(output)
    aggregator = config.aggregate_spec()
    grid = parse_grid(config.grid) if config.grid else default_grid(aggregator)
    aggregator.check(grid.names)
    folds: Folds | None = read_folds(config.folds, config.tune_on) if config.folds else None

    clock = time.perf_counter()
    passages, first_stage, fingerprint = load_passages(config)
    qrels = read_qrels(config.qrels)
    read_seconds = time.perf_counter() - clock

    frames = list(passages.values()) if isinstance(passages, dict) else [passages]
    if folds is None:
        judged = sorted(set().union(*(set(f[QID]) for f in frames)) & set(qrels[QID]))
        folds = k_folds(judged, k=config.k_folds, seed=config.seed)
    result = cross_validate(
        passages, qrels, aggregator, grid, folds, metric=config.metric, relevance_level=config.relevance_level
    )

    clock = time.perf_counter()
    run = result.run
    if first_stage is not None:
        test = set(result.folds.qids)
        run = merge_tail(run, first_stage[first_stage[QID].astype(str).isin(test)])
    evaluator = Evaluator(qrels, [result.metric, *config.measures], relevance_level=config.relevance_level)
    per_query = evaluator.per_query(run)
    evaluation = _evaluation(evaluator, per_query, result)
    fast_mean = result.cv_mean
    exact = evaluation["means"][result.metric]
    if first_stage is None and abs(exact - fast_mean) > 1e-9:  # both evaluate the same ranking
        logger.warning("fast evaluator %.6f and Evaluator %.6f disagree on the run", fast_mean, exact)
    eval_seconds = time.perf_counter() - clock

    tag = config.tag or _tag(out.name)
    facts: dict[str, Any] = {
        "resolved": _resolved(config),
        "aggregate": aggregator.name,
        "normalise": aggregator.normalise,
        "parameters": list(aggregator.parameters),
        "scorers": list(aggregator.scorers) or None,
        "grid": result.grid.spec(),
        "settings": len(result.grid),
        "metric": result.metric,
        "tie_rule": "first setting in grid order (last axis fastest) among means within 1e-12 of the best",
        "fingerprint": fingerprint,
        "folds_source": folds.source,
        "inputs": {
            "passages": sum(len(f) for f in frames),
            "documents": int(pd.concat([f[[QID, "docno"]] for f in frames]).drop_duplicates().shape[0]),
            "queries_with_passages": int(pd.concat([f[QID] for f in frames]).nunique()),
            "queries_evaluated": len(result.qids),
            "queries_predicted": len(result.folds.qids),
        },
        "choices": [asdict(c) for c in result.choices],
        "best_all_queries": asdict(result.best),
        "cv_fast_mean": fast_mean,
        "evaluation": evaluation,
        "timings": {"read": read_seconds, **result.timings, "evaluate": eval_seconds},
    }
    with atomic_output(out, overwrite=overwrite, marker=RECORD_FILE) as tmp:
        tmp.mkdir(parents=True)
        write_run(run, tmp / RUN_FILE, tag=tag)
        _params_table(result).to_csv(tmp / PARAMS_FILE, sep="\t", index=False, float_format="%.10g")
        result.fold_means().to_csv(tmp / GRID_FILE, sep="\t", index=False, float_format="%.10g")
        write_folds(result.folds, tmp / FOLDS_FILE)
        facts["timings"]["total"] = time.perf_counter() - started
        record = write_record(tmp / RECORD_FILE, "tune", config, **facts)
    logger.info("wrote %s (%s %.4f cross-validated)", out, result.metric, exact)
    return TuneOutcome(config, result, run, evaluation, out, record)


def _evaluation(evaluator: Any, per_query: pd.DataFrame, result: TuneResult) -> dict[str, Any]:
    means = evaluator.aggregate(per_query)
    fold_of = result.folds.fold_of()
    table = per_query.assign(fold=per_query[QID].map(fold_of))
    by_fold = {
        str(fold): {str(m): float(v) for m, v in rows.groupby("measure", sort=False)["value"].mean().items()}
        for fold, rows in table.groupby("fold", sort=False)
    }
    return {"queries": int(per_query[QID].nunique()), "means": means, "folds": by_fold}


def _params_table(result: TuneResult) -> pd.DataFrame:
    rows = []
    for c in [*result.choices, result.best]:
        rows.append(
            {
                "fold": c.fold,
                "tune_queries": c.n_tune,
                "test_queries": c.n_test,
                **c.params,
                f"tune_{result.metric}": c.tune_mean,
                f"test_{result.metric}": c.test_mean,
                "setting": c.index,
                "tied_settings": c.tied,
            }
        )
    return pd.DataFrame(rows)


def _resolved(config: TuneConfig) -> dict[str, Any]:
    """The input paths made absolute, so the record is usable from another folder."""
    out: dict[str, Any] = {}
    for name in ("qrels", "scores", "passages", "run", "folds"):
        value = getattr(config, name)
        out[name] = None if value is None else str(Path(value).resolve())
    if config.evidence:
        out["evidence"] = [
            f"{s.label}={s.path if '://' in s.path else Path(s.path).resolve()}"
            + (f"#{s.fingerprint}" if s.fingerprint else "")
            for s in config.sources()
        ]
    return out


def load_record(folder: str | Path) -> tuple[TuneConfig, dict[str, Any]]:
    """The config of an earlier ``tune`` output folder (paths resolved) and its whole record.

    Example:
        >>> load_record("no/such/folder")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        FileNotFoundError: no/such/folder/tune.json: not a tune output folder
    """
    path = Path(folder) / RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a tune output folder (no {RECORD_FILE})")
    record = json.loads(path.read_text(encoding="utf-8"))
    values = dict(record["config"])
    for name, resolved in record.get("resolved", {}).items():
        if name == "evidence" and resolved and values.get("evidence"):
            values[name] = [
                new if not Path(_source_path(old)).exists() and Path(_source_path(new)).exists() else old
                for old, new in zip(values["evidence"], resolved, strict=False)
            ]
            continue
        if resolved is not None and not Path(str(values.get(name))).exists() and Path(resolved).exists():
            values[name] = resolved
    for name in ("tune_on", "grid", "measures", "evidence"):
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    return TuneConfig(**values), record


def _source_path(text: str) -> str:
    """The path of an ``--evidence LABEL=PATH[#FINGERPRINT]`` source."""
    path = text.partition("=")[2]
    return path.rpartition("#")[0] if "#" in path else path


def _tag(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return cleaned or "evirank-tuned"
