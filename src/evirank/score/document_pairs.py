"""Pairwise re-ranking: a model that compares two documents for a query, over the top k of a ranking.

A pairwise family (``Family(..., pairwise=True)``, e.g. duoT5) scores rows [query, text] whose
``text`` is two documents joined by :func:`join_pair`, giving P(the first is more relevant than the
second). :class:`Duo` scores every ordered pair of each query's top ``k`` documents, ``k * (k - 1)``
model calls per query, and orders them by an aggregation of the pair probabilities
(:data:`DUO_AGGREGATES`): duoBERT's SUM, BINARY, MIN and MAX (Nogueira, Yang, Cho & Lin 2019) or
duoT5's symmetric sum (Pradeep, Nogueira & Lin 2021, the default). The stage knows no family: it
builds its pair scorer through the registry.

Example:
    >>> split_pair(join_pair("first", "second"))
    ('first', 'second')
    >>> sym_sum(np.array([[0.0, 0.9], [0.2, 0.0]])).round(6).tolist()
    [1.7, 0.3]
    >>> pair_sum(np.array([[0.0, 0.9], [0.2, 0.0]])).tolist()
    [0.9, 0.2]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from evirank.config import Runtime
from evirank.frames import DOCNO, PID, QID, QUERY, RANK, SCORE, TEXT, require_columns
from evirank.score.backends import TokenBatch
from evirank.score.query_passage import PairScorer
from evirank.score.tokenize import Part, Ragged, TextIds, TokenTable, assemble
from evirank.score.transformer import DistinctPairs, ScoringStats, _ChunkedWriter
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: Joins the two documents of a pair into the one text the score store keys.
PAIR_SEPARATOR = "\x1e"


def join_pair(first: str, second: str) -> str:
    """The one text a pair is stored under: both documents joined by :data:`PAIR_SEPARATOR`
    (a separator inside a document reads as a space, so the join splits back unambiguously).

    The score store keys a pair by (query hash, hash of this text): a rerun over the same
    documents finds every pair it scored.

    Example:
        >>> split_pair(join_pair("a", "b"))
        ('a', 'b')
    """
    return f"{first.replace(PAIR_SEPARATOR, ' ')}{PAIR_SEPARATOR}{second.replace(PAIR_SEPARATOR, ' ')}"


def split_pair(text: str) -> tuple[str, str]:
    """The two documents of a :func:`join_pair` text."""
    first, sep, second = text.partition(PAIR_SEPARATOR)
    if not sep:
        raise ValueError("a pairwise input text must be two documents joined by join_pair()")
    return first, second


def _off_diagonal(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    matrix = np.asarray(p, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"expected a square matrix of pair probabilities, found shape {matrix.shape}")
    return matrix, ~np.eye(len(matrix), dtype=bool)


def sym_sum(p: np.ndarray) -> np.ndarray:
    """duoT5's symmetric sum: s_i = sum over j != i of (p[i, j] + (1 - p[j, i])).

    ``p[i, j]`` = P(document i is more relevant than document j); the diagonal is ignored.

    Example:
        >>> sym_sum(np.array([[0.0, 0.9], [0.2, 0.0]])).round(6).tolist()
        [1.7, 0.3]
    """
    matrix, off = _off_diagonal(p)
    return (np.where(off, matrix, 0.0) + np.where(off, 1.0 - matrix.T, 0.0)).sum(axis=1)


def pair_sum(p: np.ndarray) -> np.ndarray:
    """duoBERT's SUM: s_i = sum over j != i of p[i, j] (Nogueira et al. 2019).

    Example:
        >>> pair_sum(np.array([[0.0, 0.9, 0.4], [0.2, 0.0, 0.7], [0.6, 0.1, 0.0]])).round(6).tolist()
        [1.3, 0.9, 0.7]
    """
    matrix, off = _off_diagonal(p)
    return np.where(off, matrix, 0.0).sum(axis=1)


def pair_binary(p: np.ndarray) -> np.ndarray:
    """duoBERT's BINARY: s_i = the number of j != i with p[i, j] > 0.5 (the documents i beats).

    Example:
        >>> pair_binary(np.array([[0.0, 0.9, 0.4], [0.2, 0.0, 0.7], [0.6, 0.1, 0.0]])).tolist()
        [1.0, 1.0, 1.0]
    """
    matrix, off = _off_diagonal(p)
    return (off & (matrix > 0.5)).sum(axis=1).astype(np.float64)


def pair_min(p: np.ndarray) -> np.ndarray:
    """duoBERT's MIN: s_i = min over j != i of p[i, j] (a document is as good as its hardest comparison).

    Example:
        >>> pair_min(np.array([[0.0, 0.9, 0.4], [0.2, 0.0, 0.7], [0.6, 0.1, 0.0]])).tolist()
        [0.4, 0.2, 0.1]
    """
    matrix, off = _off_diagonal(p)
    if len(matrix) < 2:
        return np.zeros(len(matrix))
    return np.where(off, matrix, np.inf).min(axis=1)


def pair_max(p: np.ndarray) -> np.ndarray:
    """duoBERT's MAX: s_i = max over j != i of p[i, j].

    Example:
        >>> pair_max(np.array([[0.0, 0.9, 0.4], [0.2, 0.0, 0.7], [0.6, 0.1, 0.0]])).tolist()
        [0.9, 0.7, 0.6]
    """
    matrix, off = _off_diagonal(p)
    if len(matrix) < 2:
        return np.zeros(len(matrix))
    return np.where(off, matrix, -np.inf).max(axis=1)


#: How a :class:`Duo` stage turns a query's matrix of pair probabilities into document scores,
#: by ``--duo-aggregate`` name: duoBERT's ``sum``, ``binary``, ``min`` and ``max`` (Nogueira,
#: Yang, Cho & Lin 2019, "Multi-Stage Document Ranking with BERT") and duoT5's ``sym-sum``
#: (Pradeep, Nogueira & Lin 2021).
DUO_AGGREGATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sum": pair_sum,
    "binary": pair_binary,
    "min": pair_min,
    "max": pair_max,
    "sym-sum": sym_sum,
}
#: The aggregation of a :class:`Duo` stage that names none.
DEFAULT_DUO_AGGREGATE = "sym-sum"


def duo_aggregate(name: str) -> Callable[[np.ndarray], np.ndarray]:
    """The pair-probability aggregation called ``name`` (:data:`DUO_AGGREGATES`).

    Raises:
        ValueError: an unknown name, listing the known ones.

    Example:
        >>> duo_aggregate("SUM") is pair_sum
        True
    """
    try:
        return DUO_AGGREGATES[str(name).strip().lower()]
    except KeyError:
        raise ValueError(
            f"unknown duo aggregation {name!r}; expected one of {', '.join(DUO_AGGREGATES)}"
        ) from None


def share_room(first: Any, second: Any, room: Any) -> tuple[Any, Any]:
    """Tokens kept of two documents of ``first`` and ``second`` tokens sharing ``room``: each
    gets half, and what one leaves unused goes to the other (numbers, or arrays of them).

    Example:
        >>> share_room(10, 300, 100), share_room(80, 90, 100), share_room(3, 4, 100)
        ((10, 90), (50, 50), (3, 4))
    """
    first, second, room = np.asarray(first), np.asarray(second), np.asarray(room)
    half = room // 2
    fits = first + second <= room
    first_short = first <= half
    second_short = second <= room - half
    keep_first = np.where(fits | first_short, first, np.where(second_short, room - second, half))
    keep_second = np.where(
        fits, second, np.where(first_short, room - first, np.where(second_short, second, room - half))
    )
    if keep_first.ndim == 0:
        return int(keep_first), int(keep_second)
    return keep_first, keep_second


class TwoDocumentScorer(PairScorer):
    """The generic half of a pairwise family's scorer: rows [qid, query, text] whose ``text`` is two
    documents joined by :func:`join_pair`, one model input per row (duoT5, duoBERT).

    The query keeps at most ``query_max_tokens``; the two documents share the rest of
    ``max_length`` (half each; what one leaves unused goes to the other, :func:`share_room`), with
    :meth:`between_ids` between them. Scores go to the score store under (query, joined text), so
    a rerun, or a smaller ``k`` of :class:`Duo`, computes nothing. A subclass (listed before its
    family's other bases) says :meth:`between_ids`, and, as every pair scorer,
    ``pair_template`` and ``read_out``: P(the first document is more relevant).
    """

    def between_ids(self) -> list[int]:
        """The token ids between the two documents."""
        raise NotImplementedError

    def input_parts(self, query: Ragged, first: Ragged, second: Ragged) -> tuple[list[Part], list[int]]:
        """The parts of every input row, in order, and each part's token type: by default the
        template's prefix, the query, its middle, both documents with :meth:`between_ids` between
        them, its suffix. A family may move the boundary or set the token types its checkpoint was
        trained with (duoBERT's three).

        Example:
            >>> table = TokenTable.of([[7], [8], [9]])
            >>> parts, types = scorer.input_parts(*(table.take([i], [1]) for i in range(3)))  # doctest: +SKIP
            >>> types  # doctest: +SKIP
            [0, 0, 0, 1, 1, 1, 1]
        """
        template = self.pair_template()
        t = template.types
        parts: list[Part] = [
            template.prefix,
            query,
            template.middle,
            first,
            tuple(self.between_ids()),
            second,
        ]
        return [*parts, template.suffix], [t[0], t[1], t[2], t[3], t[3], t[3], t[4]]

    def input_batch(
        self, rows: list[tuple[list[int], list[int], list[int]]], pad_multiple: int = 1
    ) -> TokenBatch:
        """The padded inputs of (query, first, second) id lists, already cut (:meth:`input_parts`).

        Example:
            >>> scorer.input_batch([([7], [8], [9])]).input_ids.tolist()  # doctest: +SKIP
            [[101, 7, 102, 8, 102, 9, 102]]
        """
        query, first, second = (TokenTable.of([row[k] for row in rows]) for k in range(3))
        every = np.arange(len(rows))
        return self._assemble(
            query.take(every, query.lengths),
            first.take(every, first.lengths),
            second.take(every, second.lengths),
            pad_multiple,
        )

    def _assemble(self, query: Ragged, first: Ragged, second: Ragged, pad_multiple: int) -> TokenBatch:
        parts, types = self.input_parts(query, first, second)
        encoder = self.encoder_
        return assemble(parts, types, encoder.pad_id, pad_multiple, encoder.uses_token_types)

    def _passage_room(self) -> int:
        """Tokens of one document when both fill their half."""
        return int((super()._passage_room() - len(self.between_ids())) // 2)

    def pair_inputs(self, queries: list[str], texts: list[str]) -> TokenBatch:
        """The padded inputs of (query, joined pair) rows, cut as scoring cuts them (training reads these)."""
        self.prepare()
        template = self.pair_template()
        between = self.between_ids()
        cap = self.max_length_ - template.n_special - len(between)
        q_ids = self.encoder_.token_ids(queries, self.query_max_tokens)
        halves = [split_pair(text) for text in texts]
        firsts = self.encoder_.token_ids([h[0] for h in halves], cap)
        seconds = self.encoder_.token_ids([h[1] for h in halves], cap)
        rows = []
        for q, a, b in zip(q_ids, firsts, seconds, strict=True):
            keep_a, keep_b = share_room(len(a), len(b), cap - len(q))
            rows.append((q, a[:keep_a], b[:keep_b]))
        return self.input_batch(rows)

    # Rows are pairs of documents, not passages of one: [query, text] suffice, and no segments
    # are recorded in the store.
    input_columns: tuple[str, ...] = (QUERY, TEXT)
    records_segments = False

    def _score_pairs(
        self,
        pairs: DistinctPairs,
        todo: np.ndarray,
        write: Callable[[list[tuple[int, float]]], None] | None,
        stats: ScoringStats,
    ) -> None:
        """Score the distinct (query, joined pair) items ``todo`` into ``pairs.scores``."""
        encoder = self.encoder_
        template = self.pair_template()
        n_fixed = template.n_special + len(self.between_ids())
        cap = self.max_length_ - n_fixed
        # each distinct query and document tokenised once (through the encoder's cache); the
        # documents' table holds every text's first half, then every text's second half
        halves = [split_pair(text) for text in pairs.texts]
        n_texts = len(halves)
        query_ids = TextIds(encoder, pairs.queries, self.query_max_tokens, pairs.query_hash)
        document_ids = TextIds(encoder, [h[0] for h in halves] + [h[1] for h in halves], cap)
        row_q, row_t = pairs.pair_query[todo], pairs.pair_text[todo]
        kept = np.zeros((len(todo), 3), dtype=np.int64)  # query, first, second

        def tokenize(items: np.ndarray) -> np.ndarray:
            q, t = row_q[items], row_t[items]
            query_ids.need(q)
            document_ids.need(np.concatenate([t, t + n_texts]))
            kept[items, 0] = query_ids.lengths[q]
            kept[items, 1], kept[items, 2] = share_room(
                document_ids.lengths[t], document_ids.lengths[t + n_texts], cap - kept[items, 0]
            )
            return n_fixed + kept[items].sum(axis=1)

        def build(items: np.ndarray, pad_multiple: int) -> TokenBatch:
            documents = document_ids.table()
            t = row_t[items]
            return self._assemble(
                query_ids.table().take(row_q[items], kept[items, 0]),
                documents.take(t, kept[items, 1]),
                documents.take(t + n_texts, kept[items, 2]),
                pad_multiple,
            )

        with _ChunkedWriter(write, self.commit_every) as writer:

            def consume(rows: np.ndarray, output: np.ndarray) -> None:
                values = np.asarray(self.read_out(output), dtype=np.float64)
                pairs.scores[todo[rows]] = values
                writer.add(list(zip(todo[rows].tolist(), values.tolist(), strict=True)))

            self._run_batches(len(todo), tokenize, build, consume, stats, desc=self.family)


def best_passages(run: pd.DataFrame, passages: pd.DataFrame) -> pd.DataFrame:
    """``run`` with ``text`` = each document's best passage (highest ``score`` in ``passages``;
    ties: the earlier passage).

    Example:
        >>> run = pd.DataFrame({"qid": ["1"], "docno": ["a"], "score": [1.0]})
        >>> p = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "a"], "pid": [0, 1],
        ...                   "text": ["x", "y"], "score": [0.1, 0.7]})
        >>> best_passages(run, p)["text"].tolist()
        ['y']
    """
    require_columns(passages, (QID, DOCNO, PID, TEXT, SCORE), "best_passages (passages)")
    ordered = passages.sort_values(
        [QID, DOCNO, SCORE, PID], ascending=[True, True, False, True], kind="stable"
    )
    best = ordered.drop_duplicates([QID, DOCNO])[[QID, DOCNO, TEXT]]
    return run.drop(columns=[TEXT], errors="ignore").merge(best, on=[QID, DOCNO], how="left")


class Duo(Stage):
    """Re-rank each query's top ``k`` documents by a pairwise model's preferences.

    Input a Run [qid, query, docno, score(, rank)] with ``text`` for (at least) the top ``k``
    documents, or ``fetch`` (a :class:`~evirank.rerank.FetchText`) to read it; ``evirank rerank
    --duo K`` gives each document's best passage by the passage scorer (:func:`best_passages`),
    since a pair of whole documents rarely fits in the model's input. Every ordered pair (i, j),
    i != j, of a query's top ``k`` is scored: **k(k-1) model calls per query** (90 for k = 10, 380
    for k = 20), fewer when texts repeat or the score store has them (a rerun, or a smaller ``k``,
    costs nothing). Each document gets s_i from the probabilities p_ij (document i more relevant
    than j) by ``aggregate``: ``sum`` (sum over j of p_ij), ``binary`` (the j with p_ij > 0.5),
    ``min`` / ``max`` (of p_ij over j), or ``sym-sum`` (sum over j of p_ij + 1 - p_ji, the default);
    the top ``k`` are ordered by s_i (ties: the earlier rank first) with score = s_i + (the
    highest score below the top k, or 0) + 1, so they stay above the rest, which keep their
    scores and order. A column ``duo_score`` holds s_i.

    Args:
        model: a pairwise model (Hub id or folder), or a pair scorer already built.
        k: documents re-ranked per query (at least 2).
        aggregate: a name of :data:`DUO_AGGREGATES`.
        family: the pairwise family (None: the registered pairwise family that recognises the model).
        fetch: a stage that adds ``text`` to a run without it.
        runtime: where and how the pair scorer runs (:class:`~evirank.config.Runtime`: its
            device, backend, batch budget, score store, ...).
        options: the pair scorer's own keyword arguments (``query_max_tokens``, ...).

    Example:
        >>> from evirank.score.families.seq2seq import MonoT5
        >>> mono = Rerank(Whole(), MonoT5(m), MaxP(), fetch=FetchText(corpus=c))  # doctest: +SKIP
        >>> duo = Duo("castorini/duot5-base-msmarco", k=10, fetch=FetchText(corpus=c))  # doctest: +SKIP
        >>> run = (mono >> duo)(first_stage_run)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | Any,
        k: int = 10,
        *,
        aggregate: str = DEFAULT_DUO_AGGREGATE,
        family: str | None = None,
        fetch: Stage | None = None,
        runtime: Runtime | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(k, int) or k < 2:
            raise ValueError(f"duo's k must be an integer of at least 2, found {k!r}")
        duo_aggregate(aggregate)  # an unknown name fails here
        self.scorer: Any = (
            model if hasattr(model, "transform") else pair_scorer(model, family, runtime, **options)
        )
        self.k = k
        self.aggregate = str(aggregate).strip().lower()
        self.fetch = fetch

    def __repr__(self) -> str:
        return f"Duo({str(self.scorer.model)!r}, k={self.k}, aggregate={self.aggregate!r})"

    def describe(self) -> dict[str, Any]:
        """The stage's settings and its scorer's (for records)."""
        return {
            "k": self.k,
            "aggregate": self.aggregate,
            "calls_per_query": self.k * (self.k - 1),
            **self.scorer.describe(),
        }

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The run with its top ``k`` per query re-ordered by the aggregated pair probabilities."""
        require_columns(frame, (QID, QUERY, DOCNO, SCORE), "Duo (run)")
        from evirank.aggregate.tail import ranked_run

        ranked = ranked_run(frame)
        top = ranked[ranked[RANK] <= self.k]
        if TEXT not in top.columns or top[TEXT].isna().any():
            if self.fetch is None:
                raise ValueError(
                    "Duo needs the documents' text: a run with a text column, fetch=FetchText(...), "
                    "or best_passages(run, passages)"
                )
            top = self.fetch(top)
        rows: list[tuple[str, str, str]] = []
        groups: list[tuple[Any, pd.DataFrame]] = list(top.groupby(QID, sort=False))
        for _, docs in groups:
            query = str(docs[QUERY].iloc[0])
            texts = docs[TEXT].astype(str).tolist()
            rows.extend(
                (str(docs[QID].iloc[0]), query, join_pair(texts[i], texts[j]))
                for i in range(len(texts))
                for j in range(len(texts))
                if i != j
            )
        calls = len(rows)
        logger.info(
            "duo: %d queries, top %d each: %d pair inferences (k(k-1) = %d per full query)",
            len(groups),
            self.k,
            calls,
            self.k * (self.k - 1),
        )
        pairs = pd.DataFrame(rows, columns=[QID, QUERY, TEXT]).assign(**{DOCNO: "", PID: 0})
        probs = self.scorer.transform(pairs)[SCORE].to_numpy(dtype=np.float64)
        stats = getattr(self.scorer, "stats_", None)
        if stats is not None:
            logger.info(
                "duo: %d distinct pairs, %d from the store, %d computed",
                stats.distinct,
                stats.cached,
                stats.computed,
            )
        aggregate = duo_aggregate(self.aggregate)
        scored: dict[tuple[str, str], float] = {}
        at = 0
        for _, docs in groups:
            n = len(docs)
            matrix = np.zeros((n, n))
            for i in range(n):
                for j in range(n):
                    if i != j:
                        matrix[i, j] = probs[at]
                        at += 1
            for docno, value in zip(docs[DOCNO].astype(str), aggregate(matrix), strict=True):
                scored[(str(docs[QID].iloc[0]), docno)] = float(value)
        return _reorder(ranked, scored, self.k)


def pair_scorer(
    model: str | os.PathLike[str], family: str | None = None, runtime: Runtime | None = None, **options: Any
) -> Any:
    """The pair scorer of ``model``: of ``family``, or of the pairwise family that claims it most,
    running on ``runtime`` (``options``: the family's own).

    Raises:
        UnknownFamilyError: ``family`` is not pairwise, or no pairwise family recognises the model.
    """
    from evirank.score.family import ModelInfo, UnknownFamilyError, family_names, get_family, make_scorer
    from evirank.score.fingerprint import resolve_model_dir

    if family is not None:
        chosen = get_family(family)
        if not chosen.pairwise:
            raise UnknownFamilyError(f"the {chosen.name} family scores one passage, not a pair of documents")
        return make_scorer(chosen, model, runtime, **options)
    pairwise = [get_family(name) for name in family_names() if get_family(name).pairwise]
    info = ModelInfo.read(resolve_model_dir(model))
    claims = sorted(((f.claims(info), f.name) for f in pairwise), reverse=True)
    if not claims or claims[0][0] <= 0 or (len(claims) > 1 and claims[1][0] == claims[0][0]):
        names = ", ".join(f.name for f in pairwise) or "none registered"
        raise UnknownFamilyError(f"{model}: say which pairwise family reads this model ({names})")
    return make_scorer(get_family(claims[0][1]), model, runtime, **options)


def _reorder(ranked: pd.DataFrame, duo: Mapping[tuple[str, str], float], k: int) -> pd.DataFrame:
    """The run with its top ``k`` per query ordered by ``duo`` values (see :class:`Duo`)."""
    out = ranked.copy()
    keys = list(zip(out[QID].astype(str), out[DOCNO].astype(str), strict=True))
    values = np.array([duo.get(key, np.nan) for key in keys], dtype=np.float64)
    out["duo_score"] = values
    head = out[RANK] <= k
    below = out[~head].groupby(QID)[SCORE].max()
    floor = out[QID].map(below).fillna(0.0).to_numpy(dtype=np.float64) + 1.0
    out[SCORE] = np.where(head, values + floor, out[SCORE].to_numpy(dtype=np.float64))
    out["_head"] = head
    out = out.sort_values([QID, "_head", SCORE, RANK], ascending=[True, False, False, True], kind="stable")
    out = out.drop(columns="_head")
    out[RANK] = out.groupby(QID).cumcount() + 1
    return out.reset_index(drop=True)
