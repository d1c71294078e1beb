"""One table of settings: every command's flags come from it, mean one thing everywhere, and no
default is written anywhere else."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from evirank.cli import build_parser
from evirank.config import SETTINGS, Runtime, Setting, SettingError, SettingsTable
from evirank.config import values as kinds

SRC = Path(__file__).resolve().parents[1] / "src" / "evirank"


def commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser, by its name (``store info``)."""

    def walk(name: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(f"{name} {sub_name}".strip(), sub)

    yield from walk("", build_parser())


def test_every_flag_of_every_command_is_a_setting_of_the_table() -> None:
    seen = 0
    for name, parser in commands():
        for action in parser._actions:
            flags = [s for s in action.option_strings if s not in ("-h", "--help", "--version")]
            if not flags:
                continue
            settings = {SETTINGS.by_flag(flag) for flag in flags}
            assert None not in settings, f"evirank {name}: {flags} is no setting of the table"
            (setting,) = settings
            assert action.dest == setting.name, f"evirank {name} {flags[0]}: dest {action.dest}"
            assert set(flags) <= {setting.flag, *setting.aliases}
            seen += 1
    assert seen > 300


def test_a_flag_shows_the_tables_help_and_default_unless_the_command_says_otherwise() -> None:
    """A command may give a flag its own help or default, but only where it adds the flag; the
    commands that re-rank (rerank, serve, rank) all show the table's defaults for the pipeline."""
    parsers = dict(commands())
    for command in ("rerank", "serve", "rank"):
        parser = parsers[command]
        for action in parser._actions:
            setting = SETTINGS.by_flag(action.option_strings[0]) if action.option_strings else None
            if setting is None or setting.name in ("verbose", "quiet", "output", "overwrite", "tag"):
                continue
            if setting.name in ("segment", "aggregate", "alpha", "depth", "top", "normalise", "max_passages"):
                assert action.default == setting.default, f"evirank {command} {setting.flag}"


def test_the_same_flag_has_the_same_meaning_in_every_command() -> None:
    meaning: dict[str, str] = {}
    for name, parser in commands():
        for action in parser._actions:
            for flag in action.option_strings:
                assert meaning.setdefault(flag, action.dest) == action.dest, f"{flag} in evirank {name}"


def test_a_value_is_checked_alike_from_a_flag_a_mapping_and_python() -> None:
    parser = argparse.ArgumentParser(prog="demo", exit_on_error=False)
    SETTINGS.add_flags(parser, ["depth", "alpha", "bm25"])
    with pytest.raises(argparse.ArgumentError, match="expected a positive integer"):
        parser.parse_args(["--depth", "0"])
    with pytest.raises(SettingError, match="--depth: expected a positive integer"):
        SETTINGS.check("depth", 0)
    with pytest.raises(SettingError, match="--alpha: expected a number in \\[0, 1\\]"):
        SETTINGS.check("alpha", "1.5")
    assert SETTINGS.check("bm25", "1.2 0.75") == [1.2, 0.75]
    with pytest.raises(SettingError, match="--batch-tokens"):
        Runtime(batch_tokens=-1)


def test_a_table_refuses_a_name_or_a_spelling_given_twice() -> None:
    table = SettingsTable([Setting("depth", 1, "d", "g", kind=kinds.positive_int)])
    with pytest.raises(ValueError, match="two settings"):
        table.add(Setting("depth", 2, "d", "g"))
    with pytest.raises(ValueError, match="--depth is the flag"):
        table.add(Setting("other", 2, "d", "g", flag="--depth"))


def test_the_runtime_takes_its_defaults_and_checks_from_the_table() -> None:
    runtime = Runtime()
    for name in (
        "device",
        "backend",
        "dtype",
        "batch_tokens",
        "max_length",
        "model_threads",
        "batch_layout",
        "commit_every",
    ):
        assert getattr(runtime, name) == SETTINGS.default(name)
    assert Runtime.from_mapping({"device": "cpu", "commit_every": "8"}).commit_every == 8


@pytest.mark.parametrize("literal", ['"birch:3"', '"sentences:prepend"', "(0.9, 0.4)"])
def test_a_pipeline_default_is_written_once(literal: str) -> None:
    """The defaults live in the settings table; code reads them there (docstring examples use
    other values, so that a default is never read off an example)."""
    found = []
    for path in SRC.rglob("*.py"):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if literal in line and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(SRC)}:{number}")
    assert len(found) <= 1, f"{literal} is written in {found}"


def test_the_grammars_in_help_texts_are_the_parsers_own() -> None:
    from evirank.aggregate.registry import GRAMMAR as AGGREGATES
    from evirank.config.settings import AGGREGATE_GRAMMAR, BACKENDS, CORPUS_FORMATS, DUO_AGGREGATES
    from evirank.config.settings import SEGMENT_GRAMMAR as SEGMENTS
    from evirank.io.corpus import CORPUS_FORMATS as READERS
    from evirank.score.backends import available_backends
    from evirank.score.document_pairs import DUO_AGGREGATES as DUO
    from evirank.segment.segment_spec import GRAMMAR

    assert AGGREGATE_GRAMMAR == AGGREGATES
    assert SEGMENTS == GRAMMAR
    assert tuple(CORPUS_FORMATS) == tuple(READERS)
    assert set(DUO_AGGREGATES) == set(DUO)
    assert set(BACKENDS) == set(available_backends())


def test_help_texts_do_not_restate_a_default_the_formatter_prints() -> None:
    """``--help`` prints each flag's default after its help; a help text that also says it would
    say it twice (and drift when the default changes)."""
    for setting in SETTINGS:
        if setting.default in (None, False, (), []) or isinstance(setting.default, tuple | list):
            continue
        restated = re.search(rf"\(default:? {re.escape(str(setting.default))}\)", setting.help)
        assert not restated, f"{setting.flag}: {setting.help}"
