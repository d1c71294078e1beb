"""Rank documents held in memory by their evidence: no index, no files.

The common case in two lines: long documents as strings (or dicts with an id, a title, a text and
any metadata), one query, and back come the documents ranked, each with its score, the terms that
make up that score, and its best passages with their character offsets in the document. Every
segmenter (sentences, windows, whole documents), every model family and every aggregator of the
command line can be used, and the same flow runs underneath (:class:`~evirank.rerank.Rerank`).

Unlike rerankers that cut a document at the model's input length (512 tokens), a document is split
into passages that each fit, every passage is scored, and the document's score aggregates them
(the best passage by default, MaxP, weighed with the first stage's score when one is given;
``birch:3`` for Birch's weighted top three).

Example:
    >>> import evirank
    >>> docs = ["Cats purr when they are content. Dogs bark.", "The stock market fell today."]
    >>> ranked = evirank.rank("why do cats purr", docs)  # doctest: +SKIP
    >>> ranked[0].id, ranked[0].evidence[0].text  # doctest: +SKIP
    ('0', 'Cats purr when they are content.')
    >>> ranker = evirank.Ranker(aggregate="birch:2")  # doctest: +SKIP
    >>> results = ranker.rank_many(["cats", "stocks"], docs)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evirank.config import SETTINGS, values
from evirank.config.runtime import RUNTIME_SETTINGS
from evirank.errors import ArgumentError
from evirank.frames import DOCNO, FIRST_STAGE_SCORE, PID, QID, QUERY, RANK, SCORE, TEXT, TITLE
from evirank.segment.budget import passage_budget
from evirank.segment.segment_spec import SegmentSpec
from evirank.segment.spans import locate_passages

logger = logging.getLogger(__name__)

#: The pipeline settings a :class:`Ranker` takes by keyword besides its named ones: the runtime's
#: (:class:`~evirank.config.Runtime`) and those that apply to documents held in memory.
IN_MEMORY_SETTINGS = (*RUNTIME_SETTINGS, "scorer_weights", "prune", "prune_by")

#: The keys of a document dict that are not metadata.
ID_KEYS = ("id", "_id", "docid", "docno")
TEXT_KEYS = ("text", "contents", "body")


@dataclass(frozen=True)
class ScoreTerm:
    """One term of a document's score: ``contribution = weight * value``.

    Attributes:
        name: ``first stage``, ``passage 1`` (the best passage), ``maxp of the passages``, or with
            several scorers ``LABEL: passage 1``.
        weight: the aggregator's weight of the term.
        value: what it weighs: the first-stage score or a passage score, as the aggregator read it
            (normalised per query unless the aggregator says ``normalise="none"``).
        contribution: weight x value; a document's contributions add up to its score.
    """

    name: str
    weight: float
    value: float
    contribution: float


@dataclass(frozen=True)
class Evidence:
    """A passage of a document with its model score and where it is in the document.

    Attributes:
        pid: its position among the document's passages (0-based).
        text: the passage as the model read it (with the title when the segmenter prepends it).
        score: the model's score (raw: a logit, a cosine, a probability, as the family gives it).
        field: ``"text"`` or ``"title"``: which field of the document ``start``/``end`` index.
        start: the character offset of the passage's first word in that field (None when the
            passage could not be located, e.g. a sentence splitter changed its characters).
        end: one past its last character.
    """

    pid: int
    text: str
    score: float
    field: str | None = None
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class RankedDocument:
    """A ranked document: its id, rank, score, the score's terms and the evidence passages.

    Attributes:
        id: the document's id (given, or its position in the list as a string).
        rank: 1 for the best.
        score: the aggregated score.
        terms: the score as a sum of :class:`ScoreTerm` (``sum(t.contribution) == score``).
        evidence: the document's best passages, best first (at most ``show_passages``).
        document: the document as given (a dict: its id, title, text and metadata).
        first_stage_score: the first-stage score given for it, if any.
        passages: how many of its passages the model read.
    """

    id: str
    rank: int
    score: float
    terms: tuple[ScoreTerm, ...]
    evidence: tuple[Evidence, ...]
    document: Mapping[str, Any] = field(default_factory=dict)
    first_stage_score: float | None = None
    passages: int = 0

    def explain(self) -> str:
        """The score's terms as one readable line.

        Example:
            >>> doc = RankedDocument("d", 1, 0.9, (ScoreTerm("passage 1", 1.0, 0.9, 0.9),), ())
            >>> doc.explain()
            '0.9000 = 1 x 0.9000 (passage 1)'
        """
        parts = " + ".join(f"{t.weight:.3g} x {t.value:.4f} ({t.name})" for t in self.terms)
        return f"{self.score:.4f} = {parts}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what ``evirank rank --json`` prints)."""
        return {
            "id": self.id,
            "rank": self.rank,
            "score": self.score,
            "first_stage_score": self.first_stage_score,
            "terms": [vars(t) for t in self.terms],
            "evidence": [vars(e) for e in self.evidence],
            "passages": self.passages,
            "document": dict(self.document),
        }


