"""One spec grammar, one PipelineSpec, one flag vocabulary across the commands (no model, no JVM)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from evirank.cli import build_parser, main
from evirank.grammar import SpecError, parse_spec
from evirank.pipeline import FirstStageSpec, PipelineSpec, PipelineSpecError


@pytest.mark.parametrize(
    ("text", "name", "args", "label"),
    [
        ("windows:150:75:skip", "windows", ("150", "75", "skip"), None),
        (" Birch:3 ", "birch", ("3",), None),
        ("ce2=cross:/models/a:b", "cross", ("/models/a:b",), "ce2"),
        ("interp:0.3", "interp", ("0.3",), None),
    ],
)
def test_every_part_is_split_by_the_one_grammar(
    text: str, name: str, args: tuple[str, ...], label: str | None
) -> None:
    labelled = "=" in text
    spec = parse_spec(text, what="part", labelled=labelled, tail=labelled)
    assert (spec.name, spec.args, spec.label) == (name, args, label)


@pytest.mark.parametrize("text", ["", ":3", "birch:", "windows::75"])
def test_the_grammar_refuses_empty_names_and_arguments(text: str) -> None:
    with pytest.raises(SpecError, match=r"expected|empty"):
        parse_spec(text, what="part")


def test_a_label_must_look_like_one_and_a_path_with_equals_is_no_label() -> None:
    with pytest.raises(SpecError, match="label"):
        parse_spec("Ce-2=cross:m", what="scorer", labelled=True, tail=True)
    spec = parse_spec("cross:/models/run=3", what="scorer", labelled=True, tail=True)
    assert (spec.label, spec.args) == (None, ("/models/run=3",))


def test_the_part_parsers_share_the_grammar() -> None:
    from evirank.aggregate import AggregateSpec
    from evirank.firststage import Fusion
    from evirank.score.multi import ScorerSpec
    from evirank.segment import SegmentSpec

    for error in (SegmentSpec.parse, AggregateSpec.parse):
        with pytest.raises(SpecError):
            error("birch:")
    assert Fusion.parse(" RRF:10 ").k == 10
    assert ScorerSpec.parse("b2=bi").label == "b2"


def test_a_spec_is_parsed_and_checked_when_it_is_made() -> None:
    spec = PipelineSpec.from_mapping(
        {
            "corpus": "c.jsonl",
            "scorer": ["bi", "b2=bi"],
            "scorer_weights": ["b2=0.25"],
            "aggregate": "birch:2",
        }
    )
    assert [s.label for s in spec.scorers] == ["bi", "b2"]
    assert spec.aggregator().evidence_weights() == {"bi": 0.75, "b2": 0.25}
    assert spec.describe()["aggregate"] == "birch:2"
    bad = [
        ({"scorer": ["nope:m"]}, "unknown model family"),
        ({"scorer": ["cross"]}, "needs its model"),
        ({"scorer": ["bi"], "scorer_weights": ["bi=0.5"]}, "two scorers or more"),
        ({"aggregate": "birch:2", "prune": 1}, "--prune 1 keeps only 1"),
        ({"duo": 3}, "go together"),
        ({"index": "i", "corpus": "c"}, "not both"),
        ({"scorer": ["bi", "b2=bi"], "model": "m"}, "not --model"),
        ({"k": 2**31}, "up to 2147483647"),
        ({"bm25": (float("nan"), 0.4)}, "--bm25: expected a finite number"),
        ({"bm25": (-1, 0.4)}, "K1 >= 0"),
        ({"first_stage": "dense", "rm3": True}, "dense first stage has no BM25"),
        ({"first_stage": "hybrid"}, "expected bm25, dense"),
    ]
    for options, message in bad:
        with pytest.raises(PipelineSpecError, match=message):
            PipelineSpec.from_mapping({"corpus": "c.jsonl", **options})


def test_dtype_reaches_every_scorer_only_when_asked() -> None:
    default = PipelineSpec.from_mapping({"corpus": "c.jsonl"})
    assert default.runtime.dtype == "auto"  # each backend's own default
    assert default.describe()["dtype"] == "auto"
    bf16 = PipelineSpec.from_mapping({"corpus": "c.jsonl", "dtype": "bf16"})
    assert bf16.runtime.dtype == "bf16"
    assert bf16.describe()["dtype"] == "bf16"
    args = build_parser().parse_args(
        ["rerank", "--corpus", "c.jsonl", "--topics", "t", "--output", "o", "--dtype", "fp16"]
    )
    assert args.dtype == "fp16"


def test_a_model_folder_that_is_not_there_fails_before_any_search(tmp_path: Path) -> None:
    with pytest.raises(PipelineSpecError, match="no-such-model"):
        PipelineSpec.from_mapping({"index": str(tmp_path), "model": str(tmp_path / "no-such-model")})


def test_first_stage_names() -> None:
    from evirank.lucene import Rm3

    assert FirstStageSpec().name == "bm25"
    assert FirstStageSpec(rm3=Rm3()).name == "bm25+rm3"
    assert FirstStageSpec("rrf").name == "bm25+dense-rrf60"
    assert FirstStageSpec(run="r.txt").name == "run"


def _helps(command: str) -> dict[str, tuple[str, object]]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    out = {}
    for action in sub._actions:
        for option in action.option_strings:
            if action.help != argparse.SUPPRESS:
                out[option] = (str(action.help), action.dest)
    return out


@pytest.mark.parametrize("pair", [("rerank", "serve"), ("rerank", "search"), ("serve", "search")])
def test_a_flag_means_the_same_in_every_command(pair: tuple[str, str]) -> None:
    first, second = (_helps(c) for c in pair)
    per_command = {"-h", "--help", "--depth", "--segment", "--scores", "--index", "--tag", "--overwrite"}
    shared = sorted(set(first) & set(second) - per_command)
    assert "--scorer" in shared or "search" in pair
    assert "--first-stage" in shared
    for flag in shared:
        if flag == "--model" and "serve" in pair:  # serve adds NAME=PATH, repeated, to the same meaning
            served, other = (first, second) if pair[0] == "serve" else (second, first)
            assert served[flag][0].startswith(other[flag][0]) and served[flag][1] == other[flag][1]
            continue
        assert first[flag] == second[flag], f"{flag} reads differently in {pair[0]} and {pair[1]}"


def test_depth_segment_and_the_store_differ_only_in_their_defaults() -> None:
    rerank, serve = _helps("rerank"), _helps("serve")
    for flag in ("--depth", "--segment", "--scores"):
        assert rerank[flag][1] == serve[flag][1]
        common = rerank[flag][0].split(" (default")[0].split(";")[0]
        assert serve[flag][0].startswith(common)


def test_an_unknown_flag_is_named_with_its_nearest_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    """A typo is named before argparse would complain of a missing required flag; earlier
    spellings (--evidence, --fuse, serve's --k) are unknown flags now."""
    from evirank.cli import main

    cases = [
        (
            ["rank", "--qeury", "cats", "--docs", "d.jsonl"],
            "unrecognized arguments: --qeury (did you mean --query?)",
        ),
        (
            ["search", "--index", "i", "--topics", "t", "--output", "o", "--fuse", "rrf"],
            "unrecognized arguments: --fuse",
        ),
        (
            ["rerank", "--corpus", "c", "--topics", "t", "--output", "o", "--evidence", "bi"],
            "arguments: --evidence",
        ),
        (["serve", "--index", "i", "--k", "5"], "unrecognized arguments: --k"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err


def test_quiet_and_verbose_work_after_the_command_too() -> None:
    parser = build_parser()
    assert parser.parse_args(["rank", "--query", "q", "--docs", "d", "-q"]).quiet
    assert parser.parse_args(["-q", "rank", "--query", "q", "--docs", "d"]).quiet
    assert not parser.parse_args(["rank", "--query", "q", "--docs", "d"]).quiet
    assert parser.parse_args(["rank", "--query", "q", "--docs", "d", "-vv"]).verbose == 2


def test_rerank_refuses_a_store_it_would_not_use(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A scorer that reads stored vectors keeps no scores: --scores is refused, not ignored."""
    from evirank.pipeline import build

    class Lookup:
        vectors = object()
        family = "bi"

    class Built:
        reranker = argparse.Namespace(scorer=Lookup())
        duo = None  # without a duo stage nothing would use the store

    original = build.build_pipeline
    try:
        build.build_pipeline = lambda *a, **k: Built()  # type: ignore[assignment]
        import evirank.pipeline as package

        saved = package.build_pipeline
        package.build_pipeline = build.build_pipeline  # type: ignore[assignment]
        run = tmp_path / "run.txt"
        run.write_text("1 Q0 d 1 1.0 t\n")
        code = main(
            ["rerank", "--run", str(run), "--corpus", str(tmp_path / "c.jsonl"), "--topics", str(run),
             "--scores", str(tmp_path / "s.sqlite"), "--output", str(tmp_path / "out.txt")]
        )  # fmt: skip
    finally:
        build.build_pipeline = original
        package.build_pipeline = saved
    assert code == 2
    assert "every scorer reads the stored passage vectors" in caplog.text


def test_what_needs_an_index_says_so_and_names_the_flag() -> None:
    with pytest.raises(PipelineSpecError, match=r"--first-stage dense searches an index: give --index DIR"):
        PipelineSpec(first_stage=FirstStageSpec(method="dense"))
    with pytest.raises(PipelineSpecError, match="--run is a finished first stage"):
        FirstStageSpec(method="dense", run="run.txt")
    spec = PipelineSpec(corpus="corpus.jsonl", first_stage=FirstStageSpec(run="run.txt"))
    with pytest.raises(PipelineSpecError, match="the service searches an index: give --index DIR"):
        spec.require_index("the service")
    assert spec.with_changes(corpus=None, index="idx").require_index("the service") == "idx"
