"""The aggregator registry: one parser, one default, and the tuner scoring exactly as the pipeline.

For every registered aggregator and a grid of settings (alpha, Birch's weights and N, both
normalisations), the tuner's vectorised scores (:meth:`AggregateSpec.scores`, what the grid search
ranks by) equal the scores of the stage the pipeline runs, and both equal a plain re-computation
from the definitions, on small cases with ties, single-passage documents, and documents without
passages or below the re-rank depth (which keep their first-stage order).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from evirank.aggregate import (
    AGGREGATORS,
    DEFAULT_NORMALISE,
    AggregateSpec,
    AggregateSpecError,
    merge_tail,
    parse_aggregate,
)
from evirank.evaluate import Evaluator, FastEvaluator
from evirank.frames import (
    DOCNO,
    DOCUMENT_SCORE,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    SCORE,
    make_qrels,
    make_run,
    sort_run,
)
from evirank.tune import parse_grid
from evirank.tune.search import grid_values

# Query 1: ties between documents (b and d have equal passages and first-stage scores), a
# single-passage document (c), tied passages inside a document (b). Query 2: negative scores
# (logits), one document with one passage. Query 3: every passage score equal (min-max maps
# them all to 0). First-stage documents e (query 1) and z (query 2) have no passages; f is
# below the depth.
PASSAGE_ROWS = [
    ("1", "a", 0, 0.2, 10.0),
    ("1", "a", 1, 0.9, 10.0),
    ("1", "a", 2, 0.4, 10.0),
    ("1", "a", 3, 0.1, 10.0),
    ("1", "b", 0, 0.5, 12.0),
    ("1", "b", 1, 0.5, 12.0),
    ("1", "c", 0, 0.95, 4.0),
    ("1", "d", 1, 0.5, 12.0),
    ("1", "d", 0, 0.5, 12.0),
    ("2", "a", 0, -3.0, 3.0),
    ("2", "a", 1, -1.0, 3.0),
    ("2", "x", 0, 2.0, 1.0),
    ("3", "p", 0, 0.7, 5.0),
    ("3", "q", 0, 0.7, 5.0),
    ("3", "q", 1, 0.7, 5.0),
]
FIRST_STAGE = make_run(
    [
        ("1", "b", 12.0),
        ("1", "d", 12.0),
        ("1", "a", 10.0),
        ("1", "e", 7.0),
        ("1", "c", 4.0),
        ("1", "f", 1.0),
        ("2", "a", 3.0),
        ("2", "z", 2.0),
        ("2", "x", 1.0),
        ("3", "p", 5.0),
        ("3", "q", 5.0),
    ]
)

# A document-level scorer's score of each document (on each of its passages): ties (b, d; p, q).
DOCUMENT_SCORES = {
    ("1", "a"): 0.7,
    ("1", "b"): 1.5,
    ("1", "c"): -0.2,
    ("1", "d"): 1.5,
    ("2", "a"): -2.0,
    ("2", "x"): 0.3,
    ("3", "p"): 1.0,
    ("3", "q"): 1.0,
}

ALPHAS = (0.0, 0.3, 1.0)
WEIGHTS = {
    1: [(1.0,), (0.4,)],
    2: [(1.0, 0.5), (1.0, 0.0), (0.3, 1.0)],
    3: [(1.0, 0.5, 0.25), (1.0, 0.0, 1.0)],
}


def passages() -> pd.DataFrame:
    frame = pd.DataFrame(PASSAGE_ROWS, columns=[QID, DOCNO, PID, SCORE, FIRST_STAGE_SCORE])
    keys = zip(frame[QID], frame[DOCNO], strict=True)
    return frame.assign(**{DOCUMENT_SCORE: [DOCUMENT_SCORES[key] for key in keys]})


def specs() -> list[AggregateSpec]:
    """Every registered aggregator, Birch with N = 1, 2, 3, both normalisations."""
    out = []
    for kind, normalise in itertools.product(AGGREGATORS, ("minmax", "none")):
        numbers = (1, 2, 3) if AGGREGATORS[kind].numbered else (1,)
        out += [AggregateSpec(kind, n, normalise) for n in numbers]  # type: ignore[arg-type]
    return out


def settings_of(spec: AggregateSpec) -> list[dict[str, float]]:
    """alpha x weights (Birch), alpha alone (the others)."""
    if not spec.stage_class.numbered:
        return [{"alpha": a} for a in ALPHAS]
    return [
        {"alpha": a, **{f"w{i}": w for i, w in enumerate(ws, start=1)}}
        for a, ws in itertools.product(ALPHAS, WEIGHTS[spec.top_n])
    ]


def minmax(values: pd.Series) -> pd.Series:
    """Per-query min-max as the module docstring of :mod:`evirank.aggregate.core` defines it."""
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else values * 0.0


def reference(spec: AggregateSpec, params: dict[str, float]) -> dict[tuple[str, str], float]:
    """Each document's score from the definitions, one document at a time."""
    out = {}
    for qid, query in passages().groupby(QID):
        query = query.copy()
        if spec.normalise == "minmax":
            query[SCORE] = minmax(query[SCORE])
            docs = query.drop_duplicates(DOCNO).set_index(DOCNO)[FIRST_STAGE_SCORE]
            query[FIRST_STAGE_SCORE] = query[DOCNO].map(minmax(docs))
            whole = query.drop_duplicates(DOCNO).set_index(DOCNO)[DOCUMENT_SCORE]
            query[DOCUMENT_SCORE] = query[DOCNO].map(minmax(whole))
        for docno, doc in query.groupby(DOCNO):
            values = doc.sort_values(PID)[SCORE].tolist()
            s_doc = float(doc[FIRST_STAGE_SCORE].iloc[0])
            if spec.kind == "maxp":
                evidence = max(values)
            elif spec.kind == "firstp":
                evidence = values[0]
            elif spec.kind == "sump":
                evidence = sum(values)
            elif spec.kind == "meanp":
                evidence = sum(values) / len(values)
            elif spec.kind == "document":
                evidence = float(doc[DOCUMENT_SCORE].iloc[0])
            else:
                best = sorted(values, reverse=True)[: spec.top_n]
                best += [0.0] * (spec.top_n - len(best))
                evidence = sum(params[f"w{i + 1}"] * v for i, v in enumerate(best))
            alpha = params["alpha"]
            out[(str(qid), str(docno))] = alpha * s_doc + (1 - alpha) * evidence
    return out


