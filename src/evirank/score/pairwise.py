"""Pairwise re-ranking: a model that compares two documents for a query, over the top k of a ranking.

A pairwise family (``Family(..., pairwise=True)``, e.g. duoT5) scores rows [query, text] whose
``text`` is two documents joined by :func:`join_pair`, giving P(the first is more relevant than the
second). :class:`Duo` scores every ordered pair of each query's top ``k`` documents and orders them
by the symmetric sum of Pradeep, Nogueira & Lin (2021): ``k * (k - 1)`` model calls per query. The
stage knows no family: it builds its pair scorer through the registry.

Example:
    >>> split_pair(join_pair("first", "second"))
    ('first', 'second')
    >>> sym_sum(np.array([[0.0, 0.9], [0.2, 0.0]])).round(6).tolist()
    [1.7, 0.3]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from evirank.frames import DOCNO, PID, QID, QUERY, RANK, SCORE, TEXT, require_columns
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


def sym_sum(p: np.ndarray) -> np.ndarray:
    """duoT5's symmetric sum: s_i = sum over j != i of (p[i, j] + (1 - p[j, i])).

    ``p[i, j]`` = P(document i is more relevant than document j); the diagonal is ignored.
    """
    matrix = np.asarray(p, dtype=np.float64)
    off = ~np.eye(len(matrix), dtype=bool)
    return (np.where(off, matrix, 0.0) + np.where(off, 1.0 - matrix.T, 0.0)).sum(axis=1)


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
    """Re-rank each query's top ``k`` documents by a pairwise model's preferences (symmetric sum).

    Input a Run [qid, query, docno, score(, rank)] with ``text`` for (at least) the top ``k``
    documents, or ``fetch`` (a :class:`~evirank.rerank.FetchText`) to read it; ``evirank rerank
    --duo K`` gives each document's best passage by the passage scorer (:func:`best_passages`),
    since a pair of whole documents rarely fits in the model's input. Every ordered pair (i, j),
    i != j, of a query's top ``k`` is scored: **k(k-1) model calls per query** (90 for k = 10, 380
    for k = 20), fewer when texts repeat or the score store has them (a rerun, or a smaller ``k``,
    costs nothing). Each document gets s_i = sum over j != i of (p_ij + (1 - p_ji))
    (:func:`sym_sum`); the top ``k`` are ordered by s_i (ties: the earlier rank first) with score =
    s_i + (the highest score below the top k, or 0) + 1, so they stay above the rest, which keep
    their scores and order. A column ``duo_score`` holds s_i.

    Args:
        model: a pairwise model (Hub id or folder), or a pair scorer already built.
        k: documents re-ranked per query (at least 2).
        family: the pairwise family (None: the registered pairwise family that recognises the model).
        fetch: a stage that adds ``text`` to a run without it.
        options: the pair scorer's keyword arguments (``store``, ``device``, ``batch_tokens``, ...).

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
        family: str | None = None,
        fetch: Stage | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(k, int) or k < 2:
            raise ValueError(f"duo's k must be an integer of at least 2, found {k!r}")
        self.scorer: Any = model if hasattr(model, "transform") else pair_scorer(model, family, **options)
        self.k = k
        self.fetch = fetch

    def __repr__(self) -> str:
        return f"Duo({str(self.scorer.model)!r}, k={self.k})"

    def describe(self) -> dict[str, Any]:
        """The stage's settings and its scorer's (for records)."""
        return {"k": self.k, "calls_per_query": self.k * (self.k - 1), **self.scorer.describe()}

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The run with its top ``k`` per query re-ordered by the symmetric sum."""
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
            for docno, value in zip(docs[DOCNO].astype(str), sym_sum(matrix), strict=True):
                scored[(str(docs[QID].iloc[0]), docno)] = float(value)
        return _reorder(ranked, scored, self.k)


def pair_scorer(model: str | os.PathLike[str], family: str | None = None, **options: Any) -> Any:
    """The pair scorer of ``model``: of ``family``, or of the pairwise family that claims it most.

    Raises:
        UnknownFamilyError: ``family`` is not pairwise, or no pairwise family recognises the model.
    """
    from evirank.score.family import ModelInfo, UnknownFamilyError, family_names, get_family, make_scorer
    from evirank.score.fingerprint import resolve_model_dir

    if family is not None:
        chosen = get_family(family)
        if not chosen.pairwise:
            raise UnknownFamilyError(f"the {chosen.name} family scores one passage, not a pair of documents")
        return make_scorer(chosen, model, **options)
    pairwise = [get_family(name) for name in family_names() if get_family(name).pairwise]
    info = ModelInfo.read(resolve_model_dir(model))
    claims = sorted(((f.claims(info), f.name) for f in pairwise), reverse=True)
    if not claims or claims[0][0] <= 0 or (len(claims) > 1 and claims[1][0] == claims[0][0]):
        names = ", ".join(f.name for f in pairwise) or "none registered"
        raise UnknownFamilyError(f"{model}: say which pairwise family reads this model ({names})")
    return make_scorer(get_family(claims[0][1]), model, **options)


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
