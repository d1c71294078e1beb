"""Training examples for relevance models: (query, text, label) rows with provenance.

Every builder returns an *Examples* frame with the columns of :data:`EXAMPLE_COLUMNS`::

    [qid, query, docno, pid, text, label, source]

``label`` is binary (1 relevant, 0 not), ``pid`` the unit's position in its document (0 for
a whole short text), and ``source`` says which collection and which builder made the row,
so a trained model's provenance can be written next to it.

Builders, one per kind of relevance judgement:

* :func:`short_text_examples` - short texts judged as a whole (Birch's Microblog recipe):
  the judged candidates of a run, graded labels collapsed to binary.
* :func:`document_examples` - documents with document-level qrels (Dai & Callan): every
  passage of a relevant document is relevant, passages of the run's non-relevant documents
  are not; a cap on passages per document; the title prepended.
* :func:`evidence_examples` - sentence-level gold (SciFact evidence): gold sentences are
  relevant, the other sentences of the same document and sentences of the run's
  non-relevant documents are not.
* :func:`read_pairs` - plain pair files (TSV ``query<TAB>text<TAB>label`` or JSONL).

:func:`split_by_query` splits by query, never by pair, so no query leaks into validation.

Example:
    >>> from evirank.frames import make_qrels, make_run, make_topics
    >>> topics = make_topics([("1", "bbc cuts")])
    >>> qrels = make_qrels([("1", "t1", 2), ("1", "t2", 0)])
    >>> run = make_run([("1", "t1", 3.0), ("1", "t2", 2.0), ("1", "t3", 1.0)])
    >>> texts = {"t1": "bbc world service cuts", "t2": "bbc weather", "t3": "cuts"}
    >>> short_text_examples(topics, qrels, run, texts)[["docno", "label"]].values.tolist()
    [['t1', 1], ['t2', 0]]
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np
import pandas as pd

from evirank.config.values import check_unicode_record
from evirank.errors import InputFormatError
from evirank.frames import (
    DOCNO,
    LABEL,
    PID,
    QID,
    QUERY,
    RANK,
    SOURCE,
    TEXT,
    TITLE,
    Document,
    natural_order,
    require_columns,
    sort_run,
)
from evirank.outputs import atomic_output

logger = logging.getLogger(__name__)

EXAMPLE_COLUMNS = (QID, QUERY, DOCNO, PID, TEXT, LABEL, SOURCE)
EVIDENCE = "evidence"  # column of an evidence frame: the list of gold sentence texts
# Row kinds the evidence builder appends to its ``source`` ("<source>/gold"...).
GOLD, SAME_DOC, RUN_NEGATIVE = "gold", "same-doc", "run-negative"
EVIDENCE_ROW_KINDS = (GOLD, SAME_DOC, RUN_NEGATIVE)

Unjudged: TypeAlias = Literal["skip", "negative"]
Corpus: TypeAlias = Mapping[str, Document] | Mapping[str, str] | pd.DataFrame
SplitText: TypeAlias = Callable[[str], Sequence[str]]  # text -> sentences or passages


class DocumentSegmenter(Protocol):
    """What :mod:`evirank.segment`'s ``Sentences`` and ``Windows`` offer: one document's segments."""

    def segments(self, title: str, text: str) -> list[str]:
        """The segments of one document (the segmenter applies its own title rule)."""


# --- the Examples frame ----------------------------------------------------------------
def make_examples(rows: Iterable[Sequence[Any]] | pd.DataFrame) -> pd.DataFrame:
    """Build an Examples frame [qid, query, docno, pid, text, label, source] with checked types.

    Args:
        rows: a frame with (at least) these columns, or tuples in this order.

    Raises:
        ValueError: if a label is not 0 or 1.

    Example:
        >>> make_examples([("1", "q", "d", 0, "some text", 1, "demo")]).dtypes["label"].kind
        'i'
    """
    if isinstance(rows, pd.DataFrame):
        frame = rows
    else:
        frame = pd.DataFrame(list(rows), columns=list(EXAMPLE_COLUMNS))
    require_columns(frame, EXAMPLE_COLUMNS, "Examples")
    frame = frame.loc[:, list(EXAMPLE_COLUMNS)].copy()
    for column in (QID, QUERY, DOCNO, TEXT, SOURCE):
        frame[column] = frame[column].astype(str)
    frame[PID] = frame[PID].astype(np.int64)
    frame[LABEL] = frame[LABEL].astype(np.int64)
    bad = ~frame[LABEL].isin([0, 1])
    if bad.any():
        found = sorted(frame.loc[bad, LABEL].unique().tolist())[:5]
        raise ValueError(f"Examples: labels must be 0 or 1, found {found} (binarise graded labels first)")
    return frame.reset_index(drop=True)


def summarize_examples(examples: pd.DataFrame) -> dict[str, Any]:
    """Counts that describe a set of examples: rows, queries, positives, per source.

    Written into a trained model's ``evirank-train.json`` as data provenance.

    Example:
        >>> ex = make_examples([("1", "q", "d", 0, "t", 1, "demo"), ("1", "q", "e", 0, "u", 0, "demo")])
        >>> summarize_examples(ex)["positives"]
        1
    """
    require_columns(examples, (QID, LABEL, SOURCE), "summarize_examples")
    per_source = {
        str(name): {
            "rows": len(group),
            "queries": int(group[QID].nunique()),
            "positives": int(group[LABEL].sum()),
        }
        for name, group in examples.groupby(SOURCE, sort=True)
    }
    return {
        "rows": len(examples),
        "queries": int(examples[QID].nunique()),
        "positives": int(examples[LABEL].sum()),
        "negatives": int(len(examples) - examples[LABEL].sum()),
        "sources": per_source,
    }


# --- helpers -----------------------------------------------------------------------------
def _documents(corpus: Corpus) -> Callable[[str], Document | None]:
    """A look-up docno -> Document over a mapping (of Documents or texts) or a frame."""
    if isinstance(corpus, pd.DataFrame):
        require_columns(corpus, (DOCNO, TEXT), "corpus")
        titles = (
            corpus[TITLE].fillna("").astype(str) if TITLE in corpus.columns else pd.Series("", corpus.index)
        )
        table = {
            str(d): Document(str(d), t, str(x))
            for d, t, x in zip(corpus[DOCNO], titles, corpus[TEXT], strict=True)
        }
        return table.get

    def lookup(docno: str) -> Document | None:
        value = corpus.get(docno)
        if value is None or isinstance(value, Document):
            return value
        return Document(docno, "", str(value))

    return lookup


def _queries(topics: pd.DataFrame, qids: Iterable[str], where: str) -> dict[str, str]:
    """Map qid -> query text; fail when no qid matches (a likely id-format mismatch)."""
    require_columns(topics, (QID, QUERY), f"{where}: topics")
    table = dict(zip(topics[QID].astype(str), topics[QUERY].astype(str), strict=True))
    wanted = sorted(set(qids))
    missing = [q for q in wanted if q not in table]
    if wanted and len(missing) == len(wanted):
        raise ValueError(
            f"{where}: no query id of the judgements/run is in the topics "
            f"(e.g. {missing[:3]} vs topics {sorted(table)[:3]}); do the id formats differ?"
        )
    if missing:
        logger.warning("%s: %d queries have no topic and are skipped: %s", where, len(missing), missing[:5])
    return table


def _check_unjudged(unjudged: str) -> None:
    if unjudged not in ("skip", "negative"):
        raise ValueError(f"unjudged must be 'skip' or 'negative', found {unjudged!r}")


def _cut(run: pd.DataFrame, depth: int | None) -> pd.DataFrame:
    require_columns(run, (QID, DOCNO), "run")
    if RANK not in run.columns:
        run = sort_run(run)
    run = run.assign(**{QID: run[QID].astype(str), DOCNO: run[DOCNO].astype(str)})
    return run if depth is None else run[run[RANK] <= depth]


def _judged(run: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
    """The run with the qrels' grade of each candidate (NaN where unjudged)."""
    require_columns(qrels, (QID, DOCNO, LABEL), "qrels")
    grades = qrels[[QID, DOCNO, LABEL]].astype({QID: str, DOCNO: str})
    grades = grades.drop_duplicates([QID, DOCNO], keep="last").rename(columns={LABEL: "_grade"})
    return run[[QID, DOCNO, RANK]].merge(grades, on=[QID, DOCNO], how="left")


