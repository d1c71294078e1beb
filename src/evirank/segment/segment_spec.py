"""The one grammar of segmenter specs (``--segment``), parsed once for rerank, serve, tune and embed.

::

    sentences[:segment|prepend|skip]         the title as its own first segment (default), before
                                             every sentence, or dropped (Birch)
    windows[:LENGTH[:STRIDE]][:prepend|skip] LENGTH-word windows (150), STRIDE (half the length;
                                             75 by default), the title prepended (default) or not
    whole[:prepend|skip]                     each document as one passage (tweets, passages)

Every spec has one canonical string (:attr:`SegmentSpec.spec`, ``str(spec)``) with every value
spelled out: ``sentences`` is ``sentences:segment``, ``windows`` is ``windows:150:75``
(``windows:150:75:skip`` without titles), ``whole`` is ``whole:prepend``. Passage vectors and
records name their segmenter by it. A built segmenter gives its spec back
(:func:`spec_of`), so ``parse_segment(spec_of(s))`` rebuilds ``s``.

Example:
    >>> SegmentSpec.parse("windows:100").spec
    'windows:100:50'
    >>> str(SegmentSpec.parse("Sentences"))
    'sentences:segment'
    >>> parse_segment("sentences:skip")
    Sentences(title='skip', max_tokens=None, tokenizer=None, splitter='syntok', max_title_words=50)
    >>> spec_of(parse_segment("whole"))
    'whole:prepend'
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Literal

from evirank.grammar import SpecError, parse_spec
from evirank.segment.base import Segmenter
from evirank.segment.sentences import _TITLE_MODES, Sentences
from evirank.segment.whole import Whole
from evirank.segment.windows import Windows

logger = logging.getLogger(__name__)

SegmentKind = Literal["sentences", "windows", "whole"]
#: Title modes each kind accepts; the first is its default.
TITLE_MODES: dict[str, tuple[str, ...]] = {
    "sentences": ("segment", "prepend", "skip"),
    "windows": ("prepend", "skip"),
    "whole": ("prepend", "skip"),
}
#: How help texts and errors describe the grammar.
GRAMMAR = "sentences[:segment|prepend|skip], windows[:LENGTH[:STRIDE]][:prepend|skip] or whole[:prepend|skip]"
WINDOW_LENGTH = 150
WINDOW_STRIDE = 75


class SegmentSpecError(SpecError):
    """A segmenter spec that cannot be parsed."""


@dataclass(frozen=True)
class SegmentSpec:
    """A parsed segmenter spec.

    Attributes:
        kind: ``sentences``, ``windows`` or ``whole``.
        title: the title mode (see :data:`TITLE_MODES`).
        length: window length in words (windows only).
        stride: window stride in words (windows only).
    """

    kind: SegmentKind
    title: str
    length: int | None = None
    stride: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in TITLE_MODES:
            raise SegmentSpecError(f"unknown segmenter {self.kind!r}; expected {GRAMMAR}")
        if self.title not in TITLE_MODES[self.kind]:
            raise SegmentSpecError(
                f"{self.kind}: title mode must be {' or '.join(TITLE_MODES[self.kind])}, found {self.title!r}"
            )
        if self.kind == "windows":
            if not isinstance(self.length, int) or self.length < 1:
                raise SegmentSpecError(f"windows: LENGTH must be a positive integer, found {self.length!r}")
            if not isinstance(self.stride, int) or not 1 <= self.stride <= self.length:
                raise SegmentSpecError(
                    f"windows: STRIDE must be an integer in [1, LENGTH={self.length}], found {self.stride!r}"
                )
        elif self.length is not None or self.stride is not None:
            raise SegmentSpecError(f"{self.kind} takes no length or stride")

    @classmethod
    def parse(cls, spec: str) -> SegmentSpec:
        """Parse a spec of the grammar above (any case, surrounding spaces ignored).

        Raises:
            SegmentSpecError: an unknown or malformed spec.

        Example:
            >>> SegmentSpec.parse("windows:skip")
            SegmentSpec(kind='windows', title='skip', length=150, stride=75)
        """
        parsed = parse_spec(spec, what="segmenter", error=SegmentSpecError, grammar=GRAMMAR)
        name, params = parsed.name, [p.lower() for p in parsed.args]
        if name not in TITLE_MODES:
            raise SegmentSpecError(f"unknown segmenter {spec!r}; expected {GRAMMAR}")
        modes = TITLE_MODES[name]
        title = modes[0]
        if params and params[-1] in modes:
            title = params.pop()
        if name != "windows":
            if params:
                raise SegmentSpecError(f"expected {name}[:{'|'.join(modes)}], found {spec!r}")
            return cls(name, title)  # type: ignore[arg-type]
        if len(params) > 2 or not all(p.isdigit() for p in params):
            raise SegmentSpecError(
                f"expected windows[:LENGTH[:STRIDE]][:prepend|skip] with integers, found {spec!r}"
            )
        length = int(params[0]) if params else WINDOW_LENGTH
        stride = int(params[1]) if len(params) > 1 else (max(1, length // 2) if params else WINDOW_STRIDE)
        return cls("windows", title, length, stride)

    @property
    def spec(self) -> str:
        """The canonical string: every value spelled out (``windows`` omits the default ``prepend``)."""
        if self.kind == "windows":
            return f"windows:{self.length}:{self.stride}" + (":skip" if self.title == "skip" else "")
        return f"{self.kind}:{self.title}"

    def __str__(self) -> str:
        return self.spec

    def with_title(self, mode: str) -> SegmentSpec:
        """This spec with another title mode; ``segment`` means ``prepend`` for windows and whole.

        Example:
            >>> SegmentSpec.parse("whole").with_title("skip").spec
            'whole:skip'
        """
        if mode == "segment" and self.kind != "sentences":
            mode = "prepend"
        return replace(self, title=mode)

    def build(self, *, tokenizer: Any = None, max_tokens: int | None = None) -> Segmenter:
        """The segmenter stage.

        Args:
            tokenizer: with ``max_tokens``, sentences longer than ``max_tokens`` of this
                tokenizer's tokens are cut into chunks that keep every word (windows and
                whole documents ignore both).
            max_tokens: the token budget of one sentence segment (the scorer's room for a
                passage, :meth:`evirank.score.CrossEncoder.passage_budget`).
        """
        if self.kind == "sentences":
            return Sentences(
                title=self.title,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                tokenizer=tokenizer if max_tokens is not None else None,
            )
        if self.kind == "windows":
            return Windows(self.length, self.stride, title=self.title != "skip")  # type: ignore[arg-type]
        return Whole(title=self.title)  # type: ignore[arg-type]


def parse_segment(spec: str, *, tokenizer: Any = None, max_tokens: int | None = None) -> Segmenter:
    """The segmenter of a spec (:meth:`SegmentSpec.parse`, then :meth:`SegmentSpec.build`).

    Example:
        >>> parse_segment("windows:100").stride
        50
    """
    return SegmentSpec.parse(spec).build(tokenizer=tokenizer, max_tokens=max_tokens)


def spec_of(segmenter: Any) -> str | None:
    """The canonical spec of a built segmenter, or None for one the grammar cannot express.

    Example:
        >>> spec_of(Windows(100, 40, title=False))
        'windows:100:40:skip'
    """
    if isinstance(segmenter, Sentences):
        return SegmentSpec("sentences", _TITLE_MODES[segmenter.title]).spec
    if isinstance(segmenter, Windows):
        title = "prepend" if segmenter.title else "skip"
        return SegmentSpec("windows", title, segmenter.length, segmenter.stride).spec
    if isinstance(segmenter, Whole):
        return SegmentSpec("whole", segmenter.title).spec
    return None
