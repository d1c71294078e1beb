"""Tokenise each distinct text once, then assemble model inputs from token ids.

Queries and passages are tokenised separately, without special tokens, in one batched call of
the fast (Rust) tokenizer each; every (query, passage) input is then assembled from those ids
with the model's own special-token template (``[CLS] q [SEP] p [SEP]`` for BERT,
``<s> q </s></s> p </s>`` for RoBERTa), read once from the tokenizer's post-processor. A passage
shared by many queries is tokenised once, and truncation is decided per pair: the query keeps at
most ``query_max_tokens``, the passage takes the rest of ``max_length``.

Example:
    >>> template = Template(prefix=(101,), middle=(102,), suffix=(102,), types=(0, 0, 0, 1, 1))
    >>> template.pair([7, 8], [9])
    ([101, 7, 8, 102, 9, 102], [0, 0, 0, 0, 1, 1])
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evirank.score.backends import TokenBatch


@dataclass(frozen=True)
class Template:
    """Where special tokens go around one text or a pair of texts.

    Attributes:
        prefix: ids before the first text. middle: ids between the texts (empty for single
        texts). suffix: ids after the last text. types: token type ids of
        (prefix, first text, middle, second text, suffix).
    """

    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    types: tuple[int, int, int, int, int]

    @property
    def n_special(self) -> int:
        """How many special tokens the template adds."""
        return len(self.prefix) + len(self.middle) + len(self.suffix)

    def pair(self, first: Sequence[int], second: Sequence[int]) -> tuple[list[int], list[int]]:
        """Input ids and token type ids of ``first`` and ``second`` joined by the template."""
        ids = [*self.prefix, *first, *self.middle, *second, *self.suffix]
        t = self.types
        types = (
            [t[0]] * len(self.prefix)
            + [t[1]] * len(first)
            + [t[2]] * len(self.middle)
            + [t[3]] * len(second)
            + [t[4]] * len(self.suffix)
        )
        return ids, types


def _template_from(encoding: Any, lengths: Sequence[int]) -> Template:
    """Split a post-processed encoding of texts with ``lengths`` tokens into template parts."""
    ids = list(encoding.ids)
    special = list(encoding.special_tokens_mask)
    types = list(encoding.type_ids)
    parts: list[tuple[int, ...]] = []
    part_types: list[int] = []
    text_types: list[int] = []
    pos = 0
    for n_text in lengths:
        start = pos
        while pos < len(ids) and special[pos]:
            pos += 1
        parts.append(tuple(ids[start:pos]))
        part_types.append(types[start] if pos > start else 0)
        text_types.append(types[pos] if pos < len(types) else 0)
        pos += n_text
    parts.append(tuple(ids[pos:]))
    part_types.append(types[pos] if pos < len(types) else 0)
    if len(lengths) == 1:
        return Template(parts[0], (), parts[1], (part_types[0], text_types[0], 0, 0, part_types[1]))
    return Template(
        parts[0],
        parts[1],
        parts[2],
        (part_types[0], text_types[0], part_types[1], text_types[1], part_types[2]),
    )


@dataclass(frozen=True)
class TokenPieces:
    """One text's tokens: ids, pieces as the tokenizer writes them, character spans and word indices.

    Example:
        >>> TokenPieces((7, 8), ("purr", "##s"), ((0, 4), (4, 5)), (0, 0)).words
        (0, 0)
    """

    ids: tuple[int, ...]
    pieces: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    words: tuple[int, ...]


class TextEncoder:
    """Tokenisation and input assembly for one Hugging Face fast tokenizer.

    Args:
        tokenizer: a ``transformers`` fast tokenizer (``AutoTokenizer.from_pretrained(...)``).

    Example:
        >>> from transformers import AutoTokenizer  # doctest: +SKIP
        >>> enc = TextEncoder(AutoTokenizer.from_pretrained("bert-base-uncased"))  # doctest: +SKIP
        >>> enc.pair_template.n_special  # doctest: +SKIP
        3
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        if getattr(tokenizer, "backend_tokenizer", None) is None:
            raise TypeError(
                f"{type(tokenizer).__name__} is not a fast tokenizer; evirank needs a tokenizer.json "
                "(any model saved by a recent transformers has one)"
            )
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.uses_token_types = "token_type_ids" in getattr(tokenizer, "model_input_names", [])
        backend = copy.deepcopy(tokenizer.backend_tokenizer)
        backend.no_padding()
        backend.no_truncation()
        self._backend = backend
        first = backend.encode("relevance", add_special_tokens=False)
        second = backend.encode("evidence", add_special_tokens=False)
        processor = backend.post_processor
        if processor is None:
            self.single_template = Template((), (), (), (0, 0, 0, 0, 0))
            self.pair_template = Template((), (), (), (0, 0, 0, 1, 0))
        else:
            single = processor.process(copy.deepcopy(first), None, add_special_tokens=True)
            pair = processor.process(copy.deepcopy(first), copy.deepcopy(second), add_special_tokens=True)
            self.single_template = _template_from(single, [len(first.ids)])
            self.pair_template = _template_from(pair, [len(first.ids), len(second.ids)])

    def prompt_template(self, before: str, between: str, after: str, *, end: Sequence[int] = ()) -> Template:
        """A :class:`Template` of literal prompt text around a query and a passage.

        ``before`` query ``between`` passage ``after`` (then the ids ``end``, e.g. an end-of-sequence
        token), each literal tokenised alone without special tokens; token types are all 0. A family
        whose model reads a prompt (monoT5's ``Query: q Document: d Relevant:``) builds its input so.
        """
        parts = [
            tuple(self._backend.encode(text, add_special_tokens=False).ids) if text else ()
            for text in (before, between, after)
        ]
        return Template(parts[0], parts[1], (*parts[2], *end), (0, 0, 0, 0, 0))

    def encodings(self, texts: Sequence[str]) -> list[Any]:
        """Each text tokenised whole, without special tokens or truncation: the tokenizer's
        encodings (``ids`` and the character ``offsets`` of each token in the text).

        Example:
            >>> [e.ids for e in encoder.encodings(["a cat?"])]  # doctest: +SKIP
            [[64, 8415, 30]]
        """
        if not texts:
            return []
        return list(self._backend.encode_batch(list(texts), add_special_tokens=False))

    def token_ids(self, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
        """Token ids of each text without special tokens, cut to at most ``max_tokens``."""
        if not texts:
            return []
        encodings = self._backend.encode_batch(list(texts), add_special_tokens=False)
        return [enc.ids[:max_tokens] for enc in encodings]

    def token_pieces(self, text: str, max_tokens: int) -> TokenPieces:
        """The first ``max_tokens`` tokens of ``text`` (no special tokens) with where each sits in it.

        The ids are those :meth:`token_ids` gives; each token also has its piece (``"##ing"``), its
        character span in ``text`` and the index of the word it belongs to (the tokenizer's own
        pre-tokenisation: BERT's splits punctuation from words).
        """
        encoding = self._backend.encode(text, add_special_tokens=False)
        n = min(len(encoding.ids), max(max_tokens, 0))
        word_ids = list(encoding.word_ids)[:n]
        if any(w is None for w in word_ids):  # a tokenizer without words: each token is one
            word_ids = list(range(n))
        return TokenPieces(
            ids=tuple(int(i) for i in encoding.ids[:n]),
            pieces=tuple(str(t) for t in encoding.tokens[:n]),
            spans=tuple((int(a), int(b)) for a, b in encoding.offsets[:n]),
            words=tuple(int(w) for w in word_ids),
        )

    def pair_batch(
        self,
        queries: Sequence[Sequence[int]],
        passages: Sequence[Sequence[int]],
        pad_multiple: int = 1,
        template: Template | None = None,
    ) -> TokenBatch:
        """Padded inputs of (query, passage) id lists, already truncated by the caller.

        ``template`` replaces the tokenizer's own pair template (a family's prompt).
        """
        return self._assemble(template or self.pair_template, queries, passages, pad_multiple)

    def single_batch(self, texts: Sequence[Sequence[int]], pad_multiple: int = 1) -> TokenBatch:
        """Padded inputs of single texts' id lists, already truncated by the caller."""
        return self._assemble(self.single_template, texts, [()] * len(texts), pad_multiple)

    def _assemble(
        self,
        template: Template,
        firsts: Sequence[Sequence[int]],
        seconds: Sequence[Sequence[int]],
        pad_multiple: int,
    ) -> TokenBatch:
        """``template.pair(first, second)`` of every row, padded, built with array operations.

        Written out rather than row by row in Python because this runs on the thread that feeds a
        GPU, where it was a visible share of the time per batch: every token is placed by one
        scatter per segment (prefix, first text, middle, second text, suffix).
        """
        n = len(firsts)
        if n == 0 or n != len(seconds):
            raise ValueError(
                f"a batch needs as many first as second texts (at least one), found {n} and {len(seconds)}"
            )
        first_len = np.fromiter((len(x) for x in firsts), dtype=np.int64, count=n)
        second_len = np.fromiter((len(x) for x in seconds), dtype=np.int64, count=n)
        pre, mid, suf = len(template.prefix), len(template.middle), len(template.suffix)
        first_at = np.full(n, pre, dtype=np.int64)
        middle_at = first_at + first_len
        second_at = middle_at + mid
        suffix_at = second_at + second_len
        lengths = suffix_at + suf
        width = int(lengths.max())
        if pad_multiple > 1:
            width = -(-width // pad_multiple) * pad_multiple
        input_ids = np.full((n, width), self.pad_id, dtype=np.int64)
        rows = np.arange(n)
        _place_fixed(input_ids, rows, np.zeros(n, dtype=np.int64), template.prefix)
        _place_ragged(input_ids, firsts, first_len, first_at)
        _place_fixed(input_ids, rows, middle_at, template.middle)
        _place_ragged(input_ids, seconds, second_len, second_at)
        _place_fixed(input_ids, rows, suffix_at, template.suffix)
        columns = np.arange(width)[None, :]
        mask = (columns < lengths[:, None]).astype(np.int64)
        types = None
        if self.uses_token_types:
            segment = (
                (columns >= first_at[:, None]).astype(np.int64)
                + (columns >= middle_at[:, None])
                + (columns >= second_at[:, None])
                + (columns >= suffix_at[:, None])
            )
            types = np.asarray(template.types, dtype=np.int64)[segment] * mask
        return TokenBatch(input_ids=input_ids, attention_mask=mask, token_type_ids=types)


def _place_fixed(out: np.ndarray, rows: np.ndarray, start: np.ndarray, ids: Sequence[int]) -> None:
    """Write the same ``ids`` into every row of ``out`` from column ``start[row]``."""
    for k, token in enumerate(ids):
        out[rows, start + k] = token


def _place_ragged(
    out: np.ndarray, texts: Sequence[Sequence[int]], lengths: np.ndarray, start: np.ndarray
) -> None:
    """Write ``texts[row]`` into ``out[row]`` from column ``start[row]``, all rows in one scatter."""
    total = int(lengths.sum())
    if total == 0:
        return
    flat = np.fromiter(itertools.chain.from_iterable(texts), dtype=np.int64, count=total)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, np.repeat(start, lengths) + offsets] = flat
