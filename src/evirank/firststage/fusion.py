"""Fusing two first-stage runs (BM25 and dense): reciprocal rank fusion and score interpolation.

Both work per query over the union of the two runs' documents.

- **Reciprocal rank fusion** (Cormack, Clarke & Buettcher, SIGIR 2009): a document scores
  ``sum over runs of 1 / (k + rank)``, with ``k = 60`` by default and ranks from 1 in each run's
  own order (:func:`evirank.frames.sort_run`). A document missing from a run gets nothing from it.
- **Interpolation**: each run's scores are min-max normalised per query over that run's own
  documents, then ``weight * first + (1 - weight) * second``. A document missing from a run gets
  0 from it, the normalised score of that run's lowest-ranked document: it is treated as scoring at
  most as high as anything the run retrieved. A query whose scores in one run are all equal gets
  0 from that run (as :func:`evirank.aggregate.minmax_by_group`). ``weight`` is the first run's
  (BM25's) weight, the ``alpha`` of the aggregators.

The interpolation is exactly ``maxp`` with first-stage weight ``alpha = weight`` over a
:func:`fusion_table` (one passage per document, each run's missing scores filled with its own
minimum), which is how ``evirank tune --passages TABLE --aggregate maxp`` chooses the weight by
cross-validation.

Example:
    >>> from evirank.frames import make_run
    >>> bm25 = make_run([("1", "a", 12.0), ("1", "b", 10.0), ("1", "c", 8.0)])
    >>> dense = make_run([("1", "b", 0.9), ("1", "d", 0.7), ("1", "a", 0.5)])
    >>> rrf(bm25, dense)[["docno", "score"]].round(5).values.tolist()
    [['b', 0.03252], ['a', 0.03227], ['d', 0.01613], ['c', 0.01587]]
    >>> interpolate(bm25, dense, 0.5)[["docno", "score"]].round(6).values.tolist()
    [['b', 0.75], ['a', 0.5], ['d', 0.25], ['c', 0.0]]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evirank.aggregate.core import minmax_by_group
from evirank.frames import (
    DOCNO,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    natural_key,
    require_columns,
    sort_run,
)
from evirank.grammar import SpecError, parse_spec
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: Cormack, Clarke & Buettcher's constant.
RRF_K = 60
#: The interpolation weight of the first run (BM25) when none is given.
DEFAULT_WEIGHT = 0.5
FUSIONS = ("rrf", "interp")


@dataclass(frozen=True, slots=True)
class Fusion:
    """How two runs are fused: ``rrf`` with its ``k``, or ``interp`` with the first run's ``weight``.

    Example:
        >>> Fusion.parse("rrf"), Fusion.parse("interp:0.3").weight
        (Fusion(method='rrf', k=60, weight=0.5), 0.3)
        >>> Fusion.parse("rrf:10").spec
        'rrf:10'
    """

    method: str = "rrf"
    k: int = RRF_K
    weight: float = DEFAULT_WEIGHT

    def __post_init__(self) -> None:
        if self.method not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, found {self.method!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise ValueError(f"the rrf constant must be an integer >= 0, found {self.k!r}")
        if not 0.0 <= float(self.weight) <= 1.0:
            raise ValueError(f"the interpolation weight must be within [0, 1], found {self.weight!r}")

    @classmethod
    def parse(cls, spec: str) -> Fusion:
        """``rrf``, ``rrf:K``, ``interp`` or ``interp:WEIGHT`` (the first run's weight, 0 to 1).

        Raises:
            ValueError: any other spelling, naming the grammar.
        """
        try:
            parsed = parse_spec(spec, what="fusion", grammar="rrf[:K] or interp[:WEIGHT]")
        except SpecError:
            parsed = None
        if parsed is None or parsed.name not in FUSIONS or len(parsed.args) > 1:
            raise ValueError(f"expected rrf[:K] or interp[:WEIGHT], found {spec!r}")
        method, value = parsed.name, parsed.arg(0)
        try:
            if method == "rrf":
                return cls("rrf", k=int(value) if value is not None else RRF_K)
            return cls("interp", weight=float(value) if value is not None else DEFAULT_WEIGHT)
        except ValueError as exc:
            if "must be" in str(exc):
                raise
            raise ValueError(
                f"expected rrf[:K] (an integer) or interp[:WEIGHT] (a number), found {spec!r}"
            ) from None

    @property
    def spec(self) -> str:
        """The canonical spec string."""
        return f"rrf:{self.k}" if self.method == "rrf" else f"interp:{self.weight:g}"

    def __call__(self, first: pd.DataFrame, second: pd.DataFrame, depth: int | None = None) -> pd.DataFrame:
        """Fuse two runs (``first`` is BM25's side: the interpolation weight is its)."""
        if self.method == "rrf":
            return rrf(first, second, k=self.k, depth=depth)
        return interpolate(first, second, self.weight, depth=depth)


def _ranked(run: pd.DataFrame, where: str) -> pd.DataFrame:
    require_columns(run, (QID, DOCNO, SCORE), where)
    out = sort_run(run.astype({QID: str, DOCNO: str}))
    dup = out.duplicated([QID, DOCNO])
    if dup.any():
        first = out[dup].iloc[0]
        raise ValueError(f"{where}: document {first[DOCNO]} appears twice for query {first[QID]}")
    return out


def _union(runs: Sequence[pd.DataFrame], values: Sequence[np.ndarray]) -> pd.DataFrame:
    """One row per (qid, docno) of any run, with a column ``v{i}`` per run (NaN where missing)."""
    frames = []
    for i, (run, value) in enumerate(zip(runs, values, strict=True)):
        cols = {QID: run[QID].to_numpy(), DOCNO: run[DOCNO].to_numpy(), f"v{i}": value}
        if QUERY in run:
            cols[QUERY] = run[QUERY].to_numpy()
        frames.append(pd.DataFrame(cols).set_index([QID, DOCNO]))
    merged = frames[0]
    for frame in frames[1:]:
        query = frame.pop(QUERY) if QUERY in frame else None
        merged = merged.join(frame, how="outer")
        if query is not None:
            merged[QUERY] = merged[QUERY].fillna(query) if QUERY in merged else query
    return merged.reset_index()


def _finish(fused: pd.DataFrame, depth: int | None) -> pd.DataFrame:
    columns = [QID, DOCNO, SCORE, RANK] + ([QUERY] if QUERY in fused else [])
    if fused.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns}).astype(
            {SCORE: np.float64, RANK: np.int64}
        )
    run = sort_run(fused)
    if depth is not None:
        run = run[run[RANK] <= depth].reset_index(drop=True)
    return run[columns]


