r"""Limits and defaults of the search service, as one frozen config.

The defaults come from the settings table (:data:`evirank.config.SETTINGS`): ``top``, ``depth``,
``max_depth``, ``timeout``, ``workers`` and ``max_pending``, the defaults of ``evirank serve``'s flags.
A request names three numbers, in the words of every evirank command: ``top`` (results returned),
``depth`` (first-stage hits re-ranked) and ``k`` (the first-stage depth: documents retrieved).

Example:
    >>> config = ServeConfig(timeout_s=5.0)
    >>> config.check_request("  cats  ", top=10, depth=20)
    ('cats', 10, 20, 20)
    >>> config.check_request("cats", depth=5)  # top: the default 10, cut to the 5 re-ranked
    ('cats', 5, 5, 5)
    >>> config.check_request("", 10, 20)
    Traceback (most recent call last):
    ...
    evirank.serve.config.BadRequest: the query is empty: type a few words to search for
    >>> try:
    ...     config.check_request("cats", k=5)
    ... except BadRequest as exc:
    ...     print(str(exc).replace("; ", ";\n"))
    k is the first-stage depth (documents retrieved), 5 here, fewer than the 10 results shown (top);
    to get 5 results write top=5
"""

from __future__ import annotations

from dataclasses import dataclass

from evirank.config import SETTINGS
from evirank.errors import EvirankError


class BadRequest(EvirankError, ValueError):
    """A request parameter is missing or out of range (the service answers 400 with this message)."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What the service accepts and how long it waits.

    Args:
        default_top: results returned when a request names no ``top`` (cut to its ``depth`` and ``k``).
        default_depth: first-stage hits re-ranked when a request names no ``depth``.
        max_depth: the largest ``depth``, ``k`` and ``top`` accepted (each document retrieved has its
            text fetched, each one re-ranked costs model calls, and only re-ranked ones are returned).
        max_query_chars: the longest query accepted, in characters.
        timeout_s: a search that takes longer is answered with 503 (the work already started may finish
            in the background; queued work is dropped).
        workers: searches running at once (pipeline stages still serialise on their locks).
        max_pending: searches admitted at once (running or queued); more get 503 at once.
        title: the page title.
    """

    default_top: int = SETTINGS.default("top")
    default_depth: int = SETTINGS.default("depth")
    max_depth: int = SETTINGS.default("max_depth")
    max_query_chars: int = 1000
    timeout_s: float = SETTINGS.default("timeout")
    workers: int = SETTINGS.default("workers")
    max_pending: int = SETTINGS.default("max_pending")
    title: str = "evirank"

    def __post_init__(self) -> None:
        for name in ("default_top", "default_depth", "max_depth", "max_query_chars", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServeConfig.{name} must be at least 1, found {getattr(self, name)!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"ServeConfig.timeout_s must be positive, found {self.timeout_s!r}")
        if not 1 <= self.default_depth <= self.max_depth:
            raise ValueError(f"default depth {self.default_depth} is not within 1..{self.max_depth}")
        if self.max_pending < self.workers:
            raise ValueError(f"max_pending ({self.max_pending}) must be at least workers ({self.workers})")

    def shown(self, depth: int) -> int:
        """Results a request of ``depth`` gets when it names no ``top``: the default, cut to ``depth``.

        Example:
            >>> ServeConfig(default_top=10).shown(4), ServeConfig(default_top=10).shown(50)
            (4, 10)
        """
        return min(self.default_top, depth)

    def check_request(
        self, query: str | None, top: int | None = None, depth: int | None = None, k: int | None = None
    ) -> tuple[str, int, int, int]:
        """Validate one search request; return ``(query, top, depth, k)`` with defaults filled in.

        ``depth`` defaults to ``default_depth``, ``k`` to the request's ``depth`` (so ``depth=5`` alone
        retrieves and re-ranks 5) and ``top`` to ``default_top``. Only re-ranked documents are returned,
        so ``top`` comes back cut to ``min(depth, k)``. A request that gives ``k`` below the results it
        would be shown and no ``top`` is refused: ``k`` used to name the results shown.

        Raises:
            BadRequest: with a message that names the parameter, the allowed range and what was found.
        """
        text = (query or "").strip()
        if not text:
            raise BadRequest("the query is empty: type a few words to search for")
        if len(text) > self.max_query_chars:
            raise BadRequest(
                f"the query is too long: at most {self.max_query_chars} characters, found {len(text)}"
            )
        depth = self.default_depth if depth is None else self._within("depth", depth)
        if k is not None:
            k = self._within("k", k)
        if top is None:
            top = self.shown(depth)
            if k is not None and k < top:
                raise BadRequest(
                    f"k is the first-stage depth (documents retrieved), {k} here, fewer than the {top} "
                    f"results shown (top); to get {k} results write top={k}"
                )
        else:
            top = self._within("top", top)
        k = depth if k is None else k
        return text, min(top, depth, k), depth, k

    def _within(self, name: str, value: int) -> int:
        if not 1 <= value <= self.max_depth:
            raise BadRequest(
                f"{name} must be between 1 and {self.max_depth} (the server's --max-depth), found {value}"
            )
        return value
