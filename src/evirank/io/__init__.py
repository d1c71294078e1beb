"""Data in the formats users have: corpora, topics, qrels and runs (BEIR, Pyserini, TREC).

Everything here is light (pandas and the standard library); the ``ir_datasets`` adapter in
:mod:`evirank.io.irds` imports ir_datasets only when called.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "topics.tsv").write_text("1\\tdo goldfish grow\\n")
    >>> read_topics(folder / "topics.tsv").values.tolist()
    [['1', 'do goldfish grow']]
"""

from __future__ import annotations

from evirank.io.corpus import (
    corpus_file,
    count_corpus,
    load_texts,
    parse_document,
    read_corpus,
    write_corpus,
)
from evirank.io.irds import IrdsDataset, irds_id, load_irds
from evirank.io.qrels import read_qrels, write_qrels
from evirank.io.runs import format_score, read_run, write_run
from evirank.io.topics import (
    TOPIC_FIELDS,
    TOPIC_FORMATS,
    beir_split_qids,
    detect_topics_format,
    normalize_qid,
    parse_field,
    read_topic_fields,
    read_topics,
    write_topics,
)

__all__ = [
    "TOPIC_FIELDS",
    "TOPIC_FORMATS",
    "IrdsDataset",
    "beir_split_qids",
    "corpus_file",
    "count_corpus",
    "detect_topics_format",
    "format_score",
    "irds_id",
    "load_irds",
    "load_texts",
    "normalize_qid",
    "parse_document",
    "parse_field",
    "read_corpus",
    "read_qrels",
    "read_run",
    "read_topic_fields",
    "read_topics",
    "write_corpus",
    "write_qrels",
    "write_run",
    "write_topics",
]
