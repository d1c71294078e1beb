"""The ``evirank`` command: one module per subcommand, each exposing ``add_parser`` and ``run``.

A subcommand module ``evirank.cli.<name>`` defines::

    def add_parser(subparsers) -> argparse.ArgumentParser: ...
    def run(args: argparse.Namespace) -> int: ...

Modules are imported only to build the parser; heavy libraries are imported inside ``run``.

Example:
    $ evirank search --index indexes/scifact --topics queries.jsonl --output runs/bm25.txt
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from evirank.cli.interrupts import (
    Terminated,
    caused_by_interrupt,
    exit_now,
    stdout_closed,
    stop_on_termination,
    stop_ray,
)
from evirank.config import SETTINGS, is_flag, unknown_flag
from evirank.errors import EvirankError
from evirank.version import __version__

SUBCOMMANDS = (
    "index",
    "embed",
    "search",
    "rerank",
    "rank",
    "explain",
    "store",
    "evaluate",
    "tune",
    "report",
    "train",
    "distill",
    "adapt",
    "merge",
    "serve",
    "data",
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="evirank", description="Rank documents by the evidence their sentences and passages hold."
    )
    parser.add_argument("--version", action="version", version=f"evirank {__version__}")
    SETTINGS.add_flags(parser, COMMON)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"evirank.cli.{name}")
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
        _add_common_flags(sub)
    from evirank.cli.numbers import harden_numbers

    harden_numbers(parser)  # every numeric flag: finite, and within a 32-bit integer
    return parser


#: The settings every command takes, before or after its name (``evirank -q rerank`` or ``evirank
#: rerank ... -q``).
COMMON = ("verbose", "quiet")


def _add_common_flags(parser: argparse.ArgumentParser) -> None:
    """:data:`COMMON` on a command's parser and on its own actions' (``store info``); their default
    is the top-level parser's, so ``-q`` anywhere on the line counts."""
    SETTINGS.add_flags(parser, COMMON, defaults=dict.fromkeys(COMMON, argparse.SUPPRESS))
    for action in parser._actions:  # argparse keeps a command's actions only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _add_common_flags(sub)


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help with each flag's default, ``(default: X)``, where there is one to state.

    No default is printed for flags without one (``None``), for switches, or where the help
    already says it.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "default" in text
            or action.default in (None, False, argparse.SUPPRESS)
            or (isinstance(action.default, list | tuple) and not action.default)
        ):
            return text
        default = action.default
        if isinstance(default, list | tuple):
            return f"{text} (default: {' '.join(map(str, default))})"
        return f"{text} (default: {default})"


