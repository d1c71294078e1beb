"""The Searcher seam: ranking by evidence, evidence spans, top, depth and k, deadlines, locking."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

from evirank.frames import DOCNO, QID, SCORE, TEXT, Document, make_run
from evirank.rerank.timing import STAGES
from evirank.segment.spans import passage_span
from evirank.serve.searcher import DocumentNotFound, Searcher, SearchTimeout, stage_retriever
from evirank.serve.testing import ToyIndex, ToyMaxP, ToyScorer, ToySentences, toy_searcher
from evirank.stage import Stage

DOCS = (
    Document("a", "Alpha", "Nothing relevant here. Still nothing."),
    Document("b", "Beta", "Filler text. The key sentence is here. More filler."),
    Document("c", "Gamma", "Key key key words everywhere."),
)


class TableScorer(Stage):
    """Scores passages from a fixed table of text -> score (0 when absent)."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(**{SCORE: [self.table.get(t, 0.0) for t in frame[TEXT]]})


def retrieve_fixed(scores: dict[str, float], docs: tuple[Document, ...] = DOCS):
    by_id = {d.docno: d for d in docs}
    calls: list[int] = []

    def retrieve(topics: pd.DataFrame, k: int) -> pd.DataFrame:
        calls.append(k)
        run = make_run([(topics[QID].iloc[0], d, s) for d, s in scores.items()])
        run = run[run["rank"] <= k]
        return run.assign(
            title=[by_id[d].title for d in run[DOCNO]], text=[by_id[d].text for d in run[DOCNO]]
        )

    retrieve.calls = calls  # type: ignore[attr-defined]
    return retrieve


def test_candidates_are_ranked_by_evidence_not_by_first_stage() -> None:
    retrieve = retrieve_fixed({"c": 9.0, "b": 5.0, "a": 1.0})
    scorer = TableScorer({"The key sentence is here.": 0.9, "Key key key words everywhere.": 0.4})
    result = Searcher(retrieve, ToySentences(), scorer, ToyMaxP()).search("key", top=3, depth=3)
    assert [c.docno for c in result.candidates] == ["b", "c", "a"]
    assert [c.rank for c in result.candidates] == [1, 2, 3]
    top = result.candidates[0]
    assert (top.first_stage_rank, top.first_stage_score, top.score) == (2, 5.0, 0.9)
    assert top.title == "Beta"


def test_evidence_is_best_first_and_located_in_the_text() -> None:
    retrieve = retrieve_fixed({"b": 5.0})
    scorer = TableScorer({"The key sentence is here.": 0.9, "More filler.": 0.2, "Filler text.": 0.1})
    result = Searcher(retrieve, ToySentences(), scorer, ToyMaxP(), evidence=2).search("key", 1, 1)
    (cand,) = result.candidates
    assert [e.text for e in cand.evidence] == ["The key sentence is here.", "More filler."]
    assert [e.pid for e in cand.evidence] == [1, 2]
    for ev in cand.evidence:
        assert ev.start is not None and ev.end is not None
        assert cand.text[ev.start : ev.end] == ev.text


def spied(scores: dict[str, float]) -> tuple[Searcher, list[int], list[set[str]]]:
    """A searcher over ``scores``, with the k of each retrieval and the documents of each re-ranking."""
    retrieve = retrieve_fixed(scores)
    seen: list[set[str]] = []

    class Spy(ToySentences):
        def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
            seen.append(set(frame[DOCNO]))
            return super().transform(frame)

    return Searcher(retrieve, Spy(), ToyScorer(), ToyMaxP()), retrieve.calls, seen  # type: ignore[attr-defined]


def test_depth_bounds_retrieval_and_top_bounds_the_answer() -> None:
    searcher, retrieved, seen = spied({"a": 3.0, "b": 2.0, "c": 1.0})
    result = searcher.search("key", top=1, depth=2)
    assert retrieved == [2]  # k: the depth
    assert seen == [{"a", "b"}]
    assert (result.top, result.depth, result.k, len(result.candidates)) == (1, 2, 2, 1)
    assert result.passages == 5  # 2 sentences in a, 3 in b


def test_k_smaller_than_depth_retrieves_and_reranks_k() -> None:
    searcher, retrieved, seen = spied({"a": 3.0, "b": 2.0, "c": 1.0})
    result = searcher.search("key", depth=3, k=2)
    assert retrieved == [2] and seen == [{"a", "b"}]
    assert (result.top, result.depth, result.k) == (2, 2, 2)  # top: every document re-ranked
    assert {c.docno for c in result.candidates} == {"a", "b"}


def test_documents_retrieved_beyond_depth_are_not_reranked_or_returned() -> None:
    searcher, retrieved, seen = spied({"a": 3.0, "b": 2.0, "c": 1.0})
    result = searcher.search("key", top=3, depth=1, k=3)
    assert retrieved == [3] and seen == [{"a"}]
    assert (result.top, result.depth, result.k) == (1, 1, 3)
    assert [c.docno for c in result.candidates] == ["a"]


def test_top_is_capped_by_depth_and_k() -> None:
    searcher, _, _ = spied({"a": 3.0, "b": 2.0, "c": 1.0})
    assert searcher.search("key", top=10, depth=2).top == 2
    assert len(searcher.search("key", top=10, depth=3, k=2).candidates) == 2


