"""Property-based tests of every numeric field a user writes: labels, scores, ranks, pids, flag values
and the numbers inside spec strings. Whatever the number (huge, negative, NaN, infinite, exotic
spellings), the result is evirank's own error naming the file and line (or the flag or spec), or the
exact value, within what the code under it can hold."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from evirank.cli import build_parser  # noqa: E402
from evirank.cli.numbers import INT_LIMIT  # noqa: E402
from evirank.errors import EvirankError, InputFormatError  # noqa: E402
from evirank.evaluate import Evaluator  # noqa: E402
from evirank.io import read_qrels, read_run  # noqa: E402
from evirank.io.qrels import LABEL_BOUNDS  # noqa: E402
from evirank.train.examples import read_pairs  # noqa: E402

_FIXED = os.environ.get("EVIRANK_FUZZ_RANDOM", "") != "1"
FUZZ = settings(
    derandomize=_FIXED,
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

#: Numbers as a user (or a broken program) might write them.
NUMBER_TEXT = st.one_of(
    st.integers().map(str),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(width=32).map(str),
    st.sampled_from(
        [
            "nan",
            "NaN",
            "-nan",
            "inf",
            "-inf",
            "Infinity",
            "1e400",
            "-1e400",
            "1e-400",
            "-0",
            "+3",
            "0x10",
            "1_000",
            "١٢",
            "1e29",
            "4294967296",
            "4611686018427387904",
            "9" * 40,
            "1.",
            ".5",
            "5e-324",
            "0.0",
        ]
    ),
)


@contextmanager
def _file(name: str, text: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="evirank-numfuzz-") as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        yield path


def _as_int(token: str) -> int | None:
    try:
        return int(token)
    except ValueError:
        return None


def _as_float(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


@FUZZ
@given(token=NUMBER_TEXT)
@example(token="2147483647")
@example(token=str(LABEL_BOUNDS[1] + 1))
def test_a_qrels_label_is_read_exactly_or_refused_at_its_line(token: str) -> None:
    with _file("qrels.txt", f"1 0 d0 1\n1 0 d1 {token}\n1 0 d2 0\n") as path:
        try:
            qrels = read_qrels(path)
        except InputFormatError as exc:
            assert str(exc).startswith(f"{path}:2: "), str(exc)
            return
        number = _as_float(token)  # "1.0" is read as 1 (as trec_eval reads it): exact either way
        assert number is not None and number.is_integer(), token
        value = int(number)
        assert LABEL_BOUNDS[0] <= value <= LABEL_BOUNDS[1], token
        assert qrels["label"].tolist() == [1, value, 0]
        run = {"1": {"d0": 3.0, "d1": 2.0, "d2": 1.0}}
        means = Evaluator(qrels, ["nDCG@10", "P@2", "RR"]).mean(_run_frame(run))
        assert all(0.0 <= v <= 1.0 for v in means.values())


def _run_frame(run: dict[str, dict[str, float]]):  # type: ignore[no-untyped-def]
    from evirank.frames import make_run

    return make_run([(q, d, s) for q, docs in run.items() for d, s in docs.items()])


@FUZZ
@given(token=NUMBER_TEXT, finite=st.booleans())
def test_a_run_score_is_read_exactly_or_refused_at_its_line(token: str, finite: bool) -> None:
    with _file("run.txt", f"1 Q0 d1 1 2.5 r\n1 Q0 d2 2 {token} r\n") as path:
        try:
            run = read_run(path, finite=finite)
        except InputFormatError as exc:
            assert str(exc).startswith(f"{path}:2: "), str(exc)
            value = _as_float(token)
            assert value is None or math.isnan(value) or (finite and math.isinf(value)), token
            return
        value = _as_float(token)
        assert value is not None and not math.isnan(value) and (math.isfinite(value) or not finite)
        assert dict(zip(run["docno"], run["score"], strict=True))["d2"] == value


@FUZZ
@given(token=NUMBER_TEXT)
def test_a_run_rank_read_for_ties_rank_is_a_finite_number_or_refused_at_its_line(token: str) -> None:
    with _file("run.txt", f"1 Q0 d1 1 2.5 r\n1 Q0 d2 {token} 2.5 r\n") as path:
        try:
            run = read_run(path, ranks="file")
        except InputFormatError as exc:
            assert str(exc).startswith(f"{path}:2: "), str(exc)
            return
        rank = dict(zip(run["docno"], run["rank"], strict=True))["d2"]
        assert math.isfinite(float(rank)) and float(rank) == _as_float(token)


@FUZZ
@given(label=NUMBER_TEXT, pid=st.one_of(st.integers(), st.floats(), st.text(max_size=3), st.none()))
def test_training_pair_numbers_are_read_or_refused_at_their_line(label: str, pid: object) -> None:
    record = {
        "query": "cats",
        "text": "cats purr",
        "label": _as_float(label) if _as_int(label) is None else _as_int(label),
    }
    if pid is not None:
        record["pid"] = pid
    try:
        line = json.dumps(record)
    except ValueError:  # pragma: no cover - json writes NaN and inf as tokens
        return
    with _file("pairs.jsonl", "\n" + line + "\n") as path:
        try:
            pairs = read_pairs(path)
        except InputFormatError as exc:
            assert str(exc).startswith(f"{path}:2: "), str(exc)
            return
        assert pairs["label"].tolist()[0] in (0, 1)
        assert 0 <= int(pairs["pid"].iloc[0]) <= INT_LIMIT


def _numeric_actions() -> list[tuple[str, argparse.Action]]:
    found: list[tuple[str, argparse.Action]] = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
            elif action.option_strings and action.type is not None:
                found.append((f"{prefix} {action.option_strings[-1]}", action))

    walk(build_parser(), "")
    return found


ACTIONS = _numeric_actions()


@FUZZ
@given(index=st.integers(min_value=0, max_value=len(ACTIONS) - 1), token=NUMBER_TEXT)
def test_every_flag_value_is_a_usage_error_or_a_finite_bounded_value(index: int, token: str) -> None:
    where, action = ACTIONS[index]
    try:
        value = action.type(token)  # type: ignore[misc]
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return
    values = value if isinstance(value, tuple | list) else [value]
    for item in values:
        if isinstance(item, float):
            assert math.isfinite(item), f"evirank {where} took {token!r} as {item!r}"
        elif isinstance(item, int) and not isinstance(item, bool):
            assert abs(item) <= INT_LIMIT + 1, f"evirank {where} took {token!r} as {item!r}"


@FUZZ
@given(a=NUMBER_TEXT, b=NUMBER_TEXT, kind=st.sampled_from(["windows", "birch", "weights", "rm3"]))
def test_numbers_inside_specs_give_a_spec_error_or_sane_values(a: str, b: str, kind: str) -> None:
    from evirank.aggregate.registry import MAX_TOP_N, parse_aggregate, parse_weights
    from evirank.lucene.search import Rm3
    from evirank.segment.segment_spec import parse_segment

    try:
        if kind == "windows":
            seg = parse_segment(f"windows:{a}:{b}")
            assert seg.stride >= 1 and seg.length >= 1  # type: ignore[attr-defined]
        elif kind == "birch":
            assert 1 <= parse_aggregate(f"birch:{a}").top_n <= MAX_TOP_N  # type: ignore[union-attr]
        elif kind == "weights":
            assert all(math.isfinite(w) for w in parse_weights(f"{a},{b}"))
        else:
            rm3 = Rm3.parse([a, b, "0.5"])
            assert 1 <= rm3.fb_docs <= INT_LIMIT and 1 <= rm3.fb_terms <= INT_LIMIT
    except (EvirankError, ValueError) as exc:
        assert re.search(r"\w", str(exc))  # a message, not an empty error