def _as_document(item: Any, position: int) -> dict[str, Any]:
    """A document dict with ``id``, ``title``, ``text`` (and metadata) from a string or a mapping.

    Raises:
        ArgumentError: not a string or a mapping, an id that is not a string or an integer, a title
            or text that is not a string, no text at all, or text that UTF-8 cannot hold.
    """
    if isinstance(item, str):
        doc: dict[str, Any] = {"id": str(position), "title": "", "text": item}
    elif isinstance(item, Mapping):
        doc = dict(item)
        key = next((k for k in ID_KEYS if k in doc), None)
        raw_id = doc.pop(key) if key is not None else str(position)
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
            raise ArgumentError(
                f"document {position}: expected its {key!r} to be a non-empty string or an integer, "
                f"found {raw_id!r}"
            )
        text_key = next((k for k in TEXT_KEYS if k in doc), None)
        text = doc.pop(text_key) if text_key is not None else ""
        title = doc.pop("title", "")
        doc = {"id": str(raw_id), "title": "" if title is None else title, "text": text, **doc}
    else:
        raise ArgumentError(
            f"document {position}: expected a string or a dict with a text, found {type(item).__name__}"
        )
    where = f"document {doc['id']!r} (position {position})"
    for name in ("title", "text"):
        if not isinstance(doc[name], str):
            raise ArgumentError(f"{where}: its {name} must be a string, found {type(doc[name]).__name__}")
    if not doc["text"].strip() and not doc["title"].strip():
        raise ArgumentError(f"{where} has no text (keys: text, contents or body)")
    found = values.find_lone_surrogate(doc)
    if found is not None:
        field_name, value, at = found
        raise ArgumentError(f"{where}: its {field_name} holds {values.surrogate_message(value, at)}")
    return doc


def _check_documents(documents: Any, what: str = "documents") -> list[Any]:
    """``documents`` as a list: any iterable of documents but a string, a bytes or a mapping."""
    if isinstance(documents, str | bytes | Mapping) or not hasattr(documents, "__iter__"):
        hint = (
            " (a dict: give its values, or a list of dicts with an id)"
            if isinstance(documents, Mapping)
            else ""
        )
        raise ArgumentError(
            f"{what}: expected a list of documents (strings, or dicts with an id, a title and a text), "
            f"found {type(documents).__name__}{hint}"
        )
    return list(documents)


def _check_first_stage(scores: Any, count: int, what: str) -> np.ndarray:
    """One finite first-stage score per document, as float64."""
    try:
        checked = values.finite_floats(scores, count, "first-stage scores (one per document)")
        return np.asarray(checked, dtype=np.float64)
    except ValueError as exc:
        raise ArgumentError(f"{what}: {exc}") from None


