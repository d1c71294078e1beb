"""Adapting a model to a collection from its text alone: :func:`adapt` (``evirank adapt``).

No query and no judgement of the collection is read: the training pairs are cut out of the
corpus (:mod:`evirank.train.pseudo`), and the model is trained by the same trainer and recipes as
``evirank train`` (:mod:`evirank.train.trainer`), so it is resumable, shows its progress, and
writes an ordinary model folder that ``rerank``, ``rank``, ``serve``, ``embed`` and the store use
as any other. The methods:

* ``crop`` (the default, the one method measured to help: on tweets): independent cropping
  (Contriever): two random word spans of one document as a positive pair, against the batch's other
  texts and hard negatives that BM25 finds in other documents;
* ``tsdae``: TSDAE (Wang, Reimers & Gurevych 2021) for a bi-encoder: each sentence and title of
  the collection is rebuilt by a tied decoder from the embedding of a copy with 60% of its words
  deleted (:mod:`evirank.train.tsdae`); no negatives.

The folder's ``evirank-train.json`` says what it was adapted on (the corpus path, its documents,
and a SHA-256 of their text), with which method, settings, steps and seed, under ``adaptation``.

Example:
    >>> AdaptConfig().method, AdaptConfig().train.encoder
    ('crop', 'bi')
    >>> AdaptConfig(method="simcse")
    Traceback (most recent call last):
    ...
    ValueError: method must be one of crop, tsdae, found 'simcse'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.errors import UsageError
from evirank.frames import LABEL, QID, QUERY, SOURCE, TEXT, Document
from evirank.record import write_record
from evirank.train.config import TrainConfig
from evirank.train.pseudo import (
    DOCNO_OF,
    SplitDocument,
    TextBm25,
    add_bm25_negatives,
    crop_examples,
    sentence_examples,
    split_documents,
)
from evirank.train.trainer import TRAIN_JSON, TrainResult

logger = logging.getLogger(__name__)

METHODS = ("crop", "tsdae")
#: The training settings adaptation starts from (a bi-encoder's contrastive recipe, one BM25
#: negative per step beside the batch's texts, short texts: fast enough on a CPU).
ADAPT_TRAINING = TrainConfig(
    encoder="bi", loss="contrastive", group_size=2, batch_size=32, learning_rate=2e-5, max_length=128
)


class LabelsRefusedError(UsageError):
    """``evirank adapt`` was given queries or judgements: it learns from the corpus text alone."""


@dataclass(frozen=True)
class AdaptConfig:
    """How a model is adapted to a collection (see the module).

    Attributes:
        method: ``crop`` (default) or ``tsdae``.
        queries_per_document: pseudo-queries drawn per document.
        crop_words: crop: the shortest and longest span, in words.
        negatives: BM25 negatives per pseudo-query (the pool each step draws from).
        negative_depth: BM25's top this many texts (of other documents) hold those negatives.
        prepend_title: the title starts every positive and negative text (as ``sentences:prepend``).
        sample_documents: adapt on this many documents drawn at random (None: all).
        train: the optimisation (:class:`TrainConfig`), always of a bi-encoder's contrastive recipe.
    """

    method: str = "crop"
    queries_per_document: int = 1
    crop_words: tuple[int, int] = (8, 48)
    negatives: int = 4
    negative_depth: int = 20
    prepend_title: bool = True
    sample_documents: int | None = None
    train: TrainConfig = field(default_factory=lambda: ADAPT_TRAINING)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, found {self.method!r}")
        object.__setattr__(self, "crop_words", tuple(int(w) for w in self.crop_words))
        if len(self.crop_words) != 2 or not 1 <= self.crop_words[0] <= self.crop_words[1]:
            raise ValueError(f"crop_words must be (min, max) with 1 <= min <= max, found {self.crop_words}")
        for name in ("queries_per_document", "negatives", "negative_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, found {value!r}")
        if self.sample_documents is not None and self.sample_documents < 1:
            raise ValueError(f"sample_documents must be positive or None, found {self.sample_documents}")
        if (self.train.encoder, self.train.loss) != ("bi", "contrastive"):  # every method trains a bi-encoder
            bi_encoder = dataclasses.replace(self.train, encoder="bi", loss="contrastive")
            object.__setattr__(self, "train", bi_encoder)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``adaptation`` settings of the record)."""
        out = dataclasses.asdict(self)
        out["crop_words"] = list(self.crop_words)
        out.pop("train")
        return out


