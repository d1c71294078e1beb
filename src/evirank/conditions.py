"""Reproducible conditions as data: named experiments with their exact commands and expected scores.

A conditions file (YAML) names each experiment's parts (first stage, segmenter, scorer,
aggregator, tuning), the shell commands that produce its run, how to evaluate that run, and the
scores it must reach. :func:`check_conditions` runs the commands, evaluates the run with
:class:`evirank.evaluate.Evaluator`, and compares::

    version: 1
    variables:                      # defaults; the environment or --set NAME=VALUE override them
      DATA: ../shared/datasets        # the datasets folder ($EVIRANK_DATASETS, $DATA, this default)
      OUT: runs/conditions
    conditions:
      scifact-bm25:
        description: BM25 (k1 0.9, b 0.4), title + text, SciFact test
        first_stage: bm25
        commands:
          - evirank index --corpus $DATA/scifact --index $OUT/index
          - evirank search --index $OUT/index --topics $DATA/scifact --split test --output $OUT/bm25.txt
        evaluate: {run: $OUT/bm25.txt, qrels: $DATA/scifact/qrels/test.tsv}
        expected:
          nDCG@10: {value: 0.6789, tolerance: 0.002}
          R@100: 0.9253                # a bare number: tolerance 0.0005 (4 decimals)
          AP: {min: 0.5}               # or bounds: min and/or max

``$NAME`` and ``${NAME}`` are replaced in commands and paths; commands run in ``bash -e -o
pipefail`` from the working folder, with the variables exported, and ``evirank`` and ``python``
on ``PATH`` running this Python and this evirank (so a checkout runs its own code).

Every flag of a command is read when the file is read, through the command's own parser (the
settings table's flags), so a flag the command does not take is refused with its nearest spelling;
``--segment``, ``--aggregate`` and several scorers' flags (``evirank rerank --scorer
cross:$MODELS/minilm --scorer bi --scorer-weights bi=0.3``, ``evirank tune --scorer-scores
cross=$OUT/ce.sqlite --scorer-scores bi=$OUT/bi.passages.parquet``) are parsed then too.

A condition may list ``needs``: extras (``lucene``, ``torch``, ``onnx``, ...), files that are
not in the repository, such as a trained model (``$MODELS/minilm-mb``, or
``{path: $MODELS/minilm-mb, hint: "made by condition microblog-train"}``), and the papers'
licensed collections by name (``robust04``, ``core17``, ``core18``, ``clueweb09b``,
``msmarco-docs``: :mod:`evirank.io.collections.papers`), looked for in the ``COLLECTIONS``
folder (``$EVIRANK_COLLECTIONS`` overrides the file's default). A condition whose needs are not
met is skipped, with the reason (for a collection: which files to put where), instead of failing.
``slow: true`` marks a condition that takes long (a model scoring many pairs, a training run):
it runs when named, or with ``--slow``, never by default. ``DATA`` defaults to the datasets folder
(:func:`evirank.datasets.datasets_folder`).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "c.yaml"
    >>> _ = path.write_text("conditions:\\n  demo:\\n    commands: [echo hi]\\n"
    ...                     "    evaluate: {run: r.txt, qrels: q.txt}\\n    expected: {AP: 0.5}\\n")
    >>> [(c.name, c.expected[0].measure, c.expected[0].tolerance) for c in load_conditions(path).conditions]
    [('demo', 'AP', 0.0005)]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import logging
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from evirank import markdown
from evirank.config import SETTINGS, is_flag, unknown_flag
from evirank.errors import EvirankError, InputFormatError
from evirank.io.collections.papers import PAPER_COLLECTIONS, describe_missing, missing_files

logger = logging.getLogger(__name__)

#: Tolerance of an expected score written as a bare number (scores are quoted to 4 decimals).
DEFAULT_TOLERANCE = 0.0005
PART_KEYS = ("first_stage", "segmenter", "scorer", "aggregator", "tuning")
_KEYS = {"description", *PART_KEYS, "commands", "evaluate", "expected", "needs", "slow", "__line__"}
#: The extras a condition may need, each with the module that shows it is installed.
EXTRAS = {
    "lucene": "pyserini",
    "torch": "torch",
    "onnx": "onnxruntime",
    "segment": "pysbd",
    "serve": "fastapi",
    "plots": "matplotlib",
    "datasets": "ir_datasets",
}
#: Where the papers' collections are looked for when a file defines no ``COLLECTIONS``.
DEFAULT_COLLECTIONS = "../collections"
#: The environment variable that overrides a conditions file's ``COLLECTIONS``.
COLLECTIONS_ENVIRONMENT = "EVIRANK_COLLECTIONS"
_VARIABLE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")


class ConditionError(EvirankError, ValueError):
    """A condition that cannot be run as written (unknown variable, missing run file)."""


@dataclass(frozen=True)
class Expectation:
    """An expected score: ``value`` within ``tolerance``, and/or bounds ``minimum`` / ``maximum``."""

    measure: str
    value: float | None = None
    tolerance: float = DEFAULT_TOLERANCE
    minimum: float | None = None
    maximum: float | None = None

    def check(self, actual: float) -> bool:
        """Whether ``actual`` meets the expectation (NaN never does)."""
        if not math.isfinite(actual):
            return False
        if self.value is not None and abs(actual - self.value) > self.tolerance + 1e-12:
            return False
        if self.minimum is not None and actual < self.minimum:
            return False
        return not (self.maximum is not None and actual > self.maximum)

    def describe(self) -> str:
        """``0.6789 ± 0.002``, ``>= 0.6789``, ``[0.5, 0.7]``."""
        if self.value is not None:
            return f"{self.value:.4f} ± {self.tolerance:g}"
        if self.minimum is not None and self.maximum is not None:
            return f"[{self.minimum:.4f}, {self.maximum:.4f}]"
        return f">= {self.minimum:.4f}" if self.minimum is not None else f"<= {self.maximum:.4f}"


@dataclass(frozen=True)
class Condition:
    """One named experiment (see the module docstring for the fields)."""

    name: str
    commands: tuple[str, ...]
    run: str
    qrels: str
    expected: tuple[Expectation, ...]
    description: str = ""
    parts: dict[str, str] = field(default_factory=dict)
    relevance_level: int | None = None
    missing: str = "skip"
    needs: tuple[str, ...] = ()
    hints: dict[str, str] = field(default_factory=dict)
    slow: bool = False
    line: int | None = None


@dataclass(frozen=True)
class ConditionsFile:
    """A parsed conditions file: its variables' defaults and its conditions, in order."""

    path: Path
    variables: dict[str, str]
    conditions: tuple[Condition, ...]

    def select(self, names: Sequence[str] | None, *, slow: bool = True) -> list[Condition]:
        """The conditions named (all when ``names`` is empty, without the slow ones unless ``slow``);
        unknown names raise."""
        if not names:
            return [c for c in self.conditions if slow or not c.slow]
        known = {c.name: c for c in self.conditions}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConditionError(
                f"{self.path}: no condition named {', '.join(unknown)} (known: {', '.join(known)})"
            )
        return [known[n] for n in names]


