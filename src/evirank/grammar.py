"""The one grammar of every spec string: ``[LABEL=]NAME[:ARG[:ARG ...]]``.

Every part of a pipeline that is named in a flag, a conditions file or Python is written the same
way and split by :func:`parse_spec`; each part's own parser (segmenters, aggregators, scorers,
first stages, fusions, negatives sources, evidence sources) only says what its name and arguments
mean::

    sentences:prepend          windows:150:75:skip         whole
    birch:3                    maxp
    cross:models/minilm        ce2=cross:models/other      bi
    bm25                       dense                       rrf:60        interp:0.3
    run:runs/train.txt         vectors:indexes/scifact

A spec whose last argument may itself hold ``:`` (a model path or Hub id, a file path) is parsed
with ``tail=True``: everything after the name's ``:`` is one argument. A label is allowed where
the part takes one (``labelled=True``).

Example:
    >>> parse_spec("windows:150:75", what="segmenter")
    Spec(name='windows', args=('150', '75'), label=None)
    >>> parse_spec("ce2=cross:/models/a:b", what="scorer", labelled=True, tail=True)
    Spec(name='cross', args=('/models/a:b',), label='ce2')
    >>> parse_spec("Birch:", what="aggregator")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    SpecError: aggregator 'Birch:': an empty argument after ':' (expected NAME[:ARG ...])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evirank.errors import EvirankError

#: What a label looks like (a scorer's label names a weight and a column: ``score_<label>``).
LABEL = re.compile(r"^[a-z][a-z0-9_]*$")


class SpecError(EvirankError, ValueError):
    """A spec string that the grammar cannot split (each part's parser subclasses it)."""


@dataclass(frozen=True)
class Spec:
    """A spec string split by the grammar: its name (lower-cased), arguments and optional label.

    Attributes:
        name: what is named (``windows``, ``birch``, ``cross``, ``rrf``); lower case.
        args: the arguments after the name, in order (as written; each part parses its own).
        label: the part before ``=`` (None without one).
        text: the spec as given.
    """

    name: str
    args: tuple[str, ...] = ()
    label: str | None = None
    text: str = field(default="", compare=False, repr=False)

    def arg(self, index: int, default: str | None = None) -> str | None:
        """The argument at ``index``, or ``default`` when there are fewer.

        Example:
            >>> parse_spec("rrf:10", what="fusion").arg(0), parse_spec("rrf", what="fusion").arg(0, "60")
            ('10', '60')
        """
        return self.args[index] if index < len(self.args) else default

    def __str__(self) -> str:
        head = f"{self.label}=" if self.label else ""
        return head + ":".join((self.name, *self.args))


def parse_spec(
    text: str,
    *,
    what: str,
    labelled: bool = False,
    tail: bool = False,
    error: type[SpecError] = SpecError,
    grammar: str = "NAME[:ARG ...]",
) -> Spec:
    """Split ``[LABEL=]NAME[:ARG ...]`` (see the module).

    Args:
        text: the spec as written (surrounding spaces are ignored; the name is lower-cased).
        what: the part it names (``segmenter``, ``scorer``, ...), for error messages.
        labelled: a ``LABEL=`` prefix is allowed (a label is lower-case letters, digits and ``_``,
            starting with a letter).
        tail: everything after the name's ``:`` is one argument (a path or a model id).
        error: the exception raised (the part's own subclass of :class:`SpecError`).
        grammar: the part's grammar, named in errors.

    Raises:
        SpecError: an empty spec or name, an empty argument, a label where none is allowed, or a
            malformed label.
    """
    raw = str(text).strip()
    body = raw
    label = None
    if labelled:
        head, sep, rest = raw.partition("=")
        # a label only when what precedes '=' looks like one (a path may hold '=' further on)
        if sep and ":" not in head and "/" not in head:
            label = head.strip()
            body = rest.strip()
            if not LABEL.match(label):
                raise error(
                    f"{what} {text!r}: the label {label!r} must be lower-case letters, digits and _, "
                    "starting with a letter (e.g. ce2=cross:MODEL)"
                )
    name, sep, rest = body.partition(":")
    name = name.strip().lower()
    if not name:
        raise error(f"{what} {text!r}: expected {grammar}, found an empty name")
    if not sep:
        return Spec(name, (), label, raw)
    args = (rest.strip(),) if tail else tuple(a.strip() for a in rest.split(":"))
    if any(not a for a in args):
        raise error(f"{what} {text!r}: an empty argument after ':' (expected {grammar})")
    return Spec(name, args, label, raw)