class CorpusDigest:
    """The documents of a corpus as they stream past, with their count and a SHA-256 of their text.

    Example:
        >>> digest = CorpusDigest([Document("d1", "T", "x")])
        >>> [d.docno for d in digest], digest.documents, digest.sha256[:12]
        (['d1'], 1, '7f5e7016378a')
    """

    def __init__(self, documents: Iterable[Document]) -> None:
        self._documents = documents
        self._hash = hashlib.sha256()
        self.documents = 0

    def __iter__(self) -> Iterator[Document]:
        for doc in self._documents:
            for part in (str(doc.docno), doc.title or "", doc.text or ""):
                self._hash.update(part.encode("utf-8"))
                self._hash.update(b"\x00")
            self.documents += 1
            yield doc

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def _documents(
    corpus: str | os.PathLike[str] | None, index: str | os.PathLike[str] | None
) -> Iterable[Document]:
    if (corpus is None) == (index is None):
        raise UsageError("give the collection as exactly one of a corpus (--corpus) or an index (--index)")
    if corpus is not None:
        from evirank.io.corpus import read_corpus

        return read_corpus(corpus, empty="skip")
    from evirank.lucene.docs import LuceneDocs

    return LuceneDocs(str(index))


def draw_documents(documents: list[SplitDocument], n: int | None, seed: int) -> list[SplitDocument]:
    """The ``n`` documents (all where ``n`` is None or too large) that ``adapt`` trains on with
    ``sample_documents=n`` and ``seed``, in corpus order; the others were never seen in training.

    Example:
        >>> docs = [SplitDocument(f"d{i}", "", ("x",)) for i in range(5)]
        >>> len(draw_documents(docs, 2, seed=42)), len(draw_documents(docs, None, seed=42))
        (2, 5)
    """
    if n is None or n >= len(documents):
        return documents
    keep = np.sort(np.random.default_rng([seed, 1]).choice(len(documents), size=n, replace=False))
    return [documents[i] for i in keep.tolist()]


def pseudo_examples(documents: list[SplitDocument], config: AdaptConfig) -> pd.DataFrame:
    """The training rows of ``config.method`` over ``documents``: positives and BM25 negatives.

    Every query and text is corpus text (:mod:`evirank.train.pseudo`); ``tsdae`` trains on the
    sentences themselves, with no negatives.
    """
    seed = config.train.seed
    if config.method == "tsdae":
        return sentence_examples(documents)
    positives = crop_examples(
        documents,
        per_document=config.queries_per_document,
        min_words=config.crop_words[0],
        max_words=config.crop_words[1],
        prepend_title=config.prepend_title,
        seed=seed,
    )
    if positives.empty:
        raise ValueError("the corpus gave no pseudo-query: its documents have no text to cut one from")
    return add_bm25_negatives(positives, per_query=config.negatives, depth=config.negative_depth, seed=seed)


