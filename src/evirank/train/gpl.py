"""GPL's second half: a cross-encoder trained on a teacher's margins over pseudo-queries.

GPL (Wang et al. 2022) generates queries for a collection's passages, retrieves candidates for
them, and trains a dense retriever on a cross-encoder's margins between candidates (MarginMSE).
Here no query generator and no trained cross-encoder is needed: the pseudo-queries are the ICT
sentences of :mod:`evirank.train.pseudo` (each with its own context and BM25's candidates from
other documents), the teacher is a bi-encoder (best one already adapted to the collection, e.g. by
``evirank adapt --method ict``) whose cosine, scaled by ``TrainConfig.scale``, is added to BM25's
score min-max normalised over the query's candidates (weight ``bm25_weight``), and the student is a
cross-encoder that learns the margin between two candidates of a query
(:class:`evirank.train.distillation.MarginMSE`). A pair whose "negative" the teacher prefers gets a
negative target: the teacher's opinion, not the pair's origin, is what is learnt.

The result is an ordinary cross-encoder folder (``evirank rerank --scorer cross --model DIR``).

Example:
    >>> rows = pd.DataFrame({"qid": ["q"] * 3, "query": ["x"] * 3, "text": ["a", "b", "c"],
    ...                      "label": [1, 0, 0]})
    >>> teacher_targets(rows, np.array([0.5, 0.4, 0.1]), np.array([3.0, 0.0, 1.0]),
    ...                 scale=20.0, bm25_weight=1.0).round(3).tolist()
    [11.0, 8.0, 2.333]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import LABEL, QID, QUERY, TEXT
from evirank.progress import progress
from evirank.score.devices import resolve_device
from evirank.train.distillation import TARGET, MarginMSE, margin_pairs
from evirank.train.pseudo import TextBm25
from evirank.train.recipe import recipe_for
from evirank.train.trainer import TrainResult, examples_fingerprint, fit_prepared

if TYPE_CHECKING:
    from evirank.train.adaptation import AdaptConfig


def teacher_targets(
    rows: pd.DataFrame, cosines: np.ndarray, bm25: np.ndarray, *, scale: float, bm25_weight: float
) -> np.ndarray:
    """The teacher's score of each row: ``scale * cosine + bm25_weight * minmax(bm25 within its query)``."""
    frame = pd.DataFrame({QID: rows[QID].astype(str).to_numpy(), "b": np.asarray(bm25, dtype=np.float64)})
    low = frame.groupby(QID)["b"].transform("min").to_numpy()
    high = frame.groupby(QID)["b"].transform("max").to_numpy()
    span = np.where(high > low, high - low, 1.0)
    normalised = np.where(high > low, (frame["b"].to_numpy() - low) / span, 0.0)
    return scale * np.asarray(cosines, dtype=np.float64) + bm25_weight * normalised


def _embed_all(model: Any, tokenizer: Any, texts: Sequence[str], config: Any, device: str) -> np.ndarray:
    """Unit-length embeddings of ``texts`` (no gradient), as the bi-encoder pools them."""
    from evirank.train.contrastive import embed_for_training

    torch = require("torch", "torch")
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), int(model.config.hidden_size)), dtype=np.float32)
    model.eval()
    batch = config.eval_batch_size
    with torch.no_grad():
        for start in progress(range(0, len(order), batch), desc="teacher", unit="batch"):
            idx = order[start : start + batch]
            vectors = embed_for_training(model, tokenizer, [texts[i] for i in idx], config.max_length, device)
            out[idx] = vectors.float().cpu().numpy()
    return out


def bi_encoder_cosines(teacher: str, rows: pd.DataFrame, config: Any) -> np.ndarray:
    """The teacher bi-encoder's cosine of each row's (query, text)."""
    from evirank.train.contrastive import load_encoder

    device = resolve_device(config.device)
    model, tokenizer = load_encoder(teacher, dropout=None)
    model.to(device)
    queries = sorted(set(rows[QUERY].astype(str)))
    texts = sorted(set(rows[TEXT].astype(str)))
    q = _embed_all(model, tokenizer, queries, config, device)
    t = _embed_all(model, tokenizer, texts, config, device)
    qi = pd.Index(queries).get_indexer(rows[QUERY].astype(str))
    ti = pd.Index(texts).get_indexer(rows[TEXT].astype(str))
    return np.einsum("ij,ij->i", q[qi], t[ti]).astype(np.float64)


def bm25_of_rows(rows: pd.DataFrame) -> np.ndarray:
    """BM25 of each row's (query, text), statistics over all the rows' distinct texts."""
    texts = sorted(set(rows[TEXT].astype(str)))
    bm25 = TextBm25(texts)
    column = pd.Index(texts).get_indexer(rows[TEXT].astype(str))
    out = np.zeros(len(rows))
    queries = rows[QUERY].astype(str).to_numpy()
    distinct = sorted(set(queries.tolist()))
    where = pd.Index(distinct).get_indexer(queries)
    for start in range(0, len(distinct), 256):
        scores = bm25.scores(distinct[start : start + 256])
        picked = (where >= start) & (where < start + 256)
        out[picked] = scores[where[picked] - start, column[picked]]
    return out


def train_gpl(
    examples: pd.DataFrame,
    config: AdaptConfig,
    output_dir: Path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    step_callback: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train a cross-encoder on the teacher's margins over ``examples`` (pseudo-queries with their
    positive and BM25 negatives) into ``output_dir`` (see the module)."""
    assert config.teacher is not None  # AdaptConfig checks it
    teacher, train = config.teacher, config.train

    def prepare(source: str) -> tuple[pd.DataFrame, Any, dict[str, Any], str]:
        rows = examples.reset_index(drop=True)
        cosines = bi_encoder_cosines(teacher, rows, train)
        targets = teacher_targets(
            rows, cosines, bm25_of_rows(rows), scale=train.scale, bm25_weight=config.bm25_weight
        )
        items = margin_pairs(rows.assign(**{TARGET: targets}), config.negatives, train.seed)
        if items.empty:
            raise ValueError("gpl: no margin pairs (every pseudo-query needs a BM25 candidate)")
        facts = {
            "teacher": {"bi_encoder": teacher, "bm25_weight": config.bm25_weight, "scale": train.scale},
            "data": {"train": {"rows": len(rows), "queries": int(rows[QID].nunique())}, "items": len(items)},
        }
        queries = rows[QID].nunique()
        announce = f"gpl: a cross-encoder from {source} on {len(items)} margin pairs of {queries} queries"
        return items, MarginMSE(), facts, announce

    return fit_prepared(
        recipe_for("cross"),
        train,
        output_dir,
        examples_fingerprint(examples[[QID, QUERY, TEXT, LABEL]]),
        prepare,
        overwrite=overwrite,
        resume=resume,
        step_callback=step_callback,
    )