def _check_arguments(
    queries: Any, documents: Any, first_stage_scores: Any, top: Any
) -> tuple[list[str], list[list[Any]], list[Any] | None, int | None]:
    """The queries, one list of documents per query, one list of first-stage scores per query (or
    None) and ``top`` of :meth:`Ranker.rank_many`, checked.

    Raises:
        ArgumentError: naming the argument, what was expected and what was found.
    """
    top = None if top is None else SETTINGS.check_argument("top", top)
    if isinstance(queries, str | bytes) or not hasattr(queries, "__iter__"):
        raise ArgumentError(
            f"queries: expected a list of queries (one query: Ranker.rank), found {type(queries).__name__}"
        )
    queries = [
        SETTINGS.check_argument("query", q, f"queries[{i}]", required=True) for i, q in enumerate(queries)
    ]
    documents = _check_documents(documents)
    per_query = bool(documents) and all(
        hasattr(d, "__iter__") and not isinstance(d, str | bytes | Mapping) for d in documents
    )
    if per_query:
        doc_lists = [_check_documents(d, f"documents[{i}]") for i, d in enumerate(documents)]
    else:
        doc_lists = [documents] * len(queries)
    if len(doc_lists) != len(queries):
        raise ArgumentError(f"{len(queries)} queries but {len(doc_lists)} lists of documents")
    if first_stage_scores is None:
        return queries, doc_lists, None, top
    if isinstance(first_stage_scores, str | bytes) or not hasattr(first_stage_scores, "__iter__"):
        raise ArgumentError(
            "first_stage_scores: expected one list of scores per query, found "
            f"{type(first_stage_scores).__name__} {first_stage_scores!r}"
        )
    score_lists = list(first_stage_scores)
    if len(score_lists) != len(queries):
        raise ArgumentError(f"{len(queries)} queries but {len(score_lists)} lists of first-stage scores")
    return queries, doc_lists, score_lists, top


