"""The late-interaction family (ColBERT): per-token vectors and the sum of their best matches (MaxSim).

A query and a passage are encoded separately into one vector per token: the encoder's last hidden
states through the model's linear projection(s), each L2-normalised. The score is
``sum over query tokens of max over passage tokens of cosine(q_i, p_j)`` (Khattab and Zaharia,
"ColBERT: Efficient and Effective Passage Search via Contextualized Late Interaction over BERT",
SIGIR 2020), so each query token names the passage token that carried it: :meth:`ColBERT.matches`
gives those words (``evirank explain`` shows them).

How the reference implementations encode, and what is done alike here:

- PyLate (``pylate/models/colbert.py``, ``pylate/models/Dense.py``): a sentence-transformers folder
  whose ``modules.json`` lists a Transformer and one or more ``pylate.models.Dense.Dense`` modules
  (a subfolder such as ``1_Dense/`` with ``config.json`` holding ``in_features``, ``out_features``,
  ``bias``, ``activation_function``, ``use_residual``, and ``model.safetensors`` or
  ``pytorch_model.bin`` holding ``linear.weight`` / ``linear.bias`` / ``residual.weight``).
  ``config_sentence_transformers.json`` carries ``query_prefix`` / ``document_prefix`` (``"[Q] "`` and
  ``"[D] "``, added tokens whose id is inserted right after ``[CLS]``), ``query_length`` (32),
  ``document_length`` (180), ``do_query_expansion`` (queries padded with ``[MASK]`` up to
  ``query_length``, the mask tokens hidden from attention unless ``attend_to_expansion_tokens``, and
  every query position, expansion included, taking part in MaxSim) and ``skiplist_words`` (documents'
  punctuation tokens are encoded but left out of MaxSim). Token vectors are normalised after the
  projection.
- Stanford ColBERT (``colbert/modeling/hf_colbert.py``, ``HF_ColBERT``): ``config.json`` names the
  ``HF_ColBERT`` architecture, the checkpoint holds the BERT weights and ``linear.weight`` (no bias);
  ``artifact.metadata`` may give ``query_maxlen``, ``doc_maxlen``, ``query_token_id`` /
  ``doc_token_id`` (default ``[unused0]`` / ``[unused1]``) and ``attend_to_mask_tokens``. PyLate reads
  these folders the same way, and so does this module.

Left out: PyLate's document token pooling (``pool_factor``), its sliding-window encoding of long
texts (documents are cut at ``document_length`` tokens, as PyLate does by default), activation
functions other than the identity and tanh, prompts (``prompts`` in the sentence-transformers
config), and a Transformer module stored in a subfolder (it must be the folder's root, as PyLate
saves it). Only the torch backend runs it. Passage token vectors are kept in the score store
(keyed by text), not in a passage-vector folder beside the index (``evirank embed`` writes one
vector per passage).
"""

from __future__ import annotations

import json
import logging
import os
import string
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.config import Runtime
from evirank.errors import InputFormatError
from evirank.extras import require
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.score.backends import TokenBatch
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.store import Store, text_hash
from evirank.score.transformer import DistinctPairs, ScoringStats, TransformerScorer, _ChunkedWriter

if TYPE_CHECKING:
    from evirank.score.attention import AttentionView

logger = logging.getLogger(__name__)

#: The block column saying whether an item is a query (``"q"``) or a passage (``"d"``).
SIDE = "side"
QUERY_SIDE, PASSAGE_SIDE = "q", "d"
_ACTIVATIONS = ("torch.nn.modules.linear.Identity", "torch.nn.modules.activation.Tanh")


@dataclass(frozen=True)
class Projection:
    """One linear layer after the encoder (a PyLate ``Dense`` module, or Stanford's ``linear``).

    Attributes:
        weights: the file holding its tensors. prefix: their names' prefix (``"linear."`` is read
        under it). in_features / out_features / bias: its shape. activation: the activation's
        class path. residual: whether a residual branch is added (PyLate ``use_residual``).
    """

    weights: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str = _ACTIVATIONS[0]
    residual: bool = False

    def describe(self) -> dict[str, Any]:
        """What goes into the fingerprint (the weights themselves are hashed with the model files)."""
        return {
            "in": self.in_features,
            "out": self.out_features,
            "bias": self.bias,
            "activation": self.activation,
            "residual": self.residual,
        }


