"""What every family that reads a query and a passage together shares: a joint input per pair.

:class:`PairScorer` is the generic half of a cross-encoder, a monoT5 or a yes/no LLM: the
distinct (query, passage) pairs of a Passages frame, the score store, tokenisation of each
distinct text once, truncation (the query keeps at most ``query_max_tokens``, the passage takes
the rest), length-sorted token-budget batches, Ray blocks. A family subclass says only how a pair
becomes one input (:meth:`PairScorer.pair_template`: the tokens around the query and the passage)
and how a model output row becomes one relevance score (:meth:`PairScorer.read_out`).

Example:
    >>> from evirank.score.families.cross import CrossEncoder
    >>> issubclass(CrossEncoder, PairScorer)
    True
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from evirank.config import Runtime
from evirank.errors import ArgumentError
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.score.backends import TokenBatch
from evirank.score.tokenize import Template, TextIds, TokenPieces
from evirank.score.transformer import DistinctPairs, ScoringStats, TransformerScorer, _ChunkedWriter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JointInput:
    """One (query, passage) as the model reads it, and where each text's tokens sit in the input.

    Attributes:
        batch: the input, one row. query / passage: the kept tokens of each text (truncated as
        scoring truncates them). query_at / passage_at: their positions in the row.
    """

    batch: TokenBatch
    query: TokenPieces
    passage: TokenPieces
    query_at: slice
    passage_at: slice


class PairScorer(TransformerScorer):
    """Scores (query, passage) pairs read together by one model call per pair (see the module).

    Subclasses set ``family`` and ``task`` and implement :meth:`read_out`; they may override
    :meth:`pair_template` (default: the tokenizer's own pair template, ``[CLS] q [SEP] p [SEP]``).
    """

    block_columns = (QUERY, TEXT)

    def __init__(
        self, model: str | os.PathLike[str], runtime: Runtime | None = None, *, query_max_tokens: int = 64
    ) -> None:
        if (
            isinstance(query_max_tokens, bool)
            or not isinstance(query_max_tokens, int)
            or query_max_tokens < 1
        ):
            raise ArgumentError(f"query_max_tokens: expected a positive integer, found {query_max_tokens!r}")
        super().__init__(model, runtime)
        self.query_max_tokens = query_max_tokens

    # -- what a family says ---------------------------------------------------------------
    def pair_template(self) -> Template:
        """The tokens around the query and the passage (default: the tokenizer's pair template)."""
        return self.encoder_.pair_template

    def read_out(self, output: np.ndarray) -> np.ndarray:
        """One float64 relevance score per row of the model's output."""
        raise NotImplementedError

    # -- generic --------------------------------------------------------------------------
    def _passage_room(self) -> int:
        return int(self.max_length_ - self.pair_template().n_special - self.query_max_tokens)

    def joint_input(self, query: str, text: str) -> JointInput:
        """The model input of one (query, passage), cut exactly as scoring cuts it: the query keeps at
        most ``query_max_tokens`` tokens and the passage the rest of ``max_length``.

        Example:
            >>> from evirank.score import CrossEncoder
            >>> scorer = CrossEncoder("models/minilm-scifact")  # doctest: +SKIP
            >>> scorer.joint_input("cats", "Cats purr.").query_at  # doctest: +SKIP
            slice(1, 2, None)
        """
        self.prepare()
        template = self.pair_template()
        passage_cap = self.max_length_ - template.n_special
        q = self.encoder_.token_pieces(query, self.query_max_tokens)
        p = self.encoder_.token_pieces(text, passage_cap - len(q.ids))
        batch = self.encoder_.pair_batch([q.ids], [p.ids], template=template)
        q_start = len(template.prefix)
        p_start = q_start + len(q.ids) + len(template.middle)
        return JointInput(
            batch, q, p, slice(q_start, q_start + len(q.ids)), slice(p_start, p_start + len(p.ids))
        )

    def _check_settings(self) -> None:
        if self._passage_room() < 1:
            raise ArgumentError(
                f"query_max_tokens={self.query_max_tokens} leaves no room for the passage within "
                f"max_length={self.max_length_}; lower query_max_tokens or raise max_length"
            )

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "query_max_tokens": self.query_max_tokens}

    #: The columns :meth:`transform` needs.
    input_columns: tuple[str, ...] = (QID, QUERY, DOCNO, PID, TEXT)
    #: Whether :meth:`transform` records each row's (query, document, passage) in the store.
    records_segments = True

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add ``score`` to a Passages frame [qid, query, docno, pid, text, ...]."""
        require_columns(frame, self.input_columns, type(self).__name__)
        started = time.perf_counter()
        out = frame.copy()
        stats = ScoringStats(rows=len(out))
        if out.empty:
            out[SCORE] = np.array([], dtype=np.float64)
            self.stats_ = stats
            return out
        self.prepare()
        pairs = DistinctPairs.of(out)
        stats.distinct = len(pairs.scores)
        store = self._use_store(out, pairs, record_segments=self.records_segments)
        missing = pairs.missing()
        stats.cached = stats.distinct - len(missing)
        if len(missing):
            score = self._score_pairs if self.ray is None else self._score_pairs_on_ray
            if self.ray is None:
                self._load_token_ids()
            score(pairs, missing, self._score_writer(store, pairs), stats)
            self._save_token_ids()
        out[SCORE] = pairs.scores[pairs.row_pair]
        stats.total_s = time.perf_counter() - started
        self.stats_ = stats
        logger.info(
            "%s: %d rows, %d distinct pairs, %d from the store, %d scored in %.1f s "
            "(%.0f pairs/s in the model, %.1f s tokenising)",
            self.family,
            stats.rows,
            stats.distinct,
            stats.cached,
            stats.computed,
            stats.total_s,
            stats.per_second,
            stats.tokenize_s,
        )
        return out

    def compute_block(self, columns: Mapping[str, list[str]], stats: ScoringStats) -> np.ndarray:
        """float64 scores of the (``query``, ``text``) rows of one block, in order (no store)."""
        self.prepare()
        pairs = DistinctPairs.of(pd.DataFrame({QUERY: columns[QUERY], TEXT: columns[TEXT]}))
        self._score_pairs(pairs, np.arange(len(pairs.scores)), None, stats)
        return pairs.scores[pairs.row_pair]

    def pair_inputs(self, queries: list[str], texts: list[str]) -> TokenBatch:
        """The padded inputs of (query, text) pairs, cut as scoring cuts them (training reads these).

        Example:
            >>> scorer.pair_inputs(["a query"], ["a passage"]).shape  # doctest: +SKIP
            (1, 7)
        """
        self.prepare()
        template = self.pair_template()
        cap = self.max_length_ - template.n_special
        q_ids = self.encoder_.token_ids(queries, self.query_max_tokens)
        p_ids = self.encoder_.token_ids(texts, cap)
        cut = [p[: cap - len(q)] for q, p in zip(q_ids, p_ids, strict=True)]
        return self.encoder_.pair_batch(q_ids, cut, template=template)

    def _score_pairs(
        self,
        pairs: DistinctPairs,
        todo: np.ndarray,
        write: Callable[[list[tuple[int, float]]], None] | None,
        stats: ScoringStats,
    ) -> None:
        """Score the distinct pairs ``todo`` into ``pairs.scores``, writing them as they come."""
        scores = pairs.scores
        with _ChunkedWriter(write, self.commit_every) as writer:

            def consume(rows: np.ndarray, output: np.ndarray) -> None:
                values = np.asarray(self.read_out(output), dtype=np.float64)
                if not np.isfinite(values).all():
                    logger.warning(
                        "the model returned %d non-finite scores", int((~np.isfinite(values)).sum())
                    )
                scores[todo[rows]] = values
                writer.add(list(zip(todo[rows].tolist(), values.tolist(), strict=True)))

            self._run_pairs(pairs, todo, consume, stats)

    def _run_pairs(
        self,
        pairs: DistinctPairs,
        todo: np.ndarray,
        consume: Callable[[np.ndarray, np.ndarray], None],
        stats: ScoringStats,
    ) -> None:
        """Run the model on the distinct pairs ``todo``: ``consume(items, output rows)`` after each
        batch, ``items`` being positions in ``todo``."""
        encoder = self.encoder_
        template = self.pair_template()
        n_special = template.n_special
        passage_cap = self.max_length_ - n_special
        # Token ids of each distinct text, tokenised (or found in the encoder's cache) chunk by
        # chunk in the background thread; each pair's input is assembled from them.
        query_ids = TextIds(encoder, pairs.queries, self.query_max_tokens, pairs.query_hash)
        passage_ids = TextIds(encoder, pairs.texts, passage_cap, pairs.text_hash)
        row_q, row_p = pairs.pair_query[todo], pairs.pair_text[todo]
        q_len = np.zeros(len(todo), dtype=np.int64)
        p_len = np.zeros(len(todo), dtype=np.int64)

        def tokenize(items: np.ndarray) -> np.ndarray:
            query_ids.need(row_q[items])
            passage_ids.need(row_p[items])
            q_len[items] = query_ids.lengths[row_q[items]]
            p_len[items] = np.minimum(passage_ids.lengths[row_p[items]], passage_cap - q_len[items])
            return n_special + q_len[items] + p_len[items]

        def build(items: np.ndarray, pad_multiple: int) -> TokenBatch:
            return encoder.template_batch(
                template,
                query_ids.table().take(row_q[items], q_len[items]),
                passage_ids.table().take(row_p[items], p_len[items]),
                pad_multiple,
            )

        # chunks cut by the pairs' places among all, as a Ray job cuts its blocks (same batches, same bits)
        self._run_batches(len(todo), tokenize, build, consume, stats, desc=self.family, positions=todo)

    def _score_pairs_on_ray(
        self,
        pairs: DistinctPairs,
        todo: np.ndarray,
        write: Callable[[list[tuple[int, float]]], None] | None,
        stats: ScoringStats,
    ) -> None:
        """:meth:`_score_pairs` with the model on Ray actors; each finished block is written at once."""
        assert self.ray is not None  # the caller chose this path for a scorer with a runner
        columns = {
            QUERY: lambda items: [pairs.queries[i] for i in pairs.pair_query[todo[items]]],
            TEXT: lambda items: [pairs.texts[i] for i in pairs.pair_text[todo[items]]],
        }
        for items, values in self.ray.run_blocks(self, columns, todo, stats, desc=f"{self.family} (Ray)"):
            done = todo[items]
            pairs.scores[done] = np.asarray(values, dtype=np.float64)
            if write is not None:
                write(list(zip(done.tolist(), pairs.scores[done].tolist(), strict=True)))