def _empty() -> pd.DataFrame:
    return make_examples(pd.DataFrame({c: [] for c in EXAMPLE_COLUMNS}))


# --- builders --------------------------------------------------------------------------
def short_text_examples(
    topics: pd.DataFrame,
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    corpus: Corpus,
    *,
    unjudged: Unjudged = "skip",
    relevant_grade: int = 1,
    depth: int | None = None,
    source: str = "short-texts",
) -> pd.DataFrame:
    """Examples from short texts judged as a whole: the candidates of ``run`` with their qrels.

    Birch's Microblog recipe: each judged candidate tweet becomes one example; grades at or
    above ``relevant_grade`` are relevant (Microblog's 1 "relevant" and 2 "highly relevant"
    alike), lower grades (0, and -2 "spam") are not.

    Unjudged candidates are skipped by default: Birch trained on the judged tweets, and an
    unjudged candidate of a pooled collection is not known to be non-relevant (pools miss
    relevant documents, most of all for systems that did not contribute to them), so using
    them as negatives adds label noise. ``unjudged="negative"`` uses them as negatives,
    which helps where judgements are sparse.

    Args:
        topics: [qid, query].
        qrels: [qid, docno, label] with graded labels.
        run: the candidates [qid, docno, (score | rank)].
        corpus: docno -> text (a mapping of texts or Documents, or a frame [docno, text]).
        unjudged: "skip" or "negative".
        relevant_grade: the lowest grade counted as relevant.
        depth: keep only candidates ranked at most this deep (None: all).
        source: provenance written into every row.

    Returns:
        Examples in run order (qid, rank).
    """
    _check_unjudged(unjudged)
    candidates = _judged(_cut(run, depth), qrels)
    queries = _queries(topics, candidates[QID], "short_text_examples")
    if unjudged == "skip":
        candidates = candidates[candidates["_grade"].notna()]
    lookup = _documents(corpus)
    rows: list[tuple[Any, ...]] = []
    missing = 0
    for qid, docno, grade in zip(candidates[QID], candidates[DOCNO], candidates["_grade"], strict=True):
        if qid not in queries:
            continue
        document = lookup(docno)
        if document is None:
            missing += 1
            continue
        label = 0 if pd.isna(grade) else int(grade >= relevant_grade)
        rows.append((qid, queries[qid], docno, 0, document.contents, label, source))
    if missing:
        logger.warning(
            "short_text_examples(%s): %d candidates are not in the corpus, skipped", source, missing
        )
    return make_examples(rows) if rows else _empty()


