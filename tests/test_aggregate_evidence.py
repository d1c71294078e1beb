"""Several scorers' evidence: the tuner scores as the pipeline's stage, both as the definition.

The definition (:mod:`evirank.aggregate.evidence`): each scorer's passage scores are normalised
per query and aggregated alone into ``E_k``; the document's score is
``alpha * s_doc + (1 - alpha) * sum_k lambda_k * E_k`` with the lambdas summing to 1, a document
without passages of a scorer getting ``E_k = 0`` from it. With one scorer, nothing changes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from evirank.aggregate import AggregateSpec, AggregateSpecError, MultiEvidence, merge_tail
from evirank.aggregate.evidence import EvidenceSpecError, check_labels, simplex_weights
from evirank.frames import DOCNO, FIRST_STAGE_SCORE, PID, QID, SCORE, make_qrels, sort_run
from evirank.tune import parse_grid
from evirank.tune.errors import TuneError
from evirank.tune.inputs import EvidenceSource
from evirank.tune.runner import default_grid
from evirank.tune.search import cross_validate
from test_aggregate_registry import FIRST_STAGE, PASSAGE_ROWS, settings_of, specs

LAMBDAS = (0.0, 0.3, 1.0)


def scorer_a() -> pd.DataFrame:
    return pd.DataFrame(PASSAGE_ROWS, columns=[QID, DOCNO, PID, SCORE, FIRST_STAGE_SCORE])


def scorer_b() -> pd.DataFrame:
    """Other scores for the same passages (reversed order within each query), and no passage of (1, c)."""
    frame = scorer_a()
    frame[SCORE] = frame.groupby(QID)[SCORE].transform(lambda s: s.iloc[::-1].to_numpy() * 3.0 - 1.0)
    return frame[~((frame[QID] == "1") & (frame[DOCNO] == "c"))].reset_index(drop=True)


def minmax(values: pd.Series) -> pd.Series:
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else values * 0.0


def evidence_of(spec: AggregateSpec, frame: pd.DataFrame, params: dict[str, float]) -> dict:
    """Each document's evidence E from the definitions, one document at a time."""
    out = {}
    for qid, query in frame.groupby(QID):
        values = minmax(query[SCORE]) if spec.normalise == "minmax" else query[SCORE]
        query = query.assign(v=values)
        for docno, doc in query.groupby(DOCNO):
            v = doc.sort_values(PID)["v"].tolist()
            if spec.kind == "maxp":
                e = max(v)
            elif spec.kind == "firstp":
                e = v[0]
            elif spec.kind == "sump":
                e = sum(v)
            elif spec.kind == "meanp":
                e = sum(v) / len(v)
            else:
                best = sorted(v, reverse=True)[: spec.top_n]
                best += [0.0] * (spec.top_n - len(best))
                e = sum(params[f"w{i + 1}"] * x for i, x in enumerate(best))
            out[(str(qid), str(docno))] = e
    return out


def passage_specs() -> list[AggregateSpec]:
    """The aggregators of passage scores, which several scorers' evidence can be fused from (the
    document aggregator reads a document-level scorer's own document score instead: it is checked
    against its definition in test_aggregate_registry)."""
    return [spec for spec in specs() if spec.kind != "document"]


def reference(spec: AggregateSpec, params: dict[str, float], lam: float) -> dict:
    a, b = scorer_a(), scorer_b()
    e_a, e_b = evidence_of(spec, a, params), evidence_of(spec, b, params)
    docs = a.drop_duplicates([QID, DOCNO])
    out = {}
    for qid, rows in docs.groupby(QID):
        s = rows.set_index(DOCNO)[FIRST_STAGE_SCORE]
        s = minmax(s) if spec.normalise == "minmax" else s
        for docno, s_doc in s.items():
            key = (str(qid), str(docno))
            combined = (1 - lam) * e_a[key] + lam * e_b.get(key, 0.0)
            out[key] = params["alpha"] * s_doc + (1 - params["alpha"]) * combined
    return out


@pytest.mark.parametrize("spec", passage_specs(), ids=lambda s: f"{s.spec}-{s.normalise}")
def test_tuner_scores_equal_the_pipeline_stage_and_the_definition(spec: AggregateSpec) -> None:
    multi = AggregateSpec(spec.kind, spec.top_n, spec.normalise, ("cross", "bi"))
    frames = {"cross": scorer_a(), "bi": scorer_b()}
    table = multi.table(frames)
    keys = list(zip(table.keys[QID], table.keys[DOCNO], strict=True))
    settings = [{**p, "bi": lam} for p, lam in itertools.product(settings_of(spec), LAMBDAS)]
    names = list(settings[0])
    grid = np.array([[s[n] for n in names] for s in settings])
    tuner = multi.scores(table, grid, names)
    for row, setting in zip(tuner, settings, strict=True):
        expected = reference(spec, setting, setting["bi"])
        np.testing.assert_allclose(row, [expected[k] for k in keys], rtol=1e-12, atol=1e-12)
        stage = multi.stage(setting)
        assert isinstance(stage, MultiEvidence)
        run = stage(frames)  # type: ignore[arg-type]  # {label: frame}: (1, c) has no bi passage
        piped = dict(zip(zip(run[QID], run[DOCNO], strict=True), run[SCORE], strict=True))
        np.testing.assert_allclose(row, [piped[k] for k in keys], rtol=1e-12, atol=1e-12)
        tuner_run = sort_run(table.keys.assign(**{SCORE: row}))
        ranked = merge_tail(tuner_run, FIRST_STAGE)[[QID, DOCNO]]
        assert ranked.equals(merge_tail(run, FIRST_STAGE)[[QID, DOCNO]])


