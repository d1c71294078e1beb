"""The fast evaluator equals evirank.evaluate.Evaluator (trec_eval semantics) on random cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evirank.evaluate import Evaluator, FastEvaluator, MeasureError
from evirank.frames import make_qrels

MEASURES = [
    "AP",
    "AP@5",
    "P@5",
    "P@20",
    "R@10",
    "RR",
    "RR@10",
    "Success@3",
    "nDCG",
    "nDCG@10",
    "Rprec",
    "AP(rel=2)",
    "P(rel=2)@5",
    "nDCG@20",
]


def random_case(rng: np.random.Generator, ties: bool) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    rows, judged = [], []
    for q in range(int(rng.integers(1, 9))):
        docs = list(dict.fromkeys(f"d{rng.integers(0, 60)}" for _ in range(int(rng.integers(1, 40)))))
        rows += [(str(q), d) for d in docs]
        for d in [*docs, "unretrieved1", "unretrieved2"]:
            if rng.random() < 0.4:
                judged.append((str(q), d, int(rng.integers(0, 4))))
    judged.append(("999", "x", 1))  # a qrels query without candidates: skipped, as trec_eval does
    keys = pd.DataFrame(rows, columns=["qid", "docno"])
    shape = (3, len(keys))
    scores = rng.integers(0, 4, size=shape) * 0.25 if ties else rng.normal(size=shape)
    return keys, make_qrels(judged), scores


@pytest.mark.parametrize("method", ["count", "sort", "auto"])
def test_fast_measures_equal_evaluator_on_random_runs(method: str) -> None:
    rng = np.random.default_rng({"count": 1, "sort": 2, "auto": 3}[method])
    for case in range(10):
        keys, qrels, scores = random_case(rng, ties=case % 2 == 0)
        fast = FastEvaluator(qrels, MEASURES, method=method)  # type: ignore[arg-type]
        layout = fast.layout(keys.sample(frac=1.0, random_state=case))  # any row order
        shuffled = keys.sample(frac=1.0, random_state=case).index.to_numpy()
        values = fast.per_query(layout, scores[:, shuffled])
        evaluator = Evaluator(qrels, MEASURES)
        for g in range(scores.shape[0]):
            table = evaluator.per_query(keys.assign(score=scores[g]))
            wide = table.pivot(index="qid", columns="measure", values="value")
            assert set(layout.qids) == set(wide.index)
            for name in fast.names:
                expected = wide.loc[list(layout.qids), name].to_numpy()
                np.testing.assert_allclose(values[name][g], expected, rtol=0, atol=1e-12, err_msg=name)


def test_ties_are_broken_by_docno_descending_in_single_precision() -> None:
    keys = pd.DataFrame({"qid": ["1"] * 3, "docno": ["a", "b", "c"]})
    fast = FastEvaluator(make_qrels([("1", "a", 1)]), ["RR"])
    layout = fast.layout(keys)
    # equal scores: c, b, a (docno descending); 1 + 1e-9 equals 1 in single precision.
    assert fast.per_query(layout, np.array([1.0, 1.0, 1.0]))["RR"].tolist() == [[1 / 3]]
    assert fast.per_query(layout, np.array([1.0 + 1e-9, 1.0, 1.0]))["RR"].tolist() == [[1 / 3]]
    assert fast.per_query(layout, np.array([1.0 + 1e-6, 1.0, 1.0]))["RR"].tolist() == [[1.0]]


def test_queries_without_qrels_are_not_evaluated() -> None:
    keys = pd.DataFrame({"qid": ["1", "2"], "docno": ["a", "a"]})
    fast = FastEvaluator(make_qrels([("2", "a", 1)]), ["AP"])
    layout = fast.layout(keys)
    assert layout.qids == ("2",)
    assert fast.per_query(layout, np.array([0.0, 0.0]))["AP"].tolist() == [[1.0]]


@pytest.mark.parametrize("measure", ["NumRet", "nDCG(dcg='exp-log2')@10", "P", "AP(judged_only=True)"])
def test_unsupported_measures_are_refused(measure: str) -> None:
    with pytest.raises(MeasureError):
        FastEvaluator(make_qrels([("1", "a", 1)]), [measure])
