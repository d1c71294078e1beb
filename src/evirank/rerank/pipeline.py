"""Re-rank a first-stage run by passage evidence, timing every stage.

:func:`rerank` is the ``evirank rerank`` command as a function: each query's top ``depth``
documents get their text, are segmented, scored (through the score store when the scorer has
one) and aggregated; the documents below ``depth`` follow in first-stage order
(:func:`evirank.aggregate.merge_tail`). The same steps compose as stages too::

    Bm25(index, k=1000) % 100 >> FetchText(index=index) >> Sentences() >> CrossEncoder(m) >> Birch()

:func:`parse_segment` (:mod:`evirank.segment.segment_spec`) and :func:`parse_aggregate`
(:mod:`evirank.aggregate.registry`) turn the command's ``--segment`` and ``--aggregate`` specs into
stages; they are defined once there and re-exported here.

Example:
    >>> from evirank.rerank import parse_aggregate, parse_segment
    >>> parse_segment("windows:150:75")
    Windows(length=150, stride=75, title=True, max_title_words=50, max_passages=1000)
    >>> parse_aggregate("birch:2", alpha=0.3, weights=[1.0, 0.5])
    Birch(alpha=0.3, normalise='minmax', top_n=2, weights=(1.0, 0.5))
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.aggregate.tail import merge_tail, ranked_run
from evirank.config import SETTINGS
from evirank.frames import (
    DOCNO,
    DOCUMENT_SCORE,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    QUERY,
    RANK,
    SCORE,
    TEXT,
    require_columns,
)
from evirank.outputs import atomic_output
from evirank.rerank.fetch import AddQueries
from evirank.rerank.timing import StageTimings
from evirank.score.multi import Scorers
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: Columns of a saved passages file (``--save-passages``), which ``evirank tune --passages`` reads.
PASSAGE_FILE_COLUMNS = (
    QID,
    QUERY,
    DOCNO,
    PID,
    TEXT,
    SCORE,
    DOCUMENT_SCORE,
    FIRST_STAGE_SCORE,
    FIRST_STAGE_RANK,
)


@dataclass
class RerankResult:
    """What :meth:`Rerank.run` (and :func:`rerank`) returns.

    Attributes:
        run: the re-ranked Run [qid, query, docno, score, rank, first_stage_score, first_stage_rank]:
            the re-ranked top ``depth``, then the rest in first-stage order.
        passages: the scored Passages of the re-ranked documents.
        timings: seconds per stage (see :mod:`evirank.rerank.timing`).
        counts: queries, documents re-ranked, passages, and the scorer's counters (distinct pairs,
            from the store, computed by the model, batches, tokens) when it keeps them.
        documents: the re-ranked documents as fetched: the first-stage rows of the top ``depth``
            with their query, title and text.
    """

    run: pd.DataFrame
    passages: pd.DataFrame
    timings: StageTimings
    counts: dict[str, int] = field(default_factory=dict)
    documents: pd.DataFrame = field(default_factory=pd.DataFrame)


#: ``guard(stage_name)``: a context manager entered around each stage (the service takes a lock and
#: checks its deadline there); its time is not counted in the stage's timing.
Guard = Callable[[str], AbstractContextManager[Any]]


class Rerank(Stage):
    """The re-ranking flow, defined once: fetch text, segment, (prune), score, aggregate, rank.

    ``evirank rerank``, the service (:class:`evirank.serve.Searcher`) and the Python API all run
    this object. Each query's top ``depth`` documents of a first-stage run get their text
    (``fetch``), are split into passages (``segmenter``), go through ``passage_stages`` (stages
    that keep, drop or annotate passages before the model, e.g. a cascade's pruning), are scored
    (``scorer``, through its score store when it has one: an interrupted run resumes) and
    aggregated (``aggregator``); the documents below ``depth`` follow in first-stage order
    (:func:`evirank.aggregate.merge_tail`). Every stage is timed under the names of
    :data:`evirank.rerank.timing.STAGES`.

    As a :class:`~evirank.stage.Stage` it maps a Run to the re-ranked Run, so it composes:
    ``Bm25(index) >> Rerank(Sentences(), BiEncoder(), Birch(), fetch=FetchText(index=index))``.

    Args:
        segmenter: documents -> passages (:class:`~evirank.segment.Sentences`, ``Windows``).
        scorer: passages -> scored passages (:class:`~evirank.score.CrossEncoder`, ``BiEncoder``, or
            any Stage that adds ``score``; :class:`~evirank.score.multi.Scorers` for several, each
            timed as one scorer).
        aggregator: scored passages -> Run (:class:`~evirank.aggregate.Birch`, MaxP, ...).
        fetch: adds title and text (:class:`~evirank.rerank.FetchText`); None when runs have ``text``.
        depth: documents re-ranked per query.
        passage_stages: stages run on the passages between segmentation and scoring, each timed
            under its ``timing_name`` attribute (default ``"pruning"``).
        topics: Topics [qid, query] for runs without a ``query`` column (queries without a topic
            are left out, with a warning).

    Example:
        >>> from evirank.aggregate import MaxP
        >>> from evirank.frames import make_run
        >>> from evirank.segment import Whole
        >>> class Length(Stage):
        ...     def transform(self, p):
        ...         return p.assign(score=p["text"].str.len().astype(float))
        >>> run = make_run([("1", "a", 2.0), ("1", "b", 1.0), ("1", "c", 0.5)])
        >>> run = run.assign(query="q", text=["short", "a longer text", "the longest text of all"])
        >>> result = Rerank(Whole(), Length(), MaxP(), depth=2).run(run)
        >>> result.run["docno"].tolist(), list(result.timings.as_dict())
        (['b', 'a', 'c'], ['segmentation', 'model', 'aggregation'])
    """

    def __init__(
        self,
        segmenter: Stage,
        scorer: Stage,
        aggregator: Stage,
        *,
        fetch: Stage | None = None,
        depth: int = SETTINGS.default("depth"),
        passage_stages: Sequence[Stage] = (),
        topics: pd.DataFrame | None = None,
    ) -> None:
        _check_depth(depth)
        self.fetch = fetch
        self.segmenter = segmenter
        self.passage_stages = tuple(passage_stages)
        self.scorer = scorer
        self.aggregator = aggregator
        self.depth = depth
        self.topics = topics

    def __repr__(self) -> str:
        return f"Rerank({describe_stage(self)}, depth={self.depth})"

    @property
    def stages(self) -> tuple[Stage, ...]:
        """The stages in the order they run: fetch (if any), segmenter, passage stages, scorer, aggregator."""
        head = (self.fetch,) if self.fetch is not None else ()
        return (*head, self.segmenter, *self.passage_stages, self.scorer, self.aggregator)

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The re-ranked Run of a first-stage Run."""
        return self.run(frame).run

    def run(
        self,
        run: pd.DataFrame,
        *,
        topics: pd.DataFrame | None = None,
        depth: int | None = None,
        timings: StageTimings | None = None,
        guard: Guard | None = None,
    ) -> RerankResult:
        """Re-rank each query's top ``depth`` documents of ``run``; the rest follow in first-stage order.

        Args:
            run: a first-stage Run [qid, docno, score] (+ rank, query, title, text when known).
            topics: Topics for a run without ``query`` (default: the pipeline's).
            depth: documents re-ranked per query (default: the pipeline's).
            timings: where to add the stage timings (a new one when None).
            guard: entered around each stage by name (see :data:`Guard`).

        Returns:
            A :class:`RerankResult`.
        """
        depth = self.depth if depth is None else _check_depth(depth)
        timings = StageTimings() if timings is None else timings
        step = _Steps(timings, guard)
        require_columns(run, (QID, DOCNO, SCORE), "rerank (run)")
        ranked = ranked_run(run)
        topics = self.topics if topics is None else topics
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
        if self.fetch is not None:
            with step("text_fetch"):
                head = self.fetch(head)
        require_columns(head, (TEXT,), "rerank (documents need text: give fetch=FetchText(...))")
        with step("segmentation"):
            passages = self.segmenter(head)
        passages = _with_run_columns(passages, head)
        logger.info("%d passages from %d documents", len(passages), len(head))
        segmented = len(passages)
        for stage in self.passage_stages:
            with step(str(getattr(stage, "timing_name", "pruning"))):
                passages = stage(passages)
        with step.scoring():
            if isinstance(self.scorer, Scorers):  # several scorers: each timed as one
                scored = self.scorer.transform(passages, run=step.score)
            else:
                scored = step.score(self.scorer, passages)
        require_columns(scored, (QID, DOCNO, PID, SCORE), "scorer output")
        with step("aggregation"):
            final = merge_tail(self.aggregator(scored), ranked)
        counts = {
            "queries": int(head[QID].nunique()),
            "documents_reranked": len(head),
            "documents_in_run": len(ranked),
            "passages": segmented,
        }
        if len(passages) != segmented:
            counts["passages_scored"] = len(passages)
        stats = getattr(self.scorer, "stats_", None)
        if stats is not None:
            for name in ("distinct", "cached", "embeddings_cached", "computed", "batches", "tokens"):
                counts[f"scorer_{name}"] = int(getattr(stats, name, 0))
        return RerankResult(final, scored, timings, counts, documents=head)


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
) -> RerankResult:
    """:meth:`Rerank.run` in one call (the ``evirank rerank`` command as a function).

    Example:
        >>> from evirank.aggregate import MaxP
        >>> from evirank.frames import Document, make_run, make_topics
        >>> from evirank.rerank import FetchText
        >>> from evirank.score import BiEncoder
        >>> from evirank.segment import Sentences
        >>> result = rerank(make_run([("1", "d1", 2.0)]), topics=make_topics([("1", "cats")]),
        ...                 fetch=FetchText(docs={"d1": Document("d1", "", "Cats purr.")}),
        ...                 segmenter=Sentences(), scorer=BiEncoder(), aggregator=MaxP())  # doctest: +SKIP
        >>> print(result.timings.table())  # doctest: +SKIP
    """
    pipeline = Rerank(segmenter, scorer, aggregator, fetch=fetch, depth=depth, topics=topics)
    return pipeline.run(run, timings=timings)


