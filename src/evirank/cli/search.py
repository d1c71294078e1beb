"""``evirank search``: BM25, BM25+RM3, dense or hybrid runs from an index, written as a TREC run.

Example:
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --output runs/scifact.bm25.txt
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --rm3 --output runs/scifact.bm25+rm3.txt
    $ evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
        --first-stage rrf --output runs/scifact.hybrid.txt
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

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

--first-stage dense retrieves with the passage vectors stored beside the index (`evirank index
--embed`, or --vectors VDIR from `evirank embed`): the query is embedded with the bi-encoder that
made them (--model; another model is refused), every passage is scored by inner product (exact
search) and each document gets its best passage's score. --first-stage rrf[:K] or interp[:WEIGHT]
also runs BM25 (or BM25+RM3 with --rm3) and fuses the two lists over their union: rrf[:K] is
reciprocal rank fusion (sum of 1/(K + rank), K = 60 by default); interp[:WEIGHT] interpolates
per-query min-max normalised scores, WEIGHT on BM25 (default 0.5). A document missing from one list
gets nothing from it (rrf) or 0, that list's minimum (interp). Each list retrieves --k documents
and the fused run keeps the top --k.
--save-fusion FILE writes both lists' scores per document for `evirank tune --passages FILE
--aggregate maxp --grid alpha=0:1:0.05`, which chooses WEIGHT (alpha) by cross-validation.

examples:
  evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
      --first-stage dense --output runs/scifact.dense.txt
  evirank search --index indexes/scifact --topics ../shared/datasets/scifact --split test \\
      --first-stage interp:0.3 --save-fusion runs/scifact.fusion.parquet --output runs/scifact.interp.txt
  evirank search --index indexes/robust04 --topics topics.robust04.txt --field description \\
      --output runs/robust04.desc.bm25.txt
  evirank search --index indexes/scifact --topics queries.jsonl --output run.txt --bm25 1.2 0.75 --k 100
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``search`` and its flags (the pipeline's, declared once in :mod:`evirank.pipeline.flags`)."""
    from evirank.cli import CommandHelpFormatter
    from evirank.pipeline import flags

    parser = subparsers.add_parser(
        "search",
        help="retrieve with BM25, BM25+RM3, dense passage vectors or a fusion into a TREC run",
        description="Search a Lucene index with BM25 (or BM25+RM3), its stored passage vectors "
        "(--first-stage dense), or both fused (--first-stage rrf|interp), for every topic; write a TREC run.",
        epilog=EPILOG,
        formatter_class=CommandHelpFormatter,
    )
    flags.add_flags(
        parser,
        [
            "index",
            *flags.TOPICS,
            "first_stage",
            "k",
            "bm25",
            "rm3",
            "threads",
            "model",
            "device",
            "max_length",
            "vectors",
            "output",
            "save_fusion",
            "tag",
            "overwrite",
        ],
        required={"source", "topics", "output"},
        helps={
            "output": "the TREC run to write (.gz allowed); RUN.json beside it records how it was made",
            "tag": "the run tag (default: bm25, bm25+rm3, dense, ...)",
            "overwrite": "replace an existing RUN (and RUN.json)",
        },
        changes={"output": {"metavar": "RUN"}},
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Read the topics, search (BM25, dense, or both fused), write the run and its configuration."""
    from pathlib import Path

    from evirank.errors import UsageError
    from evirank.io import read_topics, write_run
    from evirank.outputs import atomic_outputs, check_output
    from evirank.pipeline import build_pipeline
    from evirank.pipeline.flags import spec_from_args
    from evirank.record import compact_json, make_record, sidecar

    spec = spec_from_args(args)
    first = spec.first_stage
    fused = first.method not in ("bm25", "dense")
    if args.save_fusion and not fused:
        raise UsageError("--save-fusion needs a fused first stage (--first-stage rrf or interp)")
    # Fail before the (possibly long) search if an output is in the way.
    extra = [Path(args.save_fusion)] if args.save_fusion else []
    for path in [Path(args.output), sidecar(args.output), *extra]:
        check_output(path, args.overwrite)
    with build_pipeline(spec, first_stage_only=True) as pipeline:
        stage: Any = pipeline.first_stage  # BM25, dense or fused: each writes its own record below
        assert pipeline.collection is not None
        topics = read_topics(args.topics, field=args.field, split=args.split)
        tag = args.tag or first.name
        started = time.perf_counter()
        table = None
        if args.save_fusion:
            from evirank.firststage import fusion_table

            lexical, dense = stage.runs(topics)
            result = stage.fusion(lexical, dense, depth=stage.k)
            table = fusion_table(lexical, dense)
        else:
            result = stage(topics)
        seconds = time.perf_counter() - started
        logger.info(
            "%s: %d queries, %d results in %.1f s (%.1f ms/query)",
            tag,
            len(topics),
            len(result),
            seconds,
            1000 * seconds / max(len(topics), 1),
        )
        if first.method == "bm25":
            config: dict[str, Any] = stage.config.to_dict()
        else:
            dense_stage = stage if first.method == "dense" else stage.second
            config = {
                "k": first.k,
                "bm25": stage.first.config.to_dict() if fused else None,
                "dense": _describe_dense(dense_stage),
                "fusion": stage.fusion.spec if fused else None,
            }
        index_info = pipeline.collection.info
    written = Path(args.output)
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
        index_info=index_info,
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
