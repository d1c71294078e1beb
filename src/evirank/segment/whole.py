"""The whole document as one passage: short texts (tweets, MS MARCO passages) need no splitting.

Birch scores a tweet as it is; a passage collection such as TREC DL's is already split. The
title, when there is one, goes before the text (``title="prepend"``) or is dropped
(``title="skip"``). Too long a document is cut by the scorer's token limit, as any passage.

Example:
    >>> import pandas as pd
    >>> run = pd.DataFrame({"qid": ["1"], "docno": ["d"], "score": [1.0],
    ...                     "title": ["T"], "text": ["One. Two."]})
    >>> Whole()(run)[["pid", "text"]].values.tolist()
    [[0, 'T One. Two.']]
    >>> Whole(title="skip")(run)["text"].tolist()
    ['One. Two.']
"""

from __future__ import annotations

from typing import Literal

from evirank.segment.base import Segmenter


class Whole(Segmenter):
    """One segment per document: its title (unless skipped) and text, stripped.

    Args:
        title: ``"prepend"`` (default) puts the title before the text; ``"skip"`` drops it.
    """

    def __init__(self, title: Literal["prepend", "skip"] = "prepend") -> None:
        if title not in ("prepend", "skip"):
            raise ValueError(f"Whole: title must be 'prepend' or 'skip', found {title!r}")
        self.title = title

    def __repr__(self) -> str:
        return f"Whole(title={self.title!r})"

    def segments(self, title: str, text: str) -> list[str]:
        """The document as one segment."""
        head = title.strip() if self.title == "prepend" else ""
        body = text.strip()
        return [f"{head} {body}".strip()]
