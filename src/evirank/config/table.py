"""The settings table: each setting written once, with its name, kind, default, flag, help, group
and check; the flags of every command, the pipeline spec, the conditions files and the service's
request parameters are read from it.

Why a table of our own, in plain dataclasses, and not a library: the candidates were looked at.
jsonargparse builds parsers from signatures and type hints, but it replaces argparse wholesale
(its own help, its own errors, its own config files) while our values are written in a spec
grammar of their own (``birch:3``, ``windows:150:75``) that its type system would only wrap as
strings, and it is one more dependency of the light core. pydantic-settings reads environment
variables and ``.env`` files into a pydantic model: useful for a service's deployment, but the
settings here are command-line flags first, and pydantic is not a core dependency (it comes with
the ``serve`` extra only). argparse generated from dataclass fields (``dataclass-argparse`` and the
like) puts flag spellings, groups and help into field metadata, which is what this module does in
about 200 lines, with the checks the flags and the service share and no new dependency. So a
:class:`Setting` is a frozen record, :data:`SETTINGS` holds them by name, and :func:`add_flags`
makes an argparse group of any of them; nothing else writes a default, a flag spelling or a help text.

Example:
    >>> import argparse
    >>> table = SettingsTable([Setting("depth", 100, "documents re-ranked per query", "passages",
    ...                                kind=values.positive_int)])
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> table.add_flags(parser, ["depth"])
    >>> parser.parse_args(["--depth", "20"]).depth, table.default("depth")
    (20, 100)
    >>> table.check("depth", 0)
    Traceback (most recent call last):
    ...
    evirank.config.table.SettingError: --depth: expected a positive integer up to 2147483647, found 0
"""

from __future__ import annotations

import argparse
import difflib
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from evirank.config import values
from evirank.errors import UsageError


class SettingError(UsageError):
    """A setting's value that cannot be used; the message names the setting's flag."""


class UnknownSettingError(KeyError):
    """A name that is no setting of the table (a programming error, not a user's)."""


