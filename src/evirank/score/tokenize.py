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
import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evirank.score.backends import TokenBatch
from evirank.score.store import text_hash
from evirank.score.token_cache import KEEP_TOKENS, TokenCache


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

    Texts are tokenised through :attr:`cache` (token ids by text digest, memory-bounded; see
    :mod:`evirank.score.token_cache`), so a text seen before is not tokenised again.

    Args:
        tokenizer: a ``transformers`` fast tokenizer (``AutoTokenizer.from_pretrained(...)``).

    Example:
        >>> from transformers import AutoTokenizer  # doctest: +SKIP
        >>> enc = TextEncoder(AutoTokenizer.from_pretrained("bert-base-uncased"))  # doctest: +SKIP
        >>> enc.pair_template.n_special  # doctest: +SKIP
        3
    """

    #: what goes before and after every text when it is tokenised (a family's way of presenting
    #: texts: a space before each, or the prompt's pieces around each)
    text_before: str = ""
    text_after: str = ""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        if getattr(tokenizer, "backend_tokenizer", None) is None:
            raise TypeError(
                f"{type(tokenizer).__name__} is not a fast tokenizer; evirank needs a tokenizer.json "
                "(any model saved by a recent transformers has one)"
            )
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        #: token ids of the texts this encoder has tokenised, by digest (see evirank.score.token_cache)
        self.cache = TokenCache()
        self.uses_token_types = "token_type_ids" in getattr(tokenizer, "model_input_names", [])
        backend = copy.deepcopy(tokenizer.backend_tokenizer)
        backend.no_padding()
        backend.no_truncation()
        self._backend = backend
        self._fingerprint: str | None = None
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

    @property
    def fingerprint(self) -> str:
        """sha256 hex of the tokenizer (its whole ``tokenizer.json``) and of how texts are given to
        it (:attr:`text_before`, :attr:`text_after`): token ids kept on disk are found by it."""
        if getattr(self, "_fingerprint", None) is None:
            digest = hashlib.sha256(self._backend.to_str().encode("utf-8"))
            digest.update(json.dumps([self.text_before, self.text_after, KEEP_TOKENS]).encode("utf-8"))
            self._fingerprint = digest.hexdigest()
        return str(self._fingerprint)

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
        """Token ids of each text without special tokens, cut to at most ``max_tokens``
        (through the cache, as :meth:`token_table`)."""
        if not texts:
            return []
        table = self.token_table(texts, max_tokens)
        return [table.row(i) for i in range(len(texts))]

    def token_table(
        self, texts: Sequence[str], max_tokens: int, keys: Sequence[bytes] | None = None
    ) -> TokenTable:
        """Token ids of each text (no special tokens, at most ``max_tokens``) as one table.

        Texts already in :attr:`cache` are not tokenised again; the others are tokenised in one
        batched call and kept. ``keys`` are the texts' digests when the caller has them
        (:func:`evirank.score.store.text_hash`).

        Example:
            >>> encoder.token_table(["a cat", "a dog"], 512).lengths.tolist()  # doctest: +SKIP
            [2, 2]
        """
        if keys is None:
            keys = [text_hash(t) for t in texts]
        found = self.cache.find(keys, max_tokens)
        missing = [i for i, ids in enumerate(found) if ids is None]
        if missing:
            keep = max(max_tokens, KEEP_TOKENS)
            # without character offsets where the tokenizers library can (tokenizers >= 0.21)
            encode = getattr(self._backend, "encode_batch_fast", self._backend.encode_batch)
            encodings = encode(
                [self.text_before + texts[i] + self.text_after for i in missing], add_special_tokens=False
            )
            new = [np.asarray(e.ids[:keep], dtype=np.int32) for e in encodings]
            self.cache.add([keys[i] for i in missing], new)
            for i, ids in zip(missing, new, strict=True):
                found[i] = ids
        rows: list[np.ndarray] = [ids for ids in found if ids is not None]
        full = np.fromiter((len(ids) for ids in rows), dtype=np.int64, count=len(rows))
        flat = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int32)
        return TokenTable(flat, np.cumsum(full) - full, np.minimum(full, max(max_tokens, 0)))

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
        """``template.pair(first, second)`` of every row, padded (see :meth:`template_batch`)."""
        n = len(firsts)
        if n == 0 or n != len(seconds):
            raise ValueError(
                f"a batch needs as many first as second texts (at least one), found {n} and {len(seconds)}"
            )
        first, second = TokenTable.of(firsts), TokenTable.of(seconds)
        rows = np.arange(n)
        return self.template_batch(
            template, first.take(rows, first.lengths), second.take(rows, second.lengths), pad_multiple
        )

    def template_batch(
        self, template: Template, first: Ragged, second: Ragged, pad_multiple: int = 1
    ) -> TokenBatch:
        """The padded inputs of ``template`` around two token-id columns, one row per row of ``first``.

        Example:
            >>> table = TokenTable.of([[7, 8], [9]])
            >>> encoder.template_batch(  # doctest: +SKIP
            ...     encoder.pair_template, table.take([0], [2]), table.take([1], [1])
            ... ).input_ids.tolist()
            [[101, 7, 8, 102, 9, 102]]
        """
        parts = (template.prefix, first, template.middle, second, template.suffix)
        return assemble(parts, template.types, self.pad_id, pad_multiple, self.uses_token_types)

    def single_column_batch(self, texts: Ragged, pad_multiple: int = 1) -> TokenBatch:
        """The padded inputs of single texts (the tokenizer's single-text template around each)."""
        template = self.single_template
        parts = (template.prefix, texts, template.suffix)
        types = (template.types[0], template.types[1], template.types[4])
        return assemble(parts, types, self.pad_id, pad_multiple, self.uses_token_types)


class TextIds:
    """Token ids of a fixed list of texts, tokenised on demand: each at most once, through the
    encoder's cache (a scorer call's distinct queries, or its distinct passages).

    Args:
        encoder: the text encoder. texts: the texts. max_tokens: each text's ids are cut to this.
        keys: the texts' digests, when the caller has them.

    Example:
        >>> ids = TextIds(encoder, ["a cat", "a dog"], 512)  # doctest: +SKIP
        >>> ids.need(np.array([1]))  # doctest: +SKIP
        >>> ids.lengths.tolist()  # doctest: +SKIP
        [0, 2]
    """

    def __init__(
        self,
        encoder: TextEncoder,
        texts: Sequence[str],
        max_tokens: int,
        keys: Sequence[bytes] | None = None,
    ) -> None:
        self.encoder = encoder
        self.texts = texts
        self.max_tokens = max_tokens
        self.keys = keys
        #: where each text's ids start in the flat buffer (-1: not tokenised yet), and how many
        self.starts = np.full(len(texts), -1, dtype=np.int64)
        self.lengths = np.zeros(len(texts), dtype=np.int64)
        self._ids = np.zeros(0, dtype=np.int32)
        self._used = 0

    def need(self, wanted: np.ndarray) -> None:
        """Tokenise the texts ``wanted`` (indices, repeats allowed) that are not held yet."""
        chosen = np.unique(np.asarray(wanted, dtype=np.int64))
        chosen = chosen[self.starts[chosen] < 0]
        if len(chosen) == 0:
            return
        keys = None if self.keys is None else [self.keys[i] for i in chosen.tolist()]
        table = self.encoder.token_table([self.texts[i] for i in chosen.tolist()], self.max_tokens, keys)
        size = self._used + len(table.ids)
        if size > len(self._ids):
            grown = np.zeros(max(size, 2 * len(self._ids)), dtype=np.int32)
            grown[: self._used] = self._ids[: self._used]
            self._ids = grown
        self._ids[self._used : size] = table.ids
        self.starts[chosen] = self._used + table.starts
        self.lengths[chosen] = table.lengths
        self._used = size

    def table(self) -> TokenTable:
        """The texts held so far as a table (row ``i`` is text ``i``; empty until tokenised)."""
        return TokenTable(self._ids, np.maximum(self.starts, 0), self.lengths)


@dataclass(frozen=True)
class TokenTable:
    """Token ids of several texts in one flat array: text ``i`` is ``ids[starts[i]:][:lengths[i]]``.

    Example:
        >>> table = TokenTable.of([[7, 8], [], [9]])
        >>> table.lengths.tolist(), table.row(2)
        ([2, 0, 1], [9])
    """

    ids: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[Sequence[int]]) -> TokenTable:
        """The table of id lists (or arrays)."""
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        total = int(lengths.sum())
        ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=total)
        return cls(ids, np.cumsum(lengths) - lengths, lengths)

    def row(self, i: int) -> list[int]:
        """Text ``i``'s ids as a list."""
        start = int(self.starts[i])
        return list(self.ids[start : start + int(self.lengths[i])].tolist())

    def take(self, rows: Sequence[int] | np.ndarray, lengths: Sequence[int] | np.ndarray) -> Ragged:
        """A column of a batch: text ``rows[k]``'s first ``lengths[k]`` ids in row ``k``."""
        return Ragged(self, np.asarray(rows, dtype=np.int64), np.asarray(lengths, dtype=np.int64))


