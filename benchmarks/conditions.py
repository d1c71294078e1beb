"""Run the SciFact conditions of ``conditions/scifact.yaml`` and print expected against measured scores.

Each condition's commands run as written (index, search, rerank, tune), then its run is
evaluated and compared with the expected scores. Conditions whose extras are missing (Lucene,
torch) are reported as skipped. The score store is shared, so re-ranking happens once and every
tuning condition reads it.

Usage:
    python benchmarks/conditions.py                       # every SciFact condition
    python benchmarks/conditions.py scifact-bm25          # some of them
    python benchmarks/conditions.py --dry-run             # print the commands only
    python benchmarks/conditions.py --set OUT=/tmp/scifact --timeout 3600
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import platform
import sys
import time
from pathlib import Path

from evirank.conditions import (
    ConditionResult,
    expand,
    load_conditions,
    resolve_variables,
    results_markdown,
    run_condition,
)

REPO = Path(__file__).resolve().parents[1]
FILE = REPO / "conditions" / "scifact.yaml"
#: Which importable module stands for each extra a condition needs.
EXTRA_MODULES = {"lucene": "pyserini", "torch": "torch", "segment": "syntok"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="conditions to run (default: all)")
    parser.add_argument("--file", type=Path, default=FILE, help="the conditions file")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per command")
    parser.add_argument("--dry-run", action="store_true", help="print the expanded commands only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    conditions = load_conditions(args.file)
    overrides = dict(item.partition("=")[::2] for item in args.overrides)
    variables = resolve_variables(conditions.variables, overrides)
    if "DATA" not in overrides and "DATA" not in os.environ and not (REPO / variables["DATA"]).is_dir():
        found = _find_scifact()  # a worktree sits deeper than ../shared
        if found is not None:
            variables["DATA"] = os.path.relpath(found, REPO)
    data = REPO / variables["DATA"]
    if not args.dry_run and not data.is_dir():
        print(f"SciFact is not at {data}; set DATA=... (--set DATA=PATH)")
        return 2
    results: list[ConditionResult] = []
    skipped = []
    for condition in conditions.select(args.names):
        if args.dry_run:
            print(f"# {condition.name}: {condition.description}")
            for command in condition.commands:
                print(expand(command, variables))
            continue
        missing = [n for n in condition.needs if importlib.util.find_spec(EXTRA_MODULES.get(n, n)) is None]
        if missing:
            skipped.append(f"{condition.name} (needs {', '.join(missing)})")
            continue
        results.append(run_condition(condition, variables, workdir=REPO, timeout=args.timeout))
    if args.dry_run:
        return 0
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{time.strftime('%Y-%m-%d')}: {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}, "
        f"Python {platform.python_version()}; OUT={variables['OUT']}\n"
    )
    print(results_markdown(results))
    if skipped:
        print("skipped: " + "; ".join(skipped))
    for result in results:
        if result.error:
            print(f"\n{result.name}: {result.error}")
    return 0 if results and all(r.passed for r in results) else 1


def _find_scifact() -> Path | None:
    for parent in REPO.parents:
        candidate = parent / "shared" / "datasets" / "scifact"
        if candidate.is_dir():
            return candidate
    return None


if __name__ == "__main__":
    sys.exit(main())