def test_the_stage_reads_one_frame_with_a_column_per_scorer() -> None:
    a = scorer_a()
    wide = a.rename(columns={SCORE: "score_cross"}).assign(score_bi=a[SCORE] * 2.0 + 1.0)
    stage = AggregateSpec.parse("birch:2", scorers=("cross", "bi")).build(evidence_weights={"bi": 0.4})
    run = stage(wide)
    plain = AggregateSpec.parse("birch:2").build()(a)  # bi is an increasing map of cross: the same E
    pd.testing.assert_frame_equal(run.reset_index(drop=True), plain.reset_index(drop=True), rtol=1e-12)


@pytest.mark.parametrize("spec", passage_specs(), ids=lambda s: f"{s.spec}-{s.normalise}")
def test_one_scorer_is_exactly_the_aggregator(spec: AggregateSpec) -> None:
    one = AggregateSpec(spec.kind, spec.top_n, spec.normalise, ("cross",))
    assert not one.multi and one.parameters == spec.parameters and one.defaults() == spec.defaults()
    settings = settings_of(spec)
    names = list(settings[0])
    grid = np.array([[s[n] for n in names] for s in settings])
    frame = scorer_a()
    np.testing.assert_array_equal(
        one.scores(one.table({"cross": frame}), grid, names), spec.scores(spec.table(frame), grid, names)
    )
    assert repr(one.stage(settings[-1])) == repr(spec.stage(settings[-1]))


def test_a_second_copy_of_the_same_scorer_changes_nothing_whatever_its_weight() -> None:
    a = scorer_a()
    qrels = make_qrels([("1", "c", 1), ("1", "a", 1), ("2", "x", 1), ("3", "q", 1)])
    single = cross_validate(a, qrels, AggregateSpec.parse("birch:2"), parse_grid("alpha=0:1:0.25"), k=3)
    double = cross_validate(
        {"cross": a, "copy": a},
        qrels,
        AggregateSpec.parse("birch:2", scorers=("cross", "copy")),
        parse_grid("alpha=0:1:0.25 copy=0:1:0.5"),
        k=3,
    )
    assert len(double.grid) == 15
    np.testing.assert_allclose(double.values[::3], single.values, atol=1e-12)
    np.testing.assert_allclose(double.values[1::3], single.values, atol=1e-12)
    assert double.cv_mean == pytest.approx(single.cv_mean, abs=1e-12)
    assert set(double.choices[0].params) == {"alpha", "w1", "w2", "cross", "copy"}


def test_three_scorers_search_only_the_simplex() -> None:
    spec = AggregateSpec.parse("maxp", scorers=("cross", "bi", "ce2"))
    assert spec.parameters == ("alpha", "bi", "ce2")
    assert spec.defaults() == {"alpha": 0.0, "bi": pytest.approx(1 / 3), "ce2": pytest.approx(1 / 3)}
    grid = default_grid(spec)
    settings = grid.settings
    assert len(grid) == 11 * 66 and len(settings) == len(grid)
    assert (settings[:, 1] + settings[:, 2] <= 1 + 1e-9).all()
    assert default_grid(AggregateSpec.parse("birch:3", scorers=("cross", "bi"))).settings.shape == (14641, 5)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_labels(["Cross"]), "lower-case letters"),
        (lambda: check_labels(["w2"]), "name of an aggregator parameter"),
        (lambda: check_labels(["bi", "bi"]), "given twice"),
        (lambda: simplex_weights(("cross", "bi"), {"bi": 1.2}), "must be in [0, 1]"),
        (lambda: simplex_weights(("a", "b", "c"), {"b": 0.6, "c": 0.6}), "sum above 1"),
        (lambda: simplex_weights(("a", "b"), {"a": 0.5, "b": 0.3}), "must sum to 1"),
        (lambda: MultiEvidence(AggregateSpec.parse("maxp").build(), ("cross",)), "two scorers or more"),
        (lambda: AggregateSpec.parse("maxp").build(evidence_weights={"bi": 0.2}), "several scorers"),
        (lambda: AggregateSpec.parse("maxp", scorers=("a", "b")).stage({"a": 0.3}), "1 minus the others"),
        (lambda: AggregateSpec.parse("maxp", scorers=("a", "b")).table(scorer_a()), "score_a"),
        (lambda: parse_grid("alpha=0 bi=0.5:1.5:0.5").on_simplex(["bi"]), "must be in [0, 1], found 1.5"),
        (lambda: EvidenceSource.parse("runs/scores.sqlite"), "expected LABEL=STORE"),
        (lambda: EvidenceSource.parse("bi=runs/s.sqlite#"), "empty fingerprint"),
        (lambda: EvidenceSource.parse("Bi=x"), "lower-case letters"),
    ],
)
def test_bad_specs_say_what_was_expected(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((EvidenceSpecError, AggregateSpecError, TuneError)) as caught:
        call()
    assert message in str(caught.value)