@dataclass(frozen=True)
class Ragged:
    """One column of a batch taken from a :class:`TokenTable`: row ``k`` holds the first
    ``lengths[k]`` ids of the table's text ``rows[k]``."""

    table: TokenTable
    rows: np.ndarray
    lengths: np.ndarray


#: One part of a batch's rows: the same ids in every row, or a column of token ids.
Part = Sequence[int] | Ragged


def assemble(
    parts: Sequence[Part],
    part_types: Sequence[int],
    pad_id: int,
    pad_multiple: int = 1,
    token_types: bool = True,
) -> TokenBatch:
    """A padded batch whose rows are ``parts`` one after the other: fixed ids (the same in every
    row) or :class:`Ragged` columns of token ids; ``part_types[k]`` is part ``k``'s token type.

    Every row of the batch is built at once with array operations, no Python loop per row: this
    runs on the thread that feeds a GPU. Each ragged column is one gather from its table and one
    scatter into the batch.

    Example:
        >>> table = TokenTable.of([[7, 8], [9]])
        >>> batch = assemble([(101,), table.take([0, 1], [2, 1]), (102,)], (0, 0, 0), pad_id=0)
        >>> batch.input_ids.tolist(), batch.attention_mask.tolist()
        ([[101, 7, 8, 102], [101, 9, 102, 0]], [[1, 1, 1, 1], [1, 1, 1, 0]])
    """
    n = next(len(p.rows) for p in parts if isinstance(p, Ragged))
    starts = []
    end = np.zeros(n, dtype=np.int64)
    for part in parts:
        starts.append(end)
        end = end + (part.lengths if isinstance(part, Ragged) else len(part))
    width = int(end.max()) if n else 0
    if pad_multiple > 1:
        width = -(-width // pad_multiple) * pad_multiple
    input_ids = np.full((n, width), pad_id, dtype=np.int64)
    flat = input_ids.reshape(-1)
    row_start = np.arange(n, dtype=np.int64) * width
    for part, start in zip(parts, starts, strict=True):
        at = row_start + start
        if not isinstance(part, Ragged):
            for k, token in enumerate(part):
                flat[at + k] = token
            continue
        total = int(part.lengths.sum())
        if total == 0:
            continue
        step = np.arange(total, dtype=np.int64) - np.repeat(
            np.cumsum(part.lengths) - part.lengths, part.lengths
        )
        source = np.repeat(part.table.starts[part.rows], part.lengths) + step
        flat[np.repeat(at, part.lengths) + step] = part.table.ids[source]
    columns = np.arange(width, dtype=np.int64)[None, :]
    real = columns < end[:, None]
    mask = real.astype(np.int64)
    types = None
    if token_types:
        changes = _type_changes(part_types, starts)
        if len(changes) == 1 and changes[0][0] == 1:  # BERT's pairs: type 1 from the second text on
            types = ((columns >= changes[0][1][:, None]) & real).astype(np.int64)
        else:
            types = np.zeros((n, width), dtype=np.int64)
            previous = 0
            for kind, start in changes:
                types += (kind - previous) * (columns >= start[:, None])
                previous = kind
            types *= mask
    return TokenBatch(input_ids=input_ids, attention_mask=mask, token_type_ids=types)


def _type_changes(part_types: Sequence[int], starts: Sequence[np.ndarray]) -> list[tuple[int, np.ndarray]]:
    """(new type, where it starts) of each part whose token type differs from the one before (from 0)."""
    changes = []
    previous = 0
    for kind, start in zip(part_types, starts, strict=True):
        if kind != previous:
            changes.append((kind, start))
            previous = kind
    return changes
