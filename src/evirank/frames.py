"""The column vocabulary and the central frames: Topics, Qrels, Run, Passages.

Every stage passes pandas DataFrames whose column names come from this module, so the
names are written once. A passage's identity is structural, (qid, docno, pid), never a
string such as ``doc%p3``.

Frames:
    Topics   [qid, query]
    Qrels    [qid, docno, label]
    Run      [qid, docno, score, rank] (+ optional query, text, title, first_stage_score)
    Passages [qid, docno, pid, text] (+ query, score, first_stage_score, first_stage_rank)
    PerQuery [qid, measure, value] (+ run when several runs are compared)

Ranking order is deterministic everywhere (writers, evaluation, aggregation): score
descending, then docno descending (trec_eval's own tie rule, so the rank column we write is
exactly the order trec_eval evaluates); qids in natural order (numeric when all qids are
integers, otherwise lexicographic).

Example:
    >>> run = make_run([("q1", "d1", 1.0), ("q1", "d2", 1.0), ("q1", "d3", 2.0)])
    >>> run[["docno", "rank"]].values.tolist()
    [['d3', 1], ['d2', 2], ['d1', 3]]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pandas as pd

from evirank.errors import ColumnsError

T = TypeVar("T")

# --- column names -------------------------------------------------------------------
QID = "qid"
QUERY = "query"
DOCNO = "docno"
TITLE = "title"
TEXT = "text"
SCORE = "score"
RANK = "rank"
LABEL = "label"
PID = "pid"
FIRST_STAGE_SCORE = "first_stage_score"
FIRST_STAGE_RANK = "first_stage_rank"
#: a document-level scorer's score of the whole document, on each of its passages (PARADE)
DOCUMENT_SCORE = "document_score"
SOURCE = "source"  # provenance of a training example (which collection and builder made it)
# evaluation: per-query tables [run, qid, measure, value]
RUN = "run"
MEASURE = "measure"
VALUE = "value"

TOPICS_COLUMNS = (QID, QUERY)
#: A document's source (a web address), when its corpus gives one (see :class:`Document`).
URL = "url"
QRELS_COLUMNS = (QID, DOCNO, LABEL)
RUN_COLUMNS = (QID, DOCNO, SCORE, RANK)
PASSAGES_COLUMNS = (QID, DOCNO, PID, TEXT)


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a corpus: its id, an optional title, its body text, and where it comes from.

    ``url`` is the document's source (a web page, an article) when the corpus gives one: stored with
    the document and linked from the search page, never indexed; two documents with the same id,
    title and text are equal whatever their sources.

    Example:
        >>> Document("d1", "A title", "Some text.").contents
        'A title Some text.'
        >>> Document("d2", "", "Text.", url="https://example.org/d2")
        Document(docno='d2', title='', text='Text.', url='https://example.org/d2')
    """

    docno: str
    title: str
    text: str
    url: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        source = f", url={self.url!r}" if self.url else ""
        return f"Document(docno={self.docno!r}, title={self.title!r}, text={self.text!r}{source})"

    @property
    def contents(self) -> str:
        """Title and text as one field, the way Anserini indexes BEIR corpora."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


def require_columns(frame: pd.DataFrame, columns: Iterable[str], where: str) -> None:
    """Raise :class:`ColumnsError` unless ``frame`` has every name in ``columns``.

    Example:
        >>> require_columns(pd.DataFrame({"qid": []}), ["qid"], "demo")
    """
    needed = list(columns)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"{where}: expected a pandas DataFrame, found {type(frame).__name__}")
    if any(c not in frame.columns for c in needed):
        raise ColumnsError(where, needed, frame.columns)


_WHOLE_NUMBER = re.compile(r"[0-9]+")


def natural_order(qids: Iterable[T]) -> list[T]:
    """Distinct query ids in natural order: numeric when every id is a whole number, else as text.

    The one rule for qid order everywhere (runs, qrels, tables, folds, splits).

    Example:
        >>> natural_order(["10", "9", "100", "9"])
        ['9', '10', '100']
        >>> natural_order(["q10", "q9", "1"])
        ['1', 'q10', 'q9']
    """
    items = list(dict.fromkeys(qids))
    texts = [str(q) for q in items]
    if texts and all(_WHOLE_NUMBER.fullmatch(t) for t in texts):
        keys: list[tuple[int, str]] = [(int(t), t) for t in texts]
        order = sorted(range(len(items)), key=keys.__getitem__)
    else:
        order = sorted(range(len(items)), key=texts.__getitem__)
    return [items[i] for i in order]


def natural_key(qids: pd.Series) -> pd.Series:
    """A sort key for a column of qids that follows :func:`natural_order` (one integer per row).

    Example:
        >>> natural_key(pd.Series(["10", "9", "10"])).tolist()
        [1, 0, 1]
    """
    as_str = qids.astype(str)
    order = natural_order(pd.unique(as_str).tolist())
    codes = pd.Categorical(as_str, categories=order, ordered=True).codes
    return pd.Series(codes.astype(np.int64), index=qids.index)


def sort_run(run: pd.DataFrame) -> pd.DataFrame:
    """Order a run deterministically and (re)assign ranks 1..n within each query.

    Order: qid (natural), score descending, docno descending (as trec_eval breaks ties).
    Returns a new frame.
    """
    require_columns(run, (QID, DOCNO, SCORE), "sort_run")
    if len(pd.unique(run[QID].astype(str))) <= 1:
        # One query (every request of the service): the same order without the qid key and groupby.
        scores, docnos = run[SCORE].tolist(), run[DOCNO].tolist()
        if all(isinstance(d, str) for d in docnos) and not any(s != s for s in scores):
            # Python's sort is stable with reverse=True too: rows tied on both keep their order
            order = sorted(range(len(run)), key=lambda i: (scores[i], docnos[i]), reverse=True)
            out = run.take(order)
        else:  # NaN scores or docnos of other types: pandas' rules for them
            out = run.sort_values([SCORE, DOCNO], ascending=[False, False], kind="mergesort")
        out = out.reset_index(drop=True)
        out[RANK] = np.arange(1, len(out) + 1, dtype=np.int64)
        return out
    out = run.copy()
    out["_qkey"] = natural_key(out[QID])
    out = out.sort_values(["_qkey", SCORE, DOCNO], ascending=[True, False, False], kind="mergesort")
    out = out.drop(columns="_qkey").reset_index(drop=True)
    out[RANK] = out.groupby(QID, sort=False).cumcount().astype(np.int64) + 1
    return out


def make_topics(rows: Iterable[tuple[str, str]] | pd.DataFrame) -> pd.DataFrame:
    """Build a Topics frame [qid, query] with string columns.

    Example:
        >>> make_topics([("1", "bm25 ranking")]).columns.tolist()
        ['qid', 'query']
    """
    frame = pd.DataFrame(rows, columns=list(TOPICS_COLUMNS)) if not isinstance(rows, pd.DataFrame) else rows
    require_columns(frame, TOPICS_COLUMNS, "Topics")
    frame = frame.copy()
    frame[QID] = frame[QID].astype(str)
    frame[QUERY] = frame[QUERY].astype(str)
    return frame.reset_index(drop=True)


def make_qrels(rows: Iterable[tuple[str, str, int]] | pd.DataFrame) -> pd.DataFrame:
    """Build a Qrels frame [qid, docno, label] (label an integer grade).

    Example:
        >>> make_qrels([("1", "d1", 2)]).dtypes["label"].kind
        'i'
    """
    frame = pd.DataFrame(rows, columns=list(QRELS_COLUMNS)) if not isinstance(rows, pd.DataFrame) else rows
    require_columns(frame, QRELS_COLUMNS, "Qrels")
    frame = frame.copy()
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    frame[LABEL] = frame[LABEL].astype(np.int64)
    return frame.reset_index(drop=True)


def make_run(rows: Iterable[tuple[str, str, float]] | pd.DataFrame) -> pd.DataFrame:
    """Build a Run frame [qid, docno, score, rank], sorted deterministically (see :func:`sort_run`).

    Extra columns of a DataFrame input are kept.
    """
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows), columns=[QID, DOCNO, SCORE])
    require_columns(frame, (QID, DOCNO, SCORE), "Run")
    frame = frame.copy()
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    frame[SCORE] = frame[SCORE].astype(np.float64)
    return sort_run(frame)


def make_passages(rows: Sequence[tuple[str, str, int, str]] | pd.DataFrame) -> pd.DataFrame:
    """Build a Passages frame [qid, docno, pid, text] (pid: the passage's position in its document).

    Example:
        >>> make_passages([("1", "d1", 0, "First sentence.")]).columns.tolist()
        ['qid', 'docno', 'pid', 'text']
    """
    frame = (
        pd.DataFrame(list(rows), columns=list(PASSAGES_COLUMNS))
        if not isinstance(rows, pd.DataFrame)
        else rows
    )
    require_columns(frame, PASSAGES_COLUMNS, "Passages")
    frame = frame.copy()
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    frame[PID] = frame[PID].astype(np.int64)
    frame[TEXT] = frame[TEXT].astype(str)
    return frame.reset_index(drop=True)
