"""Token ids of texts already tokenised, kept by text digest so a text is tokenised once.

A scorer's :class:`~evirank.score.tokenize.TextEncoder` holds one :class:`TokenCache`: a passage
scored against many queries, or again in a later call of the same scorer, is found there instead
of being tokenised again. Keys are the 16-byte digests the score store uses for texts
(:func:`evirank.score.store.text_hash`); values are the text's first :data:`KEEP_TOKENS` token
ids (no special tokens) as an int32 array, which covers every input a scorer builds. The cache
belongs to one tokenizer (and one way of presenting texts to it), so ids from another tokenizer
are never found in it.

Memory is bounded: each entry counts its ids (4 bytes a token) plus :data:`ENTRY_OVERHEAD` bytes
for its key and bookkeeping, and once the total passes ``max_bytes`` the entries used least
recently go first. The bound is ``EVIRANK_TOKEN_CACHE_MB`` megabytes (default
:data:`DEFAULT_MAX_MB`; ``0`` turns the cache off): 256 MB hold about a million sentence-length
passages.

Example:
    >>> cache = TokenCache(max_bytes=1000)
    >>> cache.add([b"k1"], [np.array([7, 8])])
    >>> [None if ids is None else ids.tolist() for ids in cache.find([b"k1", b"k2"], 512)]
    [[7, 8], None]
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

#: The most token ids kept of one text (the longest input any scorer builds).
KEEP_TOKENS = 512
#: Bytes counted for one entry besides its ids (key, array header, dictionary slot).
ENTRY_OVERHEAD = 200
#: The default bound, in megabytes (``EVIRANK_TOKEN_CACHE_MB`` replaces it).
DEFAULT_MAX_MB = 256
#: The variable that sets the bound.
MAX_MB_VARIABLE = "EVIRANK_TOKEN_CACHE_MB"


def default_max_bytes() -> int:
    """The cache bound in bytes: ``EVIRANK_TOKEN_CACHE_MB`` megabytes, else :data:`DEFAULT_MAX_MB`.

    Raises:
        ValueError: the variable is not a non-negative number.

    Example:
        >>> default_max_bytes() == DEFAULT_MAX_MB * 2**20 or MAX_MB_VARIABLE in os.environ
        True
    """
    raw = os.environ.get(MAX_MB_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_MAX_MB * 2**20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if megabytes < 0:
        raise ValueError(f"{MAX_MB_VARIABLE} must be a number of megabytes (0 or more), found {raw!r}")
    return int(megabytes * 2**20)


class TokenCache:
    """Token ids by text digest, least recently used dropped first past ``max_bytes`` (see the module).

    Args:
        max_bytes: the bound (default: :func:`default_max_bytes`); 0 keeps nothing.
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = default_max_bytes() if max_bytes is None else max(0, int(max_bytes))
        self._entries: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._unsaved: list[bytes] = []
        #: whether :meth:`take_unsaved` is used (the ids are saved beside a score store)
        self.keep_unsaved = False
        #: bytes counted for the entries held now.
        self.nbytes = 0
        #: lookups answered and not, entries dropped for room, since the cache was made.
        self.hits = 0
        self.misses = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, keys: Sequence[bytes], max_tokens: int) -> list[np.ndarray | None]:
        """The kept ids of each key, or None where the text is not held (or where more than
        :data:`KEEP_TOKENS` ids are wanted of a text that has more)."""
        entries = self._entries
        found: list[np.ndarray | None] = []
        for key in keys:
            ids = entries.get(key)
            if ids is not None and max_tokens > KEEP_TOKENS and len(ids) >= KEEP_TOKENS:
                ids = None  # cut at KEEP_TOKENS: not enough for this request
            if ids is None:
                self.misses += 1
            else:
                self.hits += 1
                entries.move_to_end(key)
            found.append(ids)
        return found

    def add(self, keys: Sequence[bytes], ids: Sequence[np.ndarray], *, saved: bool = False) -> None:
        """Keep each text's ids (cut to :data:`KEEP_TOKENS`), dropping the oldest entries past the
        bound. ``saved``: the ids were read from disk (:meth:`take_unsaved` leaves them out)."""
        if self.max_bytes <= 0:
            return
        entries = self._entries
        for key, row in zip(keys, ids, strict=True):
            if key in entries:
                continue
            kept = np.ascontiguousarray(row[:KEEP_TOKENS], dtype=np.int32)
            entries[key] = kept
            self.nbytes += kept.nbytes + ENTRY_OVERHEAD
            if not saved and self.keep_unsaved:
                self._unsaved.append(key)
        while self.nbytes > self.max_bytes and entries:
            _, dropped = entries.popitem(last=False)
            self.nbytes -= dropped.nbytes + ENTRY_OVERHEAD
            self.evicted += 1
        if len(self._unsaved) > 2 * len(entries) + 1024:  # keys dropped before they were saved
            self._unsaved = [k for k in self._unsaved if k in entries]

    def take_unsaved(self) -> tuple[list[bytes], list[np.ndarray]]:
        """The keys and ids added since the last call (and still held), not read from disk."""
        keys = [k for k in dict.fromkeys(self._unsaved) if k in self._entries]
        self._unsaved = []
        return keys, [self._entries[k] for k in keys]

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
        self._unsaved = []
        self.nbytes = 0