class CommandHelpFormatter(DefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """:class:`DefaultsHelpFormatter` that keeps the description and epilog as written."""


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Formatter(logging.Formatter):
    """Log lines with time, level and logger; a command's error as argparse prints usage errors."""

    def format(self, record: logging.LogRecord) -> str:
        command = getattr(record, "command_error", None)
        if command:
            return f"evirank {command}: error: {record.getMessage()}"
        return super().format(record)


def configure_logging(verbose: int, quiet: bool) -> None:
    """Handlers are configured here, in the CLI, never in library code.

    ``quiet`` also hides the progress bars and notices of the libraries evirank loads (tqdm's,
    transformers' and Hugging Face Hub's, through the variables they read when imported).
    """
    level = logging.WARNING if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(LOG_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("evirank").setLevel(level)
    if quiet:
        quiet_libraries()


#: What the libraries evirank loads read to stay quiet: tqdm's bars, Hugging Face Hub's bars (which
#: transformers' weight loading uses) and transformers' notices.
QUIET_ENVIRONMENT = {
    "TQDM_DISABLE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
}


def quiet_libraries() -> None:
    """Silence the progress bars and notices of tqdm, Hugging Face Hub and transformers.

    Set in the environment (read when a library is imported, here or in a worker process), and
    applied to the libraries already imported.
    """
    os.environ.update(QUIET_ENVIRONMENT)
    if "huggingface_hub" in sys.modules:
        sys.modules["huggingface_hub"].utils.disable_progress_bars()
    if "transformers" in sys.modules:
        logging_module = importlib.import_module("transformers.utils.logging")
        logging_module.set_verbosity_error()
        logging_module.disable_progress_bar()


def fail(command: str, error: BaseException | str) -> int:
    """Report ``error`` as ``evirank COMMAND: error: MESSAGE`` (argparse's format, no time stamp); return 2.

    Example:
        >>> fail("tune", "tune: give --scores or --passages")
        2
    """
    message = str(error)
    if message.startswith(f"{command}: "):
        message = message[len(command) + 2 :]
    # the record holds the message alone; the CLI's formatter prints the prefix
    logging.getLogger("evirank").error("%s", message, extra={"command_error": command})
    return 2


INTERRUPTED = {
    "rerank": "interrupted; the scores computed so far are kept in the score store, and a rerun resumes",
    "embed": "interrupted; the vectors embedded so far are kept, and the same command again embeds the rest",
    "train": "interrupted; rerun with --resume to continue from the last checkpoint",
    "distill": "interrupted; rerun with --resume to continue from the last checkpoint",
    "adapt": "interrupted; rerun with --resume to continue from the last checkpoint",
    "serve": "stopped",
}
"""What an interrupted command keeps; the others leave nothing at their outputs and start over."""


def interrupted_message(command: str | None, args: argparse.Namespace | None = None) -> str:
    """What to tell a user whose ``command`` was interrupted (Ctrl-C), given its ``args``: an
    ``index --embed`` stopped after its index was complete keeps it and the vectors made so far.

    Example:
        >>> interrupted_message("index")
        'interrupted; nothing was written at the output paths, and a rerun starts over'
    """
    if command == "index" and args is not None and getattr(args, "embed", False) and not args.overwrite:
        from evirank.lucene.index import read_index_info

        if read_index_info(args.index) is not None:
            return (
                "interrupted; the index is complete and kept with the vectors embedded so far, "
                "and the same command again embeds the rest"
            )
    return INTERRUPTED.get(
        command or "", "interrupted; nothing was written at the output paths, and a rerun starts over"
    )


def os_error_message(exc: OSError) -> str:
    """An operating-system error as one line naming the file (never a traceback).

    Example:
        >>> os_error_message(IsADirectoryError(21, "Is a directory", "runs"))
        'runs: Is a directory'
    """
    if exc.filename is not None and exc.strerror:
        where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 is not None else f"{exc.filename}"
        return f"{where}: {exc.strerror}"
    return str(exc) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``evirank`` command; returns the exit status.

    Usage errors (argparse's, and :class:`~evirank.errors.UsageError`) and bad input
    (:class:`~evirank.errors.EvirankError`, a missing file) print one line,
    ``evirank COMMAND: error: MESSAGE``, and exit with status 2. So does any other error
    (with its type, and the traceback under ``-vv``): a user never sees a bare traceback.
    """
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    refuse_unknown_flags(parser, words)
    args = parser.parse_args(words)
    configure_logging(args.verbose, args.quiet)
    previous = stop_on_termination()
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt as exc:
        logging.getLogger("evirank").warning("%s", interrupted_message(args.command, args))
        code = 128 + exc.signal if isinstance(exc, Terminated) else 130
        stop_ray()
        if argv is None and "ray" in sys.modules:
            exit_now(code)
        return code
    except BrokenPipeError as exc:
        if stdout_closed():  # `evirank explain ... | head`: the reader has all it wanted
            return 141
        return fail(args.command, os_error_message(exc))
    except EvirankError as exc:
        return fail(args.command, exc)
    except OSError as exc:  # a file that cannot be read or written: one line, no traceback
        return fail(args.command, os_error_message(exc))
    except Exception as exc:  # anything unforeseen: still one line; -vv shows where it happened
        if caused_by_interrupt(exc):  # a library turned Ctrl-C into its own error (an import)
            logging.getLogger("evirank").warning("%s", interrupted_message(args.command, args))
            return 130
        if args.verbose > 1:
            logging.getLogger("evirank").exception("unexpected %s", type(exc).__name__)
        java = java_exception_message(exc)
        if java is not None:
            return fail(args.command, java)
        return fail(
            args.command,
            f"{exc} ({type(exc).__name__}; run again with -vv to see where it happened)",
        )
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def refuse_unknown_flags(parser: argparse.ArgumentParser, words: Sequence[str]) -> None:
    """Stop with a usage error naming every flag the command does not know, with its nearest spelling.

    argparse reports a missing required flag before an unknown one, so a typo (``--qeury``) would
    read "the following arguments are required: --query"; this looks first. Abbreviations argparse
    accepts (a unique prefix) pass, and so does anything after ``--``.

    Example:
        >>> refuse_unknown_flags(build_parser(), ["rank", "--qeury", "cats", "--docs", "d.jsonl"])
        Traceback (most recent call last):
        ...
        SystemExit: 2
    """
    found, rest = command_parser(parser, words)
    known = [s for action in found._actions for s in action.option_strings]
    unknown = []
    for word in rest:
        if word == "--":
            break
        if not is_flag(word):
            continue
        flag = word.split("=", 1)[0]
        if flag in known or (flag.startswith("--") and any(k.startswith(flag) for k in known)):
            continue
        unknown.append(unknown_flag(flag, known))
    if unknown:
        found.error(f"unrecognized arguments: {', '.join(unknown)}")


def command_parser(
    parser: argparse.ArgumentParser, words: Sequence[str]
) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the (sub)command ``words`` name, and the words after its name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for i, word in enumerate(words):
                if word in action.choices:
                    return command_parser(action.choices[word], words[i + 1 :])
    return parser, list(words)


def java_exception_message(exc: BaseException) -> str | None:
    """A Java exception raised through pyjnius as one line (its class and message, no frames).

    Returns ``None`` for anything that is not a Java exception.
    """
    from evirank.lucene.java import java_error_text

    text = java_error_text(exc)
    return None if text is None else f"Lucene failed: {text}"
