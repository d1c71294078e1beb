"""Values at their limits (huge, negative, NaN, infinite, empty) end in a clear error naming the
file and line, or the flag, never in a wrong answer, a crash or a traceback."""

from __future__ import annotations

import argparse
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evirank.cli import build_parser, main
from evirank.cli.interrupts import caused_by_interrupt
from evirank.cli.numbers import INT_LIMIT
from evirank.errors import InputFormatError
from evirank.io import read_qrels, read_run, read_topics
from evirank.train.examples import read_pairs

RUN = "1 Q0 d1 1 3.0 r\n1 Q0 d2 2 2.0 r\n"


def _error(caplog: pytest.LogCaptureFixture) -> str:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None
    return errors[0].getMessage()


@pytest.mark.parametrize(
    "label",
    ["4294967296", "4611686018427387904", "-4294967296", "2147483648", "1e29", "99999999999999999999999"],
)
def test_a_huge_qrels_label_is_refused_with_its_line(
    tmp_path: Path, label: str, caplog: pytest.LogCaptureFixture
) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"1 0 d0 1\n1 0 d1 {label}\n1 0 d2 0\n")
    with pytest.raises(
        InputFormatError, match=rf"qrels.txt:2: expected an integer relevance label .* found '{label}'"
    ):
        read_qrels(qrels)
    (tmp_path / "r.txt").write_text(RUN)
    assert (
        main(["-q", "evaluate", "--qrels", str(qrels), "--run", str(tmp_path / "r.txt"), "--measures", "P@5"])
        == 2
    )
    assert "qrels.txt:2:" in _error(caplog)


def test_labels_at_the_limits_evaluate_correctly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r.txt").write_text(RUN)
    for label, expected in ((1_000_000, "1.0000"), (-1_000_000, "0.0000")):
        (tmp_path / "q.txt").write_text(f"1 0 d1 {label}\n1 0 d2 0\n")
        assert (
            main(
                [
                    "-q",
                    "evaluate",
                    "--qrels",
                    str(tmp_path / "q.txt"),
                    "--run",
                    str(tmp_path / "r.txt"),
                    "--measures",
                    "RR",
                ]
            )
            == 0
        )
        assert capsys.readouterr().out.strip().endswith(f"| {expected} |")


def test_evaluate_ties_rank_follows_the_run_files_own_ranks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "q.txt").write_text("1 0 d1 1\n1 0 d2 0\n1 0 d3 0\n1 0 d4 0\n")
    # four documents tied at 1.0; the run ranks the relevant one first
    (tmp_path / "r.txt").write_text("1 Q0 d1 1 1.0 r\n1 Q0 d2 2 1.0 r\n1 Q0 d3 3 1.0 r\n1 Q0 d4 4 1.0 r\n")
    args = [
        "-q",
        "evaluate",
        "--qrels",
        str(tmp_path / "q.txt"),
        "--run",
        str(tmp_path / "r.txt"),
        "--measures",
        "RR",
    ]
    assert main([*args, "--ties", "rank"]) == 0
    assert capsys.readouterr().out.strip().endswith("| 1.0000 |")
    assert main(args) == 0  # trec_eval's rule: ties by docno descending, d1 comes last
    assert capsys.readouterr().out.strip().endswith("| 0.2500 |")
    run = read_run(tmp_path / "r.txt", ranks="file")
    assert dict(zip(run["docno"], run["rank"], strict=True)) == {"d1": 1, "d2": 2, "d3": 3, "d4": 4}