@dataclass(frozen=True)
class Layout:
    """What a ColBERT folder says about its inputs and its projection (read from JSON, no weights).

    Attributes:
        projections: the linear layers, in order. query_prefix / document_prefix: the marker
        tokens ("" for none). query_length / document_length: token caps (special tokens included).
        query_expansion: pad queries with ``[MASK]`` up to ``query_length``. attend_to_expansion:
        let the encoder attend to those. skiplist: passage tokens left out of MaxSim.
    """

    projections: tuple[Projection, ...]
    query_prefix: str = "[Q] "
    document_prefix: str = "[D] "
    query_length: int = 32
    document_length: int = 180
    query_expansion: bool = True
    attend_to_expansion: bool = False
    skiplist: tuple[str, ...] = field(default_factory=lambda: tuple(string.punctuation))

    @property
    def dim(self) -> int:
        """Dimensions of a token vector."""
        return self.projections[-1].out_features if self.projections else 0


def _weights_file(folder: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return folder / name
    raise InputFormatError(folder, None, "model.safetensors or pytorch_model.bin", "neither")


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputFormatError(path, None, "a JSON file", f"one that cannot be read ({exc})") from exc
    if not isinstance(data, dict):
        raise InputFormatError(path, None, "a JSON object", type(data).__name__)
    return data


def _read_tensor(path: Path, name: str) -> Any:
    """One tensor of a safetensors or PyTorch checkpoint (None when absent)."""
    torch = require("torch", "torch")
    if path.suffix == ".safetensors":
        safetensors = require("safetensors", "torch")
        with safetensors.safe_open(str(path), framework="pt", device="cpu") as f:
            return f.get_tensor(name) if name in f.keys() else None  # noqa: SIM118 (safe_open is no dict)
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    return state.get(name)


def read_layout(model_dir: str | os.PathLike[str]) -> Layout:
    """The :class:`Layout` of a PyLate / sentence-transformers or Stanford ``HF_ColBERT`` folder.

    Raises:
        InputFormatError: neither a Dense module in ``modules.json`` nor an ``HF_ColBERT`` checkpoint.

    Example:
        >>> read_layout("models/colbert").query_length  # doctest: +SKIP
        32
    """
    folder = Path(model_dir)
    projections: list[Projection] = []
    values: dict[str, Any] = {}
    if (folder / "modules.json").is_file():
        listed = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        for module in listed if isinstance(listed, list) else []:
            kind = str(module.get("type", ""))
            if not kind.endswith("Dense"):
                continue
            sub = folder / str(module.get("path", ""))
            config = _json(sub / "config.json")
            activation = str(config.get("activation_function") or _ACTIVATIONS[0])
            if activation not in _ACTIVATIONS:
                raise InputFormatError(
                    sub / "config.json",
                    None,
                    f"an activation_function of {', '.join(_ACTIVATIONS)}",
                    activation,
                )
            projections.append(
                Projection(
                    _weights_file(sub),
                    int(config["in_features"]),
                    int(config["out_features"]),
                    bool(config.get("bias", True)),
                    activation,
                    bool(config.get("use_residual", False)),
                )
            )
        if (folder / "config_sentence_transformers.json").is_file():
            values = _json(folder / "config_sentence_transformers.json")
    if not projections:
        config = _json(folder / "config.json") if (folder / "config.json").is_file() else {}
        if "HF_ColBERT" not in (config.get("architectures") or ()):
            raise InputFormatError(
                folder,
                None,
                "a ColBERT model: a Dense module in modules.json (PyLate) or the HF_ColBERT architecture",
                "neither",
            )
        weights = _weights_file(folder)
        linear = _read_tensor(weights, "linear.weight")
        if linear is None:
            raise InputFormatError(weights, None, "a linear.weight tensor (HF_ColBERT)", "none")
        projections.append(Projection(weights, int(linear.shape[1]), int(linear.shape[0]), False))
        meta = _json(folder / "artifact.metadata") if (folder / "artifact.metadata").is_file() else {}
        values = {
            "query_prefix": meta.get("query_token_id", "[unused0]"),
            "document_prefix": meta.get("doc_token_id", "[unused1]"),
            "query_length": meta.get("query_maxlen"),
            "document_length": meta.get("doc_maxlen"),
            "attend_to_expansion_tokens": meta.get("attend_to_mask_tokens"),
        }
    chosen = {key: value for key, value in values.items() if value is not None}
    default = Layout(())
    expansion = bool(chosen.get("do_query_expansion", default.query_expansion))
    return Layout(
        tuple(projections),
        query_prefix=str(chosen.get("query_prefix", default.query_prefix)),
        document_prefix=str(chosen.get("document_prefix", default.document_prefix)),
        query_length=int(chosen.get("query_length", default.query_length)),
        document_length=int(chosen.get("document_length", default.document_length)),
        query_expansion=expansion,
        attend_to_expansion=expansion and bool(chosen.get("attend_to_expansion_tokens", False)),
        skiplist=tuple(str(w) for w in chosen.get("skiplist_words", default.skiplist)),
    )


class TokenVectorsHead:
    """The torch module of a ColBERT folder: encoder, projection(s), per-token L2 normalisation.

    Its ``forward(input_ids, attention_mask[, token_type_ids])`` returns float
    [batch, tokens, dim] unit vectors (one per position, padding included).
    """

    name = "colbert-token-vectors"

    def load_torch(self, model_dir: Path) -> tuple[Any, tuple[str, ...]]:
        torch = require("torch", "torch")
        transformers = require("transformers", "torch")
        layout = read_layout(model_dir)
        encoder, info = transformers.AutoModel.from_pretrained(str(model_dir), output_loading_info=True)
        missing = [k for k in sorted(info.get("missing_keys", ())) if not k.startswith("pooler.")]
        layers = torch.nn.ModuleList()
        for spec in layout.projections:
            layer = torch.nn.Module()
            layer.linear = torch.nn.Linear(spec.in_features, spec.out_features, bias=spec.bias)
            layer.activation = torch.nn.Tanh() if spec.activation.endswith("Tanh") else torch.nn.Identity()
            if spec.residual and spec.in_features != spec.out_features:
                layer.residual = torch.nn.Linear(spec.in_features, spec.out_features, bias=False)
            for name, parameter in layer.state_dict().items():
                stored = _read_tensor(spec.weights, name)
                if stored is None:
                    missing.append(f"{spec.weights.parent.name}/{name}")
                    continue
                if tuple(stored.shape) != tuple(parameter.shape):
                    raise InputFormatError(
                        spec.weights,
                        None,
                        f"{name} of shape {tuple(parameter.shape)}",
                        f"{tuple(stored.shape)}",
                    )
                parameter.copy_(stored)
            layer.use_residual = spec.residual
            layers.append(layer)

        class TokenVectors(torch.nn.Module):  # type: ignore[name-defined]
            def __init__(self) -> None:
                super().__init__()
                self.encoder = encoder
                self.projections = layers

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
                inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
                if token_type_ids is not None:
                    inputs["token_type_ids"] = token_type_ids
                hidden = self.encoder(**inputs).last_hidden_state
                for layer in self.projections:
                    out = layer.activation(layer.linear(hidden))
                    if layer.use_residual:
                        out = out + (layer.residual(hidden) if hasattr(layer, "residual") else hidden)
                    hidden = out
                return torch.nn.functional.normalize(hidden.float(), p=2.0, dim=-1)

        return TokenVectors(), tuple(missing)


@dataclass(frozen=True)
class Match:
    """One query token and the passage token that gave its maximum similarity.

    Attributes:
        query: the query token's text. passage: the passage word holding the best token (the
        token itself for a marker or special token). similarity: their cosine.
    """

    query: str
    passage: str
    similarity: float

    def __str__(self) -> str:
        return f"{self.query} -> {self.passage} ({self.similarity:.2f})"


class ColBERT(TransformerScorer):
    """Score (query, passage) pairs by late interaction: the sum of each query token's best cosine.

    Queries and passages are encoded apart (each distinct text once per call) into unit token
    vectors; the score is MaxSim, in [-query tokens, +query tokens]. With ``store``, pair scores
    and token vectors are kept (token vectors as float32, keyed by the text and its side), so a
    passage met again is not encoded again (passage token vectors stored beside an index, as
    bi-encoder vectors are, are not written yet: the family does not claim ``stores_passages``).

    Args:
        model: a PyLate / sentence-transformers ColBERT folder or a Stanford ``HF_ColBERT`` one
            (or their Hugging Face id).
        runtime: where and how it runs (:class:`~evirank.config.Runtime`; the torch backend only;
            its ``max_length`` is the passage cap in tokens, markers included, by default the
            model's ``document_length``, else 180; with Ray, texts are encoded block by block).
        query_length: the query length in tokens (default: the model's, else 32).
        cache_embeddings: keep token vectors in the store (scores are always kept).

    Example:
        >>> from evirank.frames import make_passages
        >>> passages = make_passages([("1", "d1", 0, "A cat sat.")]).assign(query="where is the cat")
        >>> ColBERT("models/colbert")(passages)["score"].notna().all()  # doctest: +SKIP
        True
    """

    family = "colbert"
    task = TokenVectorsHead()
    block_columns = (SIDE, TEXT)

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        query_length: int | None = None,
        cache_embeddings: bool = True,
    ) -> None:
        super().__init__(model, runtime)
        if query_length is not None and query_length < 4:
            raise ValueError(f"query_length must be at least 4 tokens, found {query_length}")
        self.query_length = query_length
        self.cache_embeddings = cache_embeddings

    # -- set-up ------------------------------------------------------------------------
    def _default_max_length(self, model_dir: Path) -> int:
        return read_layout(model_dir).document_length

    def _check_settings(self) -> None:
        assert self.model_dir_ is not None
        layout = read_layout(self.model_dir_)
        tokenizer = self.encoder_.tokenizer
        self.layout_ = layout
        self.query_length_ = int(self.query_length or layout.query_length)
        self.query_prefix_id_ = self._marker_id(layout.query_prefix, "query")
        self.document_prefix_id_ = self._marker_id(layout.document_prefix, "document")
        expansion = tokenizer.mask_token_id
        if expansion is None:
            expansion = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else self.encoder_.pad_id
        self.expansion_id_ = int(expansion)
        ids = [tokenizer.convert_tokens_to_ids(word) for word in layout.skiplist]
        self.skip_ids_ = np.array(sorted({int(i) for i in ids if i is not None}), dtype=np.int64)

    def _marker_id(self, marker: str, side: str) -> int | None:
        if not marker:
            return None
        tokenizer = self.encoder_.tokenizer
        found = tokenizer.convert_tokens_to_ids(marker)
        if found is None or (found == tokenizer.unk_token_id and marker != tokenizer.unk_token):
            raise InputFormatError(
                self.model_dir_ or str(self.model),
                None,
                f"a tokenizer with the {side} marker token {marker!r} (PyLate adds it when it saves a model)",
                "none",
            )
        return int(found)

    def _prefix(self, side: str) -> tuple[int, ...]:
        marker = self.query_prefix_id_ if side == QUERY_SIDE else self.document_prefix_id_
        head = self.encoder_.single_template.prefix
        return (*head[:1], *(() if marker is None else (marker,)), *head[1:])

    def _room(self, side: str) -> int:
        """Content tokens a text of ``side`` may keep (its cap less special and marker tokens)."""
        cap = self.query_length_ if side == QUERY_SIDE else self.max_length_
        return max(1, cap - len(self._prefix(side)) - len(self.encoder_.single_template.suffix))

    def _passage_room(self) -> int:
        return self._room(PASSAGE_SIDE)

    def settings(self) -> dict[str, Any]:
        layout = self.layout_
        return {
            **super().settings(),
            "similarity": "maxsim",
            "normalise": True,
            "projection": [p.describe() for p in layout.projections],
            "query_length": self.query_length_,
            "query_prefix": [layout.query_prefix, self.query_prefix_id_],
            "document_prefix": [layout.document_prefix, self.document_prefix_id_],
            "query_expansion": [layout.query_expansion, self.expansion_id_, layout.attend_to_expansion],
            "skiplist": self.skip_ids_.tolist(),
        }

    def query_positions(self, query: str) -> int:
        """The query positions MaxSim adds over (the score divided by it is a mean cosine).

        With query expansion every query fills ``query_length`` positions; without, its own tokens and
        the special and marker tokens around them.
        """
        self.prepare()
        content = self.encoder_.tokenizer(str(query), add_special_tokens=False)["input_ids"]
        return len(self._row(QUERY_SIDE, content[: self._room(QUERY_SIDE)])[0])

    # -- inputs ------------------------------------------------------------------------
    def _row(self, side: str, content: Sequence[int]) -> tuple[list[int], list[int]]:
        """(input ids, attention mask) of one text: markers after the first special token, and
        (queries, with expansion) ``[MASK]`` up to ``query_length``, hidden unless the model attends."""
        ids = [*self._prefix(side), *content, *self.encoder_.single_template.suffix]
        mask = [1] * len(ids)
        if side == QUERY_SIDE and self.layout_.query_expansion and len(ids) < self.query_length_:
            extra = self.query_length_ - len(ids)
            ids += [self.expansion_id_] * extra
            mask += [1 if self.layout_.attend_to_expansion else 0] * extra
        return ids, mask

    def _kept(self, side: str, ids: Sequence[int]) -> np.ndarray:
        """Positions of ``ids`` (a row) whose vectors take part in MaxSim."""
        row = np.asarray(ids, dtype=np.int64)
        if side == QUERY_SIDE:
            return np.arange(len(row))  # every query position, expansion tokens included
        return np.flatnonzero(~np.isin(row, self.skip_ids_))

    def _batch(self, rows: list[tuple[list[int], list[int]]], pad_multiple: int) -> TokenBatch:
        width = max(len(ids) for ids, _ in rows)
        if pad_multiple > 1:
            width = -(-width // pad_multiple) * pad_multiple
        input_ids = np.full((len(rows), width), self.encoder_.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, (ids, attend) in enumerate(rows):
            input_ids[i, : len(ids)] = ids
            mask[i, : len(ids)] = attend
        types = np.zeros_like(input_ids) if self.encoder_.uses_token_types else None
        return TokenBatch(input_ids=input_ids, attention_mask=mask, token_type_ids=types)

    # -- encoding ----------------------------------------------------------------------
    def encode(self, texts: Sequence[str], side: str = PASSAGE_SIDE) -> list[np.ndarray]:
        """float32 unit token vectors [tokens, dim] of each text, as queries (``"q"``) or passages (``"d"``).

        Example:
            >>> [m.shape for m in ColBERT("models/colbert").encode(["a cat"], "q")]  # doctest: +SKIP
            [(32, 128)]
        """
        if side not in (QUERY_SIDE, PASSAGE_SIDE):
            raise ValueError(
                f"side must be {QUERY_SIDE!r} (queries) or {PASSAGE_SIDE!r} (passages), found {side!r}"
            )
        return self._encode([side] * len(texts), list(texts), ScoringStats(), None)

    def _encode(
        self,
        sides: Sequence[str],
        texts: Sequence[str],
        stats: ScoringStats,
        consume: Callable[[np.ndarray, list[np.ndarray]], None] | None,
    ) -> list[np.ndarray]:
        """Run the model over texts of mixed sides in length-sorted token-budget batches."""
        self.prepare()
        rows: list[tuple[list[int], list[int]]] = [([], []) for _ in texts]
        out: list[np.ndarray] = [np.zeros((0, 0), np.float32) for _ in texts]

        def tokenize(items: np.ndarray) -> np.ndarray:
            for side in (QUERY_SIDE, PASSAGE_SIDE):
                chosen = [int(r) for r in items if sides[r] == side]
                content = self.encoder_.token_ids([texts[r] for r in chosen], self._room(side))
                for r, ids in zip(chosen, content, strict=True):
                    rows[r] = self._row(side, ids)
            return np.array([len(rows[r][0]) for r in items], dtype=np.int64)

        def build(items: np.ndarray, pad_multiple: int) -> TokenBatch:
            return self._batch([rows[r] for r in items], pad_multiple)

        def keep(items: np.ndarray, output: np.ndarray) -> None:
            done = []
            for r, vectors in zip(items.tolist(), output, strict=True):
                ids = rows[r][0]
                out[r] = np.array(vectors[self._kept(sides[r], ids)], dtype=np.float32)
                done.append(out[r])
            if consume is not None:
                consume(items, done)

        self._run_batches(len(texts), tokenize, build, keep, stats, desc="colbert")
        return out

    def compute_block(self, columns: Mapping[str, list[str]], stats: ScoringStats) -> np.ndarray:
        """Token vectors of one block's texts (``side``, ``text`` columns): float32
        [items, most tokens, dim], each item's rows first and the rest NaN."""
        matrices = self._encode(list(columns[SIDE]), list(columns[TEXT]), stats, None)
        return _pad(matrices, self.layout_.dim)

    def _token_vectors(
        self,
        sides: list[str],
        texts: list[str],
        stats: ScoringStats,
        store: Store | None,
        fingerprint: str | None,
        on_ray: bool,
    ) -> list[np.ndarray]:
        """Token vectors of distinct (side, text) items: from ``store`` when there, else computed
        (on Ray when asked and set) and written to ``store``."""
        dim = self.layout_.dim
        hashes = [text_hash(f"{side}\x1f{text}") for side, text in zip(sides, texts, strict=True)]
        found: dict[int, np.ndarray] = {}
        if store is not None and fingerprint is not None:
            found = {i: v.reshape(-1, dim) for i, v in store.get_embeddings(fingerprint, hashes).items()}
        stats.embeddings_cached += len(found)
        todo = np.array([i for i in range(len(texts)) if i not in found], dtype=np.int64)
        out: dict[int, np.ndarray] = dict(found)
        if len(todo):
            write = None
            if store is not None and fingerprint is not None:

                def write(done: list[tuple[int, np.ndarray]]) -> None:
                    store.put_embeddings(
                        fingerprint, [hashes[i] for i, _ in done], [m.ravel() for _, m in done]
                    )

            todo_sides = [sides[i] for i in todo]
            todo_texts = [texts[i] for i in todo]
            if on_ray and self.ray is not None:
                columns = {
                    SIDE: lambda items: [todo_sides[i] for i in items],
                    TEXT: lambda items: [todo_texts[i] for i in items],
                }
                for items, padded in self.ray.run_blocks(
                    self, columns, np.arange(len(todo)), stats, desc="colbert (Ray)"
                ):
                    done = [(int(todo[i]), m) for i, m in zip(items.tolist(), _unpad(padded), strict=True)]
                    out.update(done)
                    if write is not None:
                        write(done)
            else:
                with _ChunkedWriter(write, self.commit_every) as writer:

                    def consume(items: np.ndarray, matrices: list[np.ndarray]) -> None:
                        done = [(int(todo[i]), m) for i, m in zip(items.tolist(), matrices, strict=True)]
                        out.update(done)
                        writer.add(done)

                    self._encode(todo_sides, todo_texts, stats, consume)
        return [out[i] for i in range(len(texts))]

    # -- scoring -----------------------------------------------------------------------
    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add ``score`` (MaxSim) to a Passages frame [qid, query, docno, pid, text, ...]."""
        require_columns(frame, (QID, QUERY, DOCNO, PID, TEXT), "ColBERT")
        started = time.perf_counter()
        out = frame.copy()
        stats = ScoringStats(rows=len(out))
        if out.empty:
            out[SCORE] = np.array([], dtype=np.float64)
            self.stats_ = stats
            return out
        self.prepare()
        pairs = DistinctPairs.of(out)
        store = self._use_store(out, pairs)
        missing = pairs.missing()
        stats.distinct = len(pairs.scores)
        stats.cached = len(pairs.scores) - len(missing)
        if len(missing):
            queries = pd.unique(pairs.pair_query[missing])
            passages = pd.unique(pairs.pair_text[missing])
            sides = [QUERY_SIDE] * len(queries) + [PASSAGE_SIDE] * len(passages)
            texts = [pairs.queries[i] for i in queries] + [pairs.texts[i] for i in passages]
            cache = store if self.cache_embeddings else None
            matrices = self._token_vectors(sides, texts, stats, cache, pairs.fingerprint, on_ray=True)
            q_at = pd.Index(queries).get_indexer(pairs.pair_query[missing])
            p_at = len(queries) + pd.Index(passages).get_indexer(pairs.pair_text[missing])
            new = maxsim_pairs(matrices, q_at, p_at)
            pairs.scores[missing] = new
            write = self._score_writer(store, pairs)
            if write is not None:
                write(list(zip(missing.tolist(), new.tolist(), strict=True)))
        out[SCORE] = pairs.scores[pairs.row_pair]
        stats.total_s = time.perf_counter() - started
        self.stats_ = stats
        logger.info(
            "colbert: %d rows, %d from the store, %d texts encoded (%d token matrices stored) in %.1f s",
            stats.rows,
            stats.cached,
            stats.computed,
            stats.embeddings_cached,
            stats.total_s,
        )
        return out

    # -- evidence ----------------------------------------------------------------------
    def matches(self, query: str, texts: Sequence[str]) -> list[list[Match]]:
        """For each passage, each query word-piece and the passage word that gave its maximum.

        Only the query's own tokens are listed (its markers and ``[MASK]`` expansion tokens count
        in the score but are not words); a passage token is shown as its whole word.

        Example:
            >>> found = ColBERT("models/colbert").matches("cat", ["A cat sat."])  # doctest: +SKIP
            >>> [str(m) for m in found[0]]  # doctest: +SKIP
            ['cat -> cat (0.97)']
        """
        self.prepare()
        sides = [QUERY_SIDE] + [PASSAGE_SIDE] * len(texts)
        matrices = self._encode(sides, [query, *texts], ScoringStats(), None)
        q_words = self._token_words(query, QUERY_SIDE)
        q_vec = matrices[0].astype(np.float64)
        start = len(self._prefix(QUERY_SIDE))
        found: list[list[Match]] = []
        for text, p_vec in zip(texts, matrices[1:], strict=True):
            words = self._token_words(text, PASSAGE_SIDE)
            ids = self._row(PASSAGE_SIDE, self.encoder_.token_ids([text], self._room(PASSAGE_SIDE))[0])[0]
            kept = self._kept(PASSAGE_SIDE, ids)
            sims = q_vec @ p_vec.astype(np.float64).T
            best = sims.argmax(axis=1)
            listed = []
            for j, q_word in enumerate(q_words):
                position = int(kept[best[start + j]])
                inside = 0 <= position - len(self._prefix(PASSAGE_SIDE)) < len(words)
                shown = (
                    words[position - len(self._prefix(PASSAGE_SIDE))]
                    if inside
                    else str(self.encoder_.tokenizer.convert_ids_to_tokens(int(ids[position])))
                )
                listed.append(Match(q_word, shown, float(sims[start + j, best[start + j]])))
            found.append(listed)
        return found

    def attention(self, query: str, text: str, layers: Sequence[int] | None = None) -> AttentionView:
        """What stands in for attention in late interaction: the cosine of each query token's vector
        with each passage token's (kind ``similarity``).

        ColBERT encodes the query and the passage apart, so no token of one attends to the other; its
        score adds, over the query's positions, each one's best cosine with a passage token (MaxSim),
        so the row maxima of this matrix are the matches :meth:`matches` lists. Rows are the query's
        own tokens (its marker and ``[MASK]`` expansions count in the score but are not shown);
        columns are the passage tokens that take part in MaxSim (punctuation in the skiplist does
        not). A view of the output only.

        Example:
            >>> view = ColBERT("models/colbert").attention("cat", "A cat sat.")  # doctest: +SKIP
            >>> view.by_word().passage.labels  # doctest: +SKIP
            ('A', 'cat', 'sat')
        """
        from evirank.score.attention import AttentionView, TokenSide, output_layer_only

        self.prepare()
        n_layers = int(getattr(self.config_, "num_hidden_layers", 0) or 0)
        chosen = output_layer_only(layers, n_layers, self.family, "MaxSim compares its token vectors")
        q_vec, p_vec = self._encode([QUERY_SIDE, PASSAGE_SIDE], [query, text], ScoringStats(), None)
        sims = q_vec.astype(np.float64) @ p_vec.astype(np.float64).T
        q = self.encoder_.token_pieces(query, self._room(QUERY_SIDE))
        p = self.encoder_.token_pieces(text, self._room(PASSAGE_SIDE))
        q_start, p_start = len(self._prefix(QUERY_SIDE)), len(self._prefix(PASSAGE_SIDE))
        kept = self._kept(PASSAGE_SIDE, self._row(PASSAGE_SIDE, p.ids)[0])
        row_of = {int(position): r for r, position in enumerate(kept)}
        shown = [j for j in range(len(p.ids)) if p_start + j in row_of]
        weights = sims[q_start : q_start + len(q.ids)][:, [row_of[p_start + j] for j in shown]]
        return AttentionView(
            family=self.family,
            kind="similarity",
            query=TokenSide.from_pieces(query, q),
            passage=TokenSide.from_pieces(text, p, shown),
            layers=chosen,
            n_layers=n_layers,
            weights=weights[None, None],
            heads=False,
            score=float(sims.max(axis=1).sum()),
            note=(
                "Late interaction encodes the query and the passage apart: no token of one attends to the "
                "other. Shown instead: the cosine of their token vectors; the score adds each query "
                "position's best cosine (MaxSim), the query's marker and [MASK] expansions included"
            ),
            model=str(self.model),
        )

    def _token_words(self, text: str, side: str) -> list[str]:
        """Each content token of ``text`` as text: the token's own span for a query, its whole word
        for a passage."""
        encoded = self.encoder_.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = encoded["offset_mapping"][: self._room(side)]
        if side == QUERY_SIDE:
            return [text[a:b] for a, b in offsets]
        word_ids = encoded.word_ids()[: len(offsets)]
        spans: dict[int | None, tuple[int, int]] = {}
        for word, (a, b) in zip(word_ids, offsets, strict=True):
            lo, hi = spans.get(word, (a, b))
            spans[word] = (min(lo, a), max(hi, b))
        return [
            text[slice(*spans[w])] if w is not None else text[a:b]
            for w, (a, b) in zip(word_ids, offsets, strict=True)
        ]


def maxsim(query: np.ndarray, passage: np.ndarray) -> float:
    """MaxSim of two token matrices: the sum over query rows of the best dot product with a passage row.

    Example:
        >>> maxsim(np.eye(2), np.array([[1.0, 0.0], [0.6, 0.8]]))
        1.8
    """
    return float((np.asarray(query, np.float64) @ np.asarray(passage, np.float64).T).max(axis=1).sum())


def maxsim_pairs(matrices: Sequence[np.ndarray], query_at: np.ndarray, passage_at: np.ndarray) -> np.ndarray:
    """MaxSim of many (query, passage) pairs given as indices into ``matrices``, one matrix
    product per query.

    Example:
        >>> mats = [np.eye(2), np.array([[1.0, 0.0]]), np.array([[0.6, 0.8]])]
        >>> maxsim_pairs(mats, np.array([0, 0]), np.array([1, 2])).tolist()
        [1.0, 1.4]
    """
    query_at, passage_at = np.asarray(query_at, np.int64), np.asarray(passage_at, np.int64)
    scores = np.empty(len(query_at), dtype=np.float64)
    for q in pd.unique(query_at):
        pairs = np.flatnonzero(query_at == q)
        chosen = [np.asarray(matrices[p], np.float64) for p in passage_at[pairs]]
        lengths = np.array([len(m) for m in chosen], dtype=np.int64)
        if (lengths == 0).any():
            raise ValueError("a passage has no token vectors (every token was in the skiplist)")
        sims = np.asarray(matrices[q], np.float64) @ np.concatenate(chosen).T
        starts = np.r_[0, np.cumsum(lengths)[:-1]]
        scores[pairs] = np.maximum.reduceat(sims, starts, axis=1).sum(axis=0)
    return scores


def _pad(matrices: Sequence[np.ndarray], dim: int) -> np.ndarray:
    """Ragged token matrices as one float32 [items, most tokens, dim] array, NaN after each item's rows."""
    longest = max((len(m) for m in matrices), default=0)
    out = np.full((len(matrices), longest, dim), np.nan, dtype=np.float32)
    for i, m in enumerate(matrices):
        out[i, : len(m)] = m
    return out


def _unpad(padded: np.ndarray) -> list[np.ndarray]:
    """The inverse of :func:`_pad`."""
    return [np.array(item[~np.isnan(item[:, 0])], dtype=np.float32) for item in padded]


def _claims(info: ModelInfo) -> int:
    """A sentence-transformers folder with PyLate's Dense module, or a Stanford HF_ColBERT checkpoint."""
    if any(kind.startswith("pylate.") and kind.endswith("Dense") for kind in info.modules):
        return 3
    if "HF_ColBERT" in info.architectures:
        return 3
    if any(kind.endswith("Dense") for kind in info.modules) and not any(
        kind.endswith("Pooling") for kind in info.modules
    ):
        return 2  # token vectors projected and never pooled
    return 0


FAMILY = register_family(
    Family(
        "colbert",
        scorer=ColBERT,
        summary="late interaction (ColBERT): projected, normalised token vectors and MaxSim "
        "(PyLate or Stanford ColBERT folders)",
        claims=_claims,
        # Token vectors are kept in the score store; a passage-vector folder (evirank embed) holds
        # one vector per passage, so the family does not read one.
        stores_passages=False,
        scale="maxsim",
    )
)
