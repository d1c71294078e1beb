"""The host side of scoring alone: pairs/s prepared and handed to a model that does nothing.

``benchmarks/gpu_batches.py --feed`` runs this file as a child process once per code version:
``--src`` puts another checkout's ``src`` folder first on the import path (the code before a
change), so both versions are measured by the same script in fresh processes. A null backend
(its forward returns zeros at once) stands where the model would be; everything the host does
for a scorer call is timed: distinct texts found, texts tokenised (or found already tokenised),
inputs assembled from token ids, sorted by length, cut by the token budget, padded and handed to
the backend's ``prepare`` (pinned memory only on CUDA). Prints one JSON object. The pairs are
the GPU check's (``benchmarks/gpu_inputs.py pairs``).

Rounds: ``cold`` builds a new scorer each round (every text tokenised on first sight); ``warm``
calls one scorer again on the same pairs (texts already tokenised, where the code keeps them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def _null_backend_class() -> type:
    from evirank.score.backends import TorchBackend

    class NullBackend(TorchBackend):
        """Scores of zeros, at once: what remains is the host's work. ``prepare`` is torch's."""

        def __init__(self, width: int, pad_multiple: int) -> None:
            super().__init__(None, "classify", "cpu", "fp32")
            self.width = width
            self.pad_multiple = pad_multiple

        def forward(self, batch: Any) -> Any:
            import numpy as np

            return np.zeros((batch.input_ids.shape[0], self.width), dtype=np.float32)

    return NullBackend


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Pairs/s cold and warm for a cross-encoder, passages/s for a bi-encoder (null models)."""
    import numpy as np
    import pandas as pd

    from evirank.config import Runtime
    from evirank.frames import DOCNO, PID, QID, QUERY, TEXT
    from evirank.score import BiEncoder, CrossEncoder

    lines = Path(args.pairs_file).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[: args.pairs]]
    queries = [str(r["query"]) for r in rows]
    codes = {q: str(i) for i, q in enumerate(dict.fromkeys(queries))}
    frame = pd.DataFrame(
        {
            QID: [codes[q] for q in queries],
            QUERY: queries,
            DOCNO: [f"p{i}" for i in range(len(rows))],
            PID: 0,
            TEXT: [str(r["text"]) for r in rows],
        }
    )
    null = _null_backend_class()
    runtime = Runtime(device="cpu", batch_tokens=args.budget)

    def made(kind: Any, width: int) -> Any:
        """A scorer of ``kind`` with its tokenizer loaded and the null model in place."""
        scorer = kind(args.model, runtime)
        scorer.prepare()
        scorer.backend_ = null(width, args.pad_multiple)
        return scorer

    def rate(call: Any, n: int) -> float:
        started = time.perf_counter()
        call()
        return n / (time.perf_counter() - started)

    def cold_and_warm(kind: Any, width: int, call: Any, n: int) -> tuple[list[float], list[float]]:
        """Rates of a new scorer each round (made before timing), then of one scorer called again."""
        fresh = [made(kind, width) for _ in range(args.rounds)]
        cold = [rate(lambda s=s: call(s), n) for s in fresh]
        again = made(kind, width)
        call(again)
        return cold, [rate(lambda: call(again), n) for _ in range(args.rounds)]

    cold, warm = cold_and_warm(CrossEncoder, 1, lambda s: s(frame), len(frame))
    texts = list(dict.fromkeys(frame[TEXT]))
    passages_cold, passages_warm = cold_and_warm(
        BiEncoder, 384, lambda s: s.compute_block({TEXT: texts}, s.new_stats()), len(texts)
    )
    scorer = made(CrossEncoder, 1)
    scorer(frame)
    stats = scorer.stats_
    encoder = scorer.encoder_
    # token_ids: what every version of the encoder has
    q_len = np.array([len(ids) for ids in encoder.token_ids(queries, scorer.query_max_tokens)])
    room = scorer.max_length_ - encoder.pair_template.n_special - q_len
    t_len = np.array([len(ids) for ids in encoder.token_ids(frame[TEXT].tolist(), scorer.max_length_)])
    tokens_mean = float(np.mean(encoder.pair_template.n_special + q_len + np.minimum(t_len, room)))
    return {
        "pairs": len(frame),
        "distinct_queries": len(codes),
        "distinct_texts": len(texts),
        "padded_tokens": int(stats.tokens),
        "tokens_mean": tokens_mean,
        "batches": int(stats.batches),
        "cold": cold,
        "warm": warm,
        "passages_cold": passages_cold,
        "passages_warm": passages_warm,
        "cold_median": statistics.median(cold),
        "warm_median": statistics.median(warm),
        "passages_cold_median": statistics.median(passages_cold),
        "passages_warm_median": statistics.median(passages_warm),
        "evirank_file": __import__("evirank").__file__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", help="a checkout's src folder, first on the import path")
    parser.add_argument("--model", required=True)
    parser.add_argument("--pairs-file", required=True)
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=65536)
    parser.add_argument("--pad-multiple", type=int, default=8)
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, str(Path(args.src).resolve()))
    print(json.dumps(measure(args)))


if __name__ == "__main__":
    main()