def rrf(*runs: pd.DataFrame, k: int = RRF_K, depth: int | None = None) -> pd.DataFrame:
    """Reciprocal rank fusion of runs: ``sum_r 1 / (k + rank_r(d))``; a run missing ``d`` adds 0.

    Args:
        runs: Runs [qid, docno, score] (ranked again by :func:`~evirank.frames.sort_run`).
        k: the constant (60 in Cormack et al.).
        depth: keep each query's top ``depth`` (None: the whole union).

    Example:
        >>> from evirank.frames import make_run
        >>> a = make_run([("1", "x", 2.0), ("1", "y", 1.0)])
        >>> rrf(a, make_run([("1", "y", 5.0)]), k=0)[["docno", "score"]].values.tolist()
        [['y', 1.5], ['x', 1.0]]
    """
    if not runs:
        raise ValueError("rrf needs at least one run")
    ranked = [_ranked(run, f"rrf run {i + 1}") for i, run in enumerate(runs)]
    values = [1.0 / (k + run[RANK].to_numpy(dtype=np.float64)) for run in ranked]
    merged = _union(ranked, values)
    parts = merged[[f"v{i}" for i in range(len(ranked))]].fillna(0.0).to_numpy()
    # summed in run order, so the same runs always give the same floats
    merged[SCORE] = parts.sum(axis=1)
    return _finish(merged, depth)


def _normalised(run: pd.DataFrame) -> np.ndarray:
    codes = natural_key(run[QID]).to_numpy()
    return minmax_by_group(run[SCORE].to_numpy(dtype=np.float64), codes)


