"""First-stage quality: BM25, BM25+RM3, dense retrieval and their fusions; then the full pipeline over them.

For each collection (an index built with ``evirank index --embed``, so its passage vectors are beside
it): BM25 and BM25+RM3 (Anserini's defaults), dense retrieval over the stored vectors (each document
scored by its best passage, exact search), reciprocal rank fusion of each BM25 run with the dense one
(k = 60), and their interpolation of per-query min-max normalised scores with the BM25 weight chosen
by ``--folds``-fold cross-validation on ``--metric`` (the folds and grid search of ``evirank tune``:
``maxp`` over the fusion table, alpha = the BM25 weight in 0:1:0.05). Every run retrieves ``--k``
documents per query; a fused run keeps the top ``--k`` of the union. Prints R@100, R@1000 and
nDCG@10 with paired t-tests against BM25 (Bonferroni) as one Markdown table per collection.

Collections: ``scifact`` (BEIR SciFact, the 300 test claims, 5,183 abstracts), ``dl19`` (TREC DL 2019
passages: the 43 judged queries over the 5,492 passages the datasets folder holds, a pool of BM25 and
BM25+RM3 top-100 lists from the full MS MARCO collection, so recall is within that pool; recall counts
labels >= 2, as the track does) and ``mb2011`` (TREC Microblog 2011: 49 judged topics over the ~40k
candidate tweets of a query-likelihood run, again a pool, not the full Tweets2011 collection).

``--pipeline`` adds the full pipeline on SciFact: the bi-encoder re-ranks the top ``--depths``
(default 20 and 100) of BM25 and of the hybrid runs by lookup in the stored vectors (sentences,
``--segment``), and ``evirank tune`` chooses MaxP's and Birch's (birch:3) weights by the same
5-fold cross-validation on nDCG@10. The interpolated hybrid's weight and the re-ranker's weights
are chosen on the same folds (``k_folds`` over the same queries and seed), so no test query of a
fold enters any of its choices. Each cell has the paired t-test's p against BM25's candidates at the
same depth (two-sided, uncorrected).

Build the indexes first (the embedding takes minutes to an hour on a small CPU):

    evirank index --corpus DATA/scifact --index indexes/scifact --embed --segment sentences:prepend
    evirank index --corpus DATA/trec-dl19-passage/corpus.jsonl --index indexes/dl19 --embed --segment whole
    evirank index --corpus DATA/microblog/2011/corpus.jsonl --index indexes/mb2011 --embed --segment whole

Example:
    $ PYTHONPATH=src python benchmarks/first_stage_quality.py --scifact indexes/scifact \\
        --dl19 indexes/dl19 --mb2011 indexes/mb2011 --pipeline
    $ PYTHONPATH=src python benchmarks/first_stage_quality.py --scifact indexes/scifact --queries 50
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from _common import datasets, footer, header

from evirank import markdown
from evirank.config import Runtime

logger = logging.getLogger("benchmarks.first_stage_quality")

MEASURES = ("R@100", "R@1000", "nDCG@10")
GRID = "alpha=0:1:0.05"
AGGREGATES = ("maxp", "birch:3")


@dataclass(frozen=True)
class Collection:
    """Where a collection's topics and qrels are, and how it is evaluated."""

    name: str
    title: str
    topics: str
    qrels: str
    split: str | None = None
    relevance_level: int | None = None


def collections(data: Path) -> dict[str, Collection]:
    """The three collections, by name."""
    return {
        "scifact": Collection(
            "scifact",
            "SciFact test (300 claims, 5,183 abstracts)",
            str(data / "scifact"),
            str(data / "scifact" / "qrels" / "test.tsv"),
            split="test",
        ),
        "dl19": Collection(
            "dl19",
            "TREC DL19 passages (43 queries; corpus: a pool of 5,492 passages, "
            "recall within it, labels >= 2)",
            str(data / "trec-dl19-passage" / "topics.dl19-passage.tsv"),
            str(data / "trec-dl19-passage" / "qrels.dl19-passage.txt"),
            relevance_level=2,
        ),
        "mb2011": Collection(
            "mb2011",
            "TREC Microblog 2011 (49 topics; corpus: a pool of ~40k candidate tweets, recall within it)",
            str(data / "microblog" / "2011" / "topics.microblog2011.txt"),
            str(data / "microblog" / "2011" / "qrels.microblog2011.txt"),
        ),
    }