def document_examples(
    topics: pd.DataFrame,
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    corpus: Corpus,
    *,
    segment: DocumentSegmenter | SplitText | None = None,
    max_passages: int | None = 4,
    negative_depth: int = 100,
    negatives_per_query: int | None = 10,
    unjudged: Unjudged = "negative",
    relevant_grade: int = 1,
    prepend_title: bool = True,
    source: str = "documents",
) -> pd.DataFrame:
    """Passage examples from document-level qrels, as Dai & Callan trained BERT-FirstP/MaxP.

    Every passage of a relevant document is labelled relevant (all relevant documents in the
    qrels, retrieved or not); passages of the run's top ``negative_depth`` documents that are
    not relevant are negatives, taking the ``negatives_per_query`` best-ranked such documents
    (hard negatives). Unjudged documents are negatives by default here: document collections
    such as SciFact judge about one document per query, so skipping them would leave almost
    no negatives.

    Args:
        topics: [qid, query].
        qrels: [qid, docno, label].
        run: the first stage's ranking [qid, docno, (score | rank)].
        corpus: docno -> Document (title + text) or text.
        segment: a segmenter of :mod:`evirank.segment` (e.g. ``Windows(150, 75)``, which applies
            its own title rule: pass the title-less document when ``prepend_title`` is False), or
            a plain callable text -> passages; None keeps the whole text as one passage. Use the
            segmenter that re-ranking will use, so training and inference see the same units.
        max_passages: at most this many passages per document, the first ones (None: all).
        negative_depth: negatives come from the run's top this many documents.
        negatives_per_query: at most this many negative documents per query (None: all).
        unjudged: "negative" or "skip" for documents of the run without judgement.
        relevant_grade: the lowest grade counted as relevant.
        prepend_title: write "title passage" as each passage's text (Dai & Callan).
        source: provenance written into every row.
    """
    _check_unjudged(unjudged)
    require_columns(qrels, (QID, DOCNO, LABEL), "qrels")
    judged_qrels = qrels.astype({QID: str, DOCNO: str})
    relevant = judged_qrels[judged_qrels[LABEL] >= relevant_grade]
    candidates = _judged(_cut(run, negative_depth), qrels)
    negatives = candidates[~(candidates["_grade"] >= relevant_grade)]
    if unjudged == "skip":
        negatives = negatives[negatives["_grade"].notna()]
    if negatives_per_query is not None:
        negatives = (
            negatives.sort_values([QID, RANK], kind="mergesort").groupby(QID).head(negatives_per_query)
        )
    queries = _queries(topics, pd.concat([relevant[QID], negatives[QID]]), "document_examples")
    lookup = _documents(corpus)
    units = [(q, d, 1) for q, d in zip(relevant[QID], relevant[DOCNO], strict=True)]
    units += [(q, d, 0) for q, d in zip(negatives[QID], negatives[DOCNO], strict=True)]
    rows: list[tuple[Any, ...]] = []
    missing = 0
    for qid, docno, label in units:
        document = lookup(docno)
        if qid not in queries:
            continue
        if document is None:
            missing += 1
            continue
        if segment is not None and hasattr(segment, "segments"):
            passages = list(segment.segments(document.title if prepend_title else "", document.text))
            titled = True  # the segmenter applied its title rule
        else:
            passages = list(segment(document.text)) if callable(segment) else [document.text]
            titled = not prepend_title or not document.title
        for pid, passage in enumerate(passages[:max_passages] if max_passages else passages):
            text = passage if titled else f"{document.title} {passage}".strip()
            rows.append((qid, queries[qid], docno, pid, text, label, source))
    if missing:
        logger.warning(
            "document_examples(%s): %d judged/retrieved documents are not in the corpus", source, missing
        )
    return make_examples(rows) if rows else _empty()