def interpolate(
    first: pd.DataFrame, second: pd.DataFrame, weight: float, depth: int | None = None
) -> pd.DataFrame:
    """``weight * minmax(first) + (1 - weight) * minmax(second)`` per query; a missing document gets 0.

    Args:
        first: a Run (BM25's side).
        second: a Run (the dense side).
        weight: the first run's weight, in [0, 1].
        depth: keep each query's top ``depth`` (None: the whole union).

    Example:
        >>> from evirank.frames import make_run
        >>> a = make_run([("1", "x", 3.0), ("1", "y", 1.0)])
        >>> b = make_run([("1", "y", 0.8), ("1", "z", 0.4)])
        >>> interpolate(a, b, 0.25)[["docno", "score"]].values.tolist()
        [['y', 0.75], ['x', 0.25], ['z', 0.0]]
    """
    if not 0.0 <= float(weight) <= 1.0:
        raise ValueError(f"weight must be within [0, 1], found {weight!r}")
    a, b = _ranked(first, "interpolate first run"), _ranked(second, "interpolate second run")
    merged = _union([a, b], [_normalised(a), _normalised(b)])
    merged[SCORE] = (
        float(weight) * merged["v0"].fillna(0.0).to_numpy()
        + (1.0 - float(weight)) * merged["v1"].fillna(0.0).to_numpy()
    )
    return _finish(merged, depth)


class Hybrid(Stage):
    """Two first stages run on the same topics and fused: ``Hybrid(Bm25(index), DenseRetriever(v))``.

    Args:
        first: the first stage whose interpolation weight is ``fusion.weight`` (BM25 or BM25+RM3).
        second: the other (the dense retriever).
        fusion: a :class:`Fusion` or its spec (``rrf``, ``rrf:K``, ``interp:WEIGHT``).
        k: documents kept per query after fusion (None: the whole union).

    Example:
        >>> from evirank.firststage import DenseRetriever
        >>> from evirank.lucene import Bm25
        >>> dense = DenseRetriever("indexes/scifact/vectors")  # doctest: +SKIP
        >>> hybrid = Hybrid(Bm25("indexes/scifact"), dense, "rrf")  # doctest: +SKIP
        >>> run = hybrid(topics)  # doctest: +SKIP
    """

    def __init__(
        self, first: Stage, second: Stage, fusion: Fusion | str = "rrf", k: int | None = 1000
    ) -> None:
        self.first = first
        self.second = second
        self.fusion = Fusion.parse(fusion) if isinstance(fusion, str) else fusion
        self.k = k

    def runs(self, topics: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The two first stages' runs, before fusion."""
        return self.first(topics), self.second(topics)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Run both stages on the topics and fuse their runs."""
        first, second = self.runs(frame)
        return self.fusion(first, second, depth=self.k)


def fusion_table(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    """The two runs as scored passages, for ``evirank tune --passages FILE --aggregate maxp``.

    One row per (qid, docno) of the union: ``pid`` 0, ``score`` the second (dense) run's score,
    ``first_stage_score`` the first (BM25) run's; a score missing from a run is that run's minimum
    for the query, which min-max normalisation maps to 0, the rule of :func:`interpolate`. So
    ``maxp`` with ``alpha = weight`` ranks exactly as ``interpolate(first, second, weight)``.

    Example:
        >>> from evirank.frames import make_run
        >>> a = make_run([("1", "x", 3.0), ("1", "y", 1.0)])
        >>> table = fusion_table(a, make_run([("1", "z", 0.4), ("1", "y", 0.8)]))
        >>> table[["docno", "score", "first_stage_score"]].values.tolist()
        [['x', 0.4, 3.0], ['y', 0.8, 1.0], ['z', 0.4, 1.0]]
    """
    a, b = _ranked(first, "fusion_table first run"), _ranked(second, "fusion_table second run")
    merged = _union([a, b], [a[SCORE].to_numpy(np.float64), b[SCORE].to_numpy(np.float64)])
    for column, run in (("v0", a), ("v1", b)):
        low = run.groupby(QID)[SCORE].min()
        # a query the run retrieved nothing for: 0, a constant (normalised to 0 like any)
        merged[column] = merged[column].fillna(merged[QID].map(low)).fillna(0.0)
    out = pd.DataFrame(
        {
            QID: merged[QID],
            DOCNO: merged[DOCNO],
            PID: np.zeros(len(merged), dtype=np.int64),
            SCORE: merged["v1"].astype(np.float64),
            FIRST_STAGE_SCORE: merged["v0"].astype(np.float64),
        }
    )
    if QUERY in merged:
        out[QUERY] = merged[QUERY]
    out["_q"] = natural_key(out[QID])
    out = out.sort_values(["_q", DOCNO], kind="mergesort").drop(columns="_q")
    return out.reset_index(drop=True)
