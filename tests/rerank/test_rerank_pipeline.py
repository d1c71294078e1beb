"""The re-ranking pipeline as Python stages, and rerank() with its stage timings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rerank_cases import DOCS, TOPICS

from evirank.aggregate import Birch, MaxP, RerankTop, SumP
from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import DOCNO, QID, RANK, SCORE, TEXT, TITLE, make_topics
from evirank.io import read_run
from evirank.rerank import (
    STAGES,
    AddQueries,
    FetchText,
    Rerank,
    StageTimings,
    parse_aggregate,
    parse_segment,
    rerank,
)
from evirank.score import BiEncoder, CrossEncoder
from evirank.segment import Sentences, Whole, Windows
from evirank.segment.budget import passage_budget
from evirank.stage import Stage

TOPIC_FRAME = make_topics(list(TOPICS.items()))


def test_rerank_equals_the_composed_pipeline_and_times_every_stage(
    collection: dict[str, Path], tiny_cross_encoder_path: Path
) -> None:
    run = read_run(collection["run"])
    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    fetch = FetchText(corpus=collection["corpus"])
    result = rerank(
        run, topics=TOPIC_FRAME, fetch=fetch, segmenter=Sentences(), scorer=scorer, aggregator=MaxP(), depth=3
    )
    pipeline = AddQueries(TOPIC_FRAME) >> RerankTop(fetch >> Sentences() >> scorer >> MaxP(), depth=3)
    expected = pipeline(run)
    pd.testing.assert_frame_equal(result.run[[QID, DOCNO, SCORE, RANK]], expected[[QID, DOCNO, SCORE, RANK]])
    timed = result.timings.as_dict()
    assert list(timed) == [s for s in STAGES if s in timed]  # recorded in pipeline order
    assert {"text_fetch", "segmentation", "tokenisation", "model", "aggregation"} <= set(timed)
    assert result.timings["model"] > 0
    assert result.counts["documents_reranked"] == 3 * len(TOPICS)


def test_a_run_with_text_needs_no_fetch_and_one_without_says_so(
    collection: dict[str, Path], tiny_bi_encoder_path: Path
) -> None:
    run = AddQueries(TOPIC_FRAME)(read_run(collection["run"]))
    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    with pytest.raises(Exception, match="FetchText"):
        rerank(run, segmenter=Sentences(), scorer=scorer, aggregator=SumP())
    with_text = FetchText(corpus=collection["corpus"])(run)
    result = rerank(with_text, segmenter=Windows(5, 5), scorer=scorer, aggregator=SumP(), depth=2)
    assert "text_fetch" not in result.timings
    assert result.run.groupby(QID).size().min() == len(DOCS)


def test_specs_build_the_stages_they_name() -> None:
    assert isinstance(parse_segment("sentences"), Sentences)
    assert parse_segment("sentences:prepend").title == "prepend"
    windows = parse_segment("windows")
    assert (windows.length, windows.stride) == (150, 75)
    assert (parse_segment("windows:100:40").length, parse_segment("windows:100:40").stride) == (100, 40)
    assert isinstance(parse_segment("whole"), Whole)
    assert parse_segment("whole:skip").title == "skip"
    for bad in ("sentences:first", "windows:a", "windows:1:2:3", "paragraphs", "whole:first", "whole:a:b"):
        with pytest.raises(ValueError):
            parse_segment(bad)
    birch = parse_aggregate("birch")
    assert (birch.top_n, birch.alpha, birch.weights, birch.normalise) == (3, 0.5, (1.0, 0.5, 0.25), "minmax")
    assert parse_aggregate("birch", weights=[1, 0.2]).top_n == 2
    maxp = parse_aggregate("maxp")
    assert (maxp.alpha, maxp.normalise) == (0.0, "minmax")  # one default everywhere
    assert parse_aggregate("meanp", alpha=0.4).normalise == "minmax"
    assert parse_aggregate("sump", alpha=0.4, normalise="none").normalise == "none"
    for bad_spec, kwargs in (("maxp:2", {}), ("birch:x", {}), ("nope", {}), ("firstp", {"weights": [1.0]})):
        with pytest.raises(ValueError):
            parse_aggregate(bad_spec, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        parse_aggregate("birch:3", weights=[1.0, 0.5])


def test_long_sentences_are_cut_to_the_scorers_room_keeping_every_word(
    tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path
) -> None:
    cross = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu", max_length=32), query_max_tokens=8)
    tokenizer, room = passage_budget(cross)  # type: ignore[misc]
    assert room == 32 - 3 - 8
    assert passage_budget(BiEncoder(tiny_bi_encoder_path, Runtime(max_length=20)))[1] == 18  # type: ignore[index]
    assert passage_budget(MaxP()) is None
    segmenter = parse_segment("sentences:skip", tokenizer=tokenizer, max_tokens=room)
    text = "the cat sat on the mat and " * 6 + "the dog sat."
    pieces = segmenter.segments("", text)
    assert len(pieces) > 1
    assert " ".join(pieces).split() == text.split()
    assert all(len(tokenizer.tokenize(p)) <= room for p in pieces)


def test_stage_timings_add_up_and_print_a_table() -> None:
    timings = StageTimings()
    timings.add("model", 1.5)
    timings.add("model", 0.5)
    with timings.measure("aggregation"):
        pass
    assert timings["model"] == 2.0 and "aggregation" in timings
    table = timings.table().splitlines()
    assert table[0].split() == ["stage", "seconds", "share"]
    assert table[-1].startswith("total")


@pytest.mark.lucene
def test_fetch_from_an_index_and_the_bm25_pipeline_end_to_end(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    pytest.importorskip("pyserini")
    from evirank.lucene import Bm25, build_index

    index = tmp_path / "index"
    build_index(DOCS, index)
    run = read_run(collection["run"])
    from_index = FetchText(index=index)(run)
    from_corpus = FetchText(corpus=collection["corpus"])(run)
    pd.testing.assert_frame_equal(from_index, from_corpus)

    scorer = CrossEncoder(tiny_cross_encoder_path, Runtime(device="cpu"))
    fetched = Bm25(index, k=5) % 3 >> FetchText(index=index) >> Sentences() >> scorer >> Birch(top_n=2)
    bm25_text = Bm25(index, k=5, fetch_text=3) % 3 >> Sentences() >> scorer >> Birch(top_n=2)
    first = fetched(TOPIC_FRAME)
    assert first.groupby(QID).size().max() == 3
    pd.testing.assert_frame_equal(first, bm25_text(TOPIC_FRAME))
    assert {TITLE, TEXT}.isdisjoint(first.columns)

    # The command with BM25 as its first stage (no --run), timing it.
    out = tmp_path / "bm25-birch.txt"
    args = ["-q", "rerank", "--index", str(index), "--topics", str(collection["topics"]), "--k", "5"]
    args += [
        "--model",
        str(tiny_cross_encoder_path),
        "--device",
        "cpu",
        "--depth",
        "3",
        "--aggregate",
        "birch:2",
        "--alpha",
        "0.5",
        "--segment",
        "sentences",
    ]
    args += ["--output", str(out)]
    assert main(args) == 0
    record = json.loads(out.with_name("bm25-birch.txt.json").read_text())
    assert record["first_stage"]["bm25"]["k"] == 5 and record["timings_s"]["first_stage"] > 0
    written = read_run(out)
    head = written[written[RANK] <= 3].reset_index(drop=True)
    np.testing.assert_allclose(head[SCORE], first.sort_values([QID, RANK])[SCORE].to_numpy(), rtol=1e-9)


class FirstPassageOnly(Stage):
    """A stand-in for a cascade's pruning: keeps each document's first passage."""

    timing_name = "pruning"

    def __init__(self) -> None:
        self.seen = 0

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        self.seen += len(frame)
        return frame[frame["pid"] == 0].reset_index(drop=True)


class PassageLength(Stage):
    """A model-free scorer: the passage's length; remembers what it scored."""

    def __init__(self) -> None:
        self.scored: list[pd.DataFrame] = []

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        self.scored.append(frame)
        return frame.assign(score=frame[TEXT].str.len().astype(float))


