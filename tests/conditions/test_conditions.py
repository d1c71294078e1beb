"""Reproducible conditions: the YAML loader, the checker on small data, and the SciFact file's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from evirank.conditions import (
    ConditionError,
    check_conditions,
    expand,
    load_conditions,
    main,
    resolve_variables,
    results_markdown,
)
from evirank.errors import InputFormatError

REPO = Path(__file__).resolve().parents[2]


def test_the_synthetic_conditions_pass(tmp_path: Path) -> None:
    results = check_conditions(
        REPO / "conditions" / "synthetic.yaml", overrides={"OUT": str(tmp_path)}, workdir=REPO
    )
    assert [r.name for r in results] == ["planted-birch3", "planted-first-stage-only"]
    assert all(r.passed for r in results), results_markdown(results)
    assert results[0].scores == {"AP": 1.0, "P@1": 1.0}
    assert "| planted-birch3 | AP | 1.0000 ± 0 | 1.0000 | pass |" in results_markdown(results)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "conditions.yaml"
    path.write_text(text)
    (tmp_path / "qrels.txt").write_text("1 0 a 1\n1 0 b 0\n")
    return path


CASE = """\
variables:
  OUT: {out}
conditions:
  good:
    commands: ["printf '1 Q0 a 1 2.0 t\\\\n1 Q0 b 2 1.0 t\\\\n' > $OUT/run.txt"]
    evaluate: {{run: $OUT/run.txt, qrels: {out}/qrels.txt}}
    expected: {{P@1: 1.0, AP: {{min: 0.9, max: 1.0}}}}
  wrong:
    commands: ["printf '1 Q0 b 1 2.0 t\\\\n1 Q0 a 2 1.0 t\\\\n' > $OUT/wrong.txt"]
    evaluate: {{run: $OUT/wrong.txt, qrels: {out}/qrels.txt}}
    expected: {{P@1: {{value: 1.0, tolerance: 0.1}}}}
  broken:
    commands: [echo starting, exit 3, echo never]
    evaluate: {{run: $OUT/none.txt, qrels: {out}/qrels.txt}}
    expected: {{AP: 0.5}}
  unknown:
    commands: [echo $NOPE]
    evaluate: {{run: x, qrels: y}}
    expected: {{AP: 0.5}}
"""


def test_checker_reports_pass_fail_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, CASE.format(out=tmp_path))
    good, wrong, broken, unknown = check_conditions(path, workdir=tmp_path)
    assert good.passed and good.scores == {"P@1": 1.0, "AP": 1.0}
    assert not wrong.passed and wrong.error is None and wrong.checks[0][1] == 0.0
    assert not broken.passed and "exit 3" in (broken.error or "") and len(broken.commands) == 2
    assert not unknown.passed and "unknown variable $NOPE" in (unknown.error or "")
    table = results_markdown([good, wrong, broken])
    assert (
        "| wrong | P@1 | 1.0000 ± 0.1 | 0.0000 | FAIL |" in table
        and "ERROR: command failed (exit 3)" in table
    )
    assert main([str(path), "good", "--workdir", str(tmp_path)]) == 0
    assert main([str(path), "good", "wrong", "--workdir", str(tmp_path)]) == 1
    assert main([str(path), "good", "--dry-run"]) == 0
    assert f"> {tmp_path}/run.txt" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("conditions:\n  a:\n    evaluate: {run: r, qrels: q}\n    expected: {AP: 1}\n", 3, "'commands'"),
        ("conditions:\n  a:\n    commands: [x]\n    expected: {AP: 1}\n", 3, "'evaluate"),
        (
            "conditions:\n  a:\n    commands: [x]\n    evaluate: {run: r, qrels: q}\n    expected:\n"
            "      AP: {around: 1}\n",
            6,
            "AP: a number",
        ),
        (
            "conditions:\n  a:\n    commands: [x]\n    evaluate: {run: r, qrels: q}\n    expected: {AP: 1}\n"
            "    colour: red\n",
            3,
            "unknown keys ['colour']",
        ),
        ("conditions:\n  a: [\n", 3, "valid YAML"),
        ("runs: []\n", 1, "'conditions"),
    ],
)
def test_bad_files_name_the_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputFormatError) as info:
        load_conditions(path)
    assert info.value.line == line and words in str(info.value)


def test_variables_expand_and_override() -> None:
    assert expand("${A}/x $A", {"A": "1"}) == "1/x 1"
    with pytest.raises(ConditionError, match=r"unknown variable \$B"):
        expand("$B", {"A": "1"})
    values = resolve_variables({"A": "default", "B": "b"}, {"B": "set"}, environ={"A": "env"})
    assert values == {"A": "env", "B": "set"}


def test_scifact_conditions_are_complete() -> None:
    conditions = load_conditions(REPO / "conditions" / "scifact.yaml")
    assert set(conditions.variables) == {"DATA", "OUT"}
    names = [c.name for c in conditions.conditions]
    assert names[0] == "scifact-bm25" and "scifact-bi-birch3-cv" in names
    for condition in conditions.conditions:
        assert condition.commands and condition.expected and condition.parts.get("first_stage")
        split = "train" if condition.name.startswith("scifact-train") else "test"
        assert condition.qrels == f"$DATA/scifact/qrels/{split}.tsv"
        for command in condition.commands:
            expand(command, conditions.variables)  # every variable is defined
    birch = conditions.select(["scifact-bi-birch3-cv"])[0]
    assert "--grid alpha=0:1:0.1 w2=0:1:0.1 w3=0:1:0.1" in birch.commands[0]
    assert birch.expected[0].value == pytest.approx(0.7368) and birch.needs == ("$OUT/scores.sqlite",)
    with pytest.raises(ConditionError, match="no condition named"):
        conditions.select(["nope"])


NEEDS = """\
variables:
  OUT: {out}
