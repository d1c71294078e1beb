"""``evirank data``: the public collections evirank can fetch, and fetching them.

Example:
    $ evirank data list
    $ evirank data get scifact          # prints the folder, downloading it first if needed
    /home/me/.cache/evirank/scifact
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

_EPILOG = """\
where a collection is looked for, in order:
  1. the datasets folder: $EVIRANK_DATASETS, else $DATA, else ../shared/datasets
  2. the data home: $EVIRANK_HOME, else evirank in the user's cache folder (~/.cache/evirank)
  3. a download into the data home, checked against its published checksum
$EVIRANK_DATA_URL points every download at a mirror holding the same file names;
$EVIRANK_DATA_REGISTRY names a JSON file of more collections (each file with its url, size, checksum).

examples:
  evirank data list
  evirank data get scifact
  evirank index --corpus "$(evirank data get scifact)" --index indexes/scifact
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``data`` with its ``list`` and ``get`` actions."""
    parser = subparsers.add_parser(
        "data",
        help="list and fetch public test collections",
        description="List the public test collections evirank can fetch, and fetch them into the data home.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True, help="list or get")
    actions.add_parser(
        "list",
        help="every collection, its download size, checksum kind and where it already is",
        description="Show every collection, its download size, the checksum it is verified against, "
        "and where it already is on this machine ('-': not here).",
    )
    get = actions.add_parser(
        "get",
        help="print a collection's folder, downloading it first if it is not on this machine",
        description="Print the folder of a collection (on stdout), downloading it into the data home "
        "first when it is neither in the datasets folder nor in the data home.",
    )
    get.add_argument("name", help="the collection (see `evirank data list`)")
    from evirank.pipeline.flags import add_flags

    add_flags(get, ["home", "force"])
    return parser


def run(args: argparse.Namespace) -> int:
    """List the collections, or print one's folder."""
    from evirank.data import data_home, describe, get_dataset, registry

    out = sys.stdout
    if args.action == "get":
        out.write(f"{get_dataset(args.name, home=args.home, force=args.force)}\n")
        return 0
    rows = describe(registry().values())
    columns = ("name", "download", "checksum", "here", "description")
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns[:-1]}
    out.write("  ".join(c.ljust(widths[c]) for c in columns[:-1]) + "  description\n")
    for row in rows:
        out.write("  ".join(row[c].ljust(widths[c]) for c in columns[:-1]) + f"  {row['description']}\n")
    out.write(f"data home: {data_home()}\n")
    return 0
