"""Limits and defaults of the search service, as one frozen config.

Example:
    >>> config = ServeConfig(timeout_s=5.0)
    >>> config.check_request("  cats  ", 10, 20)
    ('cats', 10, 20)
    >>> config.check_request("", 10, 20)
    Traceback (most recent call last):
    ...
    evirank.serve.config.BadRequest: the query is empty: type a few words to search for
"""

from __future__ import annotations

from dataclasses import dataclass

from evirank.errors import EvirankError


class BadRequest(EvirankError, ValueError):
    """A request parameter is missing or out of range (the service answers 400 with this message)."""


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """What the service accepts and how long it waits.

    Args:
        default_k: candidates returned when ``k`` is not given.
        default_depth: first-stage hits re-ranked when ``depth`` is not given.
        max_k: the largest ``k`` accepted.
        max_depth: the largest ``depth`` accepted (each hit costs model calls).
        max_query_chars: the longest query accepted, in characters.
        timeout_s: a search that takes longer is answered with 503 (the work already started may finish
            in the background; queued work is dropped).
        workers: searches running at once (pipeline stages still serialise on their locks).
        max_pending: searches admitted at once (running or queued); more get 503 at once.
        title: the page title.
    """

    default_k: int = 10
    default_depth: int = 20
    max_k: int = 100
    max_depth: int = 100
    max_query_chars: int = 1000
    timeout_s: float = 30.0
    workers: int = 4
    max_pending: int = 64
    title: str = "evirank"

    def __post_init__(self) -> None:
        for name in ("default_k", "default_depth", "max_k", "max_depth", "max_query_chars", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServeConfig.{name} must be at least 1, found {getattr(self, name)!r}")
        if self.timeout_s <= 0:
            raise ValueError(f"ServeConfig.timeout_s must be positive, found {self.timeout_s!r}")
        if not 1 <= self.default_depth <= self.max_depth:
            raise ValueError(f"default depth {self.default_depth} is not within 1..{self.max_depth}")
        if self.max_pending < self.workers:
            raise ValueError(f"max_pending ({self.max_pending}) must be at least workers ({self.workers})")

    def check_request(self, query: str | None, k: int | None, depth: int | None) -> tuple[str, int, int]:
        """Validate one search request; return ``(query, k, depth)`` with defaults filled in.

        ``k`` defaults to ``min(default_k, depth)``, so ``depth=5`` alone is a valid request.

        Raises:
            BadRequest: with a message that says what was expected and what was found.
        """
        text = (query or "").strip()
        if not text:
            raise BadRequest("the query is empty: type a few words to search for")
        if len(text) > self.max_query_chars:
            raise BadRequest(
                f"the query is too long: at most {self.max_query_chars} characters, found {len(text)}"
            )
        depth = self.default_depth if depth is None else depth
        if not 1 <= depth <= self.max_depth:
            raise BadRequest(f"depth must be between 1 and {self.max_depth}, found {depth}")
        k = min(self.default_k, depth) if k is None else k
        if not 1 <= k <= self.max_k:
            raise BadRequest(f"k must be between 1 and {self.max_k}, found {k}")
        if k > depth:
            raise BadRequest(
                f"k ({k}) must not exceed depth ({depth}): only re-ranked documents are returned; "
                f"raise depth to at least {k}"
            )
        return text, k, depth