class Ranker:
    """Rank in-memory documents by their passages' evidence; the model loads once, on first use.

    Every setting left out takes the default every front end shares (the settings table,
    :data:`evirank.config.SETTINGS`): ``evirank rank``, ``evirank rerank`` and ``evirank serve``
    rank the same documents the same way.

    Args:
        model: a Hugging Face id or a local folder (None: the offline all-MiniLM-L6-v2 bi-encoder).
        scorer: the model family (``auto``: told from the model's files; see
            :func:`evirank.score.family_names`), scorer specs ``[LABEL=]FAMILY[:MODEL]`` (a list:
            several scorers' evidence), or a scorer object (any Stage adding ``score``).
        segment: a segmenter spec (``sentences``, ``sentences:prepend``, ``windows:150:75``,
            ``whole``) or a segmenter object; passages are cut to fit the model's input.
        aggregate: an aggregator spec (``maxp``, ``firstp``, ``sump``, ``meanp``, ``birch:N``).
        alpha: the first-stage weight (None: the default when first-stage scores are given, else
            0: without them there is nothing to interpolate).
        weights: Birch's top-n weights (None: 1, 1/2, 1/4, ...).
        normalise: ``"minmax"`` or ``"none"`` (None: ``minmax`` when first-stage scores are given,
            so alpha mixes comparable scales; else ``none``, so scores are the model's own).
        show_passages: evidence passages kept per document.
        max_passages: passages per document (its first ones; 0: no limit).
        device: ``auto``, ``cpu``, ``cuda``, ``mps``.
        store: a score store (a ``.sqlite`` file or a folder), to reuse scores across calls and runs.
        options: any other setting of the pipeline that applies to documents in memory (the
            runtime's ``backend``, ``dtype``, ``batch_tokens``, ``max_length``, ...; ``scorer_weights``,
            ``prune``, ``prune_by``), and the family's own keyword arguments (an LLM's ``instruction``).

    Example:
        >>> ranker = Ranker(segment="windows:100:50", aggregate="maxp")  # doctest: +SKIP
        >>> best = ranker.rank("effects of aspirin", long_documents)[0]  # doctest: +SKIP
        >>> print(best.explain())  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        scorer: Any = None,
        segment: Any = None,
        aggregate: str | None = None,
        alpha: float | None = None,
        weights: Sequence[float] | None = None,
        normalise: str | None = None,
        show_passages: int | None = None,
        max_passages: int | None = None,
        device: str | None = None,
        store: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        from evirank.pipeline import Pipeline, PipelineSpec, build_pipeline

        show = SETTINGS.default("show_passages") if show_passages is None else show_passages
        show = SETTINGS.check_argument("show_passages", show)
        given_scorer = scorer if isinstance(scorer, str | list | tuple) or scorer is None else None
        given_segment = segment if isinstance(segment, str) or segment is None else None
        if given_segment is None and segment is not None and not callable(getattr(segment, "segments", None)):
            raise ArgumentError(
                "segment: expected a segmenter spec (sentences, windows[:LENGTH[:STRIDE]], whole) or a "
                f"segmenter (an object with .segments(title, text)), found {type(segment).__name__}"
            )
        settings = {k: options.pop(k) for k in IN_MEMORY_SETTINGS if k in options}
        # the one builder, as the command line's: the spec is parsed (and the model's family told
        # from its files) now, so a bad spec fails before any model loads
        self.spec_ = PipelineSpec.from_mapping(
            {
                "scorer": [given_scorer] if isinstance(given_scorer, str) else given_scorer,
                "model": None if model is None else str(model),
                "segment": given_segment,
                "max_passages": max_passages,
                "aggregate": aggregate,
                "alpha": alpha,
                "weights": weights,
                "normalise": normalise,
                "device": device,
                "scorer_options": options,
                **settings,
            }
        )
        object_scorer = not (scorer is None or isinstance(scorer, str | list | tuple))
        self.pipeline_: Pipeline | None = None
        self.scorer = scorer
        if not object_scorer:
            self.pipeline_ = build_pipeline(self.spec_, store=store)
            self.scorer = self.pipeline_.scorer
        object_segmenter = segment is not None and given_segment is None
        self.segment = segment if object_segmenter else self.spec_.segment
        self.segmenter_: Any = None
        if self.pipeline_ is not None and not object_segmenter:
            self.segmenter_ = self.pipeline_.segmenter
        self.show_passages = show
        self.max_passages = self.spec_.max_passages
        self.alpha = alpha
        self.normalise = normalise

    def _segmenter(self) -> Any:
        if self.segmenter_ is None:
            segment = (
                self.segment if self.segment is not None else SegmentSpec.parse(self.spec_.default_segment)
            )
            if hasattr(segment, "build"):
                budget = passage_budget(self.scorer)
                built = segment.build(
                    tokenizer=budget[0] if budget else None, max_tokens=budget[1] if budget else None
                )
            else:
                built = segment
            self.segmenter_ = built.with_max_passages(self.max_passages or None)
        return self.segmenter_

    def _aggregator(self, has_first_stage: bool) -> Any:
        """The spec's aggregator; without first-stage scores, the passages' evidence alone (alpha 0)
        on the model's own scale (no normalisation)."""
        spec = self.spec_
        if not has_first_stage:
            changes = {"alpha": 0.0 if self.alpha is None else self.alpha}
            if self.normalise is None:
                changes["aggregate"] = spec.aggregate.__class__.parse(
                    spec.aggregate.spec, "none", scorers=spec.aggregate.scorers
                )
            spec = spec.with_changes(**changes)
        return spec.aggregator()

    def rank(
        self,
        query: str,
        documents: Sequence[Any],
        *,
        first_stage_scores: Sequence[float] | None = None,
        top: int | None = None,
    ) -> list[RankedDocument]:
        """The documents ranked for ``query``, best first (see :class:`RankedDocument`).

        Args:
            query: the query text.
            documents: strings, or dicts with an id (``id``/``_id``/``docid``), a ``title`` and a
                ``text`` (or ``contents``/``body``); other keys are kept as metadata.
            first_stage_scores: one score per document (BM25, say), interpolated by ``alpha``.
            top: keep the best ``top`` documents (None: all).
        """
        query = SETTINGS.check_argument("query", query, required=True)
        documents = _check_documents(documents)
        checked = _check_arguments(
            [query], [documents], None if first_stage_scores is None else [first_stage_scores], top
        )
        return self._rank(*checked, one_query=True)[0]

    def rank_many(
        self,
        queries: Sequence[str],
        documents: Sequence[Any],
        *,
        first_stage_scores: Sequence[Sequence[float]] | None = None,
        top: int | None = None,
        max_passages: int | None = None,
    ) -> list[list[RankedDocument]]:
        """:meth:`rank` for many queries in one model pass (batches shared across queries).

        ``documents`` is one list for every query, or one list per query (a list of lists).
        ``max_passages`` reads only each document's first passages in this call (None: the
        ranker's own limit).
        """
        checked = _check_arguments(queries, documents, first_stage_scores, top)
        if max_passages is not None:
            max_passages = SETTINGS.check_argument("max_passages", max_passages)
        return self._rank(*checked, one_query=False, max_passages=max_passages or None)

    def _rank(
        self,
        queries: list[str],
        doc_lists: list[list[Any]],
        score_lists: list[Any] | None,
        top: int | None,
        *,
        one_query: bool,
        max_passages: int | None = None,
    ) -> list[list[RankedDocument]]:
        from evirank.rerank import Rerank

        frames, given = [], []
        for q_index, (query, docs) in enumerate(zip(queries, doc_lists, strict=True)):
            parsed = [_as_document(d, i) for i, d in enumerate(docs)]
            ids = [d["id"] for d in parsed]
            if len(set(ids)) != len(ids):
                repeated = sorted({i for i in ids if ids.count(i) > 1})
                raise ArgumentError(f"document ids must differ; repeated: {', '.join(repeated[:5])}")
            scores = np.zeros(len(parsed))
            if score_lists is not None:
                what = "first_stage_scores" if one_query else f"first_stage_scores[{q_index}]"
                scores = _check_first_stage(score_lists[q_index], len(parsed), what)
            given.append({d["id"]: d for d in parsed})
            frames.append(
                pd.DataFrame(
                    {
                        QID: str(q_index),
                        QUERY: query,
                        DOCNO: ids,
                        SCORE: scores,
                        TITLE: [d["title"] for d in parsed],
                        TEXT: [d["text"] for d in parsed],
                    }
                )
            )
        run = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if run.empty:
            return [[] for _ in queries]
        aggregator = self._aggregator(score_lists is not None)
        depth = int(run.groupby(QID).size().max())
        cascade = self.pipeline_.reranker.passage_stages if self.pipeline_ is not None else ()
        segmenter = self._segmenter()
        if max_passages is not None:
            segmenter = segmenter.with_max_passages(max_passages)
        result = Rerank(segmenter, self.scorer, aggregator, depth=depth, passage_stages=cascade).run(run)
        passages = result.passages
        terms = aggregator.terms(passages)
        grouped = _Grouped.of(result.run, passages, terms, score_lists is not None)
        return [self._results(str(i), given[i], grouped, top) for i in range(len(queries))]

    def _results(
        self, qid: str, docs: Mapping[str, Mapping[str, Any]], grouped: _Grouped, top: int | None
    ) -> list[RankedDocument]:
        ranked = grouped.runs.get(qid, [])
        if top is not None:
            ranked = ranked[:top]
        out = []
        for docno, rank, score, first in ranked:
            doc = docs[docno]
            rows = grouped.passages.get((qid, docno))
            evidence: list[Evidence] = []
            if rows and self.show_passages:
                ordered = sorted(rows, key=lambda r: r[0])  # by pid (stable)
                spans = locate_passages([text for _, text, _ in ordered], doc["title"], doc["text"])
                located = {pid: span for (pid, _, _), span in zip(ordered, spans, strict=True)}
                best = sorted(rows, key=lambda r: (-r[2], r[0]))[: self.show_passages]
                for pid, text, passage_score in best:
                    fld, start, end = located[pid]
                    evidence.append(Evidence(pid, text, passage_score, fld, start, end))
            out.append(
                RankedDocument(
                    id=docno,
                    rank=rank,
                    score=score,
                    terms=tuple(grouped.terms.get((qid, docno), ())),
                    evidence=tuple(evidence),
                    document=doc,
                    first_stage_score=first,
                    passages=0 if rows is None else len(rows),
                )
            )
        return out