def _normalise(text: str) -> str:
    return " ".join(text.split())


def split_around(text: str, spans: Sequence[str], split_sentences: SplitText) -> list[tuple[str, bool]]:
    """Split ``text`` into sentences so that each gold span is exactly one unit.

    The gold spans are located in ``text`` (whitespace-insensitive); the stretches between
    them are split with ``split_sentences``. Returns (sentence, is_gold) in document order.
    Gold spans not found in ``text`` are returned at the end, as gold units.

    Example:
        >>> split = lambda t: t.replace(". ", ".|").split("|")
        >>> split_around("A b. C d. E f.", ["C d."], split)
        [('A b.', False), ('C d.', True), ('E f.', False)]
    """
    flat = _normalise(text)
    found: list[tuple[int, int]] = []
    lost: list[str] = []
    for span in dict.fromkeys(_normalise(s) for s in spans if s.strip()):
        start = flat.find(span)
        if start < 0:
            lost.append(span)
        else:
            found.append((start, start + len(span)))
    found.sort()
    units: list[tuple[str, bool]] = []
    cursor = 0
    for start, end in found:
        if start < cursor:  # overlapping gold spans: keep the first one whole
            continue
        units += [(s, False) for s in split_sentences(flat[cursor:start]) if s.strip()]
        units.append((flat[start:end], True))
        cursor = end
    units += [(s, False) for s in split_sentences(flat[cursor:]) if s.strip()]
    units += [(span, True) for span in lost]
    return [(s.strip(), gold) for s, gold in units]


