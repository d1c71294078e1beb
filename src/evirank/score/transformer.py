"""What every transformer scorer shares, whatever its family: lazy loading, fingerprints, the
store, chunked writes, the batched model loop, timing."""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import pandas as pd

from evirank.config import BlockRunner, Runtime
from evirank.errors import ArgumentError, InputFormatError
from evirank.extras import require
from evirank.frames import QUERY, TEXT
from evirank.progress import progress_bar
from evirank.score.backends import Backend, ModelHead, Pending, Task, TokenBatch, get_backend
from evirank.score.batching import token_budget_batches
from evirank.score.devices import default_batch_tokens
from evirank.score.fingerprint import model_fingerprint, reading_model, resolve_model_dir
from evirank.score.store import Store, text_hash
from evirank.score.stores import open_store
from evirank.score.token_files import load_ids, save_new_ids, token_folder
from evirank.score.tokenize import TextEncoder
from evirank.stage import Stage

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The longest input a scorer will build, whatever the model allows (BERT's 512 positions).
MAX_LENGTH_CAP = 512


@dataclass
class ScoringStats:
    """Counts and timings of the last ``transform`` call (``scorer.stats_``).

    Attributes:
        rows: rows in the input frame. distinct: distinct (query, text) pairs (or texts, for
        embeddings). cached: distinct pairs found in the store. embeddings_cached: embeddings
        (of queries and passages, bi-encoder) found in the store instead of being computed.
        computed: items run through the model. batches: model batches. tokens: token slots the
        model computed (rows x padded width; a packed batch's real tokens alone).
        tokenize_s: seconds the model waited for tokenised batches (tokenisation runs in a
        background thread, overlapped with the model, so ideally only the first chunk's shows).
        tokenize_busy_s: seconds that thread spent tokenising and padding in all.
        model_s / total_s: seconds in the model, in all.
    """

    rows: int = 0
    distinct: int = 0
    cached: int = 0
    embeddings_cached: int = 0
    computed: int = 0
    batches: int = 0
    tokens: int = 0
    tokenize_s: float = 0.0
    tokenize_busy_s: float = 0.0
    model_s: float = 0.0
    total_s: float = 0.0

    @property
    def per_second(self) -> float:
        """Model throughput: computed items per second of model time."""
        return self.computed / self.model_s if self.model_s > 0 else float("nan")


@dataclass
class DistinctPairs:
    """The distinct (query, text) pairs of a Passages frame, and how rows map onto them.

    Attributes:
        queries / texts: distinct query and passage texts. row_query / row_text: each row's
        index into them. row_pair: each row's distinct pair. pair_query / pair_text: each
        distinct pair's query and text index. query_hash / text_hash: store keys of the texts.
        fingerprint: the scorer's final fingerprint when a store is used. scores: one per
        distinct pair (``nan`` until known).
    """

    queries: list[str]
    texts: list[str]
    row_query: np.ndarray
    row_text: np.ndarray
    row_pair: np.ndarray
    pair_query: np.ndarray
    pair_text: np.ndarray
    query_hash: list[bytes]
    text_hash: list[bytes]
    scores: np.ndarray
    fingerprint: str | None = None

    @classmethod
    def of(cls, frame: pd.DataFrame) -> DistinctPairs:
        """Factorise the query and text columns of ``frame``."""
        for column in (QUERY, TEXT):
            bad = frame[column].isna().to_numpy(dtype=bool)
            if bad.any():
                raise ArgumentError(
                    f"the {column!r} column: expected text in every row, found a missing value "
                    f"(None or NaN) in row {int(np.flatnonzero(bad)[0])} ({int(bad.sum())} such row(s))"
                )
        q_codes, q_uniq = pd.factorize(frame[QUERY].astype(str), sort=False)
        p_codes, p_uniq = pd.factorize(frame[TEXT].astype(str), sort=False)
        n_texts = max(len(p_uniq), 1)
        pair_codes, pair_uniq = pd.factorize(q_codes.astype(np.int64) * n_texts + p_codes, sort=False)
        queries, texts = [str(q) for q in q_uniq], [str(p) for p in p_uniq]
        return cls(
            queries=queries,
            texts=texts,
            row_query=np.asarray(q_codes, dtype=np.int64),
            row_text=np.asarray(p_codes, dtype=np.int64),
            row_pair=np.asarray(pair_codes, dtype=np.int64),
            pair_query=(np.asarray(pair_uniq) // n_texts).astype(np.int64),
            pair_text=(np.asarray(pair_uniq) % n_texts).astype(np.int64),
            query_hash=[text_hash(q) for q in queries],
            text_hash=[text_hash(p) for p in texts],
            scores=np.full(len(pair_uniq), np.nan),
        )

    def pair_hashes(self, pairs: np.ndarray | None = None) -> tuple[list[bytes], list[bytes]]:
        """Store keys (query hashes, text hashes) of distinct pairs (all when ``pairs`` is None)."""
        chosen = np.arange(len(self.scores)) if pairs is None else pairs
        return (
            [self.query_hash[i] for i in self.pair_query[chosen]],
            [self.text_hash[i] for i in self.pair_text[chosen]],
        )

    def missing(self) -> np.ndarray:
        """Indices of distinct pairs without a score."""
        return np.flatnonzero(np.isnan(self.scores))


class _ChunkedWriter:
    """Buffers computed results and writes them every ``every`` batches, and on exit.

    Exiting on an exception (Ctrl-C included) still writes what was computed, so an
    interrupted run loses at most the batch in flight (or, if the process is killed, the last
    ``every`` batches).
    """

    def __init__(self, write: Callable[[list[Any]], None] | None, every: int) -> None:
        self._write = write
        self._every = max(1, every)
        self._rows: list[Any] = []
        self._batches = 0

    def add(self, rows: list[Any]) -> None:
        if self._write is None:
            return
        self._rows.extend(rows)
        self._batches += 1
        if self._batches >= self._every:
            self.flush()

    def flush(self) -> None:
        if self._write is not None and self._rows:
            self._write(self._rows)
        self._rows = []
        self._batches = 0

    def __enter__(self) -> _ChunkedWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()


class TransformerScorer(Stage):
    """Base of the scorers: parameters, lazy model/tokenizer/store, fingerprint, batched runs.

    A family's scorer sets ``family`` (its registered name), ``task`` (what its backend computes:
    ``"classify"``, ``"embed"``, or a :class:`~evirank.score.backends.ModelHead` of its own) and
    ``block_columns`` (the text columns :meth:`compute_block` reads), and implements ``transform``
    and :meth:`compute_block`.
    """

    family: ClassVar[str]
    task: ClassVar[Task | ModelHead]
    #: the text columns one block of work needs (see :meth:`compute_block`).
    block_columns: ClassVar[tuple[str, ...]] = ()
    #: Items tokenised and length-sorted together (a Ray block is one or more such chunks).
    chunk_items: int = 16384

    def __init__(self, model: str | os.PathLike[str], runtime: Runtime | None = None) -> None:
        runtime = Runtime() if runtime is None else runtime
        if not isinstance(runtime, Runtime):
            raise TypeError(
                f"runtime must be an evirank.config.Runtime (device, backend, batching, ...), "
                f"found {type(runtime).__name__}"
            )
        if runtime.max_length is not None and runtime.max_length < 8:
            raise ArgumentError(f"max_length: expected at least 8 tokens, found {runtime.max_length}")
        if isinstance(model, bool) or not isinstance(model, str | os.PathLike) or not str(model).strip():
            raise ArgumentError(
                f"model: expected a Hugging Face id or a model folder (a non-empty string or path), "
                f"found {model!r}"
            )
        get_backend(runtime.backend)  # fail early on an unknown name
        self.model = model
        self.runtime = runtime

    # -- the runtime's settings, read where scoring needs them ---------------------------
    @property
    def device(self) -> str:
        """Where the model runs (as asked: ``auto``, ``cpu``, ...; ``device_`` once resolved)."""
        return self.runtime.device

    @property
    def backend(self) -> str:
        """The engine."""
        return self.runtime.backend

    @property
    def dtype(self) -> str:
        """The precision asked for (``precision_`` once resolved)."""
        return self.runtime.dtype

    @property
    def batch_tokens(self) -> int | None:
        """The token budget per batch asked for (``batch_tokens_`` once resolved)."""
        return self.runtime.batch_tokens

    @property
    def max_length(self) -> int | None:
        """The input cap asked for (``max_length_`` once resolved)."""
        return self.runtime.max_length

    @property
    def commit_every(self) -> int:
        """New scores go to the store every this many batches."""
        return self.runtime.commit_every

    @property
    def store(self) -> Any:
        """The score store (or its location), or None."""
        return self.runtime.store

    @store.setter
    def store(self, store: Any) -> None:
        self.runtime = self.runtime.with_changes(store=store)
        self.__dict__.pop("store_", None)
        self.__dict__.pop("token_ids_loaded_", None)

    @property
    def ray(self) -> BlockRunner | None:
        """What runs the model's blocks elsewhere (Ray), or None."""
        return self.runtime.ray

    @ray.setter
    def ray(self, ray: BlockRunner | None) -> None:
        self.runtime = self.runtime.with_changes(ray=ray)

    def __getstate__(self) -> dict[str, Any]:
        """Parameters only: a pickled scorer (sent to a worker process) reloads lazily there."""
        return {k: v for k, v in vars(self).items() if not k.endswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def kind(self) -> str:
        """The family's name (as the score store records it)."""
        return self.family

    # -- lazy state ------------------------------------------------------------------
    def prepare(self) -> None:
        """Resolve the model folder, tokenizer, limits, device and precision (no weights loaded)."""
        if getattr(self, "encoder_", None) is not None:
            return
        transformers = require("transformers", "torch")
        model_dir = resolve_model_dir(self.model)
        try:
            with reading_model(model_dir):  # a config.json that lies about the weights is named
                tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_dir))
                config = transformers.AutoConfig.from_pretrained(str(model_dir))
        except InputFormatError:
            raise
        except (OSError, ValueError, KeyError) as exc:
            raise InputFormatError(
                model_dir,
                None,
                "a Hugging Face model folder (config.json, tokenizer files, weights)",
                "one transformers cannot load: " + (str(exc).strip().splitlines() or [type(exc).__name__])[0],
            ) from exc
        self._set_up(model_dir, tokenizer, config)

    def _set_up(self, model_dir: Path | None, tokenizer: Any, config: Any) -> None:
        """Limits, device, precision and the text encoder from a tokenizer and a model config."""
        limits = [MAX_LENGTH_CAP]
        if getattr(tokenizer, "model_max_length", None) and tokenizer.model_max_length < 100_000:
            limits.append(int(tokenizer.model_max_length))
        if getattr(config, "max_position_embeddings", None):
            limits.append(int(config.max_position_embeddings))
        limit = min(limits)
        if self.max_length is not None:
            wanted = self.max_length
        else:
            wanted = self._default_max_length(model_dir) if model_dir is not None else MAX_LENGTH_CAP
        if wanted > limit:
            logger.info("max_length %d lowered to %d, the model's limit", wanted, limit)
        device, precision = get_backend(self.backend).resolve(self.device, self.dtype)
        self.model_dir_ = model_dir
        self.config_ = config
        self.max_length_ = min(wanted, limit)
        self.device_ = device
        self.precision_ = precision
        hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None)
        budget = default_batch_tokens(device, hidden if isinstance(hidden, int) else None)
        self.batch_tokens_ = self.batch_tokens or max(budget, self.max_length_)
        self.encoder_ = TextEncoder(tokenizer)
        self.backend_: Backend | None = None
        self.fingerprint_: str | None = None
        self._check_settings()

    def _default_max_length(self, model_dir: Path) -> int:
        return MAX_LENGTH_CAP

    def adopt(self, model: Any, tokenizer: Any) -> None:
        """Score with a model already in memory (one being trained) instead of loading ``self.model``.

        Tokenisation, truncation, batching and the relevance read-out stay this scorer's, so a
        model is validated exactly as it will be used. The model is used as it is (its device,
        its mode: put it in eval mode while scoring); only the torch backend can adopt one, and
        no score store is used (the weights change between calls).

        Raises:
            ValueError: another backend than torch, or a score store.

        Example:
            >>> from evirank.score import CrossEncoder
            >>> scorer = CrossEncoder("in-memory", Runtime(device="cpu"))  # doctest: +SKIP
            >>> scorer.adopt(model, tokenizer)  # doctest: +SKIP
        """
        from evirank.score.backends import TorchBackend

        if self.backend != "torch" or self.store is not None:
            raise ValueError("only the torch backend without a score store can score a model in memory")
        self._set_up(None, tokenizer, model.config)
        backend = TorchBackend.adopting(model, self.task, self.device_, self.precision_)
        backend.use_layout(self.runtime.batch_layout)
        self.backend_ = backend
        self.load_s_ = 0.0

    def passage_budget(self) -> tuple[Any, int]:
        """(tokenizer, tokens left for one passage): what a segmenter may fill without truncation.

        A bi-encoder's passage gets ``max_length - special tokens``; a cross-encoder's also leaves
        room for the query (``max_length - special tokens - query_max_tokens``). Loads the
        tokenizer, not the model weights.

        Example:
            >>> from evirank.score import BiEncoder
            >>> BiEncoder().passage_budget()[1]  # doctest: +SKIP
            254
        """
        self.prepare()
        return self.encoder_.tokenizer, self._passage_room()

    def _passage_room(self) -> int:
        return int(self.max_length_ - self.encoder_.single_template.n_special)

    def _check_settings(self) -> None:
        """Validate settings that need the tokenizer (subclasses)."""

    def settings(self) -> dict[str, Any]:
        """What changes a score besides the model files, hashed into the fingerprint (subclasses extend)."""
        return {
            "kind": self.family,
            "max_length": self.max_length_,
            "backend": self.backend,
            "precision": self.precision_,
        }

    def load(self) -> Backend:
        """Load the model (once) and return its backend; errors show here, before long work."""
        self.prepare()
        if self.backend_ is None:
            assert self.model_dir_ is not None  # only an adopted model has none, and it has a backend
            started = time.perf_counter()
            with reading_model(self.model_dir_):
                backend = get_backend(self.backend).load(
                    self.model_dir_,
                    self.task,
                    self.device_,
                    self.precision_,
                    threads=self.runtime.model_threads,
                )
            backend.use_layout(self.runtime.batch_layout)
            self.backend_ = backend
            self.load_s_ = time.perf_counter() - started  # reported by evirank rerank's stage timings
            logger.info(
                "loaded %s on %s (%s, %s backend) in %.1f s",
                self.model,
                backend.device,
                backend.precision,
                self.backend,
                self.load_s_,
            )
            if backend.newly_initialised:
                logger.warning(
                    "%s: %d parameters are not in the checkpoint and were initialised at random (%s); "
                    "scores mean nothing until the model is trained, and they are cached under a "
                    "fingerprint of these random weights",
                    self.model,
                    len(backend.newly_initialised),
                    ", ".join(backend.newly_initialised[:4]),
                )
                self.fingerprint_ = None  # now includes the random parameters
        return self.backend_

    @property
    def fingerprint(self) -> str:
        """sha256 hex naming the model files and every setting that changes a score."""
        self.prepare()
        if self.model_dir_ is None:
            raise ValueError("a model adopted in memory has no fingerprint (its weights change)")
        if self.fingerprint_ is None:
            store = self._store()
            base = model_fingerprint(
                self.model_dir_,
                self.settings(),
                store.cached_file_hash if store is not None else None,
                store.put_file_hash if store is not None else None,
            )
            if self.backend_ is not None and self.backend_.newly_initialised:
                digest = self.backend_.parameters_digest()
                base = hashlib.sha256(f"{base}:{digest}".encode()).hexdigest()
            self.fingerprint_ = base
        return self.fingerprint_

    def describe(self) -> dict[str, Any]:
        """A readable description of the fingerprint (stored beside it)."""
        self.prepare()
        random_init = bool(self.backend_ is not None and self.backend_.newly_initialised)
        return {"model": str(self.model), **self.settings(), "random_init": random_init}

    def _store(self) -> Store | None:
        if self.store is None:
            return None
        if isinstance(self.store, (str, os.PathLike)):
            if getattr(self, "store_", None) is None:
                self.store_ = open_store(self.store)
            return self.store_
        return self.store

    def _use_store(
        self, frame: pd.DataFrame, pairs: DistinctPairs, *, record_segments: bool = True
    ) -> Store | None:
        """Fill ``pairs.scores`` from the store and (``record_segments``) record the frame's
        segments there.

        When something is missing the model is loaded first: a checkpoint with randomly
        initialised parameters only knows its fingerprint once loaded.
        """
        store = self._store()
        if store is None:
            return None
        qhashes, phashes = pairs.pair_hashes()
        fingerprint = self.fingerprint
        pairs.scores = store.lookup(fingerprint, qhashes, phashes)
        if np.isnan(pairs.scores).any():
            self.load()
            if self.fingerprint != fingerprint:
                fingerprint = self.fingerprint
                pairs.scores = store.lookup(fingerprint, qhashes, phashes)
        self._register()
        pairs.fingerprint = fingerprint
        if not record_segments:
            return store
        store.record_segments(
            fingerprint,
            frame,
            [pairs.query_hash[i] for i in pairs.row_query],
            [pairs.text_hash[i] for i in pairs.row_text],
        )
        return store

    def _score_writer(
        self, store: Store | None, pairs: DistinctPairs
    ) -> Callable[[list[tuple[int, float]]], None] | None:
        """A writer of (distinct pair index, score) rows into the store, or None without one."""
        if store is None or pairs.fingerprint is None:
            return None
        fingerprint = pairs.fingerprint

        def write(rows: list[tuple[int, float]]) -> None:
            qhashes, phashes = pairs.pair_hashes(np.array([i for i, _ in rows], dtype=np.int64))
            store.put(fingerprint, qhashes, phashes, [s for _, s in rows])

        return write

    def _token_encoders(self) -> list[TextEncoder]:
        """The encoders whose token ids are kept beside a score store (subclasses with their own)."""
        return [self.encoder_]

    def _load_token_ids(self) -> None:
        """Read the token ids kept beside the score store into the encoders' caches (once), so texts
        tokenised by an earlier run are not tokenised again; a store that is not a path keeps none."""
        if getattr(self, "token_ids_loaded_", False) or not isinstance(self.store, (str, os.PathLike)):
            return
        for encoder in self._token_encoders():
            encoder.cache.keep_unsaved = True
            folder = token_folder(self.store, encoder.fingerprint)
            read = load_ids(encoder.cache, folder, encoder.fingerprint)
            if read:
                logger.info("%s: %d texts' token ids read from %s", self.family, read, folder)
        self.token_ids_loaded_ = True

    def _save_token_ids(self) -> None:
        """Keep the token ids of texts tokenised since the last save beside the score store."""
        if not getattr(self, "token_ids_loaded_", False):
            return
        assert isinstance(self.store, (str, os.PathLike))
        for encoder in self._token_encoders():
            try:
                save_new_ids(
                    encoder.cache, token_folder(self.store, encoder.fingerprint), encoder.fingerprint
                )
            except OSError as exc:  # only a cache: scoring goes on, texts are tokenised again next time
                logger.warning("token ids not kept beside the score store %s: %s", self.store, exc)

    def _register(self) -> str:
        store = self._store()
        fingerprint = self.fingerprint
        if store is not None:
            store.register(fingerprint, kind=self.family, description=self.describe())
        return fingerprint

    def compute_block(self, columns: Mapping[str, list[str]], stats: ScoringStats) -> np.ndarray:
        """Run the model on one block of items (the texts in ``columns``, named by
        ``block_columns``), without the store: the work a Ray actor does. Returns one row per item
        (a score, or a vector), exactly as the scorer's own loop computes them."""
        raise NotImplementedError(f"the {self.family} family cannot run on Ray")

    @staticmethod
    def new_stats() -> ScoringStats:
        """Empty counters, for work done outside :meth:`transform` (a Ray actor's blocks)."""
        return ScoringStats()

    def engine_threads(self) -> int:
        """The CPU threads the model runs with in this process: ``model_threads``, else the engine's
        default. A model replica elsewhere (a Ray actor) is given the same count: sums in a matrix
        product are grouped by thread, so another count can change a score's last bits."""
        return self.runtime.model_threads or get_backend(self.backend).default_threads()

    def worker_state(self) -> dict[str, Any]:
        """The parameters a model replica elsewhere (a Ray actor) is rebuilt from: no store, no Ray."""
        return {**self.__getstate__(), "runtime": self.runtime.with_changes(store=None, ray=None)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TransformerScorer:
        """A scorer rebuilt from :meth:`worker_state` (loads lazily)."""
        scorer = cls.__new__(cls)
        scorer.__setstate__(state)
        return scorer

    # -- the batched model loop ------------------------------------------------------
    def _run_batches(
        self,
        n_items: int,
        tokenize: Callable[[np.ndarray], np.ndarray],
        build: Callable[[np.ndarray, int], TokenBatch],
        consume: Callable[[np.ndarray, np.ndarray], None],
        stats: ScoringStats,
        desc: str,
        positions: np.ndarray | None = None,
    ) -> None:
        """Run the model over items ``0 .. n_items - 1`` in token-budget batches.

        Items are taken in chunks of :attr:`chunk_items` in input order (by ``positions // chunk_items``
        when given: the items' places among all, as a Ray job cuts its blocks); a background thread
        tokenises a chunk, sorts it by length into token-budget batches, pads each batch and hands
        it to the backend's ``prepare`` (pinned memory on CUDA) while the model runs the batch
        before: tokenisation overlaps with compute.

        Args:
            n_items: how many items to run.
            tokenize: (item indices) -> their token counts; tokenises what those items need.
            build: (item indices, pad multiple) -> the padded batch.
            consume: (item indices, model output rows) -> None; called after every batch.
            stats: updated in place.
            desc: progress bar label.
            positions: increasing places of the items among all (default: ``0 .. n_items - 1``).
        """
        backend = self.load()
        budget, multiple = self.batch_tokens_, backend.pad_multiple

        def produce() -> Iterator[tuple[np.ndarray, tuple[int, int], Any, float, float]]:
            size = max(1, int(self.chunk_items))
            places = np.arange(n_items, dtype=np.int64) if positions is None else np.asarray(positions)
            cuts = np.flatnonzero(np.diff(places // size)) + 1
            for chunk in np.split(np.arange(n_items, dtype=np.int64), cuts) if n_items else []:
                t0 = time.perf_counter()
                lengths = tokenize(chunk)
                tokenize_s = time.perf_counter() - t0
                for rows in token_budget_batches(lengths, budget, multiple):
                    t1 = time.perf_counter()
                    batch = build(chunk[rows], multiple)
                    prepared = backend.prepare(batch)
                    yield chunk[rows], batch.shape, prepared, tokenize_s, time.perf_counter() - t1
                    tokenize_s = 0.0

        bar = progress_bar(desc=desc, total=n_items, unit="item")
        batches = prefetch(produce(), PREFETCH_BATCHES)
        # the batch launched last, read back once the next one is launched (on a GPU the device
        # runs it meanwhile; elsewhere launch() has already run it)
        waiting: tuple[np.ndarray, Pending] | None = None

        def read_back() -> None:
            nonlocal waiting
            if waiting is not None:
                t = time.perf_counter()
                items, pending = waiting
                waiting = None
                output = pending.result()
                stats.model_s += time.perf_counter() - t
                consume(items, output)
                bar.update(len(items))

        try:
            with backend.call_scope():  # e.g. the weights cast to bf16 once per call
                while True:
                    t1 = time.perf_counter()
                    try:
                        items, (n, width), prepared, tokenize_s, build_s = next(batches)
                    except StopIteration:
                        break
                    t2 = time.perf_counter()
                    stats.tokenize_s += t2 - t1  # the model waited for the tokeniser this long
                    pending = backend.launch(prepared)
                    stats.model_s += time.perf_counter() - t2
                    read_back()
                    waiting = (items, pending)
                    if not pending.on_the_way:
                        read_back()
                    stats.batches += 1
                    layout = getattr(prepared, "layout", None)  # a packed batch computes its real tokens only
                    stats.tokens += n * width if layout is None else layout.tokens
                    stats.computed += n
                    stats.tokenize_busy_s += tokenize_s + build_s
                read_back()
        except BaseException:
            # an error or Ctrl-C while the next batch ran: the batch the device had already
            # finished is still consumed (and so kept in the store), as before the overlap
            try:
                read_back()
            except Exception:  # the error being raised is the one to report
                logger.debug("the last launched batch could not be read back", exc_info=True)
            raise
        finally:
            batches.close()
            bar.close()


#: Items tokenised and length-sorted together: large enough that sorting leaves little padding,
#: small enough that the first chunk's tokenisation (not overlapped) is short.
CHUNK_ITEMS = TransformerScorer.chunk_items
#: Batches the background thread prepares ahead of the model.
PREFETCH_BATCHES = 2


def prefetch(items: Iterator[T], depth: int) -> Generator[T, None, None]:
    """Iterate ``items`` with a background thread running up to ``depth`` items ahead.

    The producer's exceptions are raised in the consumer; when the consumer stops early (an
    exception, Ctrl-C, ``break``) the producer stops at its next item. Model calls in torch and
    ONNX Runtime release the GIL, so producing (tokenising, padding, pinning) overlaps with them.

    Example:
        >>> list(prefetch(iter(range(5)), depth=2))
        [0, 1, 2, 3, 4]
    """
    box: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def put(kind: str, value: Any) -> bool:
        while not stop.is_set():
            try:
                box.put((kind, value), timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put("item", item):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put("error", exc)
            return
        put("done", None)

    thread = threading.Thread(target=work, name="evirank-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            tag, value = box.get()
            if tag == "done":
                return
            if tag == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join(timeout=5.0)
