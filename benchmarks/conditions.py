"""Check the conditions in conditions/*.yaml: run each one's commands, evaluate its run, compare.

Every figure of docs/results.md is a named condition: its exact commands and its expected
scores (:mod:`evirank.conditions`). This runs them from the repository root and prints expected
against measured, headed by the machine. A condition whose needs are missing (an extra such as
``torch``, or a trained model that is not in the repository) is skipped with the reason; a slow
one (marked ``slow: true``: a model over many pairs, a training run) runs only when named or with
``--slow``; one whose needs are missing is reported as skipped, with the reason, whether slow or
not. Runs, indexes and score stores go under ``OUT`` (``runs/conditions/...``), so a
second run reuses them.

Usage:
    python benchmarks/conditions.py --list               # every condition: file, slow, needs
    python benchmarks/conditions.py                      # every condition that is not slow
    python benchmarks/conditions.py scifact-bm25 dl19-bm25-bundled     # by name (slow ones too)
    python benchmarks/conditions.py --slow               # all of them
    python benchmarks/conditions.py --file conditions/scifact.yaml
    python benchmarks/conditions.py scifact-bm25 --dry-run               # the commands only
    python benchmarks/conditions.py --set OUT=/tmp/conditions --timeout 3600
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from _common import REPO, footer, header

from evirank.conditions import (
    Condition,
    ConditionError,
    ConditionResult,
    add_arguments,
    expand,
    load_conditions,
    parse_overrides,
    resolve_variables,
    results_markdown,
    run_condition,
    unmet_needs,
)

FOLDER = REPO / "conditions"


def catalogue(files: list[Path]) -> dict[str, tuple[Path, Condition]]:
    """Every condition of ``files`` by name (a name used twice raises)."""
    found: dict[str, tuple[Path, Condition]] = {}
    for file in files:
        for condition in load_conditions(file).conditions:
            if condition.name in found:
                other = found[condition.name][0]
                raise ConditionError(f"{file}: condition {condition.name} is also in {other}")
            found[condition.name] = (file, condition)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    parser.add_argument(
        "--file", type=Path, nargs="+", default=None, help="conditions files (default: conditions/*.yaml)"
    )
    parser.add_argument("--list", action="store_true", help="list the conditions and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    files = args.file or sorted(FOLDER.glob("*.yaml"))
    known = catalogue(files)
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"no condition named {', '.join(unknown)} (see --list)")
    if args.list:
        for name, (file, condition) in known.items():
            marks = ["slow"] if condition.slow else []
            marks += [f"needs {', '.join(condition.needs)}"] if condition.needs else []
            print(f"{name}  [{file.name}{'; ' + '; '.join(marks) if marks else ''}]  {condition.description}")
        return 0
    chosen = args.names or [n for n, (_, c) in known.items() if args.slow or not c.slow]
    overrides = parse_overrides(args.overrides)
    variables = {
        file: resolve_variables(load_conditions(file).variables, overrides, start=REPO) for file in files
    }
    if args.dry_run:
        for name in chosen:
            file, condition = known[name]
            print(f"# {name}: {condition.description}")
            for command in condition.commands:
                print(expand(command, variables[file]))
        return 0

    print(header("Conditions: expected against measured", f"conditions: {', '.join(chosen)}"))
    results: list[ConditionResult] = []
    for name in chosen:
        file, condition = known[name]
        results.append(run_condition(condition, variables[file], workdir=REPO, timeout=args.timeout))
    slow: list[str] = []
    for name, (file, condition) in known.items():
        if name in chosen or args.names:
            continue
        unmet = unmet_needs(condition, variables[file], REPO)  # a slow one, not run: say what it needs
        if unmet:
            results.append(ConditionResult(name, skipped="needs " + "; ".join(unmet)))
        else:
            slow.append(name)
    print(results_markdown(results))
    if slow:
        print(f"not run (slow; name them or give --slow): {', '.join(slow)}")
    for result in results:
        if result.error:
            print(f"\n{result.name}: {result.error}")
    print(footer())
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
