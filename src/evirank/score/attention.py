"""What a model links between a query and a passage, token by token: the attention view.

Birch (Akkalyoncu Yilmaz 2019, section 5.6, Figure 5.3) looked inside a cross-encoder for a sentence
that scored high without holding a query term: the query's "art" attended to "renaissance" and
"paintings", "crime" to "robbers", words BM25 cannot match. This module holds that view for any
model family: an :class:`AttentionView` is a matrix per layer and head, from each query token (rows)
to each passage token (columns), with the tokens' text and where they sit in their texts.

A family offers it through an optional scorer hook, ``attention(query, text, layers=None)``, and
says in the view what a cell holds (its ``kind``):

* ``attention``: a joint-input model's self-attention (cross-encoder, monoT5's encoder): the share
  of a query token's attention that goes to each passage token, in one layer and head. A row sums
  to at most 1; the rest goes to the query itself and the special tokens.
* ``contribution``: a bi-encoder reads the query and the passage apart, so no token of one attends
  to the other. Its cosine of mean-pooled vectors is exactly a sum over token pairs, and the view
  shows each pair's part of the score.
* ``similarity``: late interaction (ColBERT) also reads them apart; the view shows the cosine of
  each query token's vector with each passage token's, whose row maxima add up to the score.

:meth:`AttentionView.by_word` merges word pieces into words, by the rule the kind calls for (for
attention, Clark et al. 2019, "What Does BERT Look At?": the attention *to* a split word is the
sum over its pieces, the attention *from* one is the mean of its pieces' rows).

Example:
    >>> view = AttentionView(
    ...     family="demo", kind="attention",
    ...     query=TokenSide.of("cats", ("cats",), ((0, 4),), (0,)),
    ...     passage=TokenSide.of("purring", ("purr", "##ing"), ((0, 4), (4, 7)), (0, 0)),
    ...     layers=(0,), n_layers=1, weights=np.array([[[[0.25, 0.5]]]]))
    >>> view.by_word().passage.labels, view.by_word().weights.tolist()
    (('purring',), [[[[0.75]]]])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from evirank.errors import UsageError
from evirank.extras import require

if TYPE_CHECKING:
    from evirank.score.backends import TokenBatch
    from evirank.score.query_passage import PairScorer
    from evirank.score.tokenize import TokenPieces

logger = logging.getLogger(__name__)

#: What a view's cells can hold (see the module docstring).
KINDS = ("attention", "contribution", "similarity")
#: How word pieces merge into words, per kind: (query side, passage side).
MERGE_RULES: Mapping[str, tuple[str, str]] = {
    "attention": ("mean", "sum"),
    "contribution": ("sum", "sum"),
    "similarity": ("mean", "max"),
}
_REDUCE: Mapping[str, Callable[..., np.ndarray]] = {"sum": np.sum, "mean": np.mean, "max": np.max}


class NoAttentionError(UsageError):
    """A scorer whose family has no attention view (the message names the families that have one)."""


@dataclass(frozen=True)
class TokenSide:
    """The tokens (or words) of one text as a view shows them.

    Attributes:
        text: the whole text. labels: each unit's text (a word piece such as ``##ing``, or a word).
        spans: each unit's character span in ``text``. words: the word each unit belongs to
        (0, 1, ...; at word level, the unit's own index).

    Example:
        >>> TokenSide.of("Cats purr", ("cats", "purr"), ((0, 4), (5, 9)), (0, 1)).labels
        ('cats', 'purr')
    """

    text: str
    labels: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    words: tuple[int, ...]

    @classmethod
    def of(
        cls,
        text: str,
        labels: Sequence[str],
        spans: Sequence[tuple[int, int]],
        words: Sequence[int],
    ) -> TokenSide:
        """A side from parallel sequences (checked to be of one length)."""
        if not len(labels) == len(spans) == len(words):
            raise ValueError(f"{len(labels)} labels, {len(spans)} spans and {len(words)} word indices")
        return cls(
            str(text),
            tuple(str(x) for x in labels),
            tuple((int(a), int(b)) for a, b in spans),
            tuple(int(w) for w in words),
        )

    @classmethod
    def from_pieces(cls, text: str, pieces: TokenPieces, keep: Sequence[int] | None = None) -> TokenSide:
        """The side of a tokenised text (:meth:`~evirank.score.tokenize.TextEncoder.token_pieces`),
        optionally only the tokens at positions ``keep``."""
        chosen = range(len(pieces.ids)) if keep is None else keep
        return cls.of(
            text,
            [pieces.pieces[i] for i in chosen],
            [pieces.spans[i] for i in chosen],
            [pieces.words[i] for i in chosen],
        )

    def __len__(self) -> int:
        return len(self.labels)

    def word_groups(self) -> list[list[int]]:
        """The units of each word, words in order of first appearance."""
        groups: dict[int, list[int]] = {}
        for i, word in enumerate(self.words):
            groups.setdefault(word, []).append(i)
        return list(groups.values())

    def by_word(self) -> TokenSide:
        """One unit per word: its span covers its pieces, its label is that span of the text."""
        spans = []
        for group in self.word_groups():
            start = min(self.spans[i][0] for i in group)
            end = max(self.spans[i][1] for i in group)
            spans.append((start, end))
        labels = [
            self.text[a:b] if b > a else self.labels[g[0]]
            for (a, b), g in zip(spans, self.word_groups(), strict=True)
        ]
        return TokenSide.of(self.text, labels, spans, range(len(spans)))


def merge_pieces(values: np.ndarray, groups: Sequence[Sequence[int]], axis: int, how: str) -> np.ndarray:
    """``values`` with the entries along ``axis`` combined per group by ``sum``, ``mean`` or ``max``.

    Example:
        >>> merge_pieces(np.array([[1.0, 2.0, 4.0]]), [[0], [1, 2]], axis=1, how="sum").tolist()
        [[1.0, 6.0]]
    """
    if how not in _REDUCE:
        raise ValueError(f"a word-piece merge is one of {', '.join(_REDUCE)}, not {how!r}")
    reduce = _REDUCE[how]
    parts = [reduce(np.take(values, list(group), axis=axis), axis=axis, keepdims=True) for group in groups]
    if not parts:
        shape = list(values.shape)
        shape[axis] = 0
        return np.zeros(shape, dtype=values.dtype)
    return np.concatenate(parts, axis=axis)


@dataclass(frozen=True)
class AttentionView:
    """From each query unit (rows) to each passage unit (columns), per layer and head.

    Attributes:
        family: the model family that computed it. kind: what a cell holds (:data:`KINDS`).
        query / passage: the units of each text (tokens, or words after :meth:`by_word`).
        layers: the layers shown (0-based, as the model numbers them). n_layers: the model's layers.
        weights: float64 ``[layers, heads, query units, passage units]`` (one "head" when the kind
            has none).
        heads: whether the second axis is the model's attention heads.
        level: ``token`` or ``word``.
        score: the model's score of this (query, passage) when the view computed it, else None.
        note: what the reader should know (said in every rendering).
        model: the model's name or folder.
    """

    family: str
    kind: str
    query: TokenSide
    passage: TokenSide
    layers: tuple[int, ...]
    n_layers: int
    weights: np.ndarray
    heads: bool = True
    level: str = "token"
    score: float | None = None
    note: str = ""
    model: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        shape = tuple(self.weights.shape)
        wanted = (len(self.layers), len(self.query), len(self.passage))
        if len(shape) != 4 or (shape[0], shape[2], shape[3]) != wanted:
            raise ValueError(
                f"weights of shape {shape}; expected (layers, heads, query, passage) = "
                f"({wanted[0]}, heads, {wanted[1]}, {wanted[2]})"
            )

    @property
    def merge(self) -> tuple[str, str]:
        """How word pieces merge into words: (query side, passage side)."""
        return MERGE_RULES[self.kind]

    @property
    def signed(self) -> bool:
        """Whether cells can be negative (contributions and cosines; attention cannot)."""
        return self.kind != "attention"

    def head_mean(self) -> np.ndarray:
        """``[layers, query, passage]``: the mean over heads (Birch's figure shows it so)."""
        return np.asarray(self.weights.mean(axis=1), dtype=np.float64)

    def by_word(self) -> AttentionView:
        """The same view with word pieces merged into words (:attr:`merge` says how)."""
        if self.level == "word":
            return self
        how_q, how_p = self.merge
        merged = merge_pieces(self.weights, self.query.word_groups(), axis=2, how=how_q)
        merged = merge_pieces(merged, self.passage.word_groups(), axis=3, how=how_p)
        return replace(
            self, query=self.query.by_word(), passage=self.passage.by_word(), weights=merged, level="word"
        )

    def passage_totals(self) -> np.ndarray:
        """``[layers, passage]``: each passage unit's weight from the whole query, the rows (mean over
        heads) combined by the query side's rule (the mean share of attention; the sum of contributions)."""
        means = self.head_mean()
        if means.shape[1] == 0:
            return np.zeros((means.shape[0], means.shape[2]))
        return _REDUCE[self.merge[0]](means, axis=1)

    def describe(self) -> str:
        """One line: what a cell holds, and how pieces were merged (at word level)."""
        what = {
            "attention": "share of the query token's attention that goes to the passage token",
            "contribution": "the token pair's part of the cosine score",
            "similarity": "cosine of the query token's and the passage token's vectors",
        }[self.kind]
        if self.level == "word":
            how_q, how_p = self.merge
            what += f"; word pieces merged: query side {how_q}, passage side {how_p}"
        return what

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form: the units with their spans, and per layer the matrix (mean over heads)
        and each passage unit's total from the query (:meth:`passage_totals`)."""
        means, totals = self.head_mean(), self.passage_totals()

        def units(side: TokenSide) -> list[dict[str, Any]]:
            return [
                {"text": t, "start": a, "end": b} for t, (a, b) in zip(side.labels, side.spans, strict=True)
            ]

        return {
            "family": self.family,
            "model": self.model,
            "kind": self.kind,
            "level": self.level,
            "measure": self.describe(),
            "merge": {"query": self.merge[0], "passage": self.merge[1]},
            "note": self.note,
            "score": self.score,
            "n_layers": self.n_layers,
            "query": units(self.query),
            "passage": units(self.passage),
            "layers": [
                {"layer": layer, "weights": _rounded(means[i]), "passage_totals": _rounded(totals[i])}
                for i, layer in enumerate(self.layers)
            ],
        }


def _rounded(values: np.ndarray, digits: int = 6) -> Any:
    return np.round(np.asarray(values, dtype=np.float64), digits).tolist()


def resolve_layers(layers: Sequence[int] | None, n_layers: int) -> tuple[int, ...]:
    """0-based layer indices from a request: None or empty is the last layer, negatives count from
    the end (-1 is the last), repeats are dropped.

    Raises:
        UsageError: a layer the model does not have.

    Example:
        >>> resolve_layers(None, 6), resolve_layers([0, -1, 5], 6)
        ((5,), (0, 5))
    """
    if n_layers < 1:
        raise UsageError("the model has no layers to show")
    if not layers:
        return (n_layers - 1,)
    chosen: list[int] = []
    for layer in layers:
        index = int(layer) + n_layers if int(layer) < 0 else int(layer)
        if not 0 <= index < n_layers:
            raise UsageError(
                f"layer {layer}: the model has {n_layers} layers, 0 to {n_layers - 1} (-1 is the last)"
            )
        if index not in chosen:
            chosen.append(index)
    return tuple(chosen)


def output_layer_only(layers: Sequence[int] | None, n_layers: int, family: str, why: str) -> tuple[int, ...]:
    """The last layer, for a view of the model's output (a bi-encoder's, ColBERT's); any other is an error.

    Example:
        >>> output_layer_only([-1], 6, "bi", "the score is computed from it")
        (5,)
    """
    chosen = resolve_layers(layers, n_layers)
    if chosen != (n_layers - 1,):
        raise UsageError(
            f"the {family} family's view is of its output, layer {n_layers - 1} ({why}); it has none of "
            f"layer {', '.join(str(layer) for layer in chosen if layer != n_layers - 1)}"
        )
    return chosen


def attention_families() -> list[str]:
    """The registered model families whose scorers have the ``attention`` hook.

    Example:
        >>> {"bi", "cross"} <= set(attention_families())
        True
    """
    from evirank.score.family import family_names, get_family

    return [name for name in family_names() if callable(getattr(get_family(name).scorer, "attention", None))]


def find_attention_hook(scorer: Any) -> Callable[..., AttentionView] | None:
    """The ``attention`` hook of a scorer, or None (several scorers: the first one's, whose score is
    ``score``; a wrapper that passes attributes on to its scorer: that scorer's).

    Example:
        >>> find_attention_hook(object()) is None
        True
    """
    hook = getattr(scorer, "attention", None)
    if callable(hook):
        return hook
    listed = getattr(scorer, "items", None)
    if callable(listed):
        pieces = list(listed())
        if pieces:
            return find_attention_hook(pieces[0][1])
    return None


def attention_hook(scorer: Any) -> Callable[..., AttentionView]:
    """The ``attention`` hook of a scorer (see :func:`find_attention_hook`).

    Raises:
        NoAttentionError: the scorer has none; the message names the families that have one.

    Example:
        >>> from evirank.score import make_scorer
        >>> callable(attention_hook(make_scorer("bi", None)))
        True
    """
    hook = find_attention_hook(scorer)
    if hook is not None:
        return hook
    family = getattr(scorer, "family", None)
    what = f"the {family} family" if isinstance(family, str) else f"this scorer ({type(scorer).__name__})"
    raise NoAttentionError(
        f"{what} has no attention view; the model families that have one: {', '.join(attention_families())}"
    )


# -- torch helpers for the families -------------------------------------------------------------
def eager_model(scorer: Any, auto_class: str) -> Any:
    """The scorer's model, loaded once more with eager attention (the view's own copy, fp32, eval).

    The scoring backend loads models with fused (SDPA) attention, which returns no attention
    weights; eager attention computes the same outputs and returns them. Kept on the scorer as
    ``attention_model_`` (not pickled with it).
    """
    cached = getattr(scorer, "attention_model_", None)
    if cached is not None:
        return cached
    scorer.prepare()
    if scorer.model_dir_ is None:
        raise UsageError("a model adopted in memory has no attention view: save it and name its folder")
    torch = require("torch", "torch")
    transformers = require("transformers", "torch")
    model = getattr(transformers, auto_class).from_pretrained(
        str(scorer.model_dir_), attn_implementation="eager"
    )
    model.to(device=scorer.device_, dtype=torch.float32)
    model.eval()
    scorer.attention_model_ = model
    return model


def torch_inputs(batch: TokenBatch, device: str, token_types: bool = True) -> dict[str, Any]:
    """The tensors of one :class:`~evirank.score.backends.TokenBatch` on ``device``."""
    torch = require("torch", "torch")
    inputs = {
        "input_ids": torch.from_numpy(batch.input_ids).to(device),
        "attention_mask": torch.from_numpy(batch.attention_mask).to(device),
    }
    if token_types and batch.token_type_ids is not None:
        inputs["token_type_ids"] = torch.from_numpy(batch.token_type_ids).to(device)
    return inputs


def attention_maps(maps: Sequence[Any] | None) -> list[np.ndarray]:
    """Each layer's ``[heads, seq, seq]`` attention of the one row of a model's output attentions
    (``output.attentions``: a tensor ``[1, heads, seq, seq]`` per layer).

    Raises:
        RuntimeError: the model returned none (it runs a fused attention kernel).
    """
    if not maps:
        raise RuntimeError(
            "the model returned no attention weights; it must be loaded with attn_implementation='eager'"
        )
    return [np.asarray(layer[0].detach().float().cpu().numpy(), dtype=np.float64) for layer in maps]


def joint_attention(
    scorer: PairScorer,
    query: str,
    text: str,
    layers: Sequence[int] | None,
    run: Callable[[TokenBatch], tuple[list[np.ndarray], float | None]],
    *,
    note: str,
) -> AttentionView:
    """The attention view of a joint-input family: the (query, passage) input as scoring builds it
    (:meth:`~evirank.score.query_passage.PairScorer.joint_input`), run by ``run`` (each layer's
    ``[heads, seq, seq]`` attention, and the score when it computes one), sliced to query rows and
    passage columns."""
    joint = scorer.joint_input(query, text)
    maps, score = run(joint.batch)
    chosen = resolve_layers(layers, len(maps))
    weights = np.stack([maps[i][:, joint.query_at, joint.passage_at] for i in chosen])
    return AttentionView(
        family=scorer.family,
        kind="attention",
        query=TokenSide.from_pieces(query, joint.query),
        passage=TokenSide.from_pieces(text, joint.passage),
        layers=chosen,
        n_layers=len(maps),
        weights=weights,
        score=score,
        note=note,
        model=str(scorer.model),
    )