def evidence_examples(
    topics: pd.DataFrame,
    evidence: pd.DataFrame,
    corpus: Corpus,
    split_sentences: SplitText,
    *,
    run: pd.DataFrame | None = None,
    qrels: pd.DataFrame | None = None,
    other_sentences: bool = True,
    negative_depth: int = 20,
    negatives_per_query: int | None = 3,
    max_sentences: int | None = None,
    relevant_grade: int = 1,
    prepend_title: bool = False,
    source: str = "evidence",
) -> pd.DataFrame:
    """Sentence examples from sentence-level gold (e.g. SciFact's rationales).

    For each (query, document) with gold evidence sentences: the gold sentences are relevant
    and, with ``other_sentences``, the document's other sentences are not. With a ``run``,
    the sentences of its top-ranked documents that are neither in ``evidence`` nor relevant
    in ``qrels`` are negatives too (``negatives_per_query`` documents from the top
    ``negative_depth``). Pass the document ``qrels`` so that a relevant document without
    gold sentences is never used as a negative.

    Args:
        topics: [qid, query].
        evidence: [qid, docno, evidence] with a list of gold sentence texts per row
            (see :func:`read_evidence`); several rows of one pair are merged.
        corpus: docno -> Document or text.
        split_sentences: a sentence splitter, text -> sentences.
        run: the first stage's ranking, for negatives from other documents (optional).
        qrels: document qrels; their relevant documents are never negatives (optional).
        other_sentences: label the relevant documents' non-gold sentences as negatives.
        negative_depth: negative documents come from the run's top this many.
        negatives_per_query: at most this many negative documents per query (None: all).
        max_sentences: at most this many sentences of a negative document (None: all).
        relevant_grade: the lowest qrels grade counted as relevant.
        prepend_title: write "title sentence" as each sentence's text.
        source: provenance; rows get ``source`` + "/gold", "/same-doc" or "/run-negative".
    """
    require_columns(evidence, (QID, DOCNO, EVIDENCE), "evidence")
    gold: dict[tuple[str, str], list[str]] = {}
    for qid, docno, sentences in zip(evidence[QID], evidence[DOCNO], evidence[EVIDENCE], strict=True):
        gold.setdefault((str(qid), str(docno)), []).extend(list(sentences))
    relevant = set(gold)
    if qrels is not None:
        require_columns(qrels, (QID, DOCNO, LABEL), "qrels")
        positive = qrels[qrels[LABEL] >= relevant_grade]
        relevant |= set(zip(positive[QID].astype(str), positive[DOCNO].astype(str), strict=True))
    negative_docs: list[tuple[str, str]] = []
    if run is not None:
        candidates = _cut(run, negative_depth).sort_values([QID, RANK], kind="mergesort")
        evidence_qids = {q for q, _ in gold}
        candidates = candidates[candidates[QID].isin(evidence_qids)]
        keep = [(q, d) not in relevant for q, d in zip(candidates[QID], candidates[DOCNO], strict=True)]
        candidates = candidates[keep]
        if negatives_per_query is not None:
            candidates = candidates.groupby(QID).head(negatives_per_query)
        negative_docs = list(zip(candidates[QID], candidates[DOCNO], strict=True))
    queries = _queries(topics, [q for q, _ in gold], "evidence_examples")
    lookup = _documents(corpus)

    def text_of(document: Document, sentence: str) -> str:
        return f"{document.title} {sentence}".strip() if prepend_title and document.title else sentence

    rows: list[tuple[Any, ...]] = []
    missing = 0
    for (qid, docno), spans in gold.items():
        document = lookup(docno)
        if qid not in queries:
            continue
        if document is None:
            missing += 1
            continue
        for pid, (sentence, is_gold) in enumerate(split_around(document.text, spans, split_sentences)):
            if is_gold:
                rows.append(
                    (qid, queries[qid], docno, pid, text_of(document, sentence), 1, f"{source}/{GOLD}")
                )
            elif other_sentences:
                rows.append(
                    (qid, queries[qid], docno, pid, text_of(document, sentence), 0, f"{source}/{SAME_DOC}")
                )
    for qid, docno in negative_docs:
        document = lookup(docno)
        if qid not in queries or document is None:
            missing += document is None
            continue
        sentences = [s for s in split_sentences(document.text) if s.strip()]
        for pid, sentence in enumerate(sentences[:max_sentences] if max_sentences else sentences):
            rows.append(
                (
                    qid,
                    queries[qid],
                    docno,
                    pid,
                    text_of(document, sentence.strip()),
                    0,
                    f"{source}/{RUN_NEGATIVE}",
                )
            )
    if missing:
        logger.warning("evidence_examples(%s): %d documents are not in the corpus, skipped", source, missing)
    return make_examples(rows) if rows else _empty()


