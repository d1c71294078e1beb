"""``evirank serve``: flags, defaults, and clear errors before anything heavy loads."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evirank.cli import build_parser, main
from evirank.cli.serve import config_from_args, quiet_per_request_progress


def parse(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def test_defaults_serve_the_offline_bi_encoder_on_localhost() -> None:
    args = parse("--index", "idx")
    assert (args.scorer, args.model, args.host, args.port) == (None, None, "127.0.0.1", 8080)  # None: auto
    assert (args.depth, args.top, args.timeout) == (20, 10, 30.0)
    assert (args.aggregate, args.segment) == ("birch:3", None)  # None: the vectors decide
    config = config_from_args(args)
    assert (config.default_depth, config.default_k, config.timeout_s) == (20, 10, 30.0)


def test_flags_reach_the_service_config() -> None:
    args = parse("--index", "idx", "--depth", "5", "--top", "8", "--timeout", "2.5", "--max-depth", "50")
    config = config_from_args(args)
    assert (config.default_depth, config.default_k, config.timeout_s, config.max_depth) == (5, 5, 2.5, 50)


def test_earlier_spellings_are_unknown_flags_named_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for old in (["--evidence", "2"], ["--evidence-scorer", "bi"], ["--title", "prepend"]):
        with pytest.raises(SystemExit):
            main(["serve", "--index", "idx", *old])
        assert f"unrecognized arguments: {old[0]}" in capsys.readouterr().err


def test_index_is_required() -> None:
    with pytest.raises(SystemExit):
        parse()


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