conditions:
  needs-model:
    needs: [{{path: $OUT/model, hint: made by condition train}}]
    commands: ["printf '1 Q0 a 1 2.0 t\\\\n' > $OUT/run.txt"]
    evaluate: {{run: $OUT/run.txt, qrels: {out}/qrels.txt}}
    expected: {{P@1: 1.0}}
  long:
    slow: true
    commands: ["printf '1 Q0 a 1 2.0 t\\\\n' > $OUT/long.txt"]
    evaluate: {{run: $OUT/long.txt, qrels: {out}/qrels.txt}}
    expected: {{P@1: 1.0}}
"""


def test_unmet_needs_skip_with_the_reason_and_slow_ones_run_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, NEEDS.format(out=tmp_path))
    conditions = load_conditions(path)
    assert [c.name for c in conditions.select(None, slow=False)] == ["needs-model"]
    assert [c.name for c in conditions.select(["long"], slow=False)] == ["long"]
    (skipped,) = check_conditions(path, ["needs-model"], workdir=tmp_path)
    assert skipped.skipped == f"needs {tmp_path}/model (not found; made by condition train)"
    assert not skipped.passed and not skipped.failed and not skipped.commands
    assert f"skipped: needs {tmp_path}/model" in results_markdown([skipped])
    assert main([str(path), "--workdir", str(tmp_path)]) == 0  # skipped is not failed; slow not run
    assert "long" not in capsys.readouterr().out
    (tmp_path / "model").mkdir()
    (ran,) = check_conditions(path, ["needs-model"], workdir=tmp_path)
    assert ran.passed and ran.skipped is None
    assert main([str(path), "--workdir", str(tmp_path), "--slow"]) == 0
    assert "| long | P@1 |" in capsys.readouterr().out


def test_a_need_that_is_neither_an_extra_nor_a_path_names_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "conditions:\n  a:\n    needs: [gpus]\n    commands: [x]\n    evaluate: {run: r, qrels: q}\n"
        "    expected: {AP: 1}\n",
    )
    with pytest.raises(InputFormatError, match="'needs' as extras") as info:
        load_conditions(path)
    assert info.value.line == 3


def test_data_is_the_datasets_folder(tmp_path: Path) -> None:
    folder = tmp_path / "datasets"
    folder.mkdir()
    values = resolve_variables({"DATA": "../shared/datasets"}, environ={"EVIRANK_DATASETS": str(folder)})
    assert values["DATA"] == str(folder)
    values = resolve_variables({"DATA": "../shared/datasets"}, {"DATA": "x"}, environ={})
    assert values["DATA"] == "x"


@pytest.mark.parametrize(
    ("extra", "command", "words"),
    [
        ("", "evirank rerank --segment paragraphs --output r.txt", "--segment"),
        ("", "evirank tune --aggregate birchh:3 --output t", "--aggregate"),
        ("    segmenter: sentences\n", "evirank rerank --segment sentences:skip --output r.txt", "segmenter"),
        ("    aggregator: maxp, tuned\n", "evirank tune --aggregate birch:3 --output t", "aggregator"),
    ],
)
def test_specs_in_commands_are_parsed_when_the_file_is_read(
    tmp_path: Path, extra: str, command: str, words: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "conditions:\n  demo:\n" + extra + f"    commands: [{command}]\n"
        "    evaluate: {run: r.txt, qrels: q.txt}\n    expected: {AP: 0.5}\n"
    )
    with pytest.raises(InputFormatError, match=words) as error:
        load_conditions(path)
    assert error.value.line is not None


def test_spec_parts_that_match_their_commands_and_descriptions_load(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "conditions:\n  demo:\n    segmenter: Sentences:Prepend (title first)\n"
        "    aggregator: raw scores, tuned\n"
        "    commands: ['evirank rerank --segment sentences:prepend --aggregate $AGG --output r.txt']\n"
        "    evaluate: {run: r.txt, qrels: q.txt}\n    expected: {AP: 0.5}\n"
    )
    assert load_conditions(path).conditions[0].parts["segmenter"].startswith("Sentences")


def test_every_conditions_file_loads_and_names_real_conditions_in_its_hints() -> None:
    import re

    files = sorted((REPO / "conditions").glob("*.yaml"))
    loaded = {file: load_conditions(file) for file in files}
    names = [c.name for conditions in loaded.values() for c in conditions.conditions]
    assert len(names) == len(set(names)), "a condition name is used twice"
    wanted = {"dl19-bm25-bundled", "microblog-2013-minilm-mb", "train-minilm-mb", "distill-minilm-mb-l3"}
    assert wanted <= set(names)
    for conditions in loaded.values():
        for condition in conditions.conditions:
            for text in (*condition.commands, condition.run, condition.qrels, *condition.needs):
                expand(text, conditions.variables)  # every variable is defined
            for hint in condition.hints.values():
                for named in re.findall(r"condition ([\w-]+)", hint):
                    assert named in names, f"{condition.name}: hint names unknown condition {named}"
            trained = [n for n in condition.needs if "$MODELS/" in n]
            assert not trained or condition.hints, f"{condition.name}: a model need without a hint"
