"""A cascade between segmentation and scoring: a cheap scorer keeps each document's top N passages.

The expensive scorer (a cross-encoder) then reads only the passages that can matter, and the
aggregator sees the pruned set (Birch aggregates a document's top 3 sentences). Birch's thesis prunes
from the other side (Akkalyoncu Yilmaz, *Cross-Domain Sentence Modeling for Relevance Transfer with
BERT*, 2019, Table 5.6: only sentences without query terms kept; BERT still beats the baseline, with
less effectiveness), see ``docs/cascade.md``.

The cheap scorer (``--prune-by``):

* ``bm25``: BM25 of the query against each passage, with document frequencies and the average
  length taken over the passages of the query's candidates (lowercased words, English stop words
  dropped). Needs nothing but the text.
* a scorer spec, ``FAMILY[:MODEL]`` (:class:`~evirank.score.multi.ScorerSpec`): that model's
  score; ``bi`` is the cosine of bi-encoder embeddings, read from stored passage vectors when there
  are some (a family that stores passage representations reads them by lookup), so only the query
  is embedded.

Example:
    >>> import pandas as pd
    >>> passages = pd.DataFrame({"qid": ["1"] * 3, "query": ["cat food"] * 3, "docno": ["d"] * 3,
    ...     "pid": [0, 1, 2], "text": ["Dogs bark.", "Cats eat cat food.", "Cats sleep."]})
    >>> Prune(1)(passages)["pid"].tolist()
    [1]
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: The column a pruned frame keeps with the cheap scorer's score.
PRUNE_SCORE = "prune_score"

#: The lexical cheap scorer's name; anything else given to ``--prune-by`` is a scorer spec.
BM25 = "bm25"

_WORD = re.compile(r"[a-z0-9]+")
#: Lucene's English stop words (what Anserini's default analyzer drops).
STOP_WORDS = frozenset(
    {
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it"),
        *("no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these"),
        *("they", "this", "to", "was", "will", "with"),
    }
)


def words(text: str) -> list[str]:
    """Lowercased alphanumeric words without stop words (the BM25 pruner's terms).

    Example:
        >>> words("The cat's Food, and 2 dogs")
        ['cat', 's', 'food', '2', 'dogs']
    """
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def bm25_scores(query: str, texts: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """BM25 of ``query`` against each of ``texts``, statistics taken over ``texts`` themselves.

    Example:
        >>> bm25_scores("cat food", ["dogs bark", "cat food", "cat"]).round(3).tolist()
        [0.0, 1.341, 0.562]
    """
    docs = [words(t) for t in texts]
    n = len(docs)
    if n == 0:
        return np.zeros(0)
    lengths = np.array([len(d) for d in docs], dtype=np.float64)
    avg = float(lengths.mean()) or 1.0
    terms = dict.fromkeys(words(query))
    df = Counter(t for d in docs for t in set(d) if t in terms)
    scores = np.zeros(n)
    for i, doc in enumerate(docs):
        if not doc:
            continue
        tf = Counter(t for t in doc if t in terms)
        norm = k1 * (1.0 - b + b * lengths[i] / avg)
        for term, count in tf.items():
            idf = math.log(1.0 + (n - df[term] + 0.5) / (df[term] + 0.5))
            scores[i] += idf * count * (k1 + 1.0) / (count + norm)
    return scores


class Prune(Stage):
    """Keep each document's ``n`` best passages by a cheap score (ties: earlier passage first).

    Args:
        n: passages kept per document (per query).
        by: ``"bm25"`` (BM25 over the candidates' passages) or the name of ``scorer``.
        scorer: the cheap model scorer when ``by`` is not ``"bm25"`` (any family; best one that
            reads stored passage representations, such as a bi-encoder with stored vectors).

    The output keeps the input's columns and order, minus the pruned rows, plus ``prune_score``.

    Example:
        See the module docstring.
    """

    #: The name its time is reported under (``evirank rerank``'s stage timings).
    timing_name = "pruning"

    def __init__(self, n: int, by: str = "bm25", scorer: Any = None) -> None:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"--prune must be a positive number of passages, found {n!r}")
        if (by == BM25) != (scorer is None):
            raise ValueError(
                f"--prune-by {by}: bm25 takes no model scorer, and any other cheap scorer needs one "
                "(scorer=BiEncoder(...))"
            )
        self.n = n
        self.by = by
        self.scorer = scorer

    def cheap_scores(self, frame: pd.DataFrame) -> np.ndarray:
        """The cheap score of every row of a Passages frame."""
        if self.scorer is not None:
            scored = self.scorer(frame[[QID, QUERY, DOCNO, PID, TEXT]])
            self.stats_ = getattr(self.scorer, "stats_", None)
            return scored[SCORE].to_numpy(dtype=np.float64)
        scores = np.zeros(len(frame))
        texts = frame[TEXT].astype(str).tolist()
        for _, rows in frame.groupby(QID, sort=False).indices.items():
            query = str(frame[QUERY].iat[rows[0]])
            scores[rows] = bm25_scores(query, [texts[i] for i in rows])
        return scores

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``frame`` (Passages with ``query``) that are among their document's ``n`` best."""
        require_columns(frame, (QID, QUERY, DOCNO, PID, TEXT), "Prune")
        if frame.empty:
            return frame.assign(**{PRUNE_SCORE: np.zeros(0)})
        score = self.cheap_scores(frame)
        order = pd.DataFrame(
            {
                "q": frame[QID].to_numpy(),
                "d": frame[DOCNO].to_numpy(),
                "s": -score,
                "p": frame[PID].to_numpy(),
            }
        ).sort_values(["q", "d", "s", "p"], kind="mergesort")
        rank = order.groupby(["q", "d"], sort=False).cumcount().to_numpy()
        keep = np.zeros(len(frame), dtype=bool)
        keep[order.index.to_numpy()[rank < self.n]] = True
        out = frame.assign(**{PRUNE_SCORE: score})[keep].reset_index(drop=True)
        logger.info(
            "pruned by %s to the top %d passage(s) per document: %d of %d passages kept",
            self.by,
            self.n,
            len(out),
            len(frame),
        )
        return out


def check_prune(aggregator: Any, n: int | None) -> None:
    """Raise ValueError when ``aggregator`` reads more passages per document than ``n`` kept.

    Example:
        >>> from evirank.aggregate import Birch
        >>> check_prune(Birch(top_n=3), 2)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: birch:3 sums each document's 3 best passages, but --prune 2 keeps only 2 ...
    """
    top_n = getattr(aggregator, "top_n", None)
    if n is not None and top_n is not None and top_n > n:
        raise ValueError(
            f"birch:{top_n} sums each document's {top_n} best passages, but --prune {n} keeps only {n} "
            f"per document: use --prune {top_n} or more, or birch:{n}"
        )


class Cascade:
    """What ``--vectors``, ``--prune`` and ``--prune-by`` ask for, resolved once for a command.

    Args:
        vectors: the stored passage vectors to read (None: none).
        prune: passages kept per document (None: no cascade).
        by: the cheap scorer: ``bm25`` or a scorer spec (``bi``, ``bi:MODEL``, ``colbert:MODEL``).
        device: where a model scorer built for pruning runs (when no ``runtime`` is given).
        from_index: the vectors were found in the index (not named): a mismatch says how to opt out.
        runtime: where and how a model scorer built for pruning runs (the pipeline's device,
            backend, precision and batching; None: ``device`` and the defaults).
    """

    def __init__(
        self,
        vectors: Any = None,
        prune: int | None = None,
        by: str = "bm25",
        device: str = "auto",
        from_index: bool = False,
        runtime: Any = None,
    ) -> None:
        self.vectors = vectors
        self.prune = prune
        self.by = by
        self.device = device if runtime is None else runtime.device
        self.from_index = from_index
        self.runtime = runtime

    def check(self, segmenter: Any, reader: Any) -> None:
        """Refuse vectors made by another model or segmenter than ``reader`` and ``segmenter``."""
        if self.vectors is None:
            return
        from evirank.vectors import VectorsMismatchError

        try:
            self.vectors.check_scorer(reader, segmenter)
        except VectorsMismatchError as exc:
            if self.from_index:
                raise VectorsMismatchError(
                    f"{exc}; or pass --vectors none to embed the passages now"
                ) from None
            raise

    def stage(self, segmenter: Any, reader: Any = None) -> Prune | None:
        """The pruning stage (None without ``--prune``); checks the vectors against what reads them.

        Args:
            segmenter: the run's segmenter.
            reader: the run's scorer when it reads stored passage representations (reused as the
                cheap scorer when ``by`` names its family without a model).
        """
        cheap = None
        if self.prune is not None and self.by != BM25:
            from evirank.score.multi import ScorerSpec

            spec = ScorerSpec.parse(self.by)
            if reader is not None and reader.family == spec.family and spec.model is None:
                cheap = reader
            else:
                stored = self.vectors if spec.stores_passages else None
                from evirank.config import Runtime

                runtime = Runtime(device=self.device) if self.runtime is None else self.runtime
                cheap = spec.build(runtime, vectors=stored)
        checked = reader if reader is not None else cheap
        if checked is not None and (checked is reader or getattr(checked, "vectors", None) is not None):
            self.check(segmenter, checked)
        if self.prune is None:
            return None
        return Prune(self.prune, self.by, cheap)

    def describe(self) -> dict[str, Any] | None:
        """The vectors used (folder, model, segmenter, passages), for a run's record."""
        if self.vectors is None:
            return None
        manifest = self.vectors.manifest
        return {
            "path": str(self.vectors.path),
            "fingerprint": manifest.get("fingerprint"),
            "model": (manifest.get("model") or {}).get("model"),
            "segment": manifest.get("segment"),
            "passages": manifest.get("passages"),
        }


def describe_vectors(pipeline: Any) -> dict[str, Any] | None:
    """The stored vectors a re-ranking pipeline reads (its scorer's or a pruning stage's), for records."""
    readers = [
        pipeline.scorer,
        *(getattr(s, "scorer", None) for s in getattr(pipeline, "passage_stages", ())),
    ]
    for reader in readers:
        vectors = getattr(reader, "vectors", None)
        if vectors is not None and hasattr(vectors, "manifest"):
            return Cascade(vectors).describe()
    return None
