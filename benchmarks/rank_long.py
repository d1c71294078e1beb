"""Long documents in memory: ``evirank.rank`` (passages, aggregated) against a reranker that truncates.

Rerankers such as sentence-transformers' ``CrossEncoder.rank`` read a document up to the model's input
length (512 tokens, or the bi-encoder's 256) and drop the rest. ``evirank.rank`` splits the document
into passages that fit, scores each and aggregates them. This benchmark builds SciFact-style long
documents from SciFact's test claims: each claim's candidates are its relevant abstracts and random
others, and every candidate is made long by placing its abstract among ``--filler`` other abstracts (at
a random position, seeded), so the evidence often lies past the point where truncation stops reading.
Quality is nDCG@10 against SciFact's test qrels; time is seconds per query (model loaded beforehand).

With ``--model DIR`` of a cross-encoder, the truncating peer is ``CrossEncoder(DIR).rank`` and evirank
scores with the same model (``scorer="cross"``); without it, both sides use the offline
all-MiniLM-L6-v2 bi-encoder (the peer: the cosine of whole-document embeddings cut at 256 tokens).

Usage:
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/rank_long.py --queries 50
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/rank_long.py --model models/minilm-scifact-cross
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
from _common import datasets, footer, header

from evirank.evaluate import nDCG, paired_ttest, per_query
from evirank.frames import DOCNO, QID, SCORE
from evirank.io import read_corpus, read_qrels, read_topics


def long_collection(
    folder: Any, queries: int, candidates: int, filler: int, seed: int
) -> tuple[list[tuple[str, str, list[dict[str, str]]]], pd.DataFrame]:
    """(claims with their long candidate documents, qrels) built from SciFact's test split."""
    rng = random.Random(seed)
    corpus = {d.docno: d for d in read_corpus(folder)}
    qrels = read_qrels(folder / "qrels" / "test.tsv")
    topics = read_topics(folder, split="test")
    relevant = qrels[qrels["label"] > 0].groupby(QID)[DOCNO].apply(list).to_dict()
    ids = sorted(corpus)
    cases = []
    for qid, query in zip(topics[QID], topics["query"], strict=True):
        if qid not in relevant:
            continue
        pool = list(dict.fromkeys(relevant[qid] + rng.sample(ids, candidates)))[:candidates]
        docs = []
        for docno in pool:
            others = [corpus[o].text for o in rng.sample(ids, filler) if o != docno]
            position = rng.randint(0, len(others))
            parts = [*others[:position], corpus[docno].text, *others[position:]]
            docs.append({"id": docno, "title": corpus[docno].title, "text": "\n\n".join(parts)})
        cases.append((str(qid), str(query), docs))
        if len(cases) == queries:
            break
    return cases, qrels


def peer(model: str | None) -> tuple[str, Callable[[str, list[dict[str, str]]], list[float]]]:
    """The truncating reranker: sentence-transformers over whole (cut) documents."""
    import sentence_transformers as st

    if model is not None:
        cross = st.CrossEncoder(model, device="cpu")

        def by_cross(query: str, docs: list[dict[str, str]]) -> list[float]:
            texts = [f"{d['title']} {d['text']}".strip() for d in docs]
            ranked = cross.rank(query, texts)
            scores = [0.0] * len(texts)
            for item in ranked:
                scores[int(item["corpus_id"])] = float(item["score"])
            return scores

        return f"sentence-transformers CrossEncoder.rank (max_length {cross.max_length})", by_cross
    from evirank.score import default_bi_encoder

    bi = st.SentenceTransformer(default_bi_encoder(), device="cpu")

    def by_bi(query: str, docs: list[dict[str, str]]) -> list[float]:
        texts = [f"{d['title']} {d['text']}".strip() for d in docs]
        q = bi.encode([query], normalize_embeddings=True)
        m = bi.encode(texts, normalize_embeddings=True, batch_size=32)
        return [float(x) for x in (m @ q[0])]

    return f"sentence-transformers bi-encoder, whole document (max_seq_length {bi.max_seq_length})", by_bi


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=50, help="SciFact test claims used")
    parser.add_argument("--candidates", type=int, default=20, help="documents ranked per claim")
    parser.add_argument("--filler", type=int, default=3, help="other abstracts around each candidate's own")
    parser.add_argument("--model", default=None, help="a cross-encoder folder (default: the bi-encoder)")
    parser.add_argument("--segment", nargs="+", default=["sentences:prepend", "windows:100:50"])
    parser.add_argument("--aggregate", nargs="+", default=["maxp", "birch:3"])
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    import evirank

    folder = datasets() / "scifact"
    cases, qrels = long_collection(folder, args.queries, args.candidates, args.filler, args.seed)
    words = statistics.mean(len(d["text"].split()) for _, _, docs in cases for d in docs)
    peer_name, peer_rank = peer(args.model)
    systems: dict[str, Callable[[str, list[dict[str, str]]], list[float]]] = {peer_name: peer_rank}
    family = "cross" if args.model else "bi"
    for segment in args.segment:
        for aggregate in args.aggregate:
            ranker = evirank.Ranker(
                args.model, scorer=family, segment=segment, aggregate=aggregate, device="cpu"
            )

            def by_evirank(query: str, docs: list[dict[str, str]], ranker: Any = ranker) -> list[float]:
                ranked = {d.id: d.score for d in ranker.rank(query, docs)}
                return [ranked[d["id"]] for d in docs]

            systems[f"evirank.rank {segment} {aggregate}"] = by_evirank
    for rank in systems.values():  # warm up: models load before any timing
        rank(cases[0][1], cases[0][2][:2])
    runs, seconds = {}, {}
    for name, rank in systems.items():
        rows, spent = [], []
        for qid, query, docs in cases:
            started = time.perf_counter()
            scores = rank(query, docs)
            spent.append(time.perf_counter() - started)
            rows += [(qid, d["id"], s) for d, s in zip(docs, scores, strict=True)]
        runs[name] = pd.DataFrame(rows, columns=[QID, DOCNO, SCORE])
        seconds[name] = spent
    table = pd.concat(
        [per_query(run, qrels, [nDCG @ 10]).assign(run=name) for name, run in runs.items()], ignore_index=True
    )
    tests = paired_ttest(table, peer_name).set_index("run")
    print(
        header(
            "Long documents in memory: passages aggregated vs a truncating reranker (SciFact test claims)",
            f"{len(cases)} claims x {args.candidates} candidates; each candidate's abstract placed among "
            f"{args.filler} other abstracts (mean {words:.0f} words per document), seed {args.seed}",
            f"model: {args.model or 'all-MiniLM-L6-v2 (bi-encoder)'}; CPU, {family} scorer",
            packages=("torch", "transformers", "sentence-transformers"),
        )
    )
    print("| system | nDCG@10 | vs truncation | p (paired t) | p (Bonferroni) | s/query (median) |")
    print("|---|---:|---:|---:|---:|---:|")
    means = table.groupby("run", sort=False)["value"].mean()
    for name in runs:
        cells = ["", "", ""]
        if name != peer_name:
            row = tests.loc[name]
            cells = [f"{row['delta']:+.4f}", f"{row['p']:.2g}", f"{row['p_adjusted']:.2g}"]
        print(
            f"| {name} | {means[name]:.4f} | {' | '.join(cells)} | {statistics.median(seconds[name]):.2f} |"
        )
    print(footer())


if __name__ == "__main__":
    main()
