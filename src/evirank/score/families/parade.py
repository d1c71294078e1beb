"""The PARADE family: a document scored from its passages' representations (Li et al. 2020).

An encoder reads each (query, passage) of a document as ``[CLS] q [SEP] p [SEP]`` (the passages
are the segmenter's: sentences or word windows); the passages' [CLS] vectors are aggregated into
one document vector by the model's trained aggregation (``avg``, ``max``, ``attn`` or
``transformer``; :mod:`evirank.score.passage_aggregation`), and a linear layer gives the
document's score. The whole model is trained end to end (``evirank train --scorer parade``).

How it fits the flow (segment -> score -> aggregate): the scorer, :class:`Parade`, writes two
columns on the Passages frame: ``score``, each passage's own score (that of a document made of
it alone: what ``explain`` shows, and what ``maxp`` / ``birch`` read), and ``document_score``,
the document's PARADE score on each of its passages, which the ``document`` aggregator
(:class:`evirank.aggregate.DocumentScore`, ``--aggregate document``) turns into the run, as every
other aggregator turns passage scores into one. Nothing generic asks which family ran.

With a score store, each (query, passage)'s [CLS] vector is kept (the store's vectors, keyed by
the model fingerprint and the pair), and so is each passage's own score: a rerun, another
depth, or another aggregator over the same passages runs only the small aggregation network,
never the encoder again.

A document's first ``max_passages`` passages (the model's, from training; in pid order) make its
score; the others still get their own scores.

Example:
    >>> from evirank.score import get_family
    >>> get_family("parade").recipe
    'evirank.train.parade:ParadeRecipe'
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.config import Runtime
from evirank.extras import require
from evirank.frames import DOCNO, DOCUMENT_SCORE, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.query_passage import PairScorer
from evirank.score.transformer import DistinctPairs, ScoringStats, _ChunkedWriter

if TYPE_CHECKING:
    from evirank.score.passage_aggregation import HeadConfig

logger = logging.getLogger(__name__)

#: What the encoder's output is read as (part of the fingerprint).
_READOUT = "last hidden state at [CLS]"


@dataclass
class ClsVectors:
    """The :class:`~evirank.score.backends.ModelHead` of the encoder: the last hidden state at the
    first token ([CLS]) of each (query, passage) input, a batch x hidden tensor.

    Example:
        >>> ClsVectors().name
        'cls-vector'
    """

    name: str = "cls-vector"

    def load_torch(self, model_dir: Path) -> tuple[Any, tuple[str, ...]]:
        transformers = require("transformers", "torch")
        try:
            model, info = transformers.AutoModel.from_pretrained(
                str(model_dir), output_loading_info=True, attn_implementation="sdpa"
            )
        except (ValueError, TypeError, ImportError):
            model, info = transformers.AutoModel.from_pretrained(str(model_dir), output_loading_info=True)
        missing = tuple(sorted(k for k in info.get("missing_keys", ()) if not k.startswith("pooler.")))
        return self.wrap(model), missing

    def wrap(self, encoder: Any) -> Any:
        """The module the backend runs, over an encoder already in memory."""
        return cls_module(encoder)


def cls_module(encoder: Any) -> Any:
    """A torch module over ``encoder`` whose forward gives the [CLS] vectors (batch x hidden)."""
    torch = require("torch", "torch")

    class Cls(torch.nn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, **extra)
            return out.last_hidden_state[:, 0]

    return Cls()


def vector_keys(pairs: DistinctPairs) -> list[bytes]:
    """The store key of each distinct (query, passage)'s vector: a hash of both texts' hashes."""
    return [
        hashlib.blake2b(pairs.query_hash[q] + pairs.text_hash[p], digest_size=16).digest()
        for q, p in zip(pairs.pair_query, pairs.pair_text, strict=True)
    ]


class Parade(PairScorer):
    """Score documents from their passages with a PARADE model (see the module).

    Input Passages [qid, query, docno, pid, text, ...]; output the same frame with ``score``
    (each passage's own score) and ``document_score`` (its document's PARADE score; aggregate
    with ``--aggregate document``). The query keeps at most ``query_max_tokens`` tokens and the
    passage takes the rest of ``max_length`` (default: the length the model was trained with).

    Args:
        model: a PARADE model folder (``evirank train --scorer parade``: an encoder with
            ``parade.json`` and ``parade_head.safetensors`` beside it).
        runtime: where and how it runs (:class:`~evirank.config.Runtime`; the torch backend; its
            device is the encoder's, the small head runs where its parameters are; its input cap
            defaults to the model's training length; its score store keeps passage vectors and
            scores; no Ray: the family runs in the calling process).
        query_max_tokens: the query's token cap (None: as in training, ``min(64, max_length // 2)``).

    Example:
        >>> scored = Parade("models/parade-transformer")(passages)  # doctest: +SKIP
        >>> DocumentScore()(scored)  # the run  # doctest: +SKIP
    """

    family = "parade"
    task = ClsVectors()

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        query_max_tokens: int | None = None,
    ) -> None:
        if runtime is not None and runtime.ray is not None:
            raise ValueError("the parade family runs in this process; it does not run on Ray")
        super().__init__(
            model, runtime, query_max_tokens=64 if query_max_tokens is None else query_max_tokens
        )
        self.query_cap = query_max_tokens

    # -- the head ---------------------------------------------------------------------------
    def _check_settings(self) -> None:
        if self.query_cap is None:  # as in training: at most 64 tokens, at most half the input
            self.query_max_tokens = min(64, max(1, self.max_length_ // 2))
        super()._check_settings()

    def _default_max_length(self, model_dir: Path) -> int:
        from evirank.score.transformer import MAX_LENGTH_CAP

        return int(self._head_config(model_dir).max_length or MAX_LENGTH_CAP)

    def _head_config(self, model_dir: Path | None) -> HeadConfig:
        from evirank.score.passage_aggregation import HeadConfig

        held = getattr(self, "head_", None)
        if held is not None:
            return held.config
        if model_dir is None:
            raise ValueError("a PARADE scorer over a model in memory needs its head (adopt it)")
        return HeadConfig.read(model_dir)

    def head(self) -> Any:
        """The aggregation network (loaded once, eval mode, on the CPU)."""
        held = getattr(self, "head_", None)
        if held is None:
            from evirank.score.passage_aggregation import load_head

            self.prepare()
            assert self.model_dir_ is not None
            held = load_head(self.model_dir_)
            self.head_ = held
        return held

    def adopt(self, model: Any, tokenizer: Any) -> None:
        """Score with a PARADE model in memory (one being trained: ``model.encoder`` and
        ``model.head``); see the base class. The head is used as it is (put it in eval mode)."""
        from evirank.score.backends import TorchBackend

        self.head_ = model.head
        self._set_up(None, tokenizer, model.encoder.config)
        self.backend_ = TorchBackend.adopting(
            self.task.wrap(model.encoder), self.task, self.device_, self.precision_
        )
        self.backend_.use_layout(self.runtime.batch_layout)  # refuses unpadded: its own module
        self.load_s_ = 0.0

    def settings(self) -> dict[str, Any]:
        from evirank.score.passage_aggregation import describe

        config = self._head_config(getattr(self, "model_dir_", None))
        return {
            **super().settings(),
            "head": "parade",
            "readout": _READOUT,
            **{f"parade_{k}": v for k, v in describe(config).items()},
        }

    @property
    def aggregation(self) -> str:
        """The model's aggregation: ``avg``, ``max``, ``attn`` or ``transformer``."""
        self.prepare()
        return str(self._head_config(self.model_dir_).aggregation)

    @property
    def max_passages(self) -> int:
        """Passages of a document that make its score (its first ones)."""
        self.prepare()
        return int(self._head_config(self.model_dir_).max_passages)

    def describe(self) -> dict[str, Any]:
        """The scorer's settings, its aggregation named first (for records)."""
        described = super().describe()
        return {"aggregation": described["parade_aggregation"], **described}

    def read_out(self, output: np.ndarray) -> np.ndarray:
        from evirank.score.passage_aggregation import passage_scores

        return passage_scores(self.head(), np.asarray(output, dtype=np.float32))

    # -- scoring ----------------------------------------------------------------------------
    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add ``score`` (each passage's own) and ``document_score`` to a Passages frame."""
        from evirank.score.passage_aggregation import passage_scores

        require_columns(frame, (QID, QUERY, DOCNO, PID, TEXT), type(self).__name__)
        started = time.perf_counter()
        out = frame.copy()
        stats = ScoringStats(rows=len(out))
        if out.empty:
            out[SCORE] = np.array([], dtype=np.float64)
            out[DOCUMENT_SCORE] = np.array([], dtype=np.float64)
            self.stats_ = stats
            return out
        self.prepare()
        pairs = DistinctPairs.of(out)
        stats.distinct = len(pairs.scores)
        vectors = self._vectors(out, pairs, stats)
        head = self.head()
        pairs.scores = passage_scores(head, vectors)
        store = self._store()
        if store is not None and pairs.fingerprint is not None:  # the passages' own scores, once
            qhashes, phashes = pairs.pair_hashes()
            new = np.flatnonzero(np.isnan(store.lookup(pairs.fingerprint, qhashes, phashes)))
            if len(new):
                qnew, pnew = pairs.pair_hashes(new)
                store.put(pairs.fingerprint, qnew, pnew, pairs.scores[new].tolist())
        out[SCORE] = pairs.scores[pairs.row_pair]
        out[DOCUMENT_SCORE] = self._document_scores(out, vectors[pairs.row_pair])
        stats.total_s = time.perf_counter() - started
        self.stats_ = stats
        logger.info(
            "parade (%s): %d passages, %d distinct pairs, %d vectors from the store, %d encoded in %.1f s",
            head.config.aggregation,
            stats.rows,
            stats.distinct,
            stats.embeddings_cached,
            stats.computed,
            stats.total_s,
        )
        return out

    def document_scores(self, passages: pd.DataFrame) -> pd.DataFrame:
        """One row per (qid, docno) of ``passages`` with its PARADE ``score`` (no first-stage mix).

        Example:
            >>> Parade("models/parade").document_scores(passages)  # doctest: +SKIP
        """
        scored = self.transform(passages)
        return scored.drop_duplicates([QID, DOCNO])[[QID, DOCNO, DOCUMENT_SCORE]].rename(
            columns={DOCUMENT_SCORE: SCORE}
        )

    def _vectors(self, frame: pd.DataFrame, pairs: DistinctPairs, stats: ScoringStats) -> np.ndarray:
        """The [CLS] vector of each distinct pair: from the store, or computed (and stored)."""
        hidden = int(self.config_.hidden_size)
        vectors = np.full((len(pairs.scores), hidden), np.nan, dtype=np.float32)
        store = self._store()
        keys = vector_keys(pairs) if store is not None else []
        if store is not None:
            fingerprint = self.fingerprint
            found = store.get_embeddings(fingerprint, keys)
            if len(found) < len(keys):
                self.load()
                if self.fingerprint != fingerprint:  # random weights: known once loaded
                    fingerprint = self.fingerprint
                    found = store.get_embeddings(fingerprint, keys)
            for i, vector in found.items():
                vectors[i] = vector
            self._register()
            pairs.fingerprint = fingerprint
            store.record_segments(
                fingerprint,
                frame,
                [pairs.query_hash[i] for i in pairs.row_query],
                [pairs.text_hash[i] for i in pairs.row_text],
            )
            stats.embeddings_cached = len(found)
            stats.cached = len(found)
        todo = np.flatnonzero(np.isnan(vectors[:, 0]))
        if not len(todo):
            return vectors
        stored_as = pairs.fingerprint

        def write(rows: list[tuple[int, np.ndarray]]) -> None:
            assert store is not None and stored_as is not None
            store.put_embeddings(stored_as, [keys[i] for i, _ in rows], [v for _, v in rows])

        with _ChunkedWriter(write if store is not None else None, self.commit_every) as writer:

            def consume(items: np.ndarray, output: np.ndarray) -> None:
                done = todo[items]
                vectors[done] = output
                writer.add(list(zip(done.tolist(), np.asarray(output, dtype=np.float32), strict=True)))

            self._run_pairs(pairs, todo, consume, stats)
        return vectors

    def _document_scores(self, frame: pd.DataFrame, row_vectors: np.ndarray) -> np.ndarray:
        """Each row's document score, from the vectors of its document's first passages."""
        from evirank.score.passage_aggregation import document_scores

        keys = frame[QID].astype(str) + "\x1f" + frame[DOCNO].astype(str)
        documents, _ = pd.factorize(keys, sort=False)
        pids = frame[PID].to_numpy(dtype=np.int64)
        order = np.lexsort((pids, documents))
        position = np.empty(len(frame), dtype=np.int64)
        sorted_docs = documents[order]
        starts = np.flatnonzero(np.r_[True, sorted_docs[1:] != sorted_docs[:-1]])
        run_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        position[order] = np.arange(len(order)) - run_start
        kept = position < self.max_passages
        scores = document_scores(
            self.head(), row_vectors[kept], documents[kept].astype(np.int64), position[kept]
        )
        return scores[documents]

    def compute_block(self, columns: Any, stats: ScoringStats) -> np.ndarray:
        raise NotImplementedError("the parade family runs in this process; it does not run on Ray")


# -- the family ---------------------------------------------------------------------------------
def _claims(info: ModelInfo) -> int:
    """A model folder with a PARADE head (``parade.json``) is a PARADE model."""
    return 3 if "parade.json" in info.files else 0


FAMILY = register_family(
    Family(
        "parade",
        scorer=Parade,
        summary="PARADE: a document scored from its passages' [CLS] vectors, aggregated by a trained "
        "avg, max, attn or transformer network (aggregate with --aggregate document)",
        claims=_claims,
        recipe="evirank.train.parade:ParadeRecipe",
        document_score=True,
    )
)
