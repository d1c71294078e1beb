"""Training pairs made from a collection's own text, with no query and no judgement: what
``evirank adapt`` (:mod:`evirank.train.adaptation`) trains on.

Every query and every text here is cut out of the corpus:

* :func:`crop_examples`, independent cropping (Izacard et al. 2022, Contriever): two random spans
  of words of one document are a positive pair;
* :func:`sentence_examples`, the collection's sentences (and titles) one by one, for TSDAE
  (:mod:`evirank.train.tsdae`), which rebuilds each from a noisy copy of itself;
* :func:`ict_examples`, the Inverse Cloze Task (Lee, Chang & Toutanova 2019): a sentence of a
  document is the query, and the sentences around it (the title prepended) are its positive; the
  sentence itself is removed from that context most of the time (``remove=0.9``, as Lee et al.).
  Trained on, it helped no collection measured, so ``adapt`` does not offer it; it serves as a
  label-free check of a model on documents it was not adapted on.

:func:`add_bm25_negatives` then gives each pseudo-query hard negatives: the training texts of
*other* documents that BM25 (computed here, in memory, over those texts) ranks highest for it, as
DPR took BM25's negatives. The rows are ordinary training examples [qid, query, text, label,
source] (label 1: the positive, 0: a negative), so the bi-encoder's contrastive recipe trains on
them unchanged; the labels are made here from positions in the corpus, never read from anywhere.

Example:
    >>> docs = split_documents([Document("d1", "Fish", "Fish swim. They have gills. Gills take oxygen.")])
    >>> rows = ict_examples(docs, per_document=1, window=1, remove=1.0, seed=0)
    >>> rows[["query", "text", "label"]].values.tolist()
    [['Gills take oxygen.', 'Fish They have gills.', 1]]
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evirank.frames import LABEL, QID, QUERY, SOURCE, TEXT, Document
from evirank.progress import progress

logger = logging.getLogger(__name__)

#: The column of a pseudo-example: the document its query and positive were cut from.
DOCNO_OF = "docno"
#: The columns of pseudo-examples.
PSEUDO_COLUMNS = (QID, QUERY, TEXT, LABEL, SOURCE, DOCNO_OF)


@dataclass(frozen=True)
class SplitDocument:
    """A document of the collection as sentences (the splitter re-ranking uses)."""

    docno: str
    title: str
    sentences: tuple[str, ...]


def split_documents(
    documents: Iterable[Document], split: Callable[[str], Sequence[str]] | None = None
) -> list[SplitDocument]:
    """The documents cut into sentences (default: :func:`evirank.train.sources.sentence_splitter`).

    Example:
        >>> split_documents([Document("d1", "", "Fish swim. Birds fly.")])[0].sentences
        ('Fish swim.', 'Birds fly.')
    """
    if split is None:
        from evirank.train.sources import sentence_splitter

        split = sentence_splitter()
    out = []
    for doc in progress(documents, desc="split", unit="doc"):
        sentences = tuple(s.strip() for s in split(doc.text or "") if s.strip())
        out.append(SplitDocument(str(doc.docno), (doc.title or "").strip(), sentences))
    return out


def _with_title(title: str, text: str, prepend_title: bool) -> str:
    return f"{title} {text}" if prepend_title and title else text


def _frame(rows: list[tuple[str, str, str, int, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(PSEUDO_COLUMNS)).astype({LABEL: int})


def ict_examples(
    documents: Sequence[SplitDocument],
    *,
    per_document: int = 1,
    window: int = 2,
    remove: float = 0.9,
    prepend_title: bool = True,
    seed: int = 42,
) -> pd.DataFrame:
    """Inverse Cloze Task pairs: a sentence as the query, its context as the positive.

    Args:
        documents: the collection as sentences (:func:`split_documents`).
        per_document: queries drawn per document (distinct sentences, fewer where it has fewer).
        window: sentences of context on each side of the query sentence.
        remove: the probability that the query sentence is left out of its context.
        prepend_title: the document's title starts the context (as ``sentences:prepend`` scores).
        seed: the draws of sentences and removals.

    Returns:
        Positive rows only (label 1), one per query; documents of one sentence give a pair only
        when the sentence stays in its context (or a title is the context).
    """
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, int, str, str]] = []
    for doc in documents:
        n = len(doc.sentences)
        if n == 0:
            continue
        for i in sorted(rng.choice(n, size=min(per_document, n), replace=False).tolist()):
            removed = bool(rng.random() < remove)
            around = [
                s
                for j, s in enumerate(doc.sentences[max(0, i - window) : i + window + 1], max(0, i - window))
                if not (removed and j == i)
            ]
            context = " ".join(around)
            if not context and not (prepend_title and doc.title):
                continue
            text = _with_title(doc.title, context, prepend_title).strip()
            rows.append((f"{doc.docno}#ict{i}", doc.sentences[i], text, 1, "ict", doc.docno))
    return _frame(rows)


def crop_examples(
    documents: Sequence[SplitDocument],
    *,
    per_document: int = 1,
    min_words: int = 8,
    max_words: int = 48,
    prepend_title: bool = True,
    seed: int = 42,
) -> pd.DataFrame:
    """Independent cropping: two random word spans of one document as a positive pair.

    Each span's length is drawn between ``min_words`` and ``max_words`` (at most the document's
    length), and its start at random, independently of the other span, so the two may overlap.

    Example:
        >>> docs = [SplitDocument("d1", "", ("one two three four five six",))]
        >>> rows = crop_examples(docs, min_words=2, max_words=3, seed=1)
        >>> [q in "one two three four five six" for q in rows[["query", "text"]].values[0]]
        [True, True]
    """
    if not 1 <= min_words <= max_words:
        raise ValueError(f"crop lengths need 1 <= min_words <= max_words, found {min_words}, {max_words}")
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, int, str, str]] = []
    for doc in documents:
        words = " ".join(doc.sentences).split()
        if len(words) < 2:
            continue
        for k in range(per_document):
            query, text = (_span(words, min_words, max_words, rng) for _ in range(2))
            rows.append(
                (
                    f"{doc.docno}#crop{k}",
                    query,
                    _with_title(doc.title, text, prepend_title),
                    1,
                    "crop",
                    doc.docno,
                )
            )
    return _frame(rows)


def sentence_examples(documents: Sequence[SplitDocument], *, min_words: int = 3) -> pd.DataFrame:
    """Every title and sentence of ``documents`` with at least ``min_words`` words, one row each
    (query and text: the sentence itself; TSDAE deletes words from the query's copy as it trains).

    Example:
        >>> docs = [SplitDocument("d1", "Fish and gills", ("Fish swim in water.", "Yes."))]
        >>> sentence_examples(docs)[["qid", "text"]].values.tolist()
        [['d1#t', 'Fish and gills'], ['d1#s0', 'Fish swim in water.']]
    """
    rows: list[tuple[str, str, str, int, str, str]] = []
    for doc in documents:
        keyed = [("t", doc.title)] + [(f"s{i}", s) for i, s in enumerate(doc.sentences)]
        for key, sentence in keyed:
            if len(sentence.split()) >= min_words:
                rows.append((f"{doc.docno}#{key}", sentence, sentence, 1, "tsdae", doc.docno))
    return _frame(rows)


def _span(words: list[str], min_words: int, max_words: int, rng: np.random.Generator) -> str:
    """A random run of ``words``: its length in [min_words, max_words] (at most all), its start at random."""
    length = int(rng.integers(min(min_words, len(words)), min(max_words, len(words)) + 1))
    start = int(rng.integers(0, len(words) - length + 1))
    return " ".join(words[start : start + length])


class TextBm25:
    """BM25 over a list of texts, in memory (sparse matrices): which texts a query's words pick out.

    Terms are :func:`evirank.rerank.prune.words` (lower-cased, stopwords out); ``k1`` and ``b``
    default to those of ``--bm25`` (Anserini's).

    Example:
        >>> bm25 = TextBm25(["cats purr", "dogs bark", "cats and dogs"])
        >>> bm25.top(["cats"], k=2)[0].tolist()
        [0, 2]
    """

    def __init__(self, texts: Sequence[str], k1: float | None = None, b: float | None = None) -> None:
        from scipy import sparse

        from evirank.config import SETTINGS
        from evirank.rerank.prune import words

        default_k1, default_b = SETTINGS.default("bm25")
        k1 = float(default_k1 if k1 is None else k1)
        b = float(default_b if b is None else b)

        self._words = words
        self.vocabulary: dict[str, int] = {}
        indptr, indices, counts = [0], [], []
        for text in texts:
            tf = Counter(words(text))
            for term, count in tf.items():
                indices.append(self.vocabulary.setdefault(term, len(self.vocabulary)))
                counts.append(count)
            indptr.append(len(indices))
        n, v = len(texts), max(1, len(self.vocabulary))
        tf_matrix = sparse.csr_matrix((np.asarray(counts, dtype=np.float64), indices, indptr), shape=(n, v))
        lengths = np.asarray(tf_matrix.sum(axis=1)).ravel()
        average = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        df = np.bincount(np.asarray(indices, dtype=np.int64), minlength=v)
        self.idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        norm = k1 * (1.0 - b + b * lengths / average)
        weights = tf_matrix.copy()
        rows = np.repeat(np.arange(n), np.diff(tf_matrix.indptr))
        weights.data = weights.data * (k1 + 1.0) / (weights.data + norm[rows])
        self._weights_t = weights.T.tocsr()  # terms x texts
        self.size = n

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """A dense (queries x texts) matrix of BM25 scores."""
        from scipy import sparse

        indptr, indices, values = [0], [], []
        for query in queries:
            terms = {self.vocabulary[t] for t in self._words(query) if t in self.vocabulary}
            indices.extend(sorted(terms))
            values.extend(self.idf[sorted(terms)].tolist())
            indptr.append(len(indices))
        q = sparse.csr_matrix((values, indices, indptr), shape=(len(queries), self._weights_t.shape[0]))
        return np.asarray((q @ self._weights_t).todense())

    def top(self, queries: Sequence[str], k: int, *, block: int = 256) -> list[np.ndarray]:
        """Each query's ``k`` best texts (indices, best first; ties: lower index first; score > 0 only)."""
        out: list[np.ndarray] = []
        for start in range(0, len(queries), block):
            scores = self.scores(queries[start : start + block])
            for row in scores:
                order = np.lexsort((np.arange(len(row)), -row))[:k]
                out.append(order[row[order] > 0])
        return out


def add_bm25_negatives(
    positives: pd.DataFrame, *, per_query: int = 4, depth: int = 20, seed: int = 42
) -> pd.DataFrame:
    """``positives`` and, for each, ``per_query`` negatives: texts of other documents BM25 ranks high.

    BM25 indexes the positives' texts; each query's top ``depth`` texts not cut from its own
    document are its candidates, of which ``per_query`` are drawn at random (seeded), as Gao et al.
    sample negatives from the top of a ranking rather than take its very top, where unjudged
    positives gather.

    Example:
        >>> pos = pd.DataFrame({"qid": ["a", "b", "c"], "query": ["cats", "dogs", "fish"],
        ...     "text": ["cats purr", "dogs bark", "cats and dogs"], "label": 1,
        ...     "source": "ict", "docno": ["d1", "d2", "d3"]})
        >>> rows = add_bm25_negatives(pos, per_query=1)
        >>> rows[rows.qid == "a"][["text", "label"]].values.tolist()
        [['cats purr', 1], ['cats and dogs', 0]]
    """
    if per_query < 1:
        raise ValueError(f"per_query must be at least 1, found {per_query}")
    positives = positives.reset_index(drop=True)
    texts = positives[TEXT].astype(str).tolist()
    docnos = positives[DOCNO_OF].astype(str).to_numpy()
    bm25 = TextBm25(texts)
    ranked = bm25.top(positives[QUERY].astype(str).tolist(), depth + per_query * 4)
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, int, str, str]] = []
    without = 0
    for i, order in enumerate(ranked):
        own = docnos[i]
        candidates = [j for j in order.tolist() if docnos[j] != own and texts[j] != texts[i]][:depth]
        if not candidates:
            others = np.flatnonzero(docnos != own)
            if not len(others):
                without += 1
                continue
            candidates = rng.choice(others, size=min(depth, len(others)), replace=False).tolist()
        picks = rng.choice(len(candidates), size=min(per_query, len(candidates)), replace=False)
        row = positives.iloc[i]
        for p in sorted(picks.tolist()):
            j = candidates[p]
            rows.append((str(row[QID]), str(row[QUERY]), texts[j], 0, f"{row[SOURCE]}-bm25", str(docnos[j])))
    if without:
        logger.warning("%d pseudo-queries have no other document to draw a negative from", without)
    negatives = _frame(rows)
    merged = pd.concat([positives[list(PSEUDO_COLUMNS)], negatives], ignore_index=True)
    order = merged[QID].map({q: k for k, q in enumerate(positives[QID])})
    return (
        merged.assign(_o=order)
        .sort_values(["_o", LABEL], ascending=[True, False], kind="stable")
        .drop(columns="_o")
        .reset_index(drop=True)
    )
