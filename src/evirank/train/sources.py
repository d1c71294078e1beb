"""Training examples straight from files: the builders of :mod:`evirank.train.examples` over
topics, qrels, runs and corpora as users have them (TREC, BEIR, Pyserini JSONL).

Each loader reads only the documents it needs from the corpus (one streaming pass) and
returns Examples whose ``source`` names the files, plus a provenance record for
``evirank-train.json``.

Example:
    >>> from evirank.train.sources import load_short_texts  # doctest: +SKIP
    >>> mb = "../shared/datasets/microblog/2011/"
    >>> files = [mb + "topics.microblog2011.txt", mb + "qrels.microblog2011.txt",
    ...          mb + "run.microblog2011.ql.txt", mb + "corpus.jsonl"]
    >>> examples, record = load_short_texts(*files)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evirank.errors import InputFormatError
from evirank.frames import DOCNO, LABEL, QID, QUERY, RANK, Document
from evirank.io import corpus_file, parse_document, read_qrels, read_run, read_topics
from evirank.io.files import iter_lines
from evirank.train.examples import (
    DocumentSegmenter,
    SplitText,
    Unjudged,
    document_examples,
    evidence_examples,
    read_evidence,
    short_text_examples,
)

if TYPE_CHECKING:
    from evirank.train.mine import HardNegatives

logger = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]
_ID = re.compile(r'"(?:_id|id|docid)"\s*:\s*"?([^",\s}]+)')


def _name(path: PathLike) -> str:
    p = Path(path)
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


def load_texts(corpus: PathLike, docnos: Iterable[str]) -> dict[str, Document]:
    """The wanted documents of a corpus, by docno, skipping documents without any text.

    Like :func:`evirank.io.load_texts` (one streaming pass, only wanted documents kept), but
    a document with neither title nor text is skipped with a warning instead of failing the
    whole read: it carries no training signal, and the real Microblog 2012 corpus has one.
    Only the wanted lines are parsed strictly (io's parser), which is also faster.
    """
    wanted = {str(d) for d in docnos}
    found: dict[str, Document] = {}
    file = corpus_file(corpus)
    for line_no, line in iter_lines(file):
        if len(found) == len(wanted):
            break
        if not line.strip() or not _maybe_wanted(line, wanted):
            continue
        try:
            document = parse_document(line, file, line_no)
        except InputFormatError as exc:
            if "no text at all" not in exc.found:
                raise
            logger.warning("%s:%d: document without text skipped", file, line_no)
            continue
        if document.docno in wanted:
            found.setdefault(document.docno, document)
    if len(found) < len(wanted):
        logger.warning(
            "%s: %d wanted documents are not in the corpus (or empty)", file, len(wanted) - len(found)
        )
    return found


def _maybe_wanted(line: str, wanted: set[str]) -> bool:
    """A cheap pre-filter on a JSONL line's id before strict parsing (unusual layouts pass)."""
    match = _ID.search(line)
    return match is None or match.group(1) in wanted


def _ranked(run: pd.DataFrame, depth: int | None) -> pd.DataFrame:
    return run if depth is None else run[run[RANK] <= depth]


def _mined(
    miner: HardNegatives,
    topics: pd.DataFrame,
    qids: Iterable[str],
    exclude: Iterable[tuple[str, str]],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The miner's negatives for ``qids`` (those with a topic), excluding ``exclude``."""
    table = dict(zip(topics[QID].astype(str), topics[QUERY].astype(str), strict=True))
    queries = {q: table[q] for q in sorted({str(q) for q in qids}) if q in table}
    return miner.mine(queries, exclude)


def load_short_texts(
    topics: PathLike,
    qrels: PathLike,
    run: PathLike,
    corpus: PathLike,
    *,
    unjudged: Unjudged = "skip",
    depth: int | None = None,
    relevant_grade: int = 1,
    topics_field: str = "title",
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`~evirank.train.examples.short_text_examples` from files (e.g. one Microblog year).

    Returns:
        (examples, provenance record).
    """
    topic_frame = read_topics(topics, field=topics_field)
    qrel_frame = read_qrels(qrels)
    candidates = _ranked(read_run(run), depth)
    wanted = (
        candidates[DOCNO] if unjudged == "negative" else candidates.merge(qrel_frame, on=[QID, DOCNO])[DOCNO]
    )
    texts = load_texts(corpus, wanted.unique())
    source = f"short-texts:{_name(qrels)}"
    examples = short_text_examples(
        topic_frame,
        qrel_frame,
        candidates,
        texts,
        unjudged=unjudged,
        relevant_grade=relevant_grade,
        source=source,
    )
    record = {
        "builder": "short_text_examples",
        "files": {"topics": str(topics), "qrels": str(qrels), "run": str(run), "corpus": str(corpus)},
        "options": {
            "unjudged": unjudged,
            "depth": depth,
            "relevant_grade": relevant_grade,
            "field": topics_field,
        },
        "source": source,
        "rows": len(examples),
    }
    return examples, record


def load_documents(
    topics: PathLike,
    qrels: PathLike,
    run: PathLike,
    corpus: PathLike,
    *,
    segment: DocumentSegmenter | SplitText | None = None,
    segment_name: str = "whole document",
    max_passages: int | None = 4,
    negative_depth: int = 100,
    negatives_per_query: int | None = 10,
    unjudged: Unjudged = "negative",
    relevant_grade: int = 1,
    prepend_title: bool = True,
    topics_field: str = "title",
    hard_negatives: HardNegatives | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`~evirank.train.examples.document_examples` from files (document-level qrels).

    With ``hard_negatives``, the negatives are mined from its ranking instead of ``run``'s
    (:mod:`evirank.train.mine`; its depth and count replace ``negative_depth`` and
    ``negatives_per_query``); the judged-relevant documents are never negatives.
    """
    topic_frame = read_topics(topics, field=topics_field)
    qrel_frame = read_qrels(qrels)
    qids = set(qrel_frame[QID])
    mined: dict[str, Any] | None = None
    if hard_negatives is not None:
        relevant = qrel_frame[qrel_frame[LABEL] >= relevant_grade]
        candidates, mined = _mined(
            hard_negatives, topic_frame, qids, zip(relevant[QID], relevant[DOCNO], strict=True)
        )
        negative_depth, negatives_per_query = int(candidates[RANK].max()) if len(candidates) else 1, None
    else:
        candidates = read_run(run)
    candidates = candidates[candidates[QID].isin(qids)]
    wanted = set(qrel_frame.loc[qrel_frame[LABEL] >= relevant_grade, DOCNO])
    wanted |= set(_ranked(candidates, negative_depth)[DOCNO])
    texts = load_texts(corpus, wanted)
    source = f"documents:{_name(qrels)}"
    examples = document_examples(
        topic_frame,
        qrel_frame,
        candidates,
        texts,
        segment=segment,
        max_passages=max_passages,
        negative_depth=negative_depth,
        negatives_per_query=negatives_per_query,
        unjudged=unjudged,
        relevant_grade=relevant_grade,
        prepend_title=prepend_title,
        source=source,
    )
    record = {
        "builder": "document_examples",
        "files": {"topics": str(topics), "qrels": str(qrels), "run": str(run), "corpus": str(corpus)},
        "options": {
            "segment": segment_name,
            "max_passages": max_passages,
            "negative_depth": negative_depth,
            "negatives_per_query": negatives_per_query,
            "unjudged": unjudged,
            "relevant_grade": relevant_grade,
            "prepend_title": prepend_title,
            "field": topics_field,
        },
        "source": source,
        "rows": len(examples),
    }
    if mined is not None:
        record["hard_negatives"] = mined
    return examples, record


def load_evidence(
    topics: PathLike,
    evidence: PathLike,
    qrels: PathLike,
    run: PathLike,
    corpus: PathLike,
    *,
    split_sentences: SplitText | None = None,
    splitter_name: str = "syntok (evirank.segment.Sentences)",
    other_sentences: bool = True,
    negative_depth: int = 20,
    negatives_per_query: int | None = 3,
    max_sentences: int | None = None,
    prepend_title: bool = False,
    topics_field: str = "title",
    hard_negatives: HardNegatives | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`~evirank.train.examples.evidence_examples` from files (e.g. SciFact's rationales).

    With ``hard_negatives``, the negative documents are mined from its ranking instead of
    ``run``'s (:mod:`evirank.train.mine`); documents relevant in the qrels or holding gold
    sentences are never negatives.
    """
    topic_frame = read_topics(topics, field=topics_field)
    gold = read_evidence(evidence)
    qrel_frame = read_qrels(qrels)
    mined: dict[str, Any] | None = None
    if hard_negatives is not None:
        relevant = qrel_frame[qrel_frame[LABEL] >= 1]
        exclude = set(zip(relevant[QID].astype(str), relevant[DOCNO].astype(str), strict=True))
        exclude |= set(zip(gold[QID].astype(str), gold[DOCNO].astype(str), strict=True))
        candidates, mined = _mined(hard_negatives, topic_frame, set(gold[QID].astype(str)), exclude)
        negative_depth, negatives_per_query = int(candidates[RANK].max()) if len(candidates) else 1, None
    else:
        candidates = read_run(run)
    candidates = candidates[candidates[QID].isin(set(gold[QID]))]
    wanted = set(gold[DOCNO]) | set(_ranked(candidates, negative_depth)[DOCNO])
    texts = load_texts(corpus, wanted)
    source = f"evidence:{_name(evidence)}"
    examples = evidence_examples(
        topic_frame,
        gold,
        texts,
        split_sentences or sentence_splitter(),
        run=candidates,
        qrels=qrel_frame,
        other_sentences=other_sentences,
        negative_depth=negative_depth,
        negatives_per_query=negatives_per_query,
        max_sentences=max_sentences,
        prepend_title=prepend_title,
        source=source,
    )
    record = {
        "builder": "evidence_examples",
        "files": {
            "topics": str(topics),
            "evidence": str(evidence),
            "qrels": str(qrels),
            "run": str(run),
            "corpus": str(corpus),
        },
        "options": {
            "splitter": splitter_name,
            "other_sentences": other_sentences,
            "negative_depth": negative_depth,
            "negatives_per_query": negatives_per_query,
            "max_sentences": max_sentences,
            "prepend_title": prepend_title,
            "field": topics_field,
        },
        "source": source,
        "rows": len(examples),
    }
    if mined is not None:
        record["hard_negatives"] = mined
    return examples, record


def sentence_splitter(splitter: str = "syntok") -> SplitText:
    """Text -> sentences with :class:`evirank.segment.Sentences` (the splitter re-ranking uses).

    Example:
        >>> sentence_splitter()("Fish swim. Birds fly.")
        ['Fish swim.', 'Birds fly.']
    """
    from evirank.segment import Sentences

    segmenter = Sentences(title="skip", splitter=splitter)

    def split(text: str) -> list[str]:
        return [s for s in segmenter.segments("", text) if s.strip()]

    return split
