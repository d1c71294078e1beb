"""Re-rank a first-stage run by passage evidence, timing every stage.

:func:`rerank` is the ``evirank rerank`` command as a function: each query's top ``depth``
documents get their text, are segmented, scored (through the score store when the scorer has
one) and aggregated; the documents below ``depth`` follow in first-stage order
(:func:`evirank.aggregate.merge_tail`). The same steps compose as stages too::

    Bm25(index, k=1000) % 100 >> FetchText(index=index) >> Sentences() >> CrossEncoder(m) >> Birch()

:func:`parse_segment` (:mod:`evirank.segment.spec`) and :func:`parse_aggregate`
(:mod:`evirank.aggregate.registry`) turn the command's ``--segment`` and ``--aggregate`` specs into
stages; they are defined once there and re-exported here.

Example:
    >>> from evirank.rerank import parse_aggregate, parse_segment
    >>> parse_segment("windows:150:75")
    Windows(length=150, stride=75, title=True, max_title_words=50, max_passages=None)
    >>> parse_aggregate("birch:2", alpha=0.3, weights=[1.0, 0.5])
    Birch(alpha=0.3, normalise='minmax', top_n=2, weights=(1.0, 0.5))
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.aggregate import merge_tail
from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    TEXT,
    require_columns,
    sort_run,
)
from evirank.outputs import atomic_output
from evirank.rerank.fetch import AddQueries
from evirank.rerank.timing import StageTimings
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: Columns of a saved passages file (``--save-passages``), which ``evirank tune --passages`` reads.
PASSAGE_FILE_COLUMNS = (QID, QUERY, DOCNO, PID, TEXT, SCORE, FIRST_STAGE_SCORE, FIRST_STAGE_RANK)


def passage_budget(scorer: Any) -> tuple[Any, int] | None:
    """(tokenizer, tokens left for a passage) of a transformer scorer, or None for other stages.

    For a cross-encoder: ``max_length - special tokens - query_max_tokens``; for a bi-encoder:
    ``max_length - special tokens``. Loads the tokenizer, not the model weights.

    Example:
        >>> from evirank.score import BiEncoder
        >>> passage_budget(BiEncoder())[1]  # doctest: +SKIP
        254
    """
    prepare = getattr(scorer, "_prepare", None)
    if prepare is None:
        return None
    prepare()  # the scorers' lazy set-up: tokenizer, limits, device (no weights)
    encoder = scorer.encoder_
    if getattr(scorer, "kind", None) == "cross":
        room = scorer.max_length_ - encoder.pair_template.n_special - scorer.query_max_tokens
    else:
        room = scorer.max_length_ - encoder.single_template.n_special
    return encoder.tokenizer, int(room)


@dataclass
class RerankResult:
    """What :func:`rerank` returns.

    Attributes:
        run: the re-ranked Run [qid, query, docno, score, rank, first_stage_score, first_stage_rank]:
            the re-ranked top ``depth``, then the rest in first-stage order.
        passages: the scored Passages of the re-ranked documents.
        timings: seconds per stage (see :mod:`evirank.rerank.timing`).
        counts: queries, documents re-ranked, passages, and the scorer's counters (distinct pairs,
            from the store, computed by the model, batches, tokens) when it keeps them.
    """

    run: pd.DataFrame
    passages: pd.DataFrame
    timings: StageTimings
    counts: dict[str, int] = field(default_factory=dict)


def rerank(
    run: pd.DataFrame,
    *,
    segmenter: Stage,
    scorer: Stage,
    aggregator: Stage,
    fetch: Stage | None = None,
    topics: pd.DataFrame | None = None,
    depth: int = 100,
    timings: StageTimings | None = None,
    prune: Stage | None = None,
) -> RerankResult:
    """Re-rank each query's top ``depth`` documents of ``run``; the rest follow in first-stage order.

    Args:
        run: a first-stage Run [qid, docno, score] (+ rank, query, title, text when known).
        segmenter: documents -> passages (:class:`~evirank.segment.Sentences`, ``Windows``).
        scorer: passages -> scored passages (:class:`~evirank.score.CrossEncoder`, ``BiEncoder``).
        aggregator: scored passages -> Run (:class:`~evirank.aggregate.Birch`, MaxP, ...).
        fetch: adds title and text (:class:`~evirank.rerank.FetchText`); None when ``run`` has ``text``.
        topics: Topics [qid, query] for a run without a ``query`` column (queries without a topic
            are left out, with a warning).
        depth: documents re-ranked per query.
        timings: where to add the stage timings (a new one when None).
        prune: a cascade stage between segmentation and scoring (:class:`~evirank.rerank.prune.Prune`):
            the scorer and the aggregator see only the passages it keeps.

    Returns:
        A :class:`RerankResult`.

    Example:
        >>> from evirank.frames import Document, make_run, make_topics
        >>> from evirank.rerank import FetchText
        >>> from evirank.score import BiEncoder
        >>> result = rerank(make_run([("1", "d1", 2.0)]), topics=make_topics([("1", "cats")]),
        ...                 fetch=FetchText(docs={"d1": Document("d1", "", "Cats purr.")}),
        ...                 segmenter=Sentences(), scorer=BiEncoder(), aggregator=MaxP())  # doctest: +SKIP
        >>> print(result.timings.table())  # doctest: +SKIP
    """
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a positive integer, found {depth!r}")
    timings = StageTimings() if timings is None else timings
    require_columns(run, (QID, DOCNO, SCORE), "rerank (run)")
    ranked = sort_run(run) if RANK not in run.columns else run.copy()
    if topics is not None:
        ranked = AddQueries(topics, missing="drop")(ranked)
    require_columns(ranked, (QUERY,), "rerank (run without topics)")
    head = ranked[ranked[RANK] <= depth].reset_index(drop=True)
    logger.info(
        "re-ranking %d documents of %d queries (top %d of %d first-stage documents)",
        len(head),
        head[QID].nunique(),
        depth,
        len(ranked),
    )
    if fetch is not None:
        with timings.measure("text_fetch"):
            head = fetch(head)
    require_columns(head, (TEXT,), "rerank (documents need text: give fetch=FetchText(...))")
    with timings.measure("segmentation"):
        passages = segmenter(head)
    logger.info("%d passages from %d documents", len(passages), len(head))
    segmented = len(passages)
    with timings.measure("pruning"):  # zero without a cascade
        if prune is not None:
            passages = prune(passages)

    scored = _score(scorer, passages, timings)
    with timings.measure("aggregation"):
        reranked = aggregator(scored)
        final = merge_tail(reranked, ranked)
    counts = {
        "queries": int(head[QID].nunique()),
        "documents_reranked": len(head),
        "documents_in_run": len(ranked),
        "passages": segmented,
        "passages_scored": len(passages),
    }
    stats = getattr(scorer, "stats_", None)
    if stats is not None:
        for name in ("distinct", "cached", "computed", "batches", "tokens"):
            counts[f"scorer_{name}"] = int(getattr(stats, name, 0))
    return RerankResult(final, scored, timings, counts)


def _score(scorer: Stage, passages: pd.DataFrame, timings: StageTimings) -> pd.DataFrame:
    """Run the scorer, splitting its time into model loading, tokenisation, model and the rest."""
    loaded_before = getattr(scorer, "backend_", None) is not None
    started = time.perf_counter()
    scored = scorer(passages)
    total = time.perf_counter() - started
    stats = getattr(scorer, "stats_", None)
    if stats is None:
        timings.add("model", total)
        return scored
    load = 0.0
    if not loaded_before and getattr(scorer, "backend_", None) is not None:
        load = float(getattr(scorer, "load_s_", 0.0))
        timings.add("model_load", load)
    tokenise = float(getattr(stats, "tokenize_s", 0.0))
    model = float(getattr(stats, "model_s", 0.0))
    timings.add("tokenisation", tokenise)
    timings.add("model", model)
    timings.add("scoring_other", total - load - tokenise - model)
    return scored


def describe_stage(stage: Any) -> str:
    """A one-line description of a stage for logs and records: its parameters, briefly.

    Long values (a tokenizer, a model path, a store) are shortened to their type or file name.

    Example:
        >>> from evirank.segment import Windows
        >>> describe_stage(Windows(100, 50))
        'Windows(length=100, stride=50, title=True, max_title_words=50, max_passages=None)'
    """
    from evirank.stage import Pipeline

    if isinstance(stage, Pipeline):
        return " >> ".join(describe_stage(s) for s in stage.stages)
    params = []
    for key, value in vars(stage).items():
        if key.endswith("_") or key.startswith("_"):
            continue
        if isinstance(value, str | int | float | bool | tuple | type(None)):
            text = repr(value)
        elif isinstance(value, os.PathLike):
            text = repr(str(value))
        else:
            text = f"<{type(value).__name__}>"
        if len(text) > 80:
            text = text[:36] + "..." + text[-36:]
        params.append(f"{key}={text}")
    return f"{type(stage).__name__}({', '.join(params)})"


def save_passages(passages: pd.DataFrame, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write scored passages as Parquet, the columns of :data:`PASSAGE_FILE_COLUMNS` that exist.

    ``evirank tune --passages FILE`` reads this file (and so does pandas: ``pd.read_parquet``).

    Example:
        >>> import tempfile, pathlib
        >>> frame = pd.DataFrame({"qid": ["1"], "docno": ["d"], "pid": [0], "score": [0.5]})
        >>> path = save_passages(frame, pathlib.Path(tempfile.mkdtemp()) / "p.parquet")
        >>> pd.read_parquet(path).columns.tolist()
        ['qid', 'docno', 'pid', 'score']
    """
    require_columns(passages, (QID, DOCNO, SCORE), "save_passages")
    frame = passages[[c for c in PASSAGE_FILE_COLUMNS if c in passages.columns]].copy()
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    frame[SCORE] = frame[SCORE].astype(np.float64)
    out = Path(path)
    with atomic_output(out, overwrite=overwrite) as tmp:
        frame.to_parquet(tmp, index=False)
    logger.info("wrote %d scored passages to %s", len(frame), out)
    return out
