"""Token-budget batching: every row once, no batch over budget, similar lengths together."""

from __future__ import annotations

import numpy as np
import pytest

from evirank.score.batching import padded_length, token_budget_batches


@pytest.mark.parametrize("pad_multiple", [1, 8])
@pytest.mark.parametrize("seed", range(5))
def test_batches_cover_every_row_once_and_never_exceed_the_budget(seed: int, pad_multiple: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, 300, size=500)
    budget = int(rng.integers(320, 5000))
    batches = token_budget_batches(lengths, budget, pad_multiple)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(len(lengths)))
    for rows in batches:
        width = padded_length(int(lengths[rows].max()), pad_multiple)
        assert len(rows) * width <= budget
    # longest first: batch maxima never increase
    maxima = [int(lengths[rows].max()) for rows in batches]
    assert maxima == sorted(maxima, reverse=True)


def test_batches_are_as_full_as_the_budget_allows() -> None:
    batches = token_budget_batches([10] * 10, budget=35)
    assert [len(b) for b in batches] == [3, 3, 3, 1]


def test_a_row_longer_than_the_budget_is_an_error() -> None:
    with pytest.raises(ValueError, match="budget"):
        token_budget_batches([10, 600], budget=512)


def test_no_rows_no_batches() -> None:
    assert token_budget_batches([], budget=100) == []
