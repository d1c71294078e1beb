"""The papers' conditions: every headline experiment named, guarded by its collection, and skipped
with a message that says which files to put where when the collection is absent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evirank.conditions import check_conditions, expand, load_conditions, resolve_variables, unmet_needs
from evirank.io.collections.papers import PAPER_COLLECTIONS, describe_missing, missing_files

REPO = Path(__file__).resolve().parents[2]
PAPERS = REPO / "conditions" / "papers.yaml"


def test_every_headline_experiment_is_a_condition_with_the_papers_figure() -> None:
    conditions = {c.name: c for c in load_conditions(PAPERS).conditions}
    wanted = {f"{c}-bm25{rm3}" for c in ("robust04", "core17", "core18") for rm3 in ("", "-rm3")} | {
        f"{c}-birch-{n}s" for c in ("robust04", "core17", "core18") for n in (1, 2, 3)
    }
    wanted |= {f"robust04-{f}-{a}" for f in ("title", "description") for a in ("firstp", "maxp", "sump")}
    wanted |= {"msmarco-docs-meanp", "robust04-narrative-positive-maxp", "robust04-description-keywords-maxp"}
    assert wanted <= set(conditions)
    variables = load_conditions(PAPERS).variables
    for condition in conditions.values():
        collections = [n for n in condition.needs if n in PAPER_COLLECTIONS]
        assert len(collections) == 1, condition.name
        assert condition.name.startswith(collections[0]), condition.name
        assert condition.expected and all(
            e.value is not None or e.minimum is not None for e in condition.expected
        )
        for text in (*condition.commands, condition.run, condition.qrels):
            expand(text, variables)
    assert conditions["robust04-bm25-rm3"].expected[0].value == pytest.approx(0.2908)  # Anserini's page
    birch = conditions["robust04-birch-2s"]
    assert birch.expected[0].measure == "AP" and birch.expected[0].value == pytest.approx(0.3697)
    assert any("folds.robust04.yang19.json" in c and "--aggregate birch:2" in c for c in birch.commands)
    maxp = conditions["robust04-description-maxp"]
    assert any("--field description" in c and "--aggregate maxp" in c for c in maxp.commands)
    assert any("--folds" in c for c in maxp.commands) and maxp.expected[0].measure == "nDCG@20"
    meanp = conditions["msmarco-docs-meanp"]
    assert any("--aggregate meanp" in c for c in meanp.commands)
    assert {e.measure for e in meanp.expected} == {"RR@10", "RR@100"}


def test_an_absent_collection_skips_its_conditions_naming_the_files_and_where(tmp_path: Path) -> None:
    results = check_conditions(
        PAPERS, ["robust04-bm25", "core18-bm25-rm3"], overrides={"COLLECTIONS": str(tmp_path)}, workdir=REPO
    )
    assert [r.skipped is not None and not r.failed for r in results] == [True, True]
    robust04, core18 = (r.skipped or "" for r in results)
    assert "Robust04" in robust04 and "disk45/fbis" in robust04 and "qrels.robust04.txt" in robust04
    assert f"{tmp_path}/robust04" in robust04 and "https://trec.nist.gov/data/cd45/" in robust04
    assert "WashingtonPost.v2/data" in core18 and f"{tmp_path}/core18" in core18


def test_a_collection_in_place_meets_the_need(tmp_path: Path) -> None:
    for name, collection in PAPER_COLLECTIONS.items():
        assert missing_files(name, tmp_path), name
        for alternatives, _ in collection.files:
            path = tmp_path / collection.folder / alternatives[-1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch() if "." in path.name else path.mkdir()
        assert missing_files(name, tmp_path) == [], name
    condition = next(c for c in load_conditions(PAPERS).conditions if c.name == "core17-bm25")
    variables = resolve_variables(load_conditions(PAPERS).variables, {"COLLECTIONS": str(tmp_path)})
    assert not any("Core17" in reason for reason in unmet_needs(condition, variables, REPO))
    assert "nyt_corpus/data" in describe_missing("core17", "elsewhere")


def test_the_collections_folder_comes_from_the_environment_too() -> None:
    variables = resolve_variables(
        {"COLLECTIONS": "../collections"}, environ={"EVIRANK_COLLECTIONS": "/data/trec"}
    )
    assert variables["COLLECTIONS"] == "/data/trec"


def test_the_benchmark_lists_every_paper_condition_and_skips_the_absent_collections(tmp_path: Path) -> None:
    env = {**os.environ, "EVIRANK_COLLECTIONS": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "benchmarks/conditions.py", "--file", "conditions/papers.yaml"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "skipped: needs" in line]
    names = {row.split(" | ")[0].strip("| ") for row in rows}
    assert names == {c.name for c in load_conditions(PAPERS).conditions}
    assert all(f"{tmp_path}/" in row for row in rows)