# --- files -------------------------------------------------------------------------------
def read_evidence(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read sentence-level gold as JSONL ``{"query-id", "corpus-id", "evidence": [sentence, ...]}``.

    Returns a frame [qid, docno, evidence] (one row per line; :func:`evidence_examples`
    merges the rows of one pair).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "ev.jsonl"
        >>> _ = p.write_text('{"query-id": "1", "corpus-id": "d1", "evidence": ["A sentence."]}\\n')
        >>> read_evidence(p).values.tolist()
        [['1', 'd1', ['A sentence.']]]
    """
    from evirank.io.files import input_file, iter_lines

    path = input_file(path, "an evidence file (.jsonl)")
    rows = []
    for line_no, line in iter_lines(path):  # bytes that are not UTF-8 are named with their line
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            row = (str(record["query-id"]), str(record["corpus-id"]), record["evidence"])
        except (json.JSONDecodeError, RecursionError, KeyError, TypeError, IndexError) as exc:
            raise InputFormatError(
                path,
                line_no,
                'a JSON object {"query-id", "corpus-id", "evidence": [...]}',
                repr(line[:80]),
            ) from exc
        if not isinstance(row[2], list) or not all(isinstance(s, str) for s in row[2]):
            raise InputFormatError(path, line_no, "evidence as a list of sentence strings", repr(row[2])[:80])
        check_unicode_record(record, path, line_no)
        rows.append(row)
    return pd.DataFrame(rows, columns=[QID, DOCNO, EVIDENCE])


def query_id(query: str) -> str:
    """A stable id for a query known only by its text (pair files without qids).

    Example:
        >>> query_id("bbc cuts") == query_id("bbc cuts")
        True
    """
    return "q" + hashlib.sha1(query.encode("utf-8")).hexdigest()[:12]


def _label(value: Any, path: str | os.PathLike[str], line_no: int, relevant_grade: int) -> int:
    """An integer grade (int, integral float, or digits) binarised at ``relevant_grade``."""
    integral = isinstance(value, bool | int) or (isinstance(value, float) and value.is_integer())
    if integral or (isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value)):
        grade = int(value)
    else:
        raise InputFormatError(path, line_no, "an integer label (0/1 or a grade)", repr(value))
    return int(grade >= relevant_grade)


def read_pairs(
    path: str | os.PathLike[str], *, relevant_grade: int = 1, source: str | None = None
) -> pd.DataFrame:
    """Read a plain pair file into Examples.

    Formats (chosen by the file's suffix):

    * ``.tsv``: ``query<TAB>text<TAB>label`` per line (a first line ``query text label`` is a
      header and skipped);
    * ``.jsonl``: one object per line with ``query``, ``text``, ``label`` and optionally
      ``qid``, ``docno``, ``pid``, ``source`` (the format :func:`write_examples` writes).

    Queries without a ``qid`` get a stable one from their text (:func:`query_id`), so equal
    queries stay together when splitting; rows without a ``docno`` get their line number.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "pairs.tsv"
        >>> _ = p.write_text("bbc cuts\\tbbc world service cuts\\t1\\n")
        >>> read_pairs(p)[["query", "label"]].values.tolist()
        [['bbc cuts', 1]]
    """
    from evirank.io.files import input_file, iter_lines, type_name

    path = input_file(path, "a pair file (.tsv or .jsonl)")
    name = source or path.name
    rows: list[tuple[Any, ...]] = []
    suffix = path.suffix.lower()
    if suffix not in (".tsv", ".jsonl"):
        raise InputFormatError(path, None, "a .tsv or .jsonl pair file", f"suffix {path.suffix!r}")
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        if suffix == ".tsv":
            fields = line.split("\t")
            if len(fields) != 3:
                raise InputFormatError(
                    path, line_no, "3 tab-separated fields: query, text, label", f"{len(fields)} fields"
                )
            if line_no == 1 and [f.strip().lower() for f in fields] == ["query", "text", "label"]:
                continue
            query, text, label = fields
            _require_text(query, "query", path, line_no)
            _require_text(text, "text", path, line_no)
            rows.append(
                (
                    query_id(query),
                    query,
                    str(line_no),
                    0,
                    text,
                    _label(label, path, line_no, relevant_grade),
                    name,
                )
            )
            continue
        try:
            record = json.loads(line)
            query, text, label = record[QUERY], record[TEXT], record[LABEL]
        except (json.JSONDecodeError, RecursionError, KeyError, TypeError) as exc:
            raise InputFormatError(
                path, line_no, 'a JSON object with "query", "text", "label"', repr(line[:80])
            ) from exc
        check_unicode_record(record, path, line_no)  # a lone surrogate (an escape such as \ud800)
        for field, value in ((QUERY, query), (TEXT, text)):
            if not isinstance(value, str):
                raise InputFormatError(path, line_no, f'a string as "{field}"', type_name(value))
            _require_text(value, field, path, line_no)
        pid = record.get(PID, 0)
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < 2**31:
            raise InputFormatError(path, line_no, f'"{PID}" an integer from 0 to {2**31 - 1}', repr(pid))
        rows.append(
            (
                str(record.get(QID) or query_id(str(query))),
                str(query),
                str(record.get(DOCNO, line_no)),
                pid,
                str(text),
                _label(label, path, line_no, relevant_grade),
                str(record.get(SOURCE) or name),
            )
        )
    if not rows:
        raise InputFormatError(path, None, "at least one (query, text, label) pair", "an empty file")
    return make_examples(rows)


def _require_text(value: str, field: str, path: str | os.PathLike[str], line_no: int) -> None:
    """Refuse an empty (or blank) query or text: the model would learn from nothing."""
    if not value.strip():
        raise InputFormatError(path, line_no, f"a non-empty {field}", "an empty one")


def write_examples(examples: pd.DataFrame, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write Examples as JSONL (one object per row, every column), readable by :func:`read_pairs`.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "ex.jsonl"
        >>> ex = make_examples([("1", "q", "d", 0, "t", 1, "demo")])
        >>> read_pairs(write_examples(ex, p)).equals(ex)
        True
    """
    examples = make_examples(examples)
    with atomic_output(path, overwrite=overwrite) as tmp, open(tmp, "w", encoding="utf-8") as handle:
        for record in examples.to_dict(orient="records"):
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return Path(path)


# --- splits ------------------------------------------------------------------------------
def split_by_query(
    examples: pd.DataFrame, validation_fraction: float = 0.25, *, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split examples into (train, validation) by query: all rows of a query go to one side.

    Queries are ordered naturally and shuffled with ``seed``; the first
    ``round(validation_fraction * n)`` (at least one) go to validation. Birch sampled 25% of
    Microblog for validation.

    Raises:
        ValueError: if there are fewer than two queries or the fraction is not in (0, 1).

    Example:
        >>> ex = make_examples([(q, "q", "d", 0, "t", 1, "demo") for q in "1234"])
        >>> train, val = split_by_query(ex, 0.25)
        >>> len(train), len(val), set(train.qid) & set(val.qid)
        (3, 1, set())
    """
    if not 0 < validation_fraction < 1:
        raise ValueError(f"validation_fraction must be in (0, 1), found {validation_fraction}")
    require_columns(examples, (QID,), "split_by_query")
    qids = natural_order(examples[QID].astype(str))
    if len(qids) < 2:
        raise ValueError(f"split_by_query needs at least 2 queries, found {len(qids)}")
    order = np.random.default_rng(seed).permutation(len(qids))
    n_validation = min(len(qids) - 1, max(1, round(validation_fraction * len(qids))))
    validation_qids = {qids[i] for i in order[:n_validation]}
    return split_by_qids(examples, validation_qids)


def split_by_qids(
    examples: pd.DataFrame, validation_qids: Iterable[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split examples into (train, validation): rows of ``validation_qids`` go to validation.

    Example:
        >>> ex = make_examples([(q, "q", "d", 0, "t", 1, "demo") for q in "12"])
        >>> [len(f) for f in split_by_qids(ex, ["2"])]
        [1, 1]
    """
    require_columns(examples, (QID,), "split_by_qids")
    held_out = examples[QID].astype(str).isin({str(q) for q in validation_qids})
    return examples[~held_out].reset_index(drop=True), examples[held_out].reset_index(drop=True)
