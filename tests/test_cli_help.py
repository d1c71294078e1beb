"""Every subcommand's help: each flag explained, no empty default printed, one list form."""

from __future__ import annotations

import argparse

import pytest

from evirank.cli import SUBCOMMANDS, build_parser


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def nested(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and the parsers of its own subcommands (``evirank data get``)."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += nested(sub)
    return out


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_flag_has_help_and_no_help_prints_an_empty_default(command: str) -> None:
    for sub in nested(subparsers()[command]):
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
                continue
            assert action.help, f"{sub.prog} {'/'.join(action.option_strings) or action.dest}: no help"
        text = sub.format_help()
        for empty in ("default: None", "default None", "(default: )", "default: []", "default: ()"):
            assert empty not in text, f"{sub.prog} --help prints {empty!r}"


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_list_flags_are_space_separated(command: str) -> None:
    sub = subparsers()[command]
    for action in sub._actions:
        if action.metavar and isinstance(action.metavar, str):
            assert "," not in action.metavar, f"evirank {command} {action.option_strings}: {action.metavar}"
        if action.help and action.help != argparse.SUPPRESS:
            assert "comma-separated" not in action.help, f"evirank {command} {action.option_strings}"


def test_search_help_states_the_tie_rule_it_applies() -> None:
    text = " ".join(subparsers()["search"].format_help().split())
    assert "score descending, then docno descending" in text
    assert "docno ascending" not in text
