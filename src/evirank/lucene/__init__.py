"""The first stage on Lucene (Pyserini's Anserini jar): index a corpus, search it with BM25 or BM25+RM3.

Importing this package starts no JVM and imports neither pyserini nor jnius; the JVM starts
(once per process) when a searcher first opens, and indexing runs Java in a separate process.
Java 21+ is needed: see :mod:`evirank.lucene.java` for how it is found.

Example:
    >>> from evirank.lucene import Bm25, Rm3, build_index, LuceneDocs
    >>> Bm25("indexes/scifact", rm3=Rm3()).config.rm3
    Rm3(fb_docs=10, fb_terms=10, original_weight=0.5)
"""

from evirank.lucene.docs import LuceneDocs, document_from_raw
from evirank.lucene.index import IndexInfo, IndexingError, build_index, read_index_info
from evirank.lucene.java import JavaError, find_java, start_jvm
from evirank.lucene.search import Bm25, Bm25Config, Rm3

__all__ = [
    "Bm25",
    "Bm25Config",
    "IndexInfo",
    "IndexingError",
    "JavaError",
    "LuceneDocs",
    "Rm3",
    "build_index",
    "document_from_raw",
    "find_java",
    "read_index_info",
    "start_jvm",
]
