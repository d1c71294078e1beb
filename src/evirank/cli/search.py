"""``evirank search``: BM25, BM25+RM3, dense or hybrid runs from an index, written as a TREC run.

Example:
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --output runs/scifact.bm25.txt
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --rm3 --output runs/scifact.bm25+rm3.txt
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \
        --fuse rrf --output runs/scifact.hybrid.txt
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from evirank.cli.index import positive_int

logger = logging.getLogger(__name__)

EPILOG = """\
Defaults are Anserini's: BM25 k1=0.9 b=0.4; RM3 with 10 feedback documents, 10 expansion terms
and original query weight 0.5 (--rm3 alone), or --rm3 FB_DOCS FB_TERMS ORIG_WEIGHT.

Topics: a TREC <top> file, TREC Web XML, TSV (qid TAB query), BEIR queries.jsonl, or a BEIR
folder (with --split to keep the queries judged in qrels/<split>.tsv). --field picks the TREC
query text: title, description, narrative, or several joined by + (title+description); and
the query variants of Dai & Callan's Table 3: description-keywords and narrative-keywords
(punctuation and evirank's stopwords removed) and narrative-positive (the sentences saying
what is not relevant removed); see docs/io.md.

The run is ordered by qid (natural order), score descending, then docno descending: evirank's
one tie rule, trec_eval's own, so the rank column is the order trec_eval evaluates. Anserini
picks the top k itself (its ties go to the smaller docid, then it nudges tied scores apart by
1e-6, so the scores it returns seldom tie). The run is written atomically; RUN.json next to it
records the configuration, the index and the versions.