@dataclass(frozen=True)
class Setting:
    """One setting: everything a flag, a spec field and a request parameter need to know.

    Attributes:
        name: its name in Python (``first_stage``): the spec field, the request parameter, the
            argparse destination.
        default: the value when none is given (None: not given; each reader says what that means).
        help: one line for ``--help``, the service's API description and the docs.
        group: the title of the ``--help`` group it is shown in.
        kind: checks a value and returns it in its type; given text (a flag, a query string) or a
            typed value (YAML, JSON, Python) alike; raises ValueError saying what was expected.
        flag: its spelling on the command line (default: ``--`` and the name with ``-``).
        aliases: other spellings that mean the same (``--normalize``).
        choices: the values allowed (shown in ``--help``), when they are few.
        metavar: the value's name in ``--help``.
        nargs: how many words the flag takes (argparse's ``nargs``); ``kind`` then checks each word.
        action: argparse's action (``store_true``, ``append``, or an Action class) when not ``store``.
        const: argparse's ``const`` (the value of a flag given with no word, ``nargs="?"``).
        exclusive: settings with the same key are mutually exclusive on the command line.
        api: whether the search service takes it as a request parameter.
        cli: whether it is a flag (False: a setting of the spec and the service only).
    """

    name: str
    default: Any
    help: str
    group: str
    kind: Callable[[Any], Any] = values.text
    flag: str = ""
    aliases: tuple[str, ...] = ()
    choices: tuple[Any, ...] | None = None
    metavar: str | tuple[str, ...] | None = None
    nargs: int | str | None = None
    action: str | type[argparse.Action] | None = None
    const: Any = None
    exclusive: str | None = None
    api: bool = False
    cli: bool = True
    _spellings: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.flag:
            object.__setattr__(self, "flag", "--" + self.name.replace("_", "-"))
        object.__setattr__(self, "_spellings", (self.flag, *self.aliases) if self.cli else ())

    @property
    def switch(self) -> bool:
        """Whether it is an on/off flag (no value on the command line)."""
        return self.action in ("store_true", "store_false")

    def check(self, value: Any, *, label: str | None = None) -> Any:
        """``value`` checked and in its type (None stays None: not given).

        ``label`` names the value in the error instead of the flag (a Python argument's name).

        Raises:
            SettingError: naming the flag (or ``label``), what was expected and what was found.
        """
        if value is None:
            return None
        try:
            if self.switch:
                if not isinstance(value, bool):
                    raise ValueError(f"expected true or false, found {value!r}")
                return value
            if self.nargs in ("*", "+") or isinstance(self.nargs, int) or self.action == "append":
                if isinstance(value, str):  # one item of a repeated flag, or the words of several
                    items = [value] if self.action == "append" else value.split()
                else:
                    items = value
                if not isinstance(items, list | tuple):
                    items = [items]
                checked = [self._one(v) for v in items]
                if isinstance(self.nargs, int) and len(checked) != self.nargs:
                    raise ValueError(f"expected {self.nargs} values, found {len(checked)}")
                if self.nargs == "+" and not checked:
                    raise ValueError("expected one value or more, found none")
                return type(value)(checked) if isinstance(value, tuple) else checked
            return self._one(value)
        except ValueError as exc:
            raise SettingError(f"{label or self.flag}: {exc}") from None

    def _one(self, value: Any) -> Any:
        checked = self.kind(value)
        if self.choices is not None and checked not in self.choices:
            raise ValueError(f"expected one of {', '.join(map(str, self.choices))}, found {value!r}")
        return checked

    def argparse_type(self) -> Callable[[str], Any]:
        """The ``type=`` of its argparse argument: ``kind`` with argparse's usage error."""
        kind = self.kind

        def parse(text: str) -> Any:
            try:
                return kind(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        parse.__name__ = getattr(kind, "__name__", self.name)
        parse._evirank_checked = True  # type: ignore[attr-defined]  # numbers are checked already
        return parse


#: The group title argparse gives a parser's own options: settings of this group join it.
PARSER_GROUP = "options"
#: Each parser's groups by title (so settings of one group land together whatever adds them).
_GROUPS: weakref.WeakKeyDictionary[argparse.ArgumentParser, dict[str, Any]] = weakref.WeakKeyDictionary()


class SettingsTable:
    """Settings by name, in the order they were written (see the module).

    Raises:
        ValueError: two settings with one name or one flag.
    """

    def __init__(self, settings: Iterable[Setting] = ()) -> None:
        self._settings: dict[str, Setting] = {}
        self._flags: dict[str, str] = {}
        for setting in settings:
            self.add(setting)

    def add(self, setting: Setting) -> Setting:
        """Add ``setting`` (a name or a spelling used twice is refused)."""
        if setting.name in self._settings:
            raise ValueError(f"two settings are named {setting.name!r}")
        for spelling in setting._spellings:
            if spelling in self._flags:
                raise ValueError(f"{spelling} is the flag of {self._flags[spelling]!r} already")
            self._flags[spelling] = setting.name
        self._settings[setting.name] = setting
        return setting

    def __getitem__(self, name: str) -> Setting:
        try:
            return self._settings[name]
        except KeyError:
            raise UnknownSettingError(f"no setting is named {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._settings

    def __iter__(self) -> Iterator[Setting]:
        return iter(self._settings.values())

    def __len__(self) -> int:
        return len(self._settings)

    def default(self, name: str) -> Any:
        """The default of setting ``name``."""
        return self[name].default

    def by_flag(self, spelling: str) -> Setting | None:
        """The setting spelled ``spelling`` on the command line (``--depth``, ``-o``), or None."""
        name = self._flags.get(spelling)
        return None if name is None else self._settings[name]

    def flags(self) -> list[str]:
        """Every spelling of every flag."""
        return list(self._flags)

    def check(self, name: str, value: Any) -> Any:
        """``value`` of setting ``name``, checked (see :meth:`Setting.check`)."""
        return self[name].check(value)

    def check_argument(
        self, name: str, value: Any, label: str | None = None, *, required: bool = False
    ) -> Any:
        """``value`` of setting ``name`` given to a Python function, checked: the error names the
        argument (``label``, default ``name``) rather than the flag; None is refused when ``required``.

        Example:
            >>> from evirank.config import SETTINGS
            >>> SETTINGS.check_argument("top", -1)
            Traceback (most recent call last):
            ...
            evirank.config.table.SettingError: top: expected an integer from 0 to 2147483647, found -1
        """
        setting = self[name]
        if value is None and required:
            try:
                setting.kind(None)
            except ValueError as exc:
                raise SettingError(f"{label or name}: {exc}") from None
            raise SettingError(f"{label or name}: expected a value, found None")
        return setting.check(value, label=label or name)

    def group(self, title: str) -> list[str]:
        """The names of the settings shown under ``title``, in table order."""
        return [s.name for s in self if s.group == title]

    def value(self, options: Mapping[str, Any], name: str) -> Any:
        """Setting ``name`` from ``options`` (a parsed command line, a conditions entry, a request),
        checked; its default when absent or None."""
        given = options.get(name)
        return self.default(name) if given is None else self.check(name, given)

    def add_flags(
        self,
        parser: Any,
        names: Iterable[str],
        *,
        defaults: Mapping[str, Any] | None = None,
        required: Iterable[str] = (),
        helps: Mapping[str, str] | None = None,
        changes: Mapping[str, Mapping[str, Any]] | None = None,
        exclusive: bool = True,
    ) -> None:
        """Add the flags of ``names`` to ``parser``, each under its group.

        Args:
            parser: an ``argparse.ArgumentParser`` (or a subcommand's).
            names: settings of this table.
            defaults: a command's own defaults, by name (visible where the command adds its flags).
            required: names (or ``exclusive`` keys) the command cannot run without.
            helps: a command's own help text for some settings (what the flag means there).
            changes: other argparse options a command sets for a setting, by name (``{"scorer":
                {"action": None}}``: given once, not repeated; ``{"format": {"choices": (...)}}``).
            exclusive: whether settings with one ``exclusive`` key exclude each other (False: a
                command that takes them together, such as ``index --corpus C --index I``).

        Raises:
            ValueError: a setting that is no flag (``cli=False``).
        """
        defaults = dict(defaults or {})
        required = set(required)
        helps = dict(helps or {})
        groups = _GROUPS.setdefault(parser, {})
        for name in names:
            setting = self[name]
            if not setting.cli:
                raise ValueError(f"the setting {name!r} is no flag")
            group = groups.get(setting.group)
            if group is None:
                new = parser if setting.group == PARSER_GROUP else parser.add_argument_group(setting.group)
                group = groups[setting.group] = new
            if setting.exclusive is not None and exclusive:
                key = f"exclusive:{setting.exclusive}"
                if key not in groups:
                    groups[key] = group.add_mutually_exclusive_group(required=setting.exclusive in required)
                group = groups[key]
            options = _argparse_options(setting, defaults, required, helps, exclusive)
            for key, value in (changes or {}).get(name, {}).items():
                if value is None:
                    options.pop(key, None)
                else:
                    options[key] = value
            group.add_argument(*setting._spellings, **options)


def is_flag(word: str) -> bool:
    """Whether a command-line word names a flag, rather than being a value such as ``-0.5`` or ``-``.

    Example:
        >>> [is_flag(w) for w in ("--depth", "-q", "-0.5", "-", "20")]
        [True, True, False, False, False]
    """
    if not word.startswith("-") or word == "-":
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False


def unknown_flag(flag: str, known: Iterable[str]) -> str:
    """``flag``, with the nearest known spelling when one is close, for an error message.

    Example:
        >>> unknown_flag("--qeury", ["--query", "--depth"])
        '--qeury (did you mean --query?)'
    """
    near = difflib.get_close_matches(flag, list(known), n=1, cutoff=0.6)
    return f"{flag} (did you mean {near[0]}?)" if near else flag


def _argparse_options(
    setting: Setting,
    defaults: Mapping[str, Any],
    required: set[str],
    helps: Mapping[str, str],
    exclusive: bool,
) -> dict[str, Any]:
    options: dict[str, Any] = {
        "dest": setting.name,
        "default": defaults.get(setting.name, setting.default),
        "help": helps.get(setting.name, setting.help),
    }
    if (setting.exclusive is None or not exclusive) and setting.name in required:
        options["required"] = True
    if setting.switch:
        options["action"] = setting.action
        if options["default"] is None:
            options["default"] = False
        return options
    if setting.action is not None:
        options["action"] = setting.action
    if setting.action not in ("count",):
        options["type"] = setting.argparse_type()
    for key in ("choices", "metavar", "nargs", "const"):
        value = getattr(setting, key)
        if value is not None:
            options[key] = value
    return options