def first_stages(
    index: Path, collection: Collection, args: argparse.Namespace, work: Path
) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Every first-stage run of one collection (name -> Run), and facts for the header."""
    from evirank.firststage import DenseRetriever, fusion_table, rrf
    from evirank.io import read_qrels, read_topics, write_run
    from evirank.lucene import Bm25, Rm3
    from evirank.score import BiEncoder
    from evirank.tune import k_folds, parse_aggregate, parse_grid
    from evirank.tune.search import cross_validate
    from evirank.vectors.index import vectors_of_index

    topics = read_topics(collection.topics, split=collection.split)
    qrels = read_qrels(collection.qrels)
    topics = topics[topics["qid"].isin(set(qrels["qid"]))]
    if args.queries:
        topics = topics.head(args.queries)
    vectors = vectors_of_index(index)
    if vectors is None:
        raise SystemExit(f"{index} has no passage vectors: build it with `evirank index --embed`")
    facts: dict[str, Any] = {"queries": len(topics), "vectors": repr(vectors), "seconds": {}, "weights": {}}
    runs: dict[str, pd.DataFrame] = {}

    def timed(name: str, make: Any) -> pd.DataFrame:
        started = time.perf_counter()
        run = make()
        facts["seconds"][name] = round(time.perf_counter() - started, 1)
        return run

    with Bm25(index, k=args.k) as bm25, Bm25(index, rm3=Rm3(), k=args.k) as rm3:
        runs["BM25"] = timed("BM25", lambda: bm25(topics))
        runs["BM25+RM3"] = timed("BM25+RM3", lambda: rm3(topics))
    dense = DenseRetriever(vectors, BiEncoder(None, Runtime(device=args.device)), k=args.k)
    runs["dense"] = timed("dense", lambda: dense(topics))
    qids = sorted(set(topics["qid"]) & set(qrels["qid"]))
    folds = k_folds(qids, k=args.folds, seed=args.seed)
    for sparse in ("BM25", "BM25+RM3"):
        runs[f"RRF({sparse}, dense)"] = rrf(runs[sparse], runs["dense"], depth=args.k)
        table = fusion_table(runs[sparse], runs["dense"])
        result = cross_validate(
            table, qrels, parse_aggregate("maxp"), parse_grid(GRID), folds, metric=args.metric
        )
        name = f"interp({sparse}, dense), CV"
        run = result.run[result.run["rank"] <= args.k].reset_index(drop=True)
        runs[name] = run
        facts["weights"][name] = [c.params["alpha"] for c in result.choices]
        write_run(run, work / f"{collection.name}.{sparse}.interp.txt", tag="interp-cv")
    for name in ("BM25", "dense", "RRF(BM25, dense)"):
        write_run(runs[name], work / f"{collection.name}.{_slug(name)}.txt", tag=_slug(name))
    return runs, facts


def _slug(name: str) -> str:
    return (
        name.lower().replace("(", "-").replace(")", "").replace(", ", "-").replace("+", "").replace(" ", "")
    )


def quality_table(runs: dict[str, pd.DataFrame], collection: Collection) -> str:
    """R@100, R@1000 and nDCG@10 of every run, t-tested against BM25."""
    from evirank.evaluate import compare, markdown_table
    from evirank.io import read_qrels

    comparison = compare(
        runs,
        read_qrels(collection.qrels),
        list(MEASURES),
        baseline="BM25",
        relevance_level=collection.relevance_level,
    )
    return markdown_table(comparison)


def pipeline(index: Path, args: argparse.Namespace, work: Path, data: Path) -> str:
    """SciFact test nDCG@10 of the bi-encoder re-ranking over BM25 and hybrid candidates, tuned by CV."""
    from evirank.cli import main

    collection = collections(data)["scifact"]
    candidates = {
        "BM25": work / "scifact.bm25.txt",
        "RRF(BM25, dense)": work / "scifact.rrf-bm25-dense.txt",
        "interp(BM25, dense), CV": work / "scifact.BM25.interp.txt",
    }
    from evirank.evaluate import compare
    from evirank.io import read_qrels, read_run

    qrels = read_qrels(collection.qrels)
    rows = []
    for depth in args.depths:
        tuned_runs: dict[tuple[str, str], pd.DataFrame] = {}
        cells_of: dict[str, list[str]] = {}
        for name, run in candidates.items():
            out = work / f"rerank.{_slug(name)}.{depth}.txt"
            passages = work / f"rerank.{_slug(name)}.{depth}.parquet"
            started = time.perf_counter()
            rerank = ["-q", "rerank", "--run", str(run), "--index", str(index), "--topics", collection.topics]
            rerank += ["--split", "test", "--scorer", "bi", "--segment", args.segment, "--depth", str(depth)]
            rerank += ["--aggregate", "maxp", "--device", args.device, "--no-scores"]
            if main([*rerank, "--output", str(out), "--save-passages", str(passages), "--overwrite"]) != 0:
                raise SystemExit(f"evirank rerank failed on {name} at depth {depth}")
            cells_of[name] = [name, str(depth), f"{time.perf_counter() - started:.0f}"]
            for aggregate in AGGREGATES:
                tuned = work / f"tune.{_slug(name)}.{depth}.{aggregate.replace(':', '')}"
                tune = ["-q", "tune", "--passages", str(passages), "--run", str(run), "--depth", str(depth)]
                tune += ["--qrels", collection.qrels, "--aggregate", aggregate, "--metric", "nDCG@10"]
                tune += ["--k-folds", str(args.folds), "--seed", str(args.seed), "--measures", "nDCG@10"]
                with contextlib.redirect_stdout(io.StringIO()):  # tune prints its own summary
                    status = main([*tune, "--output", str(tuned), "--overwrite"])
                if status != 0:
                    raise SystemExit(f"evirank tune failed on {name} at depth {depth}")
                tuned_runs[(name, aggregate)] = read_run(tuned / "run.txt")
        for aggregate in AGGREGATES:
            runs = {name: tuned_runs[(name, aggregate)] for name in candidates}
            comparison = compare(runs, qrels, ["nDCG@10"], baseline="BM25", correction="none")
            p_of = {}
            if comparison.significance is not None:
                p_of = dict(zip(comparison.significance["run"], comparison.significance["p"], strict=True))
            for name in candidates:
                value = f"{comparison.means.loc[name, 'nDCG@10']:.4f}"
                cells_of[name].append(value + (f" (p {p_of[name]:.3f})" if name in p_of else ""))
        rows.extend(cells_of.values())
    return markdown.table(
        ["candidates", "depth", "rerank s", "bi MaxP nDCG@10 (CV)", "bi birch:3 nDCG@10 (CV)"], rows
    )


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scifact", type=Path, help="SciFact index with passage vectors")
    parser.add_argument("--dl19", type=Path, help="DL19 passage index with passage vectors")
    parser.add_argument("--mb2011", type=Path, help="Microblog 2011 index with passage vectors")
    parser.add_argument("--k", type=int, default=1000, help="documents per run (default 1000)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds (default 0)")
    parser.add_argument("--metric", default="nDCG@10", help="the measure the weights maximise")
    parser.add_argument("--queries", type=int, help="only the first N judged queries (a quick check)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--pipeline", action="store_true", help="also re-rank SciFact's candidates")
    parser.add_argument("--depths", type=int, nargs="+", default=[20, 100], help="re-ranking depths")
    parser.add_argument("--segment", default="sentences:prepend", help="the SciFact vectors' segmenter")
    parser.add_argument("--work", type=Path, help="keep runs here (default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    data = datasets()
    assert data is not None
    indexes = {name: getattr(args, name) for name in ("scifact", "dl19", "mb2011") if getattr(args, name)}
    if not indexes:
        parser.error("give at least one of --scifact, --dl19, --mb2011 (indexes built with --embed)")
    if args.pipeline and "scifact" not in indexes:
        parser.error("--pipeline needs --scifact")
    work = args.work or Path(tempfile.mkdtemp(prefix="first-stage-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        details = [
            f"every run retrieves {args.k} documents per query; "
            f"fused runs keep the top {args.k} of the union",
            "dense: all-MiniLM-L6-v2 (offline), exact inner product over the stored float16 passage vectors, "
            "documents by their best passage (MaxP)",
            f"RRF k = 60; interp: per-query min-max scores, BM25 weight by {args.folds}-fold CV "
            f"(seed {args.seed}) on {args.metric} over {GRID}",
            "significance: paired t-test against BM25, Bonferroni over the table, p <= 0.05",
        ]
        if args.queries:
            details.append(f"only the first {args.queries} judged queries of each collection (a quick check)")
        sys.stdout.write(
            header(
                "First-stage quality: BM25, BM25+RM3, dense and hybrid", *details, packages=("numpy", "torch")
            )
        )
        for name, index in indexes.items():
            collection = collections(data)[name]
            runs, facts = first_stages(index, collection, args, work)
            sys.stdout.write(f"\n#### {collection.title}\n\n")
            sys.stdout.write(f"index {index.name}: {facts['vectors']}; {facts['queries']} queries\n\n")
            sys.stdout.write(quality_table(runs, collection) + "\n\n")
            weights = "; ".join(f"{k}: {v}" for k, v in facts["weights"].items())
            sys.stdout.write(f"BM25 weights chosen per fold: {weights}\n")
            seconds = ", ".join(f"{k} {v} s" for k, v in facts["seconds"].items())
            sys.stdout.write(f"time for all queries: {seconds}\n")
            sys.stdout.flush()
        if args.pipeline:
            sys.stdout.write(
                "\n#### Full pipeline, SciFact test: bi-encoder re-ranking (stored vectors, "
                f"{args.segment}) over each first stage's top N, "
                f"weights by {args.folds}-fold CV on nDCG@10\n\n"
            )
            sys.stdout.write(pipeline(indexes["scifact"], args, work, data) + "\n")
        sys.stdout.write(footer() + "\n")
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main_())
