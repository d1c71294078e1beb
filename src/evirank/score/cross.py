"""The cross-encoder scorer: ``[CLS] query [SEP] passage [SEP]`` through a sequence classifier."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.score._base import DistinctPairs, ScoringStats, TransformerScorer, _ChunkedWriter
from evirank.score.backends import TokenBatch
from evirank.score.store import ScoreStore

logger = logging.getLogger(__name__)


def relevance_from_logits(logits: Any, relevant_class: int = 1) -> Any:
    """The relevance score of classifier logits, as the log-odds of the relevant class.

    One logit: the logit itself (the log-odds under a sigmoid head). Two or more logits:
    ``logit[relevant] - logsumexp(other logits)`` = ``log(P(relevant) / (1 - P(relevant)))``
    under the softmax, which is ``logit[1] - logit[0]`` for two classes. It is a strictly
    increasing function of P(relevant), so it ranks exactly as the relevant-class probability
    does, and unlike the log-probability it does not flatten to 0.0 in float32 for confident
    pairs (which would create ties at the top of a ranking).

    Scoring and training read a model's relevance through this one function: an array (or a
    list) gives float64 numpy values; a torch tensor gives a tensor (in its dtype, on its device,
    differentiable), as training's losses need.

    Example:
        >>> relevance_from_logits(np.array([[0.5, 2.0], [1.0, -1.0]])).tolist()
        [1.5, -2.0]
        >>> relevance_from_logits([[0.5], [2.0]]).tolist()
        [0.5, 2.0]
    """
    tensor = type(logits).__module__.startswith("torch")
    values: Any = logits if tensor else np.asarray(logits, dtype=np.float64)
    shape = tuple(values.shape)
    if len(shape) != 2 or shape[1] < 1:
        raise ValueError(f"expected logits of shape (rows, labels), found {shape}")
    if shape[1] == 1:
        return values[:, 0]
    if not 0 <= relevant_class < shape[1]:
        raise ValueError(f"relevant_class {relevant_class} is not one of the model's {shape[1]} labels")
    others = values[:, [i for i in range(shape[1]) if i != relevant_class]]
    if shape[1] == 2:
        return values[:, relevant_class] - others[:, 0]
    rest = others.logsumexp(dim=1) if tensor else logsumexp(others, axis=1)
    return values[:, relevant_class] - rest


class CrossEncoder(TransformerScorer):
    """Score (query, passage) pairs with a Hugging Face sequence-classification model.

    Input ``Passages`` [qid, query, docno, pid, text, ...]; output the same frame with ``score``
    (a ``score`` column already there is replaced). The input is ``[CLS] query [SEP] passage [SEP]``
    (the model's own template): the query keeps at most ``query_max_tokens`` tokens and the
    passage takes the rest of ``max_length``.

    Scores: a one-logit head gives the logit; a head with two or more logits gives the log-odds
    of ``relevant_class``, ``logit[rel] - logsumexp(other logits)`` (``logit[1] - logit[0]`` for
    two), which ranks exactly as P(relevant) (see :func:`relevance_from_logits`).

    Speed and memory: each distinct query and passage is tokenised once and each distinct
    (query, passage) pair is scored once per call; pairs are sorted by length and batched under a
    token budget (padded rows x padded length), so long passages never run out of memory. With
    ``store``, stored scores are reused and new ones are written every ``commit_every`` batches, so
    an interrupted run resumes where it stopped. Scores do not depend on batch size or order
    (fp32: within 1e-5).

    Args:
        model: a Hugging Face model id or local folder (a sequence-classification checkpoint).
        max_length: input length cap in tokens (lowered to the model's limit, at most 512).
        query_max_tokens: the query's token cap.
        batch_tokens: token budget per batch (default by device: cpu 2048, mps 16384, cuda 65536).
        device: ``"auto"`` (cuda, then mps, then cpu) or a torch device string.
        dtype: ``"auto"`` (bf16 autocast on GPUs with bf16, else fp16; fp32 on CPU) or a dtype name.
        relevant_class: the relevant label of multi-logit heads.
        backend: the engine running the model (see :mod:`evirank.score.backends`).
        store: a :class:`ScoreStore` or its path, to reuse and persist scores.
        commit_every: write new scores to the store every this many batches.

    Example:
        >>> from evirank.frames import make_passages
        >>> passages = make_passages([("1", "d1", 0, "BM25 ranks documents.")]).assign(query="what is bm25")
        >>> scored = CrossEncoder("models/minilm-msmarco")(passages)  # doctest: +SKIP
        >>> scored["score"].dtype  # doctest: +SKIP
        dtype('float64')
    """

    kind = "cross"
    task = "classify"

    def __init__(
        self,
        model: str | os.PathLike[str],
        max_length: int = 512,
        query_max_tokens: int = 64,
        batch_tokens: int | None = None,
        device: str = "auto",
        dtype: str = "auto",
        relevant_class: int = 1,
        backend: str = "torch",
        store: ScoreStore | str | os.PathLike[str] | None = None,
        commit_every: int = 4,
    ) -> None:
        if query_max_tokens < 1:
            raise ValueError(f"query_max_tokens must be positive, found {query_max_tokens}")
        super().__init__(
            model,
            max_length=max_length,
            batch_tokens=batch_tokens,
            device=device,
            dtype=dtype,
            backend=backend,
            store=store,
            commit_every=commit_every,
        )
        self.query_max_tokens = query_max_tokens
        self.relevant_class = relevant_class

    def _passage_room(self) -> int:
        return int(self.max_length_ - self.encoder_.pair_template.n_special - self.query_max_tokens)

    def _check_settings(self) -> None:
        if self._passage_room() < 1:
            raise ValueError(
                f"query_max_tokens={self.query_max_tokens} leaves no room for the passage within "
                f"max_length={self.max_length_}; lower query_max_tokens or raise max_length"
            )

    def _settings(self) -> dict[str, object]:
        labels = int(getattr(self.config_, "num_labels", 1))
        head = "logit" if labels == 1 else f"log_odds:{self.relevant_class}/{labels}"
        return {**super()._settings(), "query_max_tokens": self.query_max_tokens, "head": head}

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add ``score`` to a Passages frame (see the class docstring)."""
        require_columns(frame, (QID, QUERY, DOCNO, PID, TEXT), "CrossEncoder")
        started = time.perf_counter()
        out = frame.copy()
        stats = ScoringStats(rows=len(out))
        if out.empty:
            out[SCORE] = np.array([], dtype=np.float64)
            self.stats_ = stats
            return out
        self._prepare()
        pairs = DistinctPairs.of(out)
        stats.distinct = len(pairs.scores)
        store = self._use_store(out, pairs)
        missing = pairs.missing()
        stats.cached = stats.distinct - len(missing)
        if len(missing):
            self._score_pairs(pairs, missing, self._score_writer(store, pairs), stats)
        out[SCORE] = pairs.scores[pairs.row_pair]
        stats.total_s = time.perf_counter() - started
        self.stats_ = stats
        logger.info(
            "cross-encoder: %d rows, %d distinct pairs, %d from the store, %d scored in %.1f s "
            "(%.0f pairs/s in the model, %.1f s tokenising)",
            stats.rows,
            stats.distinct,
            stats.cached,
            stats.computed,
            stats.total_s,
            stats.per_second,
            stats.tokenize_s,
        )
        return out

    def _score_pairs(
        self,
        pairs: DistinctPairs,
        todo: np.ndarray,
        write: Callable[[list[tuple[int, float]]], None] | None,
        stats: ScoringStats,
    ) -> None:
        """Score the distinct pairs ``todo`` into ``pairs.scores``, writing them as they come."""
        queries, passages, pair_q, pair_p, scores = (
            pairs.queries,
            pairs.texts,
            pairs.pair_query,
            pairs.pair_text,
            pairs.scores,
        )
        encoder = self.encoder_
        n_special = encoder.pair_template.n_special
        passage_cap = self.max_length_ - n_special
        # Token ids of each distinct text, filled chunk by chunk in the tokenising thread.
        q_ids: list[list[int] | None] = [None] * len(queries)
        p_ids: list[list[int] | None] = [None] * len(passages)
        p_len = np.zeros(len(todo), dtype=np.int64)

        def fill(ids: list[list[int] | None], texts: list[str], wanted: np.ndarray, cap: int) -> None:
            need = [int(i) for i in np.unique(wanted) if ids[i] is None]
            for i, tokens in zip(need, encoder.token_ids([texts[i] for i in need], cap), strict=True):
                ids[i] = tokens

        def tokenize(items: np.ndarray) -> np.ndarray:
            fill(q_ids, queries, pair_q[todo[items]], self.query_max_tokens)
            fill(p_ids, passages, pair_p[todo[items]], passage_cap)
            q_len = np.array([len(q_ids[i] or ()) for i in pair_q[todo[items]]], dtype=np.int64)
            full = np.array([len(p_ids[i] or ()) for i in pair_p[todo[items]]], dtype=np.int64)
            p_len[items] = np.minimum(full, passage_cap - q_len)
            return n_special + q_len + p_len[items]

        def build(items: np.ndarray, pad_multiple: int) -> TokenBatch:
            return encoder.pair_batch(
                [q_ids[pair_q[todo[r]]] or [] for r in items],
                [(p_ids[pair_p[todo[r]]] or [])[: p_len[r]] for r in items],
                pad_multiple,
            )

        with _ChunkedWriter(write, self.commit_every) as writer:

            def consume(rows: np.ndarray, logits: np.ndarray) -> None:
                values = relevance_from_logits(logits, self.relevant_class)
                if not np.isfinite(values).all():
                    logger.warning(
                        "the model returned %d non-finite scores", int((~np.isfinite(values)).sum())
                    )
                scores[todo[rows]] = values
                writer.add(list(zip(todo[rows].tolist(), values.tolist(), strict=True)))

            self._run_batches(len(todo), tokenize, build, consume, stats, desc="cross-encoder")
