"""``evirank store``: inspect, merge and convert score stores (SQLite files and Parquet shards).

$ evirank store info runs/bm25.txt.scores.sqlite
$ evirank store export runs/bm25.txt.scores.sqlite s3://bucket/scores      # SQLite -> shards
$ evirank store merge s3://bucket/scores --into runs/all.scores.sqlite     # shards -> SQLite
$ evirank store merge scores-a/ scores-b/ --into scores-merged/            # many small shards -> few
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

logger = logging.getLogger(__name__)

EPILOG = """\
A store is a SQLite file (a path ending in .sqlite) or a folder or URL of Parquet shards
(s3://, gs:// with the s3 / gcs extras), which several machines can write at once. Every command
that takes --scores (rerank, tune, explain, serve) reads both kinds.
"""


#: ``--fingerprint`` names several scorers in ``store merge`` and ``store export``.
FINGERPRINTS = {"fingerprint": "copy only these fingerprints (default: all)"}
SEVERAL = {"fingerprint": {"nargs": "+"}}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``store`` subcommand and its actions."""
    from evirank.pipeline.flags import add_flags

    parser = subparsers.add_parser(
        "store",
        help="inspect, merge and convert score stores (SQLite or Parquet shards)",
        description="Inspect, merge and convert score stores.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(
        dest="action", metavar="ACTION", required=True, help="info, merge or export"
    )
    info = actions.add_parser("info", help="fingerprints, models and counts of a store")
    info.add_argument("store", metavar="STORE", help="the store (a .sqlite file, a folder or a URL)")
    add_flags(info, ["json"])

    merge = actions.add_parser("merge", help="copy one or more stores into another (created if absent)")
    merge.add_argument("sources", nargs="+", metavar="STORE", help="stores to read")
    add_flags(merge, ["into", "fingerprint"], required={"into"}, helps=FINGERPRINTS, changes=SEVERAL)

    export = actions.add_parser("export", help="convert a store into a new one of either kind")
    export.add_argument("source", metavar="STORE", help="the store to read")
    export.add_argument("dest", metavar="DEST", help="the new store (must not exist)")
    add_flags(export, ["fingerprint"], helps=FINGERPRINTS, changes=SEVERAL)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the chosen action."""
    from contextlib import ExitStack

    from evirank.errors import EvirankError
    from evirank.score.stores import copy_store, open_store

    if args.action == "info":
        with open_store(args.store, readonly=True) as store:
            print_info(store, as_json=args.json)
        return 0
    if args.action == "export":
        if _exists(args.dest):
            raise EvirankError(
                f"{args.dest} already exists; `evirank store merge {args.source} --into {args.dest}` "
                "adds to an existing store"
            )
        sources, dest = [args.source], args.dest
    else:
        sources, dest = args.sources, args.into
    with ExitStack() as stack:
        # every source is opened (and checked) before anything is written at the destination
        opened = [
            (location, stack.enter_context(open_store(location, readonly=True))) for location in sources
        ]
        with _new_or_existing(dest) as target:
            for location, source in opened:
                counts = copy_store(source, target, args.fingerprint)
                logger.info(
                    "%s -> %s: %d fingerprints, %d scores, %d embeddings, %d segments new",
                    location,
                    dest,
                    counts["fingerprints"],
                    counts["scores"],
                    counts["embeddings"],
                    counts["segments"],
                )
    return 0


@contextmanager
def _new_or_existing(dest: str) -> Iterator[Any]:
    """The store at ``dest`` for writing; a new local one appears there only once complete.

    A store that does not exist yet is built under a temporary name beside ``dest`` and renamed
    into place at the end, so a copy that fails (or is interrupted) leaves nothing at ``dest`` and
    its rerun is not refused; at a URL, where nothing can be renamed, what was made is removed.
    An existing store is added to in place (what it held is kept; a rerun adds what is missing).
    """
    from evirank.outputs import check_output, clean_stale, replace_output, temporary_path
    from evirank.score.store_parquet import is_parquet_store
    from evirank.score.stores import open_store

    if _exists(dest):
        with open_store(dest) as store:
            yield store
        return
    if "://" in dest:
        try:
            with open_store(dest) as store:
                yield store
        except BaseException:
            _remove_url(dest)
            raise
        return
    out = check_output(dest)
    clean_stale(out)
    tmp = temporary_path(out, "" if is_parquet_store(dest) else out.suffix)
    try:
        with open_store(tmp) as store:
            yield store
        replace_output(tmp, out)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def _exists(location: str) -> bool:
    from fsspec.core import url_to_fs

    fs, path = url_to_fs(location)
    return bool(fs.exists(path))


def _remove_url(location: str) -> None:
    from fsspec.core import url_to_fs

    with suppress(Exception):
        fs, path = url_to_fs(location)
        if fs.exists(path):
            fs.rm(path, recursive=True)


def print_info(store: Any, *, as_json: bool = False) -> None:
    """Write a store's kind, location and per-fingerprint counts to stdout."""
    table = store.fingerprints()
    rows = [
        {
            "fingerprint": row.fingerprint,
            "kind": row.kind,
            "model": row.description.get("model", "?"),
            "backend": row.description.get("backend", "?"),
            "precision": row.description.get("precision", "?"),
            "scores": int(row.scores),
            "segments": int(row.segments),
        }
        for row in table.itertuples()
    ]
    kind = type(store).__name__
    if as_json:
        sys.stdout.write(json.dumps({"store": str(store.path), "kind": kind, "fingerprints": rows}, indent=2))
        sys.stdout.write("\n")
        return
    sys.stdout.write(f"{store.path} ({kind}): {len(rows)} fingerprints\n")
    if rows:
        sys.stdout.write("fingerprint   kind   scores  segments  model (backend, precision)\n")
    for r in rows:
        sys.stdout.write(
            f"{r['fingerprint'][:12]}  {r['kind']:<5} {r['scores']:>8} {r['segments']:>9}  "
            f"{r['model']} ({r['backend']}, {r['precision']})\n"
        )
