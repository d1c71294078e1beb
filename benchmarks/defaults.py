"""Which pipeline defaults: candidate segmenters, aggregators and depths, zero-shot, on SciFact and DL19.

The defaults every front end shares (``evirank rank``, ``Ranker``, ``rerank``, ``serve`` and the page)
are the best zero-shot setting on the two collections whose measurements stand in docs/results.md:
SciFact test (300 claims, BM25's top 100 from the conditions' index) and TREC DL19 passages (43
queries, the bundled BM25 top 100), both re-ranked by the offline all-MiniLM-L6-v2 bi-encoder. Each
candidate is one ``evirank rerank`` with explicit flags over the score stores the conditions
``scifact-bi-maxp`` and ``dl19-bi-maxp`` fill (segmenters they did not score are scored here once,
into a store of this benchmark's), evaluated with evirank's trec_eval semantics. The table gives
nDCG@10 per collection, their mean (the choice), and a paired t-test of each candidate against the
best one, pooled over both collections' queries.

The candidates are chosen on the test queries themselves, so the table is a comparison of
defaults, not a result to quote: the tuned, cross-validated figures are in docs/results.md.

Usage (from the repository root, after ``python benchmarks/conditions.py scifact-bm25 scifact-bi-maxp
dl19-bi-maxp``, which build the index and fill the stores; about 20 minutes on 2 CPU cores):
    python benchmarks/defaults.py
    python benchmarks/defaults.py --quick        # the aggregators only, one depth, no new scores
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _common import REPO, footer, header
from scipy import stats

from evirank.cli import main as evirank
from evirank.datasets import datasets_folder
from evirank.evaluate.measures import per_query
from evirank.io import read_qrels, read_run

logger = logging.getLogger("defaults")


@dataclass(frozen=True)
class Collection:
    """A collection's re-ranking inputs."""

    name: str
    flags: tuple[str, ...]
    qrels: Path
    store: Path


@dataclass(frozen=True)
class Candidate:
    """One setting of the defaults."""

    segment: str
    aggregate: str
    alpha: float
    depth: int

    @property
    def label(self) -> str:
        return f"{self.segment}, {self.aggregate}, alpha {self.alpha:g}, depth {self.depth}"

    def flags(self) -> list[str]:
        return [
            *("--segment", self.segment, "--aggregate", self.aggregate),
            *("--alpha", str(self.alpha), "--normalise", "minmax", "--depth", str(self.depth)),
        ]


def collections(data: Path, runs: Path) -> list[Collection]:
    scifact, dl19 = data / "scifact", data / "trec-dl19-passage"
    return [
        Collection(
            "SciFact test",
            (
                "--run", str(runs / "scifact" / "bm25.txt"),
                "--index", str(runs / "scifact" / "index"),
                "--topics", str(scifact), "--split", "test",
            ),
            scifact / "qrels" / "test.tsv",
            runs / "scifact" / "scores.sqlite",
        ),
        Collection(
            "TREC DL19 passages",
            (
                "--run", str(dl19 / "run.dl19-passage.bm25.txt"),
                "--corpus", str(dl19 / "corpus.jsonl"),
                "--topics", str(dl19 / "topics.dl19-passage.tsv"),
            ),
            dl19 / "qrels.dl19-passage.txt",
            runs / "dl19" / "scores.sqlite",
        ),
    ]  # fmt: skip


def candidates(quick: bool) -> list[Candidate]:
    """Each aggregator at first-stage weights around its own default (Birch's 0.5, the others' 0),
    then the segmenters' title rules and the service's earlier depth of 20."""
    found = [
        Candidate("sentences:prepend", aggregate, alpha, 100)
        for aggregate, alphas in (
            ("maxp", (0.0, 0.1, 0.2, 0.3, 0.5)),
            ("birch:3", (0.5, 0.3, 0.2, 0.1)),
            ("firstp", (0.0, 0.2)),
            ("sump", (0.0, 0.2)),
            ("meanp", (0.0, 0.2)),
        )
        for alpha in alphas
    ]
    if quick:
        return found
    found += [Candidate("sentences", "maxp", alpha, 100) for alpha in (0.0, 0.2)]
    found += [Candidate("sentences", "birch:3", 0.5, 100)]
    found += [Candidate("sentences:prepend", "maxp", alpha, 20) for alpha in (0.0, 0.2)]
    found += [Candidate("sentences:prepend", "birch:3", 0.5, 20)]
    return found


def ndcg_per_query(run: Path, qrels: Path) -> dict[str, float]:
    """Each query's nDCG@10 (trec_eval semantics)."""
    table = per_query(read_run(run), read_qrels(qrels), ["nDCG@10"])
    return dict(zip(table["qid"].astype(str), table["value"].astype(float), strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=Path, default=REPO / "runs" / "conditions", help="the conditions' outputs"
    )
    parser.add_argument("--quick", action="store_true", help="the aggregators only (no new scores)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    data = datasets_folder(REPO)
    if data is None:
        sys.exit("the datasets folder is not here (set EVIRANK_DATASETS)")
    chosen = collections(data, args.runs)
    for collection in chosen:
        if not collection.store.exists():
            sys.exit(
                f"{collection.store}: run `python benchmarks/conditions.py scifact-bm25 scifact-bi-maxp "
                "dl19-bi-maxp` first"
            )
    results: dict[Candidate, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for candidate in candidates(args.quick):
            scores = []
            for i, collection in enumerate(chosen):
                store = collection.store
                if candidate.segment != "sentences:prepend":  # scored once into this benchmark's store
                    store = (
                        args.runs.parent
                        / "defaults"
                        / f"{collection.store.parent.name}.{candidate.segment}.sqlite"
                    )
                    store.parent.mkdir(parents=True, exist_ok=True)
                out = Path(folder) / f"{i}.txt"
                code = evirank(
                    [
                        "-q",
                        "rerank",
                        *collection.flags,
                        "--scorer",
                        "bi",
                        *candidate.flags(),
                        "--scores",
                        str(store),
                        "--output",
                        str(out),
                        "--overwrite",
                    ]
                )
                if code != 0:
                    sys.exit(f"rerank failed for {candidate.label} on {collection.name}")
                scores.append(ndcg_per_query(out, collection.qrels))
            results[candidate] = scores
            logger.warning(
                "%s: %s", candidate.label, [round(float(np.mean(list(s.values()))), 4) for s in scores]
            )
    means = {c: [float(np.mean(list(s.values()))) for s in per] for c, per in results.items()}
    best = max(means, key=lambda c: float(np.mean(means[c])))
    print(header("Candidate defaults, zero-shot all-MiniLM-L6-v2 bi-encoder over BM25's top 100 (nDCG@10)"))
    names = " | ".join(c.name for c in chosen)
    print(f"| setting | {names} | mean | p vs best (pooled, paired t-test) |")
    print("|---|" + "---:|" * (len(chosen) + 2))
    for candidate, per in sorted(means.items(), key=lambda kv: -float(np.mean(kv[1]))):
        pooled = [v for s in results[candidate] for _, v in sorted(s.items())]
        reference = [v for s in results[best] for _, v in sorted(s.items())]
        p = "" if candidate == best else f"{stats.ttest_rel(pooled, reference).pvalue:.3g}"
        cells = " | ".join(f"{v:.4f}" for v in per)
        mark = " (best)" if candidate == best else ""
        print(f"| {candidate.label}{mark} | {cells} | {float(np.mean(per)):.4f} | {p} |")
    print(footer())
    return 0


if __name__ == "__main__":
    sys.exit(main())
