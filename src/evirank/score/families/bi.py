"""The bi-encoder family: mean-pooled, L2-normalised embeddings and their cosine."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.config import Runtime
from evirank.errors import ArgumentError
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.score.backends import TokenBatch
from evirank.score.default_model import default_bi_encoder
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.store import Store, text_hash
from evirank.score.tokenize import TextIds
from evirank.score.transformer import DistinctPairs, ScoringStats, TransformerScorer, _ChunkedWriter

if TYPE_CHECKING:
    from evirank.score.attention import AttentionView
    from evirank.vectors import PassageVectors

logger = logging.getLogger(__name__)


#: Texts shorter than this (in tokens, special tokens included) are embedded one per model call by
#: :meth:`BiEncoder.embed_exact`: on CPU, a batch of a few rows takes other kernels than many rows.
EXACT_MIN_TOKENS = 8


class BiEncoder(TransformerScorer):
    """Score (query, passage) pairs by the cosine of their embeddings.

    Embeddings are the mean of the last hidden states over real tokens, L2-normalised, so the
    score is their dot product, in [-1, 1]. Each distinct text (query or passage) is embedded
    once per call; with ``store``, embeddings and scores are kept, so a passage met again under
    another query, in a later call or a later run, is not embedded again. Texts are cut at
    ``max_length`` tokens (default: the model's sentence-transformers ``max_seq_length`` if it
    has one, else 512 or the model's limit).

    Args:
        model: a Hugging Face model id or local folder; ``None`` is the offline all-MiniLM-L6-v2.
        runtime: where and how it runs (:class:`~evirank.config.Runtime`: device, backend,
            precision, batch budget, token cap per text, the score store that keeps embeddings
            and scores, Ray: the texts to embed go to an actor pool block by block, with the same
            batches and vectors).
        query_prefix: prepended to queries (``"query: "`` for E5-style models).
        passage_prefix: prepended to passages (``"passage: "`` for E5-style models).
        cache_embeddings: keep embeddings in the store (scores are always kept when it is set).
        vectors: stored passage vectors (a :class:`~evirank.vectors.PassageVectors` or its folder,
            made by this model): a passage whose (docno, pid) is stored with the same text is scored
            by lookup, only the query and the passages not stored (or changed since) are embedded.
            Scores made this way are not kept in the score store. Vectors made by another model
            are refused (:class:`~evirank.vectors.VectorsMismatchError`).

    Example:
        >>> from evirank.frames import make_passages
        >>> passages = make_passages([("1", "d1", 0, "A cat sat.")]).assign(query="where is the cat")
        >>> BiEncoder()(passages)["score"].between(-1, 1).all()  # doctest: +SKIP
        True
    """

    family = "bi"
    task = "embed"
    block_columns = (TEXT,)

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        runtime: Runtime | None = None,
        *,
        query_prefix: str = "",
        passage_prefix: str = "",
        cache_embeddings: bool = True,
        vectors: PassageVectors | str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(model if model is not None else default_bi_encoder(), runtime)
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.cache_embeddings = cache_embeddings
        self.vectors = vectors

    def _default_max_length(self, model_dir: Path) -> int:
        st_config = model_dir / "sentence_bert_config.json"
        if st_config.is_file():
            try:
                return int(json.loads(st_config.read_text())["max_seq_length"])
            except (ValueError, KeyError, TypeError):
                logger.warning("%s: no usable max_seq_length; using 512", st_config)
        pooling = model_dir / "1_Pooling" / "config.json"
        if pooling.is_file() and not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens", True):
            logger.warning(
                "%s was trained with another pooling than the mean; BiEncoder mean-pools", model_dir
            )
        return super()._default_max_length(model_dir)

    def settings(self) -> dict[str, Any]:
        return {
            **super().settings(),
            "pooling": "mean",
            "normalise": True,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
        }

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings of ``texts`` (no prefix added), one row each.

        With a score store (and ``cache_embeddings``), embeddings already there are read, not
        computed, and new ones are added.

        Example:
            >>> BiEncoder().embed(["a cat", "a dog"]).shape  # doctest: +SKIP
            (2, 384)
        """
        if isinstance(texts, str | bytes) or not all(isinstance(text, str) for text in texts):
            found = (
                type(texts).__name__
                if isinstance(texts, str | bytes)
                else "a list holding " + next(type(t).__name__ for t in texts if not isinstance(t, str))
            )
            raise ArgumentError(f"texts: expected a list of strings, found {found}")
        distinct = list(dict.fromkeys(texts))
        store = self._store() if self.cache_embeddings else None
        fingerprint = None
        if store is not None:
            self.load()  # a randomly initialised head only knows its fingerprint once loaded
            fingerprint = self._register()
        stats = ScoringStats(rows=len(texts), distinct=len(distinct))
        vectors = self._embed_distinct(distinct, stats, store, fingerprint, on_ray=False)
        self.stats_ = stats
        return vectors[pd.Index(distinct).get_indexer(texts)]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add ``score`` (cosine) to a Passages frame [qid, query, docno, pid, text, ...]."""
        require_columns(frame, (QID, QUERY, DOCNO, PID, TEXT), "BiEncoder")
        started = time.perf_counter()
        out = frame.copy()
        stats = ScoringStats(rows=len(out))
        if out.empty:
            out[SCORE] = np.array([], dtype=np.float64)
            self.stats_ = stats
            return out
        self.prepare()
        if self.vectors is not None:
            out, self.stats_ = self._transform_by_lookup(out, stats, started)
            return out
        pairs = DistinctPairs.of(out)  # keyed by the raw texts: the prefixes are in the fingerprint
        store = self._use_store(out, pairs)
        missing = pairs.missing()
        stats.cached = len(pairs.scores) - len(missing)
        if len(missing):
            # Embedded texts carry their prefix; a text used as query and as passage gets both.
            q_text = [self.query_prefix + pairs.queries[i] for i in pairs.pair_query[missing]]
            p_text = [self.passage_prefix + pairs.texts[i] for i in pairs.pair_text[missing]]
            texts = list(dict.fromkeys(q_text + p_text))
            stats.distinct = len(texts)
            cache = store if self.cache_embeddings else None
            vectors = self._embed_distinct(texts, stats, cache, pairs.fingerprint, on_ray=True)
            index = pd.Index(texts)
            q_vec = vectors[index.get_indexer(q_text)].astype(np.float64)
            p_vec = vectors[index.get_indexer(p_text)].astype(np.float64)
            new = np.einsum("ij,ij->i", q_vec, p_vec)
            pairs.scores[missing] = new
            write = self._score_writer(store, pairs)
            if write is not None:
                write(list(zip(missing.tolist(), new.tolist(), strict=True)))

        out[SCORE] = pairs.scores[pairs.row_pair]
        stats.total_s = time.perf_counter() - started
        self.stats_ = stats
        logger.info(
            "bi-encoder: %d rows, %d distinct pairs (%d from the store), %d texts embedded "
            "(%d embeddings from the store) in %.1f s (%s)",
            stats.rows,
            len(pairs.scores),
            stats.cached,
            stats.computed,
            stats.embeddings_cached,
            stats.total_s,
            f"{stats.per_second:.0f} texts/s in the model" if stats.computed else "no model run",
        )
        return out

    def passage_vectors(self) -> PassageVectors:
        """The stored passage vectors, opened once and checked against this model.

        Raises:
            VectorsMismatchError: they were made by another model (or other settings).
        """
        opened = getattr(self, "vectors_", None)
        if opened is None:
            from evirank.vectors import PassageVectors

            assert self.vectors is not None
            opened = (
                self.vectors
                if isinstance(self.vectors, PassageVectors)
                else PassageVectors.open(self.vectors)
            )
            opened.check_scorer(self)
            self.vectors_ = opened
        return opened

    def score_by_lookup(
        self,
        frame: pd.DataFrame,
        embed: Callable[[list[str]], np.ndarray],
        embed_together: Callable[[list[str]], np.ndarray],
    ) -> tuple[pd.DataFrame, ScoringStats]:
        """:meth:`transform` with stored passage vectors, the model run by the caller's functions.

        When every passage is stored, ``embed`` gets the distinct queries (with the query prefix);
        when some are not (or changed since), ``embed_together`` gets the queries and those passages,
        to embed in one call as :meth:`transform` does. Nothing of this scorer is written (the counts
        are returned, ``stats_`` is left alone), so several threads may call it at once once the
        model is ready (``transform`` has run), as long as the two functions are safe to share.

        Example:
            >>> scorer = BiEncoder(vectors="indexes/scifact/vectors")  # doctest: +SKIP
            >>> scored, stats = scorer.score_by_lookup(
            ...     passages, scorer.embed_exact, scorer.embed)  # doctest: +SKIP
        """
        require_columns(frame, (QID, QUERY, DOCNO, PID, TEXT), "BiEncoder")
        started = time.perf_counter()
        out = frame.copy()
        stats = ScoringStats(rows=len(out))
        if out.empty:
            out[SCORE] = np.array([], dtype=np.float64)
            return out, stats
        return self._transform_by_lookup(out, stats, started, (embed, embed_together))

    def embed_exact(self, texts: list[str]) -> np.ndarray:
        """Unit float32 embeddings of ``texts``, each bitwise what embedding it alone gives.

        Texts are grouped by token length and each group runs unpadded (padding changes a vector's
        last bits), so several queries share a model call without changing any answer; texts of
        fewer than :data:`EXACT_MIN_TOKENS` tokens run one per call (the CPU's matrix kernels for a
        few rows round differently from those for many). On CPU with one torch thread the vectors
        then equal those of embedding each text alone bit for bit (``evirank serve`` checks this at
        start-up and embeds each query alone where it does not hold).

        Example:
            >>> BiEncoder().embed_exact(["a cat", "a dog", "cats purr"]).shape  # doctest: +SKIP
            (3, 384)
        """
        self.prepare()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        backend = self.load()
        n_special = self.encoder_.single_template.n_special
        ids = self.encoder_.token_ids(texts, self.max_length_ - n_special)
        groups: dict[int | tuple[int], list[int]] = {}
        for i, tokens in enumerate(ids):
            alone = len(tokens) + n_special < EXACT_MIN_TOKENS
            groups.setdefault((i,) if alone else len(tokens), []).append(i)
        out: np.ndarray | None = None
        for rows in groups.values():
            if len(rows) * (len(ids[rows[0]]) + n_special) <= self.batch_tokens_:
                # one batch, as _compute_embeddings would build it, without its pipeline's overhead
                batch = self.encoder_.single_batch([ids[i] for i in rows], backend.pad_multiple)
                vectors = np.asarray(backend.forward(backend.prepare(batch)), dtype=np.float32)
            else:
                vectors = self._compute_embeddings([texts[i] for i in rows], ScoringStats(), None)
            if out is None:
                out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out

    def _transform_by_lookup(
        self,
        out: pd.DataFrame,
        stats: ScoringStats,
        started: float,
        embed: tuple[Callable[[list[str]], np.ndarray], Callable[[list[str]], np.ndarray]] | None = None,
    ) -> tuple[pd.DataFrame, ScoringStats]:
        """Score with stored passage vectors; embed the distinct queries and the passages not stored
        (by ``embed``'s first function when every passage is stored, else its second; by this
        scorer's model when None)."""
        vectors = self.passage_vectors()
        texts = out[TEXT].astype(str).to_numpy(dtype=object)
        rows = vectors.lookup(out[DOCNO].astype(str).to_numpy(dtype=object), out[PID].to_numpy())
        found = rows >= 0
        hit = found.copy()
        hit[found] = vectors.texts(rows[found]) == texts[found]
        queries = out[QUERY].astype(str).to_numpy(dtype=object)
        q_distinct = pd.Index(pd.unique(queries))
        missed = pd.Index(pd.unique(texts[~hit]))
        embedded = [self.query_prefix + q for q in q_distinct] + [self.passage_prefix + t for t in missed]
        stats.distinct = len(q_distinct) + int(hit.sum()) + len(missed)
        stats.cached = int(hit.sum())
        if embed is not None:
            fresh = embed[1](embedded) if len(missed) else embed[0](embedded)
            stats.computed += len(embedded)
        else:
            fresh = self._embed_distinct(embedded, stats, None, None)
        q_vec = fresh[: len(q_distinct)][q_distinct.get_indexer(queries)]
        p_vec = np.empty((len(out), q_vec.shape[1]), dtype=np.float32)
        p_vec[hit] = vectors.vectors(rows[hit])
        if len(missed):
            p_vec[~hit] = fresh[len(q_distinct) :][missed.get_indexer(texts[~hit])]
            changed = int((found & ~hit).sum())
            logger.info(
                "%d passages not in the stored vectors (%d of them changed since) were embedded now",
                int((~hit).sum()),
                changed,
            )
        out[SCORE] = np.einsum("ij,ij->i", q_vec.astype(np.float64), p_vec.astype(np.float64))
        stats.total_s = time.perf_counter() - started
        logger.info(
            "bi-encoder: %d rows, %d passages by lookup, %d queries and %d passages embedded in %.2f s",
            stats.rows,
            stats.cached,
            len(q_distinct),
            len(missed),
            stats.total_s,
        )
        return out, stats

    def _embed_distinct(
        self,
        texts: list[str],
        stats: ScoringStats,
        store: Store | None,
        fingerprint: str | None,
        on_ray: bool = False,
    ) -> np.ndarray:
        """Unit embeddings of distinct ``texts``: read from ``store`` when there, else computed
        (on Ray when ``on_ray`` and :attr:`ray` is set) and written to ``store`` every
        ``commit_every`` batches (every block on Ray)."""
        self.prepare()
        hashes = [text_hash(t) for t in texts]
        found: dict[int, np.ndarray] = {}
        if store is not None and fingerprint is not None:
            found = store.get_embeddings(fingerprint, hashes)
        stats.embeddings_cached += len(found)
        todo = np.array([i for i in range(len(texts)) if i not in found], dtype=np.int64)
        dim = next(iter(found.values())).shape[0] if found else None
        chunks: dict[int, np.ndarray] = dict(found)
        if len(todo):
            write = None
            if store is not None and fingerprint is not None:
                write = _embedding_writer(store, fingerprint, texts, hashes)
            todo_texts = [texts[i] for i in todo]
            if on_ray and self.ray is not None:
                columns = {TEXT: lambda items: [todo_texts[i] for i in items]}
                positions = np.arange(len(todo))
                for items, matrix in self.ray.run_blocks(
                    self, columns, positions, stats, desc="bi-encoder (Ray)"
                ):
                    block = np.asarray(matrix, dtype=np.float32)
                    done = list(zip(todo[items].tolist(), block, strict=True))
                    chunks.update(done)
                    if write is not None:
                        write(done)
            else:
                with _ChunkedWriter(write, self.commit_every) as writer:

                    def consume(rows: np.ndarray, output: np.ndarray) -> None:
                        done = list(zip(todo[rows].tolist(), output, strict=True))
                        chunks.update(done)
                        writer.add(done)

                    self._compute_embeddings(todo_texts, stats, consume)
            dim = next(iter(chunks.values())).shape[0]
        vectors = np.zeros((len(texts), dim or 0), dtype=np.float32)
        for i, vector in chunks.items():
            vectors[i] = vector
        return vectors

    def attention(self, query: str, text: str, layers: Sequence[int] | None = None) -> AttentionView:
        """What stands in for attention in a bi-encoder: each (query token, passage token) pair's part
        of the score.

        A bi-encoder reads the query and the passage apart, so no token of one attends to the other.
        But its score is the cosine of mean-pooled token vectors, ``u = mean_i h_i``, ``v = mean_j g_j``,
        so it is exactly a sum over token pairs: ``cos(u, v) = sum_ij h_i . g_j / (n_q n_p |u| |v|)``.
        The view shows those terms between the texts' own tokens (kind ``contribution``); the pairs
        with ``[CLS]``, ``[SEP]`` and prefix tokens make up the rest of the score (the ``note`` says
        how much). It is a view of the output layer only.

        Example:
            >>> view = BiEncoder().attention("art crime", "Robbers took the paintings.")  # doctest: +SKIP
            >>> round(view.score, 4)  # doctest: +SKIP
            0.2611
        """
        from evirank.extras import require
        from evirank.score.attention import (
            AttentionView,
            TokenSide,
            eager_model,
            output_layer_only,
            torch_inputs,
        )

        torch = require("torch", "torch")
        self.prepare()
        model = eager_model(self, "AutoModel")
        n_layers = int(getattr(self.config_, "num_hidden_layers", 0) or 0)
        chosen = output_layer_only(layers, n_layers, self.family, "the score is computed from it")
        encoder = self.encoder_
        cap = self.max_length_ - encoder.single_template.n_special
        start = len(encoder.single_template.prefix)
        sides, states = [], []
        for prefix, raw in ((self.query_prefix, query), (self.passage_prefix, text)):
            pieces = encoder.token_pieces(prefix + raw, cap)
            with torch.inference_mode():
                output = model(**torch_inputs(encoder.single_batch([list(pieces.ids)]), self.device_))
            states.append(output.last_hidden_state[0].double().cpu().numpy())
            own = [i for i, (a, _) in enumerate(pieces.spans) if a >= len(prefix)]  # not the prefix's
            side = TokenSide.from_pieces(prefix + raw, pieces, own)
            shifted = [(a - len(prefix), b - len(prefix)) for a, b in side.spans]
            sides.append((TokenSide.of(raw, side.labels, shifted, side.words), [start + i for i in own]))
        (q_side, q_at), (p_side, p_at) = sides
        h, g = states
        u, v = h.mean(axis=0), g.mean(axis=0)
        pairs = (h @ g.T) / (len(h) * len(g) * np.linalg.norm(u) * np.linalg.norm(v))
        shown = pairs[np.ix_(q_at, p_at)]
        score, part = float(pairs.sum()), float(shown.sum())
        return AttentionView(
            family=self.family,
            kind="contribution",
            query=q_side,
            passage=p_side,
            layers=chosen,
            n_layers=n_layers,
            weights=shown[None, None],
            heads=False,
            score=score,
            note=(
                "A bi-encoder reads the query and the passage apart: no token of one attends to the "
                "other. Shown instead: each token pair's part of the cosine of the mean-pooled vectors "
                f"(exact). The pairs shown add up to {part:.4f} of the score {score:.4f}; pairs with "
                "special (and prefix) tokens make up the rest"
            ),
            model=str(self.model),
        )

    def compute_block(self, columns: Mapping[str, list[str]], stats: ScoringStats) -> np.ndarray:
        """float32 unit vectors of one block's ``text`` column, in order (no store, no prefix added)."""
        return self._compute_embeddings(list(columns[TEXT]), stats, None)

    def _compute_embeddings(
        self,
        texts: list[str],
        stats: ScoringStats,
        consume: Callable[[np.ndarray, np.ndarray], None] | None,
    ) -> np.ndarray:
        """Run the model over ``texts`` (in chunks of :attr:`chunk_items`, length-sorted token-budget
        batches); ``consume(positions, vectors)`` after each batch. Returns the float32 matrix."""
        self.prepare()
        encoder = self.encoder_
        n_special = encoder.single_template.n_special
        ids = TextIds(encoder, texts, self.max_length_ - n_special)
        out: np.ndarray | None = None

        def tokenize(items: np.ndarray) -> np.ndarray:
            ids.need(items)
            return n_special + ids.lengths[items]

        def build(rows: np.ndarray, pad_multiple: int) -> TokenBatch:
            return encoder.single_column_batch(ids.table().take(rows, ids.lengths[rows]), pad_multiple)

        def keep(rows: np.ndarray, output: np.ndarray) -> None:
            nonlocal out
            vectors = np.asarray(output, dtype=np.float32)
            if out is None:
                out = np.zeros((len(texts), *vectors.shape[1:]), dtype=np.float32)
            out[rows] = vectors
            if consume is not None:
                consume(rows, output)

        self._run_batches(len(texts), tokenize, build, keep, stats, desc="bi-encoder")
        if out is None:
            return np.zeros((0, 0), dtype=np.float32)
        return out


def _embedding_writer(
    store: Store, fingerprint: str, texts: list[str], hashes: list[bytes]
) -> Callable[[list[tuple[int, np.ndarray]]], None]:
    """A writer of (text index, vector) rows into ``store``."""

    def write(rows: list[tuple[int, np.ndarray]]) -> None:
        store.put_texts([texts[i] for i, _ in rows], [hashes[i] for i, _ in rows])
        store.put_embeddings(fingerprint, [hashes[i] for i, _ in rows], np.stack([v for _, v in rows]))

    return write


def _claims(info: ModelInfo) -> int:
    """A sentence-transformers folder that pools is a bi-encoder; a bare encoder may be one."""
    if any(kind.endswith("Pooling") for kind in info.modules):
        return 3
    if info.architectures and all(a.endswith("Model") for a in info.architectures):
        return 1  # an encoder without a head (BertModel): mean-pooled, as all-MiniLM-L6-v2 is
    return 0


FAMILY = register_family(
    Family(
        "bi",
        scorer=BiEncoder,
        summary="a bi-encoder: the cosine of mean-pooled query and passage embeddings "
        "(all-MiniLM-L6-v2 by default)",
        claims=_claims,
        backends=("torch", "onnx", "onnx-int8", "openvino", "openvino-int8"),
        needs_model=False,
        stores_passages=True,
        recipe="evirank.train.contrastive:ContrastiveRecipe",
        scale="cosine",
    )
)