def test_stages_between_segmentation_and_scoring_see_every_passage_and_are_timed(
    collection: dict[str, Path],
) -> None:
    run = read_run(collection["run"])
    prune, scorer = FirstPassageOnly(), PassageLength()
    pipeline = Rerank(
        Sentences(),
        scorer,
        MaxP(),
        fetch=FetchText(corpus=collection["corpus"]),
        depth=3,
        passage_stages=[prune],
        topics=TOPIC_FRAME,
    )
    result = pipeline.run(run)
    assert prune.seen == result.counts["passages"] > result.counts["passages_scored"]
    assert (scorer.scored[0]["pid"] == 0).all()
    assert list(result.timings.as_dict()) == ["text_fetch", "segmentation", "pruning", "model", "aggregation"]
    # the tail: documents below the depth keep their first-stage order under the re-ranked ones
    for qid, ranked in result.run.groupby(QID):
        original = run[run[QID] == qid].sort_values(RANK)[DOCNO].tolist()
        assert ranked[DOCNO].tolist()[3:] == original[3:]


def test_the_pipeline_object_is_a_stage_and_equals_rerank_and_the_expression(
    collection: dict[str, Path],
) -> None:
    run = read_run(collection["run"])
    fetch = FetchText(corpus=collection["corpus"])
    pipeline = Rerank(Sentences(), PassageLength(), Birch(), fetch=fetch, depth=2, topics=TOPIC_FRAME)
    as_stage = pipeline(run)
    as_call = rerank(
        run,
        topics=TOPIC_FRAME,
        fetch=fetch,
        segmenter=Sentences(),
        scorer=PassageLength(),
        aggregator=Birch(),
        depth=2,
    ).run
    expression = (
        AddQueries(TOPIC_FRAME) >> RerankTop(fetch >> Sentences() >> PassageLength() >> Birch(), 2)
    )(run)
    pd.testing.assert_frame_equal(as_stage, as_call)
    pd.testing.assert_frame_equal(as_stage[[QID, DOCNO, SCORE, RANK]], expression[[QID, DOCNO, SCORE, RANK]])
    assert "Sentences(" in repr(pipeline) and "Birch(" in repr(pipeline)


def test_the_service_runs_the_same_pipeline_object(collection: dict[str, Path]) -> None:
    from evirank.serve.searcher import Searcher

    docs = {d.docno: d for d in DOCS}
    run = read_run(collection["run"])
    qid = sorted(TOPICS)[0]

    def retrieve(topics: pd.DataFrame, depth: int) -> pd.DataFrame:
        first = run[run[QID] == qid].assign(qid="q")
        return first[first[RANK] <= depth].reset_index(drop=True)

    searcher = Searcher(retrieve, Sentences(), PassageLength(), MaxP(), docs.get)
    assert isinstance(searcher.pipeline, Rerank)
    served = searcher.search(TOPICS[qid], top=3, depth=3)
    direct = rerank(
        run[run[QID] == qid],
        topics=TOPIC_FRAME,
        fetch=FetchText(docs=docs),
        segmenter=Sentences(),
        scorer=PassageLength(),
        aggregator=MaxP(),
        depth=3,
    ).run.head(3)
    assert [c.docno for c in served.candidates] == direct[DOCNO].tolist()
    assert [c.score for c in served.candidates] == pytest.approx(direct[SCORE].tolist())
