"""Score breakdowns: every aggregator's terms add up to the score it gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evirank.aggregate import Birch, FirstP, MaxP, MeanP, SumP
from evirank.aggregate.evidence import MultiEvidence
from evirank.frames import DOCNO, QID, SCORE


def passages(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for q in ("1", "2"):
        for d in ("a", "b", "c", "d"):
            fs = float(rng.normal(10, 3))
            for pid in range(int(rng.integers(1, 5))):
                rows.append((q, d, pid, float(rng.normal()), float(rng.normal()), fs))
    return pd.DataFrame(rows, columns=[QID, DOCNO, "pid", SCORE, "score_bi", "first_stage_score"])


@pytest.mark.parametrize(
    "aggregator",
    [
        Birch(top_n=3, alpha=0.3, weights=(1.0, 0.4, 0.1)),
        Birch(top_n=2, alpha=0.0, normalise="none"),
        MaxP(alpha=0.25),
        FirstP(),
        SumP(alpha=0.5, normalise="none"),
        MeanP(alpha=0.7),
    ],
    ids=repr,
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_terms_add_up_to_the_score(aggregator, seed: int) -> None:
    frame = passages(seed)
    run = aggregator(frame).set_index([QID, DOCNO])[SCORE]
    terms = aggregator.terms(frame)
    summed = terms.groupby([QID, DOCNO])["contribution"].sum()
    assert np.allclose(summed.reindex(run.index).to_numpy(), run.to_numpy(), rtol=0, atol=1e-12)
    assert ("first stage" in set(terms["term"])) == (aggregator.alpha > 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_several_scorers_terms_add_up_and_name_each_scorer(seed: int) -> None:
    frame = passages(seed).assign(score_cross=lambda f: f[SCORE])
    multi = MultiEvidence(Birch(top_n=2, alpha=0.4), ("cross", "bi"), [0.3])
    run = multi(frame).set_index([QID, DOCNO])[SCORE]
    terms = multi.terms(frame)
    summed = terms.groupby([QID, DOCNO])["contribution"].sum()
    assert np.allclose(summed.reindex(run.index).to_numpy(), run.to_numpy(), atol=1e-12)
    assert {"cross: passage 1", "bi: passage 2", "first stage"} <= set(terms["term"])
