"""Conditions with several scorers' evidence: their flags are parsed when the file is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from evirank.conditions import load_conditions
from evirank.errors import InputFormatError


def write(tmp_path: Path, command: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        "conditions:\n  demo:\n    scorer: cross-encoder + bi-encoder\n"
        f"    commands: ['{command}']\n"
        "    evaluate: {run: r.txt, qrels: q.txt}\n    expected: {AP: 0.5}\n"
    )
    return path


def test_a_two_scorer_rerank_and_tune_load(tmp_path: Path) -> None:
    rerank = (
        "evirank rerank --scorer cross:$MODELS/minilm --scorer bi --scorer-weights bi=0.3 "
        "--aggregate birch:3 --output $OUT/r.txt"
    )
    tune = (
        "evirank tune --scorer-scores cross=$OUT/r.txt.scores.sqlite#3fa2 --scorer-scores bi=$OUT/bi.parquet "
        "--output t"
    )
    for command in (rerank, tune):
        assert load_conditions(write(tmp_path, command)).conditions[0].parts["scorer"].startswith("cross")


def test_train_keeps_its_own_evidence_flag(tmp_path: Path) -> None:
    command = "evirank train --evidence topics.tsv evidence.jsonl qrels.tsv run.txt corpus --output m"
    assert load_conditions(write(tmp_path, command)).conditions


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("evirank rerank --scorer cross --output r.txt", "needs its model"),
        ("evirank rerank --scorer bi --scorer bi --output r.txt", "'bi' is given twice"),
        ("evirank rerank --scorer cross:m --scorer bi --scorer-weights ce=0.3 --output r", "ce"),
        ("evirank rerank --evidence bi --output r.txt", "found --evidence .did you mean --device"),
        ("evirank tune --scorer-scores $OUT/scores.sqlite --output t", "expected LABEL=STORE"),
    ],
)
def test_bad_scorer_flags_name_the_condition_and_line(tmp_path: Path, command: str, words: str) -> None:
    with pytest.raises(InputFormatError, match=words) as error:
        load_conditions(write(tmp_path, command))
    assert error.value.line is not None and "demo" in str(error.value)