def adapt(
    corpus: str | os.PathLike[str] | None = None,
    *,
    index: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] = "model",
    model: str | None = None,
    config: AdaptConfig | None = None,
    overwrite: bool = False,
    resume: bool = False,
    step_callback: Callable[[int], None] | None = None,
) -> TrainResult:
    """Adapt ``model`` to a collection from its text alone, into the model folder ``output_dir``.

    There is deliberately no parameter for queries or judgements: the pairs are cut out of the
    documents (see the module).

    Args:
        corpus: the collection as a corpus (a BEIR folder, JSONL, a collection format); or
        index: a Lucene index with stored documents (``evirank index``).
        output_dir: the model folder to create.
        model: the bi-encoder's initial weights (default: all-MiniLM-L6-v2).
        config: the method and its settings (:class:`AdaptConfig`).
        overwrite: replace an existing ``output_dir`` made by training.
        resume: continue an interrupted run in ``output_dir`` (same settings and corpus).
        step_callback: called with the step number after each optimizer step (raising in it
            interrupts training, as a kill would).

    Returns:
        The :class:`~evirank.train.trainer.TrainResult`.

    Example:
        >>> import evirank  # doctest: +SKIP
        >>> evirank.adapt("data/scifact", output_dir="models/minilm-scifact-crop")  # doctest: +SKIP
    """
    from evirank.train.trainer import check_train_output

    config = config or AdaptConfig()
    if model is not None:
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, model=str(model)))
    out = check_train_output(output_dir, overwrite=overwrite, resume=resume)  # before any work
    source = CorpusDigest(_documents(corpus, index))
    documents = split_documents(source)
    if not documents:
        raise ValueError(f"{corpus or index}: no documents")
    chosen = draw_documents(documents, config.sample_documents, config.train.seed)
    examples = pseudo_examples(chosen, config)
    facts = {
        "method": config.method,
        "corpus": {
            "path": str(corpus if corpus is not None else index),
            "kind": "corpus" if corpus is not None else "index",
            "documents": source.documents,
            "documents_used": len(chosen),
            "text_sha256": source.sha256,
        },
        "labels_read": "none: every query and text is cut from the corpus",
        "pseudo_queries": int((examples[LABEL] == 1).sum()),
        "bm25_negatives": int((examples[LABEL] == 0).sum()),
        "settings": config.to_dict(),
        "seed": config.train.seed,
    }
    logger.info(
        "adapt (%s): %d pseudo-queries from %d of %d documents, %d BM25 negatives",
        config.method,
        facts["pseudo_queries"],
        len(chosen),
        source.documents,
        facts["bm25_negatives"],
    )
    if config.method == "tsdae":
        from evirank.train.tsdae import train_tsdae

        result = train_tsdae(
            examples, config, out, overwrite=overwrite, resume=resume, step_callback=step_callback
        )
    else:
        from evirank.train.trainer import train_model

        result = train_model(
            examples[[QID, QUERY, TEXT, LABEL, SOURCE]],
            config.train,
            out,
            overwrite=overwrite,
            resume=resume,
            step_callback=step_callback,
        )
    _record_adaptation(out, {**facts, "steps": result.steps})
    return result


def _record_adaptation(out: Path, facts: dict[str, Any]) -> None:
    """Add ``adaptation`` (what corpus, which method, steps, seed) to the folder's ``evirank-train.json``."""
    payload = json.loads((out / TRAIN_JSON).read_text(encoding="utf-8"))
    command = "adapt"
    for key in ("command", "versions"):  # written afresh
        payload.pop(key, None)
    payload.pop("adaptation", None)
    write_record(out / TRAIN_JSON, command, payload.pop("config"), **payload, adaptation=facts)


def examples_from(documents: Iterable[Document], config: AdaptConfig | None = None) -> pd.DataFrame:
    """The pseudo-examples :func:`adapt` would train on (with their ``docno``), for inspection.

    Example:
        >>> docs = [Document("d1", "Fish", "Fish swim. Gills take oxygen. Fins steer."),
        ...         Document("d2", "Birds", "Birds fly. Wings lift them. Feathers keep them warm.")]
        >>> rows = examples_from(docs, AdaptConfig(negatives=1))
        >>> sorted(rows["label"].tolist())
        [0, 0, 1, 1]
    """
    config = config or AdaptConfig()
    chosen = draw_documents(split_documents(documents), config.sample_documents, config.train.seed)
    return pseudo_examples(chosen, config)


__all__ = [
    "ADAPT_TRAINING",
    "DOCNO_OF",
    "METHODS",
    "AdaptConfig",
    "CorpusDigest",
    "LabelsRefusedError",
    "TextBm25",
    "adapt",
    "examples_from",
    "pseudo_examples",
]