def _check_depth(depth: int) -> int:
    if not isinstance(depth, int) or depth < 1:
        raise ValueError(f"depth must be a positive integer, found {depth!r}")
    return depth


def _with_run_columns(passages: pd.DataFrame, head: pd.DataFrame) -> pd.DataFrame:
    """Passages with query and first_stage_score (from the run) when a segmenter left them out."""
    require_columns(passages, (QID, DOCNO, PID, TEXT), "segmenter output")
    if QUERY not in passages.columns:
        queries = head.drop_duplicates(QID).set_index(QID)[QUERY]
        passages = passages.assign(**{QUERY: passages[QID].map(queries)})
    if FIRST_STAGE_SCORE not in passages.columns:
        first = head[[QID, DOCNO, SCORE]].rename(columns={SCORE: FIRST_STAGE_SCORE})
        passages = passages.merge(first, on=[QID, DOCNO], how="left")
    return passages


class _Steps:
    """Enter the guard, then time the stage (the guard's own time is not the stage's)."""

    def __init__(self, timings: StageTimings, guard: Guard | None) -> None:
        self.timings = timings
        self.guard = guard

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        with self.guarded(name), self.timings.measure(name):
            yield

    def guarded(self, name: str) -> AbstractContextManager[Any]:
        return self.guard(name) if self.guard is not None else nullcontext()

    def scoring(self) -> AbstractContextManager[Any]:
        return self.guarded("scoring")

    def score(self, scorer: Stage, passages: pd.DataFrame) -> pd.DataFrame:
        """Run the scorer, splitting its time into model loading, tokenisation, model and the rest."""
        timings = self.timings
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
        'Windows(length=100, stride=50, title=True, max_title_words=50, max_passages=1000)'
    """
    from evirank.stage import Chain

    if isinstance(stage, Chain | Rerank):
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

    With several scorers, each one's ``score_<label>`` column is kept too (``score`` is the first's);
    ``evirank tune --evidence LABEL=FILE`` reads the label's column.

    ``evirank tune --passages FILE`` reads this file (and so does pandas: ``pd.read_parquet``).

    Example:
        >>> import tempfile, pathlib
        >>> frame = pd.DataFrame({"qid": ["1"], "docno": ["d"], "pid": [0], "score": [0.5]})
        >>> path = save_passages(frame, pathlib.Path(tempfile.mkdtemp()) / "p.parquet")
        >>> pd.read_parquet(path).columns.tolist()
        ['qid', 'docno', 'pid', 'score']
    """
    require_columns(passages, (QID, DOCNO, SCORE), "save_passages")
    evidence = [c for c in passages.columns if str(c).startswith(f"{SCORE}_")]  # several scorers'
    frame = passages[[c for c in PASSAGE_FILE_COLUMNS if c in passages.columns] + evidence].copy()
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    frame[SCORE] = frame[SCORE].astype(np.float64)
    out = Path(path)
    with atomic_output(out, overwrite=overwrite) as tmp:
        frame.to_parquet(tmp, index=False)
    logger.info("wrote %d scored passages to %s", len(frame), out)
    return out