def test_first_stage_without_text_is_completed_from_the_document_lookup() -> None:
    index = ToyIndex(DOCS)

    def retrieve(topics: pd.DataFrame, depth: int) -> pd.DataFrame:
        return make_run([("q", "b", 1.0)])  # no title, no text

    result = Searcher(retrieve, ToySentences(), ToyScorer(), ToyMaxP(), index.lookup).search("key", 1, 1)
    assert result.candidates[0].title == "Beta"
    assert result.candidates[0].evidence[0].text == "The key sentence is here."


def test_no_hits_gives_an_empty_answer_with_timings() -> None:
    result = toy_searcher().search("zebra xylophone", top=5, depth=5)
    assert result.candidates == ()
    assert result.timings["total"] >= result.timings["first_stage"] >= 0


def test_timings_cover_every_stage() -> None:
    result = toy_searcher(delay_s=0.05).search("cats", top=2, depth=3)
    # the stage names of every re-ranking (evirank rerank's record too), then queueing and the total
    assert tuple(result.timings) == (*(s for s in STAGES if s != "write"), "wait", "total")
    assert result.timings["model"] >= 50  # a scorer without its own counters: all of its time
    assert result.timings["segmentation"] > 0 and result.timings["aggregation"] > 0
    assert result.timings["total"] >= sum(v for k, v in result.timings.items() if k != "total") * 0.99


@pytest.mark.parametrize(("top", "depth", "k"), [(0, 5, None), (1, 0, None), (1, 5, 0)])
def test_a_top_depth_or_k_below_one_is_refused(top: int, depth: int, k: int | None) -> None:
    with pytest.raises(ValueError, match="top, depth and k must be at least 1"):
        toy_searcher().search("cats", top, depth, k=k)


def test_empty_query_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        toy_searcher().search("   ", top=1, depth=1)


def test_document_lookup_and_unknown_docno() -> None:
    searcher = toy_searcher()
    assert searcher.document("d2").title == "Dogs and their bark"
    with pytest.raises(DocumentNotFound, match="nope"):
        searcher.document("nope")
    with pytest.raises(DocumentNotFound):
        Searcher(ToyIndex().retrieve, ToySentences(), ToyScorer(), ToyMaxP()).document("d1")


def test_a_passed_deadline_stops_the_search_before_the_model() -> None:
    searcher = toy_searcher()
    with pytest.raises(SearchTimeout):
        searcher.search("cats", 1, 2, deadline=time.monotonic() - 1)
    assert searcher.scorer.calls == 0  # type: ignore[attr-defined]


def test_a_search_waiting_for_a_busy_model_gives_up_at_its_deadline() -> None:
    searcher = toy_searcher(delay_s=1.5)
    slow = threading.Thread(target=searcher.search, args=("cats", 1, 2))
    slow.start()
    time.sleep(0.2)  # the first search now holds the model
    began = time.monotonic()
    # a deadline long enough for the stages before the model on a busy machine, short of the model
    with pytest.raises(SearchTimeout, match="waiting for the scoring stage"):
        searcher.search("dogs", 1, 2, deadline=time.monotonic() + 0.4)
    assert time.monotonic() - began < 1.0
    slow.join()
    assert searcher.scorer.calls == 1  # type: ignore[attr-defined]


def test_model_calls_never_overlap_and_concurrent_answers_equal_sequential_ones() -> None:
    searcher = toy_searcher(delay_s=0.02)
    queries = ["cats purr", "dogs bark", "ocean currents", "pets at home", "cats", "dogs"] * 3
    expected = {q: searcher.search(q, 3, 5).candidates for q in set(queries)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda q: searcher.search(q, 3, 5).candidates, queries))
    assert answers == [expected[q] for q in queries]
    assert searcher.scorer.max_concurrent == 1  # type: ignore[attr-defined]


def test_pieces_declaring_thread_safety_run_concurrently() -> None:
    scorer = ToyScorer(delay_s=0.1)
    scorer.thread_safe = True  # type: ignore[attr-defined]
    index = ToyIndex()
    searcher = Searcher(index.retrieve, ToySentences(), scorer, ToyMaxP(), index.lookup)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda q: searcher.search(q, 1, 2), ["cats", "dogs", "ocean", "pets"]))
    assert scorer.max_concurrent > 1


def test_stage_retriever_builds_the_first_stage_per_depth() -> None:
    depths: list[int] = []

    def make(depth: int):
        depths.append(depth)
        return lambda topics: make_run([("q", "d1", 1.0)])

    retrieve = stage_retriever(make)
    assert retrieve(pd.DataFrame({"qid": ["q"], "query": ["x"]}), 7)["docno"].tolist() == ["d1"]
    assert depths == [7]


@pytest.mark.parametrize(
    ("text", "passage", "title", "expected"),
    [
        ("One. Two three.", "Two three.", "", (5, 15)),
        ("One.\n Two   three.", "Two three.", "", (6, 18)),
        ("Body sentence.", "A Title Body sentence.", "A Title", (0, 14)),
        ("Body sentence.", "A Title Body sentence.", "A   Title ", (0, 14)),
        ("Body sentence.", "Something else.", "", None),
        ("Body.", "   ", "", None),
        ("a+b (c) [d]?", "(c) [d]?", "", (4, 12)),
    ],
)
def test_passages_are_found_despite_whitespace_and_titles(
    text: str, passage: str, title: str, expected: tuple[int, int] | None
) -> None:
    where, start, end = passage_span(passage, title, text)
    assert (None if where != "text" else (start, end)) == expected


def test_warm_up_opens_the_first_stage_and_calls_the_model_once() -> None:
    searcher = toy_searcher()
    assert searcher.warm_up("zebra") >= 0  # no hit for this query, yet the model is called
    assert searcher.scorer.calls == 1  # type: ignore[attr-defined]