--dense retrieves with the passage vectors stored beside the index (`evirank index --embed`, or
--vectors VDIR from `evirank embed`): the query is embedded with the bi-encoder that made them
(--model; another model is refused), every passage is scored by inner product (exact search) and
each document gets its best passage's score. --fuse also runs BM25 (or BM25+RM3 with --rm3) and
fuses the two lists over their union: rrf[:K] is reciprocal rank fusion (sum of 1/(K + rank),
K = 60 by default); interp[:WEIGHT] interpolates per-query min-max normalised scores, WEIGHT on
BM25 (default 0.5). A document missing from one list gets nothing from it (rrf) or 0, that list's
minimum (interp). Each list retrieves --k documents and the fused run keeps the top --k.
--save-fusion FILE writes both lists' scores per document for `evirank tune --passages FILE
--aggregate maxp --grid alpha=0:1:0.05`, which chooses WEIGHT (alpha) by cross-validation.

examples:
  evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test --dense \
      --output runs/scifact.dense.txt
  evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \
      --fuse interp:0.3 --save-fusion runs/scifact.fusion.parquet --output runs/scifact.interp.txt
  evirank search --index indexes/robust04 --topics topics.robust04.txt --field description \\
      --output runs/robust04.desc.bm25.txt
  evirank search --index indexes/scifact --topics queries.jsonl --output run.txt --bm25 1.2 0.75 --k 100
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``search`` and its flags."""
    parser = subparsers.add_parser(
        "search",
        help="retrieve with BM25, BM25+RM3, dense passage vectors or a fusion into a TREC run",
        description="Search a Lucene index with BM25 (or BM25+RM3), its stored passage vectors "
        "(--dense), or both fused (--fuse), for every topic; write a TREC run.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--index", required=True, metavar="DIR", help="a Lucene index folder (evirank index)")
    parser.add_argument(
        "--topics", required=True, metavar="PATH", help="topics file, BEIR folder, or irds:<id>"
    )
    parser.add_argument(
        "--output", required=True, metavar="RUN", help="the TREC run file to write (.gz allowed)"
    )
    parser.add_argument("--k", type=positive_int, default=1000, help="documents per query (default: 1000)")
    parser.add_argument(
        "--bm25",
        nargs=2,
        type=float,
        default=(0.9, 0.4),
        metavar=("K1", "B"),
        help="BM25 parameters (default: 0.9 0.4)",
    )
    parser.add_argument(
        "--rm3",
        nargs="*",
        default=None,
        action=_Rm3Action,
        metavar="FB_DOCS FB_TERMS ORIG_WEIGHT",
        help="expand queries with RM3: no value for Anserini's defaults (10 10 0.5), or all three",
    )
    parser.add_argument(
        "--field",
        default="title",
        help="TREC topic field: title (default), description, narrative, their keyword versions "
        "description-keywords and narrative-keywords, narrative-positive, or a combination a+b",
    )
    parser.add_argument(
        "--split", default=None, help="for a BEIR folder: keep the queries of qrels/SPLIT.tsv"
    )
    parser.add_argument(
        "--threads", type=positive_int, default=1, metavar="N", help="search threads (default: 1)"
    )
    dense = parser.add_argument_group("dense and hybrid retrieval")
    dense.add_argument(
        "--dense",
        action="store_true",
        help="retrieve by the stored passage vectors (each document scored by its best passage)",
    )
    dense.add_argument(
        "--fuse",
        metavar="SPEC",
        help="fuse the dense run with BM25 (or BM25+RM3): rrf[:K] (default K 60) or interp[:WEIGHT] "
        "(WEIGHT on BM25, default 0.5); implies --dense",
    )
    dense.add_argument(
        "--vectors", metavar="VDIR", help="passage vectors (evirank embed; default: the index's own)"
    )
    dense.add_argument(
        "--model",
        metavar="M",
        help="the bi-encoder that embeds queries: the one that made the vectors "
        "(default: the offline all-MiniLM-L6-v2)",
    )
    dense.add_argument(
        "--max-length", type=positive_int, metavar="N", help="query token cap (default: the model's)"
    )
    dense.add_argument("--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, mps")
    dense.add_argument(
        "--save-fusion",
        metavar="FILE",
        help="with --fuse: both lists' scores per document (Parquet) for evirank tune --passages",
    )
    parser.add_argument("--tag", default=None, help="the run tag (default: bm25, bm25+rm3, dense, ...)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing RUN (and RUN.json)")
    return parser


def parse_rm3(values: list[str] | None) -> Any:
    """``--rm3`` values to an :class:`~evirank.lucene.Rm3` (or ``None`` when the flag is absent).

    Raises:
        ValueError: not zero or three values, or values of the wrong type or range.

    Example:
        >>> parse_rm3([]), parse_rm3(None)
        (Rm3(fb_docs=10, fb_terms=10, original_weight=0.5), None)
        >>> parse_rm3(["20", "5", "0.3"])
        Rm3(fb_docs=20, fb_terms=5, original_weight=0.3)
    """
    from evirank.lucene.search import Rm3

    if values is None:
        return None
    if not values:
        return Rm3()
    if len(values) != 3:
        raise ValueError(f"takes no value or three (FB_DOCS FB_TERMS ORIG_WEIGHT), found {len(values)}")
    try:
        fb_docs, fb_terms, weight = int(values[0]), int(values[1]), float(values[2])
    except ValueError:
        raise ValueError(
            f"expected FB_DOCS FB_TERMS ORIG_WEIGHT as integer integer number, found {values}"
        ) from None
    return Rm3(fb_docs=fb_docs, fb_terms=fb_terms, original_weight=weight)


class _Rm3Action(argparse.Action):
    """Turn ``--rm3 [FB_DOCS FB_TERMS ORIG_WEIGHT]`` into an Rm3 at parse time (usage errors exit 2)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        try:
            setattr(namespace, self.dest, parse_rm3(list(values)))
        except ValueError as exc:
            parser.error(f"argument --rm3: {exc}")


def dense_retriever(args: argparse.Namespace) -> Any:
    """The :class:`~evirank.firststage.DenseRetriever` of the flags (nothing loaded yet).

    Raises:
        UsageError: no passage vectors (neither --vectors nor any recorded in the index).
    """
    from evirank.errors import UsageError
    from evirank.firststage import DenseRetriever
    from evirank.score import BiEncoder
    from evirank.vectors.index import resolve_vectors

    if args.vectors is not None and args.vectors.strip().lower() == "none":
        raise UsageError("--dense needs passage vectors; --vectors none turns them off")
    vectors = resolve_vectors(args.vectors, args.index)
    if vectors is None:
        raise UsageError(
            f"{args.index} has no passage vectors: build them with `evirank embed --index {args.index}` "
            "(or `evirank index --embed`), or name a folder with --vectors VDIR"
        )
    scorer = BiEncoder(args.model, max_length=args.max_length, device=args.device)
    return DenseRetriever(vectors, scorer=scorer, k=args.k)


def _tag(bm25: Any, fusion: Any) -> str:
    if fusion is None:
        return "dense" if bm25 is None else str(bm25.config.name)
    return f"{bm25.config.name}+dense-{fusion.spec.replace(':', '')}"


def run(args: argparse.Namespace) -> int:
    """Read the topics, search (BM25, dense, or both fused), write the run and its configuration."""
    from pathlib import Path

    from evirank.errors import UsageError
    from evirank.io import read_topics, write_run
    from evirank.lucene.index import read_index_info
    from evirank.lucene.search import Bm25
    from evirank.outputs import atomic_outputs, check_output
    from evirank.record import compact_json, make_record, sidecar

    fusion = None
    if args.fuse is not None:
        from evirank.firststage import Fusion

        try:
            fusion = Fusion.parse(args.fuse)
        except ValueError as exc:
            raise UsageError(f"--fuse: {exc}") from exc
    dense = args.dense or fusion is not None
    if args.save_fusion and fusion is None:
        raise UsageError("--save-fusion needs --fuse (it holds the two lists that are fused)")
    if args.rm3 is not None and dense and fusion is None:
        raise UsageError("--rm3 expands BM25's queries; with --dense alone there is no BM25 (add --fuse)")
    bm25 = None
    if not dense or fusion is not None:
        try:
            bm25 = Bm25(
                args.index, k1=args.bm25[0], b=args.bm25[1], rm3=args.rm3, k=args.k, threads=args.threads
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    retriever = dense_retriever(args) if dense else None
    # Fail before the (possibly long) search if an output is in the way.
    extra = [Path(args.save_fusion)] if args.save_fusion else []
    for path in [Path(args.output), sidecar(args.output), *extra]:
        check_output(path, args.overwrite)
    topics = read_topics(args.topics, field=args.field, split=args.split)
    tag = args.tag or _tag(bm25, fusion)
    started = time.perf_counter()
    table = None
    if retriever is None:
        assert bm25 is not None
        result = bm25(topics)
    elif bm25 is None:
        result = retriever(topics)
    else:
        from evirank.firststage import fusion_table

        assert fusion is not None
        first, second = bm25(topics), retriever(topics)
        result = fusion(first, second, depth=args.k)
        table = fusion_table(first, second) if args.save_fusion else None
    seconds = time.perf_counter() - started
    logger.info(
        "%s: %d queries, %d results in %.1f s (%.1f ms/query)",
        tag,
        len(topics),
        len(result),
        seconds,
        1000 * seconds / max(len(topics), 1),
    )
    written = Path(args.output)
    if retriever is None:
        assert bm25 is not None
        config: dict[str, Any] = bm25.config.to_dict()
    else:
        config = {
            "k": args.k,
            "bm25": bm25.config.to_dict() if bm25 is not None else None,
            "dense": _describe_dense(retriever),
            "fusion": fusion.spec if fusion is not None else None,
        }
    record = make_record(
        "search",
        config,
        run=written,
        tag=tag,
        index=args.index,
        topics=args.topics,
        field=args.field,
        split=args.split,
        queries=len(topics),
        seconds=round(seconds, 3),
        fusion_table=args.save_fusion,
        index_info=read_index_info(args.index),
    )
    # the run, its record (and the fusion table) succeed or fail together
    outputs = [(written, None), (sidecar(written), None), *((p, None) for p in extra)]
    with atomic_outputs(*outputs, overwrite=args.overwrite) as temps:
        write_run(result, temps[0], tag=tag)
        temps[1].write_text(compact_json(record) + "\n", encoding="utf-8")
        if table is not None:
            table.to_parquet(temps[2], index=False)
    logger.info("wrote %s and %s", written, sidecar(args.output))
    return 0


def _describe_dense(retriever: Any) -> dict[str, Any]:
    vectors, scorer, searcher = retriever._open()
    return {
        "vectors": str(vectors.path),
        "fingerprint": vectors.identity.fingerprint,
        "model": scorer.describe(),
        "segment": vectors.identity.segment,
        "searcher": repr(searcher),
        "pooling": "max",
    }
