"""An adapter for ``ir_datasets``, for users with the internet (``pip install 'evirank[datasets]'``).

``ir_datasets`` is imported only when :func:`load_irds` is called. Its records (namedtuples
whose fields vary by collection) are turned into evirank's types: :class:`Document`, Topics,
Qrels. The readers of :mod:`evirank.io` also accept ``irds:<dataset-id>`` in place of a path.

Example (needs the network the first time, so not run here):
    >>> ds = load_irds("beir/scifact/test")                      # doctest: +SKIP
    >>> topics, qrels = ds.topics(), ds.qrels()                  # doctest: +SKIP
    >>> first = next(ds.docs())                                  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from evirank.extras import require
from evirank.frames import Document, make_qrels, make_topics
from evirank.io.fields import field_text, parse_field

logger = logging.getLogger(__name__)

IRDS_PREFIX = "irds:"
# Which record attribute holds each topic field, in order of preference, across ir_datasets' query types.
_QUERY_ATTRS = {
    "title": ("title", "query", "text"),
    "description": ("description",),
    "narrative": ("narrative",),
}


def irds_id(path: object) -> str | None:
    """The dataset id of an ``irds:<id>`` reference, or ``None`` for an ordinary path.

    Example:
        >>> irds_id("irds:beir/scifact/test"), irds_id("data/corpus.jsonl")
        ('beir/scifact/test', None)
    """
    text = str(path)
    return text[len(IRDS_PREFIX) :] if text.startswith(IRDS_PREFIX) else None


def _text_of(record: Any, names: tuple[str, ...]) -> str:
    for name in names:
        value = getattr(record, name, None)
        if isinstance(value, str) and value.strip():
            return value
    return ""


@dataclass(frozen=True)
class IrdsDataset:
    """One ``ir_datasets`` dataset seen through evirank's types.

    Args:
        dataset_id: the ir_datasets id, e.g. ``"msmarco-passage/trec-dl-2019/judged"``.
        dataset: the object ``ir_datasets.load(dataset_id)`` returned.
    """

    dataset_id: str
    dataset: Any

    def _need(self, what: str) -> None:
        has = getattr(self.dataset, f"has_{what}", None)
        if callable(has) and not has():
            raise ValueError(f"ir_datasets {self.dataset_id!r} has no {what}")

    def docs(self) -> Iterator[Document]:
        """Stream the documents (title, and text or body); documents without any text are skipped."""
        self._need("docs")
        skipped = 0
        for record in self.dataset.docs_iter():
            title = _text_of(record, ("title",))
            text = _text_of(record, ("text", "body", "contents"))
            if not text and not title and callable(getattr(record, "default_text", None)):
                text = record.default_text()
            if not (title.strip() or text.strip()):
                skipped += 1
                continue
            yield Document(str(record.doc_id), title, text)
        if skipped:
            logger.warning("ir_datasets %s: skipped %d document(s) without text", self.dataset_id, skipped)

    def docs_count(self) -> int | None:
        """The number of documents, when ir_datasets knows it without reading them."""
        count = getattr(self.dataset, "docs_count", None)
        return int(count()) if callable(count) and count() is not None else None

    def topics(self, field: str = "title") -> pd.DataFrame:
        """The queries as a Topics frame; ``field`` as in :func:`evirank.io.read_topics`."""
        self._need("queries")
        names = parse_field(field)
        rows: list[tuple[str, str]] = []
        for record in self.dataset.queries_iter():
            parts = []
            for name in names:
                fields = {field: _text_of(record, attrs) for field, attrs in _QUERY_ATTRS.items()}
                value = field_text(fields, name)
                if not value:
                    raise ValueError(
                        f"ir_datasets {self.dataset_id!r}: query {record.query_id} has no {name} "
                        f"(its fields: {', '.join(getattr(record, '_fields', ()))})"
                    )
                parts.append(" ".join(value.split()))
            rows.append((str(record.query_id), " ".join(parts)))
        return make_topics(rows)

    def qrels(self) -> pd.DataFrame:
        """The relevance judgements as a Qrels frame."""
        self._need("qrels")
        return make_qrels(
            [(str(r.query_id), str(r.doc_id), int(r.relevance)) for r in self.dataset.qrels_iter()]
        )


def load_irds(dataset_id: str) -> IrdsDataset:
    """Load an ``ir_datasets`` dataset (downloads on first use; needs the ``datasets`` extra).

    Raises:
        MissingExtraError: when ir_datasets is not installed.
        KeyError: when ir_datasets does not know ``dataset_id``.
    """
    ir_datasets = require("ir_datasets", "datasets")
    dataset_id = irds_id(dataset_id) or dataset_id
    return IrdsDataset(dataset_id, ir_datasets.load(dataset_id))
