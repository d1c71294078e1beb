"""The tiny collection of the re-ranking tests (imported by tests and by conftest.py)."""

from __future__ import annotations

from evirank.frames import Document

# Words from the tiny test models' vocabulary, so the random models see real tokens.
DOCS = [
    Document("d1", "Cats", "The cat sat on the mat. It is a cat. Cats are not dogs."),
    Document("d2", "Dogs", "Dogs sat on the mat. A dog is not a cat."),
    Document("d3", "", "BM25 ranks documents. A passage is evidence. The query is relevant."),
    Document("d4", "Vaccine", "A vaccine trains cells. The virus is in the cell."),
    Document("d5", "Search", "Search and retrieval rank documents by score. This is a model of ranking."),
    Document("d6", "Evidence", "Sentence evidence is relevant to the query."),
    Document("d7", "Mat", "The mat is on the cat."),
]
TOPICS = {"1": "where did the cat sit", "2": "bm25 document ranking", "3": "vaccine virus cells"}
# Every query retrieves every document; scores descending with the docno, with one tie in query 3.
RUN = [
    (qid, doc.docno, float(10 - i if not (qid == "3" and i == 5) else 10 - 4))
    for qid in TOPICS
    for i, doc in enumerate(DOCS)
]
