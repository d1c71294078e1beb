"""Comparisons of several runs and their Markdown and JSON reports."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from evirank.evaluate import compare, markdown_report, markdown_table, summarize, to_json, to_record
from evirank.evaluate.significance import SIGNIFICANT
from evirank.frames import MEASURE, QID, RUN, VALUE, make_qrels, make_run

QIDS = [str(q) for q in range(1, 13)]
QRELS = make_qrels([(q, "rel", 1) for q in QIDS])


def ranked_at(position: dict[str, int]) -> pd.DataFrame:
    """A run that puts the relevant document at ``position[qid]`` below non-relevant ones."""
    rows = []
    for q in QIDS:
        for i in range(1, 6):
            rows.append((q, "rel" if i == position[q] else f"n{i}", 10.0 - i))
    return make_run(rows)


BASE = ranked_at({q: 2 + int(q) % 3 for q in QIDS})  # relevant at rank 2, 3 or 4
BETTER = ranked_at({q: 1 + int(q) % 2 for q in QIDS})  # rank 1 or 2
WORSE = ranked_at({q: 5 for q in QIDS})


def test_compare_gives_per_query_means_and_tests_in_run_order() -> None:
    result = compare({"base": BASE, "better": BETTER, "worse": WORSE}, QRELS, ["RR", "P@1"], baseline="base")
    assert result.runs == ["base", "better", "worse"]
    assert result.measures == ["RR", "P@1"]
    assert result.queries == {"base": 12, "better": 12, "worse": 12}
    assert len(result.per_query) == 3 * 12 * 2
    assert list(result.per_query.columns) == [RUN, QID, MEASURE, VALUE]
    expected_base_rr = np.mean([1 / (2 + int(q) % 3) for q in QIDS])
    assert result.means.loc["base", "RR"] == pytest.approx(expected_base_rr)
    assert result.means.loc["better", "P@1"] == pytest.approx(0.5)
    sig = result.significance
    assert sig is not None and len(sig) == 4
    assert sig.set_index([RUN, MEASURE]).loc[("worse", "RR"), SIGNIFICANT]
    assert result.settings["correction"] == "bonferroni" and result.settings["ties"] == "trec_eval"


def test_compare_without_baseline_has_no_tests_and_refuses_unknown_baseline() -> None:
    assert compare({"base": BASE}, QRELS, ["RR"]).significance is None
    with pytest.raises(ValueError, match="baseline"):
        compare({"base": BASE}, QRELS, ["RR"], baseline="other")


def test_markdown_marks_significant_gains_and_losses_with_a_legend() -> None:
    result = compare({"base": BASE, "better": BETTER, "worse": WORSE}, QRELS, ["RR"], baseline="base")
    text = markdown_table(result)
    lines = text.splitlines()
    assert lines[0] == "| run | queries | RR |"
    assert lines[1] == "| --- | ---: | ---: |"
    assert lines[2].startswith("| base (baseline) | 12 | ")
    assert lines[3].startswith("| better | 12 | ") and lines[3].endswith("† |")
    assert lines[4].startswith("| worse | 12 | 0.2000‡ |")
    assert "Bonferroni correction over all 2 comparisons" in text
    holm = markdown_table(
        compare({"base": BASE, "better": BETTER}, QRELS, ["RR"], baseline="base", correction="holm")
    )
    assert "Holm correction" in holm


def test_markdown_per_query_sections_and_undefined_values() -> None:
    table = pd.DataFrame(
        {RUN: ["a", "a", "b"], QID: ["10", "9", "9"], MEASURE: ["AP"] * 3, VALUE: [0.5, 0.25, math.nan]}
    )
    result = summarize(table)
    report = markdown_report(result, per_query=True)
    assert "## Per-query values" in report and "### AP" in report
    body = report.split("### AP")[1].strip().splitlines()
    assert body[0] == "| qid | a | b |"
    assert body[2] == "| 9 | 0.2500 | – |"  # natural qid order: 9 before 10
    assert body[3].startswith("| 10 | 0.5000 |")


def test_json_is_strict_and_holds_means_tests_and_per_query_values() -> None:
    result = compare({"base": BASE, "better": BETTER}, QRELS, ["RR", "P@1"], baseline="base")
    record = json.loads(to_json(result, per_query=True))
    assert record["measures"] == ["RR", "P@1"]
    assert record["baseline"] == "base"
    assert [r["name"] for r in record["runs"]] == ["base", "better"]
    assert record["runs"][1]["means"]["P@1"] == pytest.approx(0.5)
    assert len(record["significance"]) == 2
    assert set(record["significance"][0]) == {
        "run",
        "measure",
        "n",
        "mean",
        "baseline_mean",
        "delta",
        "t",
        "p",
        "p_adjusted",
        "significant",
    }
    assert len(record["per_query"]) == 2 * 12 * 2
    nan_table = pd.DataFrame({RUN: ["a"], QID: ["1"], MEASURE: ["AP"], VALUE: [math.nan]})
    assert to_record(summarize(nan_table))["runs"][0]["means"]["AP"] is None
