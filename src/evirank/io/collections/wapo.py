"""The TREC Washington Post Corpus (Core18): one JSON article per line, its body a ``contents`` list.

Each line is ``{"id", "title", "contents": [{"type", "content", ...}, ...], ...}``. What is kept is
what Anserini's ``WashingtonPostCollection`` keeps: the title, and then, in order, the text of
each ``sanitized_html`` and ``tweet`` item (markup removed), each ``kicker`` as it is, and each
image's ``fullcaption`` (markup removed), one line each: the paragraphs joined. Other items
(``byline``, ``date``, ``title``, ...) are left out. A malformed line, or an article without an
id, is an error naming the file and line, as for JSONL corpora.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "wapo.jl"
    >>> _ = path.write_text(json.dumps({"id": "a1", "title": "Cats", "contents": [
    ...     {"type": "byline", "content": "By A. Writer"},
    ...     {"type": "sanitized_html", "subtype": "paragraph", "content": "<p>Cats &amp; dogs.</p>"},
    ...     {"type": "image", "fullcaption": "A cat."}]}) + "\\n")
    >>> [located.doc for located in read_wapo(path)]
    [Document(docno='a1', title='Cats', text='Cats & dogs.\\nA cat.')]
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evirank.config.values import check_unicode_record
from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io.collections.base import Located
from evirank.io.collections.markup import markup_text
from evirank.io.files import check_docno, iter_lines, json_error, open_binary, shorten, type_name

#: The item types whose ``content`` is HTML text (Anserini's ``CONTENT_TYPE_TAG``).
HTML_TYPES = frozenset({"sanitized_html", "tweet"})
SUFFIXES = (".jl", ".jsonl", ".txt", ".jl.gz", ".jsonl.gz", ".txt.gz")

_SHAPE = 'a Washington Post article {"id", "title", "contents": [{"type", "content"}, ...]}'


def read_wapo(path: Path) -> Iterator[Located]:
    """The articles of one Washington Post JSON lines file (plain or ``.gz``)."""
    for line_no, line in iter_lines(path):
        if line.strip():
            yield Located(parse_article(line, path, line_no), line_no)


def count_wapo(path: Path) -> int:
    """The number of non-blank lines of a file."""
    with open_binary(path) as handle:
        return sum(1 for raw in handle if raw.strip())


def parse_article(line: str, path: Path, line_no: int) -> Document:
    """One line as a Document (see the module docstring for what is kept)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise InputFormatError(path, line_no, "one JSON object per line", json_error(exc)) from None
    if not isinstance(record, dict):
        raise InputFormatError(path, line_no, _SHAPE, type_name(record))
    raw_id = record.get("id")
    if not isinstance(raw_id, str):
        found = f"keys {sorted(record)}" if raw_id is None else f'"id" as {type_name(raw_id)}'
        raise InputFormatError(path, line_no, _SHAPE, found)
    docno = check_docno(raw_id.strip(), path, line_no)
    items = record.get("contents")
    if items is not None and not isinstance(items, list):
        raise InputFormatError(path, line_no, f'"contents" as a list ({_SHAPE})', type_name(items))
    parts: list[str] = []
    for position, item in enumerate(items or [], start=1):
        if item is None:
            continue
        if not isinstance(item, dict):
            raise InputFormatError(
                path, line_no, f'each item of "contents" as an object ({_SHAPE})',
                f"item {position}: {type_name(item)}: {shorten(item)}",
            )  # fmt: skip
        kind, content = item.get("type"), _content(item.get("content"))
        if kind is not None and content is not None:
            if str(kind) in HTML_TYPES:
                parts.append(markup_text(content))
            elif str(kind).lower() == "kicker":
                parts.append(content)
        if item.get("fullcaption") is not None:
            parts.append(markup_text(str(item["fullcaption"])))
    title = "" if record.get("title") is None else str(record["title"])
    url = record.get("article_url")
    source = url if isinstance(url, str) and url.startswith(("http://", "https://")) else None
    text = "\n".join(parts)
    check_unicode_record(
        {"id": docno, "title": title, "text": text, "article_url": source or ""}, path, line_no
    )
    return Document(docno, title, text, source)


def _content(value: Any) -> str | None:
    """An item's ``content`` as text, as Anserini reads it (a list's parts and an object's
    ``text`` each followed by a space; numbers as digits; anything else: none)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return "".join(f"{part} " for part in value)
    if isinstance(value, dict) and value.get("text") is not None:
        return f"{value['text']} "
    return None
