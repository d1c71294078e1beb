"""The ``evirank`` command: one module per subcommand, each exposing ``add_parser`` and ``run``.

A subcommand module ``evirank.cli.<name>`` defines::

    def add_parser(subparsers) -> argparse.ArgumentParser: ...
    def run(args: argparse.Namespace) -> int: ...

Modules are imported only to build the parser; heavy libraries are imported inside ``run``.

Example:
    $ evirank search --index indexes/scifact --topics queries.jsonl --output runs/bm25.txt
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from evirank import __version__
from evirank.errors import EvirankError

SUBCOMMANDS = (
    "index",
    "embed",
    "search",
    "rerank",
    "explain",
    "evaluate",
    "tune",
    "report",
    "train",
    "distill",
    "serve",
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="evirank", description="Rank documents by the evidence their sentences and passages hold."
    )
    parser.add_argument("--version", action="version", version=f"evirank {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only, no progress")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"evirank.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"evirank.cli.{name}":
                continue  # subcommand not built yet
            raise
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
    return parser


def configure_logging(verbose: int, quiet: bool) -> None:
    """Handlers are configured here, in the CLI, never in library code."""
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("evirank").setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evirank`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose, args.quiet)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        logging.getLogger("evirank").warning("interrupted; finished work is kept and a rerun resumes")
        return 130
    except (EvirankError, FileNotFoundError) as exc:
        logging.getLogger("evirank").error("%s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
