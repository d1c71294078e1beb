"""What every collection reader yields: a document and where it starts.

Example:
    >>> from evirank.frames import Document
    >>> Located(Document("d1", "", "x"), 3).line
    3
"""

from __future__ import annotations

from typing import NamedTuple

from evirank.frames import Document


class Located(NamedTuple):
    """A document read from a file, with the 1-based line it starts on (``None`` when unknown)."""

    doc: Document
    line: int | None
