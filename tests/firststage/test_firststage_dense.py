"""Dense retrieval: exact block search equals brute force, max-pooling, model checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.firststage import DenseRetriever, ExactSearcher, PassageSearcher, max_pool
from evirank.frames import Document, make_topics
from evirank.vectors import PassageVectors, VectorBuilder, VectorsMismatchError

DOCS = [
    Document("d1", "Cats", "Cats purr on the mat. They sleep a lot in the sun."),
    Document("d2", "", "Dogs bark at night."),
    Document("d3", "Birds", "Birds sing. Birds fly south. Some birds swim in lakes."),
    Document("d4", "Fish", "Fish swim in the sea."),
    Document("d5", "", "Snakes hiss quietly. A cat watches the snake."),
    Document("d6", "Bees", "Bees make honey. Honey is sweet. Bears like honey."),
]
QUERIES = [("1", "cats sleeping"), ("2", "honey bees"), ("3", "birds that swim"), ("4", "zzz")]


def brute_force(matrix: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    scores = queries.astype(np.float32) @ matrix.astype(np.float32).T
    rows = np.broadcast_to(np.arange(len(matrix)), scores.shape)
    order = np.lexsort((rows, -scores), axis=-1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), order


@pytest.mark.parametrize(("block_rows", "query_block", "k"), [(16, 2, 10), (1000, 256, 10), (7, 1, 300)])
def test_exact_search_equals_brute_force(block_rows: int, query_block: int, k: int) -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(size=(257, 8)).astype(np.float16)
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    scores, rows = ExactSearcher(matrix, block_rows=block_rows, query_block=query_block).search(queries, k)
    want_scores, want_rows = brute_force(matrix, queries, k)
    assert rows.shape == (5, min(k, 257))
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6, atol=1e-6)
    assert (np.diff(scores, axis=1) <= 0).all()


def test_exact_search_refuses_vectors_of_another_dimension() -> None:
    with pytest.raises(ValueError, match="dimensions"):
        ExactSearcher(np.zeros((3, 4), dtype=np.float16)).search(np.zeros((1, 5)), 2)


def test_max_pool_keeps_each_documents_best_passage_in_score_order() -> None:
    documents = np.array([4, 2, 4, 7, 2, 9])
    scores = np.array([0.9, 0.8, 0.7, 0.5, 0.4, 0.1])
    docs, best = max_pool(documents, scores, k=3)
    assert docs.tolist() == [4, 2, 7]
    assert best.tolist() == [0.9, 0.8, 0.5]
    docs, best = max_pool(documents, scores, k=10)
    assert docs.tolist() == [4, 2, 7, 9]


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory, tiny_bi_encoder_path: Path) -> PassageVectors:
    from evirank.score import BiEncoder

    folder = tmp_path_factory.mktemp("dense") / "vectors"
    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    return VectorBuilder(folder, scorer, "sentences:prepend", block_size=2).build(DOCS)


def expected_run(vectors: PassageVectors, model: Path, k: int) -> pd.DataFrame:
    """Every passage scored, each document's maximum, top k by (score desc, docno desc)."""
    from evirank.score import BiEncoder

    table = vectors.frame()
    query_vectors = BiEncoder(model, Runtime(device="cpu")).embed([q for _, q in QUERIES])
    passage_vectors = vectors.vectors(table["row"].to_numpy())
    rows = []
    for (qid, _), q in zip(QUERIES, query_vectors, strict=True):
        scored = table.assign(score=(passage_vectors @ q).astype(np.float32).astype(np.float64))
        best = scored.groupby("docno")["score"].max().reset_index()
        best = best.sort_values(["score", "docno"], ascending=False).head(k)
        rows += [(qid, d, s) for d, s in zip(best["docno"], best["score"], strict=True)]
    return pd.DataFrame(rows, columns=["qid", "docno", "score"])


@pytest.mark.parametrize("passage_depth", [None, 1])
def test_dense_retriever_is_max_pooled_exact_search(
    vectors: PassageVectors, tiny_bi_encoder_path: Path, passage_depth: int | None
) -> None:
    from evirank.score import BiEncoder

    k = 4
    retriever = DenseRetriever(
        vectors, BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")), k=k, passage_depth=passage_depth
    )
    run = retriever(make_topics(QUERIES))
    assert run.columns.tolist() == ["qid", "docno", "score", "rank", "query"]
    assert run.groupby("qid").size().tolist() == [k] * len(QUERIES)
    want = expected_run(vectors, tiny_bi_encoder_path, k)
    assert run[["qid", "docno"]].values.tolist() == want[["qid", "docno"]].values.tolist()
    np.testing.assert_allclose(run["score"], want["score"], atol=1e-5)


def test_dense_retriever_returns_every_document_when_k_exceeds_them(
    vectors: PassageVectors, tiny_bi_encoder_path: Path
) -> None:
    from evirank.score import BiEncoder

    run = DenseRetriever(vectors, BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")), k=50)(
        make_topics(QUERIES[:1])
    )
    assert sorted(run["docno"]) == sorted(d.docno for d in DOCS)


def test_dense_retriever_refuses_another_model(vectors: PassageVectors, tiny_bi_encoder_path: Path) -> None:
    from evirank.score import BiEncoder

    other = BiEncoder(tiny_bi_encoder_path, Runtime(max_length=16, device="cpu"))  # another fingerprint
    with pytest.raises(VectorsMismatchError, match="model"):
        DenseRetriever(vectors, other, k=3)(make_topics(QUERIES[:1]))


def test_dense_retriever_uses_any_passage_searcher(
    vectors: PassageVectors, tiny_bi_encoder_path: Path
) -> None:
    from evirank.score import BiEncoder

    class Recording:
        """An 'approximate' searcher: the exact one, recording its calls."""

        def __init__(self) -> None:
            self.inner = ExactSearcher(vectors.matrix)
            self.calls: list[int] = []

        def __len__(self) -> int:
            return len(self.inner)

        def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
            self.calls.append(k)
            return self.inner.search(queries, k)

    searcher = Recording()
    assert isinstance(searcher, PassageSearcher)
    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    run = DenseRetriever(vectors, scorer, k=2, searcher=searcher)(make_topics(QUERIES))
    assert searcher.calls and run.groupby("qid").size().tolist() == [2] * len(QUERIES)
    plain = DenseRetriever(vectors, BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu")), k=2)(
        make_topics(QUERIES)
    )
    pd.testing.assert_frame_equal(run, plain)