def test_a_rank_that_is_not_a_number_is_named_under_ties_rank(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("1 Q0 d1 1 1.0 r\n1 Q0 d2 two 1.0 r\n")
    with pytest.raises(
        InputFormatError, match=r"r.txt:2: expected a number as rank in column 4, found 'two'"
    ):
        read_run(tmp_path / "r.txt", ranks="file")
    assert len(read_run(tmp_path / "r.txt")) == 2  # without --ties rank the column is not read


@pytest.mark.parametrize("score", ["inf", "-inf", "Infinity"])
def test_an_infinite_first_stage_score_is_named_when_the_run_is_read(tmp_path: Path, score: str) -> None:
    (tmp_path / "r.txt").write_text(f"1 Q0 d1 1 2.0 r\n1 Q0 d2 2 {score} r\n")
    with pytest.raises(
        InputFormatError, match=rf"r.txt:2: expected a finite number as score in column 5, found '{score}'"
    ):
        read_run(tmp_path / "r.txt")
    assert len(read_run(tmp_path / "r.txt", finite=False)) == 2  # evaluate accepts them, as trec_eval


def test_rerank_refuses_an_infinite_first_stage_score_before_any_model_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tiny_cross_encoder_path: Path
) -> None:
    (tmp_path / "r.txt").write_text("1 Q0 d1 1 inf r\n")
    (tmp_path / "t.tsv").write_text("1\tcats\n")
    (tmp_path / "c.jsonl").write_text('{"_id": "d1", "text": "Cats purr."}\n')
    args = ["-q", "rerank", "--run", str(tmp_path / "r.txt"), "--topics", str(tmp_path / "t.tsv")]
    args += [
        "--corpus",
        str(tmp_path / "c.jsonl"),
        "--output",
        str(tmp_path / "o.txt"),
        "--model",
        str(tiny_cross_encoder_path),
    ]
    assert main(args) == 2
    assert "r.txt:1: expected a finite number as score in column 5, found 'inf'" in _error(caplog)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("2\t", "2 column(s) with an empty query"),
        ("\tcats", "2 column(s) with an empty qid"),
        ("2\t  ", "2 column(s) with an empty query"),
    ],
)
def test_an_empty_query_or_qid_in_tsv_topics_is_named_as_such(tmp_path: Path, line: str, found: str) -> None:
    (tmp_path / "t.tsv").write_text(f"1\tcats\n{line}\n")
    with pytest.raises(
        InputFormatError,
        match=re.escape(f"t.tsv:2: expected 2 tab-separated columns: qid TAB query, found {found}"),
    ):
        read_topics(tmp_path / "t.tsv")


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (
            "bbc cuts\tbbc world service cuts\t1\n\tsome text\t0\n",
            "p.tsv",
            r"p.tsv:2: expected a non-empty query, found an empty one",
        ),
        ("bbc cuts\t  \t0\n", "p.tsv", r"p.tsv:1: expected a non-empty text, found an empty one"),
        ('{"query": "", "text": "t", "label": 1}\n', "p.jsonl", r"p.jsonl:1: expected a non-empty query"),
        (
            '{"query": "q", "text": 7, "label": 1}\n',
            "p.jsonl",
            r'p.jsonl:1: expected a string as "text", found a number',
        ),
        (
            '{"query": "q", "text": "t", "label": 1, "pid": 99999999999}\n',
            "p.jsonl",
            r'p.jsonl:1: expected "pid" an integer',
        ),
        ('{"query": "q", "text": "t", "label": NaN}\n', "p.jsonl", r"p.jsonl:1: expected an integer label"),
        ("caf\xe9\tt\t1\n", "p.tsv", r"p.tsv:1: expected UTF-8 text"),
    ],
)
def test_training_pairs_with_empty_or_wrong_fields_are_refused_with_their_line(
    tmp_path: Path, content: str, name: str, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(InputFormatError, match=message):
        read_pairs(path)


def _numeric_flags() -> list[tuple[str, str, argparse.Action]]:
    found = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
            elif (
                action.option_strings
                and action.type is not None
                and getattr(action.type, "__name__", "") != "str"
            ):
                found.append((prefix, action.option_strings[-1], action))

    walk(build_parser(), "")
    return found


def test_every_flag_that_takes_a_number_refuses_nan_infinity_and_huge_values() -> None:
    checked = 0
    for command, flag, action in _numeric_flags():
        for hostile in ("nan", "inf", "-inf", "1e400", str(INT_LIMIT + 1), "99999999999999999999"):
            try:
                value = action.type(hostile)  # type: ignore[misc]
            except (argparse.ArgumentTypeError, ValueError, TypeError):
                continue
            bad = (isinstance(value, float) and not math.isfinite(value)) or (
                isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_LIMIT
            )
            assert not bad, f"evirank {command} {flag} accepts {hostile!r} as {value!r}"
        checked += 1
    assert checked >= 40  # every command's numeric flags were seen


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--index", "i", "--topics", "t", "--output", "o", "--bm25", "nan", "0.4"],
        ["search", "--index", "i", "--topics", "t", "--output", "o", "--k", "2147483648"],
        ["explain", "--scores", "s", "--qid", "1", "--docno", "d", "--show-passages", "-1"],
        ["rerank", "--run", "r", "--topics", "t", "--corpus", "c", "--output", "o", "--depth", "-1"],
        ["evaluate", "--qrels", "q", "--run", "r", "--significance", "nan"],
    ],
)
def test_hostile_flag_values_are_usage_errors_before_any_work(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert f"evirank {argv[0]}: error: argument" in capsys.readouterr().err


def test_a_reader_that_stops_early_ends_the_output_quietly(tmp_path: Path) -> None:
    import pandas as pd

    from evirank.score.store import ScoreStore

    rows = pd.DataFrame(
        {
            "qid": "1",
            "query": "q",
            "docno": "d",
            "pid": range(5000),
            "text": [f"passage {i}" for i in range(5000)],
        }
    )
    with ScoreStore(tmp_path / "s.sqlite") as store:
        fp = store.register("ab" * 32, kind="cross", description={})
        store.record_segments(fp, rows)
        store.put_scores(fp, rows["query"].tolist(), rows["text"].tolist(), [float(i) for i in range(5000)])
    explain = [sys.executable, "-m", "evirank", "explain", "--scores", str(tmp_path / "s.sqlite")]
    explain += ["--qid", "1", "--docno", "d", "--no-matches"]
    proc = subprocess.Popen(explain, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # as `| head -1`
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"query 1: q")
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 141 and stderr == b"", stderr.decode()[-2000:]


def test_ctrl_c_turned_into_another_error_by_a_library_is_still_an_interruption() -> None:
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as inner:
            raise ModuleNotFoundError("Could not import module 'AutoTokenizer'") from inner
    except ModuleNotFoundError as outer:
        assert caused_by_interrupt(outer)
    assert not caused_by_interrupt(ValueError("plain"))


@pytest.mark.parametrize(
    ("measure", "message"),
    [
        ("P@0", "the cutoff (@k) must be an integer from 1"),
        ("RR@0", "the cutoff (@k) must be an integer from 1"),
        ("ndcg_cut.0", "the cutoff (@k) must be an integer from 1"),
        ("P@2147483648", "the cutoff (@k) must be an integer from 1"),
        ("AP(rel=99999999999)", "rel must be an integer grade from -1000000 to 1000000"),
    ],
)
def test_measures_beyond_what_trec_eval_holds_are_refused(
    tmp_path: Path, measure: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "q.txt").write_text("1 0 d1 1\n1 0 d2 0\n")
    (tmp_path / "r.txt").write_text(RUN)
    args = ["-q", "evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt")]
    assert main([*args, "--measures", measure]) == 2  # P@0 used to abort the process in C
    assert f"measure {measure!r}: {message}" in _error(caplog)


def test_a_negative_weight_decay_is_refused() -> None:
    from evirank.train.config import TrainConfig

    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        TrainConfig(weight_decay=-1.0)
    with pytest.raises(ValueError, match="learning_rate must be positive"):
        TrainConfig(learning_rate=float("nan"))


def test_a_port_beyond_65535_is_refused_not_wrapped(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--index", "idx", "--port", "70000"])  # the resolver read it as 4464
    assert exit_info.value.code == 2
    assert "argument --port: expected a port from 0 to 65535, found '70000'" in capsys.readouterr().err
