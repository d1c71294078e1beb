"""The cross-encoder cascade's speed/quality curve: keep each document's N best passages, score only those.

For each N (``--prune``, default 1 2 3 5 all), over SciFact's test claims and BM25's top ``--depth``:
a cheap scorer (``--prune-by``: BM25 over each document's sentences, or the bi-encoder by lookup in
stored vectors) keeps each document's N best sentences, the cross-encoder ``--model`` scores only
those, and Birch (top min(3, N) sentences) is tuned by 5-fold cross-validation (alpha and weights on
the default grid, nDCG@10). Prints the pairs scored, the time of pruning and of scoring, and the
cross-validated nDCG@10 for every N as a Markdown table, and draws the curve (nDCG@10 against
cross-encoder time) with ``--plot``.

Quality and time can come from different amounts of work, so that all 300 claims fit in a few
minutes: ``--scores STORE`` looks up the cross-encoder's scores of pairs that a re-ranking with the
same model and segmenter already cached there (``evirank rerank --scores``), and
``--time-queries K`` times the pruning and the model on the first K claims only (the model really
runs there, with no store), scaled to all claims by pairs. The table header says which was done.

Birch's thesis looks at the question from the other side (Akkalyoncu Yilmaz 2019, *Cross-Domain
Sentence Modeling for Relevance Transfer with BERT*, Table 5.6): it keeps only the sentences with no
query term and finds BERT still beats the baseline, though every model loses effectiveness; BM25
pruning keeps exactly the sentences it removed (see docs/cascade.md).

The figures mean something only with a SciFact-trained cross-encoder (docs/train.md has the recipe);
``--model-label`` names the model in the output so that a table made with another one (a tiny or
zero-shot model, to check the benchmark) is never mistaken for the real figure.

Example:
    $ python benchmarks/cascade.py --index /tmp/scifact --model models/scifact-ce \\
        --model-label "MiniLM-L6, SciFact listwise, 2 epochs" --plot docs/img/cascade.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
from _common import datasets, footer, header

from evirank import markdown
from evirank.config import Runtime


def evaluate_cv(passages: pd.DataFrame, qrels: pd.DataFrame, top_n: int, folds: int) -> float:
    """nDCG@10 of Birch (top ``top_n``) tuned by ``folds``-fold cross-validation on nDCG@10."""
    from evirank.evaluate import evaluate, nDCG
    from evirank.tune import cross_validate, parse_aggregate
    from evirank.tune.runner import default_grid

    spec = parse_aggregate(f"birch:{top_n}")
    result = cross_validate(passages, qrels, spec, default_grid(spec), metric="nDCG@10", k=folds, seed=0)
    return float(evaluate(result.run, qrels, [nDCG @ 10])["nDCG@10"])


def prepare(args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame, Any, float]:
    """(all candidate passages, qrels, the cross-encoder, segmentation seconds)."""
    from evirank.io import read_qrels, read_topics
    from evirank.lucene import Bm25
    from evirank.rerank import FetchText
    from evirank.rerank.fetch import AddQueries
    from evirank.score import CrossEncoder
    from evirank.segment.budget import passage_budget
    from evirank.segment.segment_spec import parse_segment

    data = Path(args.data)
    topics = read_topics(str(data), split="test")
    if args.queries:
        topics = topics.head(args.queries)
    qrels = read_qrels(data / "qrels" / "test.tsv")
    qrels = qrels[qrels["qid"].isin(set(topics["qid"]))]
    with Bm25(args.index, k=args.depth) as bm25:
        run = bm25(topics)
    with FetchText(index=args.index) as fetch:
        run = fetch(AddQueries(topics, missing="drop")(run) if "query" not in run.columns else run)
    scorer = CrossEncoder(args.model, Runtime(device=args.device))
    budget = passage_budget(scorer)
    segmenter = parse_segment(args.segment, tokenizer=budget[0], max_tokens=budget[1]) if budget else None
    assert segmenter is not None
    started = time.perf_counter()
    passages = segmenter(run)
    return passages, qrels, scorer, time.perf_counter() - started


def cheap_scorer(args: argparse.Namespace) -> Any:
    if args.prune_by != "bi":
        return None
    from evirank.score import BiEncoder
    from evirank.vectors.index import resolve_vectors

    vectors = resolve_vectors(args.vectors, args.index)
    return BiEncoder(None, Runtime(device=args.device), vectors=vectors)


def measure(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from evirank.evaluate import evaluate, nDCG
    from evirank.frames import make_run
    from evirank.rerank.prune import Prune

    passages, qrels, scorer, segment_s = prepare(args)
    first = passages.drop_duplicates(["qid", "docno"])[["qid", "docno", "first_stage_score"]]
    bm25 = evaluate(make_run(first.rename(columns={"first_stage_score": "score"})), qrels, [nDCG @ 10])
    scorer.load()  # load once, outside every timing
    scorer(passages.head(256))  # warm up (thread pools, allocator) outside every timing
    cheap = cheap_scorer(args)
    quality_scorer = scorer
    if args.scores:
        from evirank.score import CrossEncoder

        quality_scorer = CrossEncoder(args.model, Runtime(device=args.device, store=args.scores))
    qids = list(dict.fromkeys(passages["qid"]))
    timed_qids = set(qids[: args.time_queries]) if args.time_queries else set(qids)
    timed = passages[passages["qid"].isin(timed_qids)]
    rows = []
    for label in args.prune:
        n = None if label == "all" else int(label)
        started = time.perf_counter()
        kept_timed = Prune(n, args.prune_by, cheap)(timed) if n is not None else timed
        prune_s = time.perf_counter() - started if n is not None else 0.0
        scorer.stats_ = None
        started = time.perf_counter()
        scored = scorer(kept_timed)
        score_s = time.perf_counter() - started
        if len(timed_qids) < len(qids) or quality_scorer is not scorer:
            kept = Prune(n, args.prune_by, cheap)(passages) if n is not None else passages
            scale = len(kept) / max(1, len(kept_timed))
            prune_s, score_s = prune_s * scale, score_s * scale
            scored = quality_scorer(kept)
            stats = getattr(quality_scorer, "stats_", None)
            if stats is not None:
                print(f"N={label}: {stats}", file=sys.stderr)
        else:
            kept = kept_timed
        top_n = min(3, n) if n is not None else 3
        ndcg = evaluate_cv(scored, qrels, top_n, args.folds)
        rows.append(
            {
                "N": label,
                "birch": f"birch:{top_n}",
                "pairs": len(kept),
                "pairs_per_query": len(kept) / max(1, kept["qid"].nunique()),
                "prune_s": prune_s,
                "score_s": score_s,
                "ndcg10": ndcg,
            }
        )
        print(f"N={label}: {len(kept)} pairs, {score_s:.1f} s, nDCG@10 {ndcg:.4f}", file=sys.stderr)
    context = {
        "queries": int(passages["qid"].nunique()),
        "passages": len(passages),
        "segment_s": segment_s,
        "bm25_ndcg10": float(bm25["nDCG@10"]),
        "folds": args.folds,
        "timed_queries": len(timed_qids),
    }
    return rows, context


def table(rows: list[dict[str, Any]], context: dict[str, Any]) -> str:
    full = next((r for r in rows if r["N"] == "all"), rows[-1])
    columns = ["N", "aggregation", "pairs scored", "per query", "prune s", "cross-encoder s", "speed-up"]
    columns.append(f"nDCG@10 ({context['folds']}-fold CV)")
    lines = [
        [
            r["N"],
            r["birch"],
            r["pairs"],
            f"{r['pairs_per_query']:.1f}",
            f"{r['prune_s']:.2f}",
            f"{r['score_s']:.1f}",
            f"{full['score_s'] / (r['score_s'] + r['prune_s']):.1f}x" if r["score_s"] else "",
            f"{r['ndcg10']:.4f}",
        ]
        for r in rows
    ]
    lines.append(["BM25", "", 0, "0", "", "", "", f"{context['bm25_ndcg10']:.4f}"])
    return markdown.table(columns, lines, align="llrrrrrr")


def timing_line(args: argparse.Namespace, context: dict[str, Any]) -> str:
    """How the seconds and the quality of the table were obtained."""
    timed = context["timed_queries"]
    where = (
        "seconds: every claim's pairs scored by the model"
        if timed == context["queries"]
        else f"seconds: measured on the first {timed} claims (model run, no store), scaled by pairs to all"
    )
    source = "; quality: scores looked up in a score store of the same model" if args.scores else ""
    return where + source


def plot(rows: list[dict[str, Any]], context: dict[str, Any], path: Path, label: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [r["score_s"] + r["prune_s"] for r in rows]
    ys = [r["ndcg10"] for r in rows]
    ax.plot(xs, ys, marker="o")
    for r, x, y in zip(rows, xs, ys, strict=True):
        ax.annotate(f"N={r['N']}", (x, y), textcoords="offset points", xytext=(5, -12))
    ax.axhline(context["bm25_ndcg10"], color="grey", linestyle="--", label="BM25")
    ax.set_xlabel("pruning + cross-encoder time (s)")
    ax.set_ylabel(f"nDCG@10 (Birch, {context['folds']}-fold CV)")
    ax.set_title(f"Cascade on SciFact test: {label}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="SciFact Lucene index (evirank index [--embed])")
    parser.add_argument("--data", default=None, help="SciFact BEIR folder (default: the datasets folder's)")
    parser.add_argument("--model", required=True, help="the cross-encoder (a SciFact-trained one)")
    parser.add_argument("--model-label", default=None, help="how the table names the model")
    parser.add_argument("--prune", nargs="+", default=["1", "2", "3", "5", "all"], help="values of N")
    parser.add_argument("--prune-by", choices=("bm25", "bi"), default="bm25")
    parser.add_argument(
        "--vectors", default=None, help="stored vectors for --prune-by bi (default: the index's)"
    )
    parser.add_argument("--segment", default="sentences:prepend")
    parser.add_argument("--depth", type=int, default=20, help="BM25 hits re-ranked per claim")
    parser.add_argument("--queries", type=int, default=None, help="only the first N test claims")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--scores",
        default=None,
        help="score store of a re-ranking with the same model and segmenter: cached pairs are looked up "
        "for the quality column (missing ones are scored and added)",
    )
    parser.add_argument(
        "--time-queries",
        type=int,
        default=None,
        help="time pruning and the model on the first K claims only (no store), scaled to all by pairs",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--plot", default=None, help="write the curve to this PNG")
    parser.add_argument("--json", default=None, help="also write the raw results to this JSON file")
    args = parser.parse_args(argv)
    args.data = args.data or str(datasets() / "scifact")
    for value in args.prune:
        if value != "all" and (not value.isdigit() or int(value) < 1):
            raise SystemExit(f"--prune values are positive integers or 'all', found {value!r}")
    label = args.model_label or Path(args.model).name
    rows, context = measure(args)
    print(
        header(
            "Cross-encoder cascade: passages kept per document against quality and time",
            f"cross-encoder: {label} ({args.model})",
            f"SciFact test, {context['queries']} claims, BM25 top {args.depth}, {args.segment} "
            f"({context['passages']} candidate sentences; segmentation {context['segment_s']:.1f} s, "
            "not counted below)",
            f"cheap scorer: {args.prune_by}; Birch tuned by {args.folds}-fold CV on nDCG@10 "
            "(alpha, w2, w3 in 0:1:0.1)",
            timing_line(args, context),
            packages=("torch", "transformers"),
        )
    )
    print(table(rows, context))
    print(footer())
    if args.plot:
        plot(rows, context, Path(args.plot), label)
        print(f"\n![cascade]({args.plot})")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, **context}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