@dataclass
class CommandResult:
    """One command as run: the expanded text, exit status, seconds, and the end of its output."""

    command: str
    returncode: int
    seconds: float
    output_tail: str


@dataclass
class ConditionResult:
    """What checking one condition found."""

    name: str
    commands: list[CommandResult] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)
    checks: list[tuple[Expectation, float, bool]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        """True when every command succeeded and every expectation held."""
        return self.error is None and bool(self.checks) and all(ok for _, _, ok in self.checks)

    @property
    def failed(self) -> bool:
        """True when the condition ran (was not skipped) and did not pass."""
        return self.skipped is None and not self.passed


# -- loading -------------------------------------------------------------------------------
def load_conditions(path: str | os.PathLike[str]) -> ConditionsFile:
    """Parse a conditions file.

    Raises:
        InputFormatError: invalid YAML or a condition that lacks or misuses a field (with its line).
    """
    import yaml

    file = Path(path)

    class _Loader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[str, Any]:
        value = cast("dict[str, Any]", loader.construct_mapping(node, deep=True))
        value["__line__"] = node.start_mark.line + 1
        return value

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        data = yaml.load(file.read_text(encoding="utf-8"), Loader=_Loader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputFormatError(
            file, mark.line + 1 if mark else None, "valid YAML", str(exc).splitlines()[0]
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("conditions"), dict):
        raise InputFormatError(file, 1, "a mapping with 'conditions: {name: {...}}'", _kind(data))
    variables = data.get("variables") or {}
    if not isinstance(variables, dict):
        raise InputFormatError(file, _line(data), "'variables' as a mapping NAME: value", _kind(variables))
    defaults = {str(k): str(v) for k, v in variables.items() if k != "__line__"}
    conditions = [
        _condition(file, str(name), body) for name, body in data["conditions"].items() if name != "__line__"
    ]
    if not conditions:
        raise InputFormatError(file, _line(data["conditions"]), "at least one condition", "none")
    return ConditionsFile(file, defaults, tuple(conditions))


def _condition(file: Path, name: str, body: Any) -> Condition:
    if not isinstance(body, dict):
        raise InputFormatError(file, None, f"condition {name!r} as a mapping", _kind(body))
    line = _line(body)
    unknown = sorted(set(body) - _KEYS)
    if unknown:
        raise InputFormatError(
            file,
            line,
            f"condition {name!r} with keys among {sorted(_KEYS - {'__line__'})}",
            f"unknown keys {unknown}",
        )
    commands = body.get("commands")
    if isinstance(commands, str):
        commands = [commands]
    if not isinstance(commands, list) or not commands or not all(isinstance(c, str) for c in commands):
        raise InputFormatError(
            file, line, f"condition {name!r}: 'commands' as a list of shell commands", _kind(commands)
        )
    evaluate = body.get("evaluate")
    if not isinstance(evaluate, dict) or not evaluate.get("run") or not evaluate.get("qrels"):
        raise InputFormatError(
            file, line, f"condition {name!r}: 'evaluate: {{run: PATH, qrels: PATH}}'", _kind(evaluate)
        )
    expected = body.get("expected")
    if not isinstance(expected, dict) or len(expected) <= 1:
        raise InputFormatError(
            file, line, f"condition {name!r}: 'expected: {{MEASURE: value}}'", _kind(expected)
        )
    expectations = [
        _expectation(file, name, str(m), v, _line(expected)) for m, v in expected.items() if m != "__line__"
    ]
    missing = str(evaluate.get("missing", "skip"))
    if missing not in ("skip", "zero"):
        raise InputFormatError(file, _line(evaluate), "missing: skip or zero", repr(missing))
    needs, hints = _needs(file, name, body.get("needs"), line)
    parts = {k: str(body[k]) for k in PART_KEYS if body.get(k) is not None}
    _check_specs(file, name, commands, parts, line)
    return Condition(
        name=name,
        commands=tuple(commands),
        run=str(evaluate["run"]),
        qrels=str(evaluate["qrels"]),
        expected=tuple(expectations),
        description=str(body.get("description", "")).strip(),
        parts=parts,
        relevance_level=None if evaluate.get("relevance_level") is None else int(evaluate["relevance_level"]),
        missing=missing,
        needs=needs,
        hints=hints,
        slow=bool(body.get("slow", False)),
        line=line,
    )


def _check_specs(
    file: Path, name: str, commands: Sequence[str], parts: Mapping[str, str], line: int | None
) -> None:
    """Parse every ``--segment`` and ``--aggregate`` of the commands with the one spec parsers, so a
    typo fails when the file is read, not after an hour of earlier commands; a ``segmenter`` or
    ``aggregator`` part that names a spec must be the one the commands use.
    """
    from evirank.aggregate.registry import GRAMMAR as AGGREGATE_GRAMMAR
    from evirank.aggregate.registry import AggregateSpec
    from evirank.segment.segment_spec import GRAMMAR as SEGMENT_GRAMMAR
    from evirank.segment.segment_spec import SegmentSpec

    kinds: dict[str, tuple[str, Callable[[str], object], str]] = {
        "segment": ("segmenter", SegmentSpec.parse, SEGMENT_GRAMMAR),
        "aggregate": ("aggregator", AggregateSpec.parse, AGGREGATE_GRAMMAR),
    }
    used: dict[str, set[str]] = {"segmenter": set(), "aggregator": set()}
    for command in commands:
        given = command_settings(file, name, command, line)
        for setting, values in given.items():
            if setting not in kinds:
                continue
            part, parse, grammar = kinds[setting]
            for value in values:
                if "$" in value:
                    continue
                try:
                    used[part].add(str(parse(value)))
                except ValueError:
                    raise InputFormatError(
                        file, line, f"condition {name!r}: --{setting} {grammar}", repr(value)
                    ) from None
    _check_evidence(file, name, commands, line)
    for part, (_, parse, _) in ((k[0], k) for k in kinds.values()):
        text = parts.get(part, "")
        head = re.split(r"[\s,]+", text.strip(), maxsplit=1)[0] if text.strip() else ""
        try:
            named = str(parse(head)) if head else None
        except ValueError:
            continue  # a description, not a spec
        if named is not None and used[part] and named not in used[part]:
            raise InputFormatError(
                file,
                line,
                f"condition {name!r}: its {part} part naming the spec its commands use "
                f"({', '.join(sorted(used[part]))})",
                repr(head),
            )


def _words(command: str) -> list[str]:
    """The words of a shell command (none when the shell could not split it)."""
    try:
        return shlex.split(command)
    except ValueError:
        return []


def _command_name(command: str) -> str | None:
    """The evirank subcommand a shell command runs (``rerank``), or None."""
    words = _words(command)
    return next((b for a, b in itertools.pairwise(words) if Path(a).name == "evirank"), None)


def command_settings(file: Path, name: str, command: str, line: int | None) -> dict[str, list[str]]:
    """The settings an ``evirank`` command of a condition gives, by name, each with its words:
    flags are read through the settings table (:data:`evirank.config.SETTINGS`), so a flag no
    setting has is refused when the file is read, with the nearest spelling.

    Example:
        >>> command_settings(Path("c.yaml"), "demo", "evirank rerank --scorer bi --weights 1 0.5", 1)
        {'scorer': ['bi'], 'weights': ['1', '0.5']}
    """

    words = _words(command)
    start = next((i for i, w in enumerate(words) if Path(w).name == "evirank"), None)
    if start is None:
        return {}
    known = _command_flags(tuple(words[start + 1 :]))
    given: dict[str, list[str]] = {}
    setting, room = None, 0  # the flag being read, and how many more words it takes
    for word in words[start + 1 :]:
        if word in ("|", "&&", "||", ";", ">", "2>", "<"):
            break
        if is_flag(word):
            flag = word.split("=", 1)[0]
            setting = SETTINGS.by_flag(flag) if flag in known else None
            if setting is None:
                raise InputFormatError(
                    file, line, f"condition {name!r}: a flag evirank knows", unknown_flag(flag, known)
                )
            values = given.setdefault(setting.name, [])
            room = _words_taken(setting)
            if "=" in word:
                values.append(word.split("=", 1)[1])
                room -= 1
            continue
        if setting is not None and room > 0:
            given[setting.name].append(word)
            room -= 1
    return given


@functools.lru_cache(maxsize=64)
def _command_flags(words: tuple[str, ...]) -> list[str]:
    """Every flag spelling of the evirank command ``words`` name (its parser's)."""
    from evirank.cli import command_parser

    parser, _ = command_parser(_parser(), list(words))
    return [s for action in parser._actions for s in action.option_strings]


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    from evirank.cli import build_parser

    return build_parser()


def _words_taken(setting: Any) -> int:
    """How many words after its flag a setting takes (a large number: until the next flag)."""
    if setting.switch or setting.action == "count":
        return 0
    if isinstance(setting.nargs, int):
        return setting.nargs
    if setting.nargs in ("*", "+"):
        return 10**6
    return 1


def _check_evidence(file: Path, name: str, commands: Sequence[str], line: int | None) -> None:
    """Parse the several-scorer flags of ``rerank`` (``--scorer [LABEL=]FAMILY[:MODEL]`` repeated,
    ``--scorer-weights LABEL=W``) and ``tune`` (``--scorer-scores LABEL=SOURCE``) when the file is
    read. Models are not opened here (a
    model made by an earlier command does not exist yet): the grammar, the families, the labels and
    the weights are checked."""
    from evirank.aggregate.evidence import check_labels
    from evirank.grammar import parse_spec
    from evirank.score.family import AUTO, family_names, get_family
    from evirank.score.multi import GRAMMAR, parse_evidence_weights
    from evirank.tune.inputs import EvidenceSource

    for command in commands:
        command_name = _command_name(command)
        if command_name not in ("rerank", "tune"):
            continue
        given = command_settings(file, name, command, line)
        specs = given.get("scorer" if command_name == "rerank" else "scorer_scores", [])
        weights = given.get("scorer_weights", [])
        words = _words(command)
        try:
            if command_name == "rerank":
                parsed = [parse_spec(text, what="scorer", labelled=True, tail=True) for text in specs]
                unknown = [p.name for p in parsed if p.name not in (AUTO, *family_names())]
                if unknown:
                    raise ValueError(f"unknown model family {unknown[0]!r}")
                lonely = [
                    p.name
                    for p in parsed
                    if not p.args
                    and p.name != AUTO
                    and get_family(p.name).needs_model
                    and not (len(parsed) == 1 and "--model" in words)
                ]
                if lonely:
                    raise ValueError(f"the {lonely[0]} family needs its model ({lonely[0]}:MODEL)")
                labels = list(check_labels([p.label or p.name for p in parsed])) if parsed else []
                extra = [k for k in parse_evidence_weights(weights) if k not in labels[1:]]
                if extra:
                    raise ValueError(f"--scorer-weights for {', '.join(extra)}, not a scorer after the first")
            else:
                for text in specs:
                    EvidenceSource.parse(text)
        except ValueError as exc:
            raise InputFormatError(
                file,
                line,
                f"condition {name!r}: {command_name} "
                + (f"--scorer {GRAMMAR}" if command_name == "rerank" else "--scorer-scores LABEL=SOURCE"),
                str(exc),
            ) from None


def _needs(file: Path, name: str, value: Any, line: int | None) -> tuple[tuple[str, ...], dict[str, str]]:
    """``needs`` as (extras and paths, {path: hint})."""
    items = value if isinstance(value, list) else [] if value is None else [value]
    needs, hints = [], {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            needs.append(item["path"])
            if item.get("hint"):
                hints[item["path"]] = str(item["hint"])
        elif isinstance(item, str) and (item in EXTRAS or item in PAPER_COLLECTIONS or "/" in item):
            needs.append(item)
        else:
            raise InputFormatError(
                file,
                _line(item) or line,
                f"condition {name!r}: 'needs' as extras ({', '.join(EXTRAS)}), collections "
                f"({', '.join(PAPER_COLLECTIONS)}), paths, or {{path, hint}}",
                repr(item),
            )
    return tuple(needs), hints


def unmet_needs(
    condition: Condition, variables: Mapping[str, str], workdir: str | os.PathLike[str] = "."
) -> list[str]:
    """What ``condition`` needs and this machine lacks: extras not installed, paths not there.

    Example:
        >>> c = Condition("c", ("true",), "r", "q", (), needs=("$OUT/model",))
        >>> unmet_needs(c, {"OUT": "/nonexistent"})
        ['/nonexistent/model (not found)']
    """
    import importlib.util

    missing = []
    for need in condition.needs:
        if need in EXTRAS:
            if importlib.util.find_spec(EXTRAS[need]) is None:
                missing.append(f"the {need} extra (pip install 'evirank[{need}]')")
            continue
        if need in PAPER_COLLECTIONS:
            root = Path(workdir) / variables.get("COLLECTIONS", DEFAULT_COLLECTIONS)
            if missing_files(need, root):
                missing.append(describe_missing(need, variables.get("COLLECTIONS", DEFAULT_COLLECTIONS)))
            continue
        if need not in condition.needs or ("/" not in need and "$" not in need):
            continue  # a name that is neither an extra nor a path: for people only
        path = expand(need, variables, f"condition {condition.name}: ")
        if not (Path(workdir) / path).exists():
            hint = condition.hints.get(need)
            missing.append(f"{path} (not found{'; ' + hint if hint else ''})")
    return missing


def _expectation(file: Path, name: str, measure: str, spec: Any, line: int | None) -> Expectation:
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return Expectation(measure, float(spec))
    if isinstance(spec, dict):
        line = _line(spec) or line
        keys = set(spec) - {"__line__"}
        if keys and keys <= {"value", "tolerance", "min", "max"} and keys & {"value", "min", "max"}:
            try:
                return Expectation(
                    measure,
                    value=None if spec.get("value") is None else float(spec["value"]),
                    tolerance=float(spec.get("tolerance", DEFAULT_TOLERANCE)),
                    minimum=None if spec.get("min") is None else float(spec["min"]),
                    maximum=None if spec.get("max") is None else float(spec["max"]),
                )
            except (TypeError, ValueError):
                pass
    raise InputFormatError(
        file,
        line,
        f"condition {name!r}, {measure}: a number, or {{value, tolerance}}, or {{min, max}}",
        repr(spec),
    )


def _line(value: Any) -> int | None:
    return value.get("__line__") if isinstance(value, dict) else None


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


# -- running -------------------------------------------------------------------------------
def expand(text: str, variables: Mapping[str, str], where: str = "") -> str:
    """Replace ``$NAME`` / ``${NAME}`` with ``variables`` (unknown names raise :class:`ConditionError`).

    Example:
        >>> expand("$OUT/run.txt ${OUT}x", {"OUT": "runs"})
        'runs/run.txt runsx'
    """

    def replace(match: re.Match[str]) -> str:
        name = match["braced"] or match["plain"]
        if name not in variables:
            raise ConditionError(f"{where}unknown variable ${name} (known: {', '.join(sorted(variables))})")
        return variables[name]

    return _VARIABLE.sub(replace, text)


def resolve_variables(
    defaults: Mapping[str, str],
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    start: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Each variable from ``overrides``, else the environment, else the file's default.

    ``DATA``, when the file has it, is the datasets folder by evirank's one rule
    (:func:`evirank.datasets.datasets_folder`: ``$EVIRANK_DATASETS``, ``$DATA``, then
    ``../shared/datasets`` from ``start``) where that folder exists.
    """
    from evirank.datasets import datasets_folder

    env = os.environ if environ is None else environ
    values = {name: env.get(name, value) for name, value in defaults.items()}
    if "DATA" in defaults:
        found = datasets_folder(start, env)
        if found is not None:
            values["DATA"] = str(found)
    if "COLLECTIONS" in defaults and env.get(COLLECTIONS_ENVIRONMENT):
        values["COLLECTIONS"] = env[COLLECTIONS_ENVIRONMENT]
    values.update(overrides or {})
    return values


def run_condition(
    condition: Condition,
    variables: Mapping[str, str],
    *,
    workdir: str | os.PathLike[str] = ".",
    timeout: float | None = None,
    python: str = sys.executable,
) -> ConditionResult:
    """Run ``condition``'s commands, evaluate its run, and compare with its expectations."""
    from evirank.evaluate import Evaluator
    from evirank.io import read_qrels, read_run

    result = ConditionResult(condition.name)
    started = time.perf_counter()
    where = f"condition {condition.name}: "
    try:
        unmet = unmet_needs(condition, variables, workdir)
        if unmet:
            result.skipped = "needs " + "; ".join(unmet)
            return result
        commands = [expand(c, variables, where) for c in condition.commands]
        run_path = Path(workdir) / expand(condition.run, variables, where)
        qrels_path = Path(workdir) / expand(condition.qrels, variables, where)
    except ConditionError as exc:
        result.error = str(exc)
        return result
    with tempfile.TemporaryDirectory(prefix="evirank-shim-") as shim:
        env = _environment(variables, Path(shim), python)
        for command in commands:
            logger.info("%s$ %s", where, command)
            clock = time.perf_counter()
            try:
                done = subprocess.run(
                    ["bash", "-e", "-o", "pipefail", "-c", command],
                    cwd=workdir,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
                code, output = done.returncode, (done.stdout + done.stderr)
            except subprocess.TimeoutExpired as exc:
                code, output = 124, f"timed out after {exc.timeout} s"
            result.commands.append(CommandResult(command, code, time.perf_counter() - clock, output[-2000:]))
            if code != 0:
                result.error = f"command failed (exit {code}): {command}\n{output[-800:]}"
                result.seconds = time.perf_counter() - started
                return result
    try:
        if not run_path.is_file():
            raise ConditionError(f"{where}the commands wrote no run at {run_path}")
        evaluator = Evaluator(
            read_qrels(qrels_path),
            [e.measure for e in condition.expected],
            missing=condition.missing,  # type: ignore[arg-type]
            relevance_level=condition.relevance_level,
        )
        result.scores = evaluator.mean(read_run(run_path))
    except (EvirankError, FileNotFoundError, ValueError) as exc:
        result.error = str(exc)
        result.seconds = time.perf_counter() - started
        return result
    for expectation, name in zip(condition.expected, evaluator.names, strict=True):
        actual = result.scores[name]
        result.checks.append((expectation, actual, expectation.check(actual)))
    result.seconds = time.perf_counter() - started
    return result


def check_conditions(
    path: str | os.PathLike[str],
    names: Sequence[str] | None = None,
    *,
    overrides: Mapping[str, str] | None = None,
    workdir: str | os.PathLike[str] = ".",
    timeout: float | None = None,
) -> list[ConditionResult]:
    """Run and check the conditions of a file (all, or those named)."""
    conditions = load_conditions(path)
    variables = resolve_variables(conditions.variables, overrides, start=workdir)
    return [run_condition(c, variables, workdir=workdir, timeout=timeout) for c in conditions.select(names)]


def results_markdown(results: Sequence[ConditionResult]) -> str:
    """One row per (condition, measure): expected, measured, pass/FAIL, seconds."""
    rows: list[list[object]] = []
    for r in results:
        if r.skipped is not None:
            rows.append([r.name, "–", "–", "–", f"skipped: {r.skipped}", "0.0"])
            continue
        if r.error is not None and not r.checks:
            rows.append([r.name, "–", "–", "–", f"ERROR: {r.error.splitlines()[0]}", f"{r.seconds:.1f}"])
            continue
        for expectation, actual, ok in r.checks:
            rows.append(
                [
                    r.name,
                    expectation.measure,
                    expectation.describe(),
                    f"{actual:.4f}",
                    "pass" if ok else "FAIL",
                    f"{r.seconds:.1f}",
                ]
            )
    header = ["condition", "measure", "expected", "measured", "result", "seconds"]
    return markdown.table(header, rows, align="lllrlr") + "\n"


def _environment(variables: Mapping[str, str], shim: Path, python: str) -> dict[str, str]:
    """The commands' environment: variables exported; ``evirank`` and ``python`` are this Python's."""
    for name, text in (
        ("evirank", f'exec {shlex.quote(python)} -m evirank "$@"'),
        ("python", f'exec {shlex.quote(python)} "$@"'),
    ):
        script = shim / name
        script.write_text(f"#!/bin/sh\n{text}\n", encoding="utf-8")
        script.chmod(0o755)
    env = dict(os.environ)
    env.update(variables)
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    src = Path(__file__).resolve().parents[1]  # the folder holding this evirank package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src), env.get("PYTHONPATH", "")) if p)
    return env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments every conditions runner takes: names, --set, --slow, --timeout, --dry-run."""
    parser.add_argument("names", nargs="*", help="conditions to run (default: every one that is not slow)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable, such as OUT or DATA (repeat for several)",
    )
    parser.add_argument(
        "--slow", action="store_true", help="run the slow conditions too (when none is named)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per command (default: none)")
    parser.add_argument("--dry-run", action="store_true", help="print the expanded commands only")


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """``["OUT=/tmp/c", ...]`` as ``{"OUT": "/tmp/c"}``.

    Raises:
        ConditionError: an item without ``=``.
    """
    bad = [item for item in items if "=" not in item]
    if bad:
        raise ConditionError(f"--set takes NAME=VALUE, found {bad[0]!r}")
    return dict(item.partition("=")[::2] for item in items)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m evirank.conditions FILE [NAME ...] [--set NAME=VALUE] [--dry-run]``."""
    parser = argparse.ArgumentParser(prog="python -m evirank.conditions", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a conditions YAML file")
    parser.add_argument("--workdir", default=".", help="folder the commands run in (default: .)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    overrides = parse_overrides(args.overrides)
    conditions = load_conditions(args.file)
    variables = resolve_variables(conditions.variables, overrides, start=args.workdir)
    selected = conditions.select(args.names, slow=args.slow)
    if args.dry_run:
        for condition in selected:
            sys.stdout.write(f"# {condition.name}: {condition.description}\n")
            for command in condition.commands:
                sys.stdout.write(expand(command, variables) + "\n")
        return 0
    results = [run_condition(c, variables, workdir=args.workdir, timeout=args.timeout) for c in selected]
    sys.stdout.write(results_markdown(results))
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
