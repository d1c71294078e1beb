"""``evirank embed``: segment a collection and embed every passage once, for evidence by lookup.

Example:
    $ evirank embed --index indexes/scifact --segment sentences:prepend
    $ evirank embed --corpus ../shared/datasets/scifact --segment sentences:prepend --output vectors/scifact
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from evirank.config.runtime import RUNTIME_SETTINGS
from evirank.segment.segment_spec import GRAMMAR

logger = logging.getLogger(__name__)


EPILOG = """\
Every document is split with --segment (the grammar of `evirank rerank --segment`, long sentences
cut to the model's room as rerank does) and each passage is embedded with the bi-encoder --model
(default: the offline all-MiniLM-L6-v2). The vectors (float16, L2-normalised), the passage table and
a manifest naming the model and segmenter go to --output; with --index and no --output, to
INDEX/vectors, recorded in INDEX/evirank-index.json so that `evirank serve --index` and
`evirank rerank --index` use them.

The build goes block by block (--block-size documents each); each finished block is kept in
OUTPUT.partial, so an interrupted build run again with the same flags resumes where it stopped.
The folder appears at OUTPUT only when complete.

examples:
  evirank embed --index indexes/scifact --segment sentences:prepend
  evirank embed --corpus corpus.jsonl --segment windows:150:75 --output vectors/mine --block-size 500
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``embed`` and its flags."""
    from evirank.cli import CommandHelpFormatter

    parser = subparsers.add_parser(
        "embed",
        help="embed every passage of a collection once (bi-encoder vectors for evidence by lookup)",
        description="Segment every document of a corpus or index and store each passage's bi-encoder "
        "embedding, so that re-ranking and the search service embed only the query.",
        epilog=EPILOG,
        formatter_class=CommandHelpFormatter,
    )
    from evirank.config import SETTINGS
    from evirank.pipeline import flags

    flags.add_flags(
        parser,
        ["index", "corpus", "corpus_format", *EMBEDDING, "output", "overwrite", *flags.RAY],
        required={"source"},
        helps={
            **EMBEDDING_HELPS,
            "output": "the vector folder to create (default with --index: INDEX/vectors)",
            "overwrite": "replace an existing vector folder",
        },
        defaults={"segment": SETTINGS.default("default_segment")},
        changes={"scorer": {"action": None, "metavar": "FAMILY"}, "output": {"metavar": "VDIR"}},
    )
    return parser


#: The settings that choose what is embedded and how (``embed``, and ``index --embed``).
EMBEDDING = ["segment", "scorer", "model", *RUNTIME_SETTINGS, "scores", "block_size"]
#: What they mean when passages are embedded.
EMBEDDING_HELPS = {
    "segment": f"{GRAMMAR}; rerank and serve must use the same",
    "scorer": "the model family whose passage representations are stored (auto: told from --model's "
    "files; without --model the offline all-MiniLM-L6-v2 bi-encoder)",
    "scores": "a score store (evirank rerank --scores) whose cached embeddings are reused, and filled",
}


def passage_encoder(args: argparse.Namespace) -> Any:
    """The scorer whose passage vectors are stored, built by the one pipeline builder (nothing loaded yet).

    Raises:
        UsageError: a family that cannot compute a passage's representation alone (a cross-encoder
            reads the query and the passage together), or one whose representations are not vectors.
    """
    from evirank.errors import UsageError
    from evirank.pipeline import PipelineSpec, build_pipeline
    from evirank.score.family import family_of

    spec = PipelineSpec.from_mapping(
        {
            "scorer": args.scorer,
            "model": args.model,
            **{name: getattr(args, name, None) for name in RUNTIME_SETTINGS},
            "segment": args.segment,
            "vectors": "none",  # the vectors being made are not read
        }
    )
    scorer = build_pipeline(spec, store=getattr(args, "scores", None)).scorer
    family = family_of(scorer)
    if not family.stores_passages or not callable(getattr(scorer, "embed", None)):
        raise UsageError(
            f"the {family.name} family computes no passage vector alone (it reads the query with the "
            "passage, or keeps its passage representations in the score store): evirank embed needs a "
            "family whose passages are embedded once, such as bi"
        )
    return scorer


def documents_of(args: argparse.Namespace) -> tuple[Iterable[Any], int | None, str]:
    """(documents, their count if known, a description of the source) from ``--index`` or ``--corpus``."""
    if getattr(args, "corpus", None):
        from evirank.io import count_corpus, read_corpus

        try:
            total: int | None = count_corpus(args.corpus, format=args.corpus_format)
        except (OSError, ValueError, ImportError):
            total = None
        return read_corpus(args.corpus, format=args.corpus_format, empty="skip"), total, str(args.corpus)
    from evirank.lucene import LuceneDocs

    docs = LuceneDocs(args.index)
    return docs, len(docs), str(args.index)


def embed_collection(
    documents: Iterable[Any],
    output: Path,
    *,
    scorer: Any,
    segment: str,
    block_size: int | None,
    overwrite: bool,
    total: int | None,
    source: str,
    ray: Any = None,
) -> Any:
    """Build the vector folder (resuming an unfinished one), on Ray with ``ray`` (RayOptions);
    return it opened."""
    from evirank.vectors import DEFAULT_BLOCK_SIZE, VectorBuilder

    builder = VectorBuilder(
        output,
        scorer,
        segment,
        block_size=block_size or DEFAULT_BLOCK_SIZE,
        overwrite=overwrite,
        source=source,
    )
    started = time.perf_counter()
    if ray is None:
        vectors = builder.build(documents, total=total)
    else:
        from evirank.scale.embed import embed_on_ray

        vectors = embed_on_ray(builder, documents, ray, total=total)
    logger.info(
        "embedded %d passages of %d documents in %.1f s into %s",
        len(vectors),
        vectors.documents,
        time.perf_counter() - started,
        output,
    )
    return vectors


def run(args: argparse.Namespace) -> int:
    """Embed the collection; with --index and the default output, record the vectors in the index."""
    from evirank.rerank import parse_segment
    from evirank.scale.options import RayOptions
    from evirank.vectors.index import default_vectors_path, record_vectors

    try:
        parse_segment(args.segment)
    except ValueError as exc:
        raise SystemExit(f"evirank embed: error: --segment: {exc}") from exc
    if args.output is None and args.index is None:
        raise SystemExit("evirank embed: error: give --output VDIR (required with --corpus)")
    output = Path(args.output) if args.output else default_vectors_path(args.index)
    documents, total, source = documents_of(args)
    vectors = embed_collection(
        documents,
        output,
        scorer=passage_encoder(args),
        segment=args.segment,
        block_size=args.block_size,
        overwrite=args.overwrite,
        total=total,
        source=source,
        ray=RayOptions.from_mapping(vars(args)),
    )
    if args.index is not None and output.resolve() == default_vectors_path(args.index).resolve():
        record_vectors(args.index, vectors)
        logger.info("recorded the vectors in %s/evirank-index.json", args.index)
    return 0
