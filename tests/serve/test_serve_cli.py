"""``evirank serve``: flags, defaults, and clear errors before anything heavy loads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evirank.cli import build_parser, main
from evirank.cli.serve import config_from_args, quiet_per_request_progress
from evirank.config import SETTINGS


def parse(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def test_defaults_serve_the_offline_bi_encoder_on_localhost() -> None:
    args = parse("--index", "idx")
    assert (args.scorer, args.model, args.host, args.port) == (None, None, "127.0.0.1", 8080)  # None: auto
    names = ("depth", "top", "max_depth", "timeout", "workers", "max_pending", "aggregate")
    assert [getattr(args, name) for name in names] == [SETTINGS.default(name) for name in names]
    assert args.segment is None  # None: the vectors decide
    config = config_from_args(args)
    assert (config.default_depth, config.default_top, config.max_depth) == (
        args.depth,
        args.top,
        args.max_depth,
    )
    assert (config.timeout_s, config.workers, config.max_pending) == (
        args.timeout,
        args.workers,
        args.max_pending,
    )


def test_flags_reach_the_service_config() -> None:
    args = parse(
        "--index", "idx", "--depth", "5", "--top", "8", "--timeout", "2.5", "--max-depth", "50",
        "--workers", "2", "--max-pending", "3",
    )  # fmt: skip
    config = config_from_args(args)
    assert (config.default_depth, config.default_top, config.timeout_s, config.max_depth) == (5, 8, 2.5, 50)
    assert (config.workers, config.max_pending) == (2, 3)
    assert config.check_request("cats") == ("cats", 5, 5, 5)  # top: --top cut to --depth
    assert config.check_request("cats", depth=20, k=30) == ("cats", 8, 20, 30)


def test_top_0_shows_every_document_reranked() -> None:
    config = config_from_args(parse("--index", "idx", "--top", "0", "--depth", "30"))
    assert config.check_request("cats") == ("cats", 30, 30, 30)


def test_earlier_spellings_are_unknown_flags_named_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for old in (["--evidence", "2"], ["--evidence-scorer", "bi"], ["--title", "prepend"]):
        with pytest.raises(SystemExit):
            main(["serve", "--index", "idx", *old])
        assert f"unrecognized arguments: {old[0]}" in capsys.readouterr().err


def test_without_an_index_the_service_only_reranks_and_model_repeats() -> None:
    from evirank.cli.serve import served_models

    args = parse("--model", "ce=models/a", "--model", "models/b", "--max-documents", "10")
    assert args.index is None and args.max_documents == 10
    assert served_models(args.model) == {"ce": "models/a", "b": "models/b"}
    with pytest.raises(ValueError, match="two models are named 'a'"):
        served_models(["models/a", "other/a"])


def test_inconsistent_limits_fail_with_status_2(caplog: pytest.LogCaptureFixture) -> None:
    assert main(["serve", "--index", "idx", "--depth", "500"]) == 2
    assert "default depth 500 is not within 1..100" in caplog.text


def test_cross_encoder_without_a_model_fails_clearly(caplog: pytest.LogCaptureFixture) -> None:
    assert main(["serve", "--index", "idx", "--scorer", "cross"]) == 2
    assert "the cross family needs its model" in caplog.text


def test_missing_index_fails_clearly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert main(["serve", "--index", str(tmp_path / "nope")]) == 2
    assert "no such index folder" in caplog.text


def test_serving_hides_progress_bars_but_keeps_its_own_logs() -> None:
    root, serve = logging.getLogger("evirank"), logging.getLogger("evirank.serve")
    saved = root.level, serve.level
    try:
        root.setLevel(logging.INFO)
        quiet_per_request_progress()
        assert root.getEffectiveLevel() == logging.WARNING
        assert serve.getEffectiveLevel() == logging.INFO
    finally:
        root.setLevel(saved[0])
        serve.setLevel(saved[1])