def test_every_aggregator_kind_has_a_case_in_the_reference() -> None:
    assert set(AGGREGATORS) == {"birch", "maxp", "firstp", "sump", "meanp", "document"}


@pytest.mark.parametrize("spec", specs(), ids=lambda s: f"{s.spec}-{s.normalise}")
def test_tuner_scores_equal_the_pipeline_stage_and_the_definition(spec: AggregateSpec) -> None:
    frame = passages()
    settings = settings_of(spec)
    names = list(spec.parameters)
    table = spec.table(frame)
    grid = np.array([[s[n] for n in names] for s in settings])
    tuned = spec.scores(table, grid, names)  # [G, D], what the grid search ranks by
    keys = list(zip(table.keys[QID], table.keys[DOCNO], strict=True))
    assert tuned.shape == (len(settings), len(keys))
    for row, params in zip(tuned, settings, strict=True):
        stage = spec.stage(params)
        assert stage.normalise == spec.normalise and stage.params() == params
        run = stage(frame)
        pipeline = dict(zip(zip(run[QID], run[DOCNO], strict=True), run[SCORE], strict=True))
        np.testing.assert_allclose(row, [pipeline[k] for k in keys], rtol=1e-12, atol=1e-12)
        expected = reference(spec, params)
        np.testing.assert_allclose(row, [expected[k] for k in keys], rtol=1e-12, atol=1e-12)

        # The same ranking after the tail: documents without passages or below the depth follow
        # in first-stage order, under the re-ranked ones, in both.
        tuner_run = sort_run(table.keys.assign(**{SCORE: row}))
        for left, right in ((merge_tail(tuner_run, FIRST_STAGE), merge_tail(run, FIRST_STAGE)),):
            assert left[[QID, DOCNO]].values.tolist() == right[[QID, DOCNO]].values.tolist()
        merged = merge_tail(run, FIRST_STAGE)
        assert merged[merged[QID] == "1"][DOCNO].tolist()[-2:] == ["e", "f"]


@pytest.mark.parametrize("spec", specs(), ids=lambda s: f"{s.spec}-{s.normalise}")
def test_the_tuners_metric_equals_evaluate_on_the_pipelines_run(spec: AggregateSpec) -> None:
    frame = passages()
    qrels = make_qrels([("1", "c", 1), ("1", "b", 2), ("2", "x", 1), ("3", "q", 1)])
    table = spec.table(frame)
    evaluator = FastEvaluator(qrels, ["AP", "nDCG@3"])
    layout = evaluator.layout(table.keys)
    axes = ["alpha=0,0.3,1"] + [f"w{i}=0.5,1" for i in range(2, spec.top_n + 1)]
    grid = parse_grid(axes)
    for measure in ("AP", "nDCG@3"):
        values = grid_values(spec, table, grid, evaluator, layout, measure=measure)
        exact = Evaluator(qrels, [measure])
        for g, params in enumerate(grid.settings):
            run = spec.stage(dict(zip(grid.names, params, strict=True)))(frame)
            per_query = exact.per_query(run).set_index(QID)["value"]
            expected = per_query.reindex(list(layout.qids)).to_numpy()
            np.testing.assert_allclose(values[g], expected, atol=1e-12)


def test_one_parser_one_default_normalisation() -> None:
    assert DEFAULT_NORMALISE == "minmax"
    for kind, cls in AGGREGATORS.items():
        spec = AggregateSpec.parse(kind.upper())
        assert spec.normalise == "minmax" and spec.build().normalise == "minmax"
        assert cls().normalise == "minmax"  # the Python API's default too
        assert parse_aggregate(kind).normalise == "minmax"
        assert AggregateSpec.parse(spec.spec) == spec  # the canonical spec parses back
    assert str(AggregateSpec.parse("birch")) == "birch:3"
    assert AggregateSpec.parse("birch", top_n=2).spec == "birch:2"
    assert parse_aggregate("birch", weights="1,0.2").top_n == 2


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("best", {}, "unknown aggregator"),
        ("maxp:3", {}, "takes no parameter"),
        ("birch:x", {}, "positive integer"),
        ("birch:0", {}, "positive integer"),
        ("birch:2:1", {}, "unknown aggregator"),
        ("firstp", {"weights": [1.0]}, "weights are Birch's"),
        ("birch:3", {"weights": [1.0, 0.5]}, "3 values"),
        ("maxp", {"alpha": 1.5}, r"alpha must be in \[0, 1\]"),
        ("birch", {"weights": "1,x"}, "comma-separated numbers"),
    ],
)
def test_bad_specs_say_what_was_expected(spec: str, kwargs: dict, message: str) -> None:
    with pytest.raises(AggregateSpecError, match=message):
        parse_aggregate(spec, **kwargs)


def test_unknown_parameters_are_refused() -> None:
    with pytest.raises(AggregateSpecError, match="maxp has no parameter 'w2'"):
        AggregateSpec.parse("maxp").check(["alpha", "w2"])
