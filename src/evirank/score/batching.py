"""Length-sorted batches bounded by a token budget (padded rows x padded length).

A fixed batch *count* runs out of memory on long passages and wastes time on short ones;
a token budget keeps the padded tensor size, and so the activation memory, bounded. This is
written here rather than taken from a library because it is the core of the scorer's speed
and memory behaviour, and it is a few lines.

Example:
    >>> [b.tolist() for b in token_budget_batches([5, 40, 12, 38], budget=80)]
    [[1, 3], [2, 0]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def padded_length(length: int, multiple: int = 1) -> int:
    """``length`` rounded up to a multiple of ``multiple`` (tensor cores like multiples of 8).

    Example:
        >>> padded_length(13, 8)
        16
    """
    if multiple <= 1:
        return int(length)
    return int(-(-length // multiple) * multiple)


def token_budget_batches(
    lengths: Sequence[int] | np.ndarray, budget: int, pad_multiple: int = 1
) -> list[np.ndarray]:
    """Split row indices into batches whose padded size ``rows x padded max length`` fits ``budget``.

    Rows are sorted by length, longest first (so an out-of-memory error, if any, shows on the first
    batch), ties in input order; each batch holds rows of similar length, so padding is small.

    Args:
        lengths: the token count of each row (special tokens included).
        budget: the most tokens (padding included) one batch may hold; at least the longest row.
        pad_multiple: batches are padded to a multiple of this; the budget counts the padding.

    Returns:
        Arrays of row indices, one per batch, in scoring order.

    Raises:
        ValueError: if one row alone does not fit the budget.
    """
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.size == 0:
        return []
    longest = padded_length(int(lens.max()), pad_multiple)
    if longest > budget:
        raise ValueError(
            f"batch token budget {budget} is smaller than the longest input ({longest} tokens); "
            "raise batch_tokens to at least max_length"
        )
    order = np.argsort(-lens, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    n = len(order)
    while start < n:
        # Sorted longest first, so the first row of a batch fixes its padded length.
        width = padded_length(int(lens[order[start]]), pad_multiple)
        rows = max(1, budget // width)
        batches.append(order[start : start + rows])
        start += rows
    return batches