@dataclass
class _Grouped:
    """A re-ranking's run, passages and score terms, grouped once by query (and document) as plain
    Python values, so each query's results are read without filtering the frames again.

    Attributes:
        runs: per qid, (docno, rank, score, first-stage score or None), best first.
        passages: per (qid, docno), (pid, text, score) in the passages frame's order.
        terms: per (qid, docno), the score's terms in the terms frame's order.
    """

    runs: dict[str, list[tuple[str, int, float, float | None]]]
    passages: dict[tuple[str, str], list[tuple[int, str, float]]]
    terms: dict[tuple[str, str], list[ScoreTerm]]

    @classmethod
    def of(
        cls, run: pd.DataFrame, passages: pd.DataFrame, terms: pd.DataFrame, first_stage: bool
    ) -> _Grouped:
        ordered = run.sort_values([QID, RANK], kind="mergesort")
        runs: dict[str, list[tuple[str, int, float, float | None]]] = {}
        firsts = ordered[FIRST_STAGE_SCORE].tolist() if first_stage else [None] * len(ordered)
        for qid, docno, rank, score, first in zip(
            ordered[QID].astype(str).tolist(),
            ordered[DOCNO].astype(str).tolist(),
            ordered[RANK].tolist(),
            ordered[SCORE].tolist(),
            firsts,
            strict=True,
        ):
            runs.setdefault(qid, []).append(
                (docno, int(rank), float(score), None if first is None else float(first))
            )
        by_doc: dict[tuple[str, str], list[tuple[int, str, float]]] = {}
        for qid, docno, pid, text, score in zip(
            passages[QID].astype(str).tolist(),
            passages[DOCNO].astype(str).tolist(),
            passages[PID].tolist(),
            passages[TEXT].tolist(),
            passages[SCORE].tolist(),
            strict=True,
        ):
            by_doc.setdefault((qid, docno), []).append((int(pid), str(text), float(score)))
        by_term: dict[tuple[str, str], list[ScoreTerm]] = {}
        for qid, docno, name, weight, value, contribution in zip(
            terms[QID].astype(str).tolist(),
            terms[DOCNO].astype(str).tolist(),
            terms["term"].tolist(),
            terms["weight"].tolist(),
            terms["value"].tolist(),
            terms["contribution"].tolist(),
            strict=True,
        ):
            by_term.setdefault((qid, docno), []).append(
                ScoreTerm(str(name), float(weight), float(value), float(contribution))
            )
        return cls(runs, by_doc, by_term)


def rank(
    query: str,
    documents: Sequence[Any],
    model: str | os.PathLike[str] | None = None,
    *,
    first_stage_scores: Sequence[float] | None = None,
    top: int | None = None,
    **options: Any,
) -> list[RankedDocument]:
    """Rank ``documents`` for ``query`` by their passages' evidence (a one-off :class:`Ranker`).

    Args:
        query: the query text.
        documents: strings, or dicts with an id, a title, a text and any metadata.
        model: a Hugging Face id or a local folder (None: the offline all-MiniLM-L6-v2 bi-encoder).
        first_stage_scores: one score per document to interpolate (e.g. BM25).
        top: keep the best ``top`` documents.
        options: :class:`Ranker`'s settings (``scorer``, ``segment``, ``aggregate``, ``device``, ...).

    Example:
        >>> ranked = rank("why do cats purr", ["Cats purr when content.", "Stocks fell."])  # doctest: +SKIP
        >>> [(d.id, round(d.score, 3)) for d in ranked]  # doctest: +SKIP
        [('0', 1.0), ('1', 0.0)]
    """
    return Ranker(model, **options).rank(query, documents, first_stage_scores=first_stage_scores, top=top)
