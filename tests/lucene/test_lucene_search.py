"""Bm25 / Rm3 stages, LuceneDocs, and the index/search commands, on the tiny inline corpus."""

from __future__ import annotations

import dataclasses
import json
import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from evirank.cli import main
from evirank.errors import ColumnsError
from evirank.frames import DOCNO, QID, QUERY, RANK, SCORE, TEXT, TITLE, Document, make_topics, sort_run
from evirank.lucene import Bm25, Bm25Config, LuceneDocs, Rm3
from evirank.lucene.java import VECTOR_MODULE_OPTION

pytestmark = pytest.mark.lucene

TOPICS = make_topics(
    [
        ("2", "purring cats"),
        ("10", "parrots mimic speech"),
        ("7", "hamster cheek pouches"),
        ("3", "zebra"),  # matches nothing
    ]
)


def test_config_is_frozen_and_validated() -> None:
    config = Bm25Config(rm3=Rm3())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.k1 = 1.2  # type: ignore[misc]
    for bad in ({"k": 0}, {"b": 1.5}, {"threads": 0}, {"fetch_text": -1}):
        with pytest.raises(ValueError):
            Bm25Config(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fb_docs"):
        Rm3(fb_docs=0)
    assert Bm25("nowhere", rm3=Rm3(fb_docs=5)).config.rm3 == Rm3(fb_docs=5, fb_terms=10, original_weight=0.5)


def test_jvm_is_java_21_or_newer_without_the_vector_module_option(tiny_index: Path) -> None:
    Bm25(tiny_index, k=1)(TOPICS.head(1))  # starts the JVM in this process
    import jnius_config

    from evirank.lucene.java import autoclass

    version = str(autoclass("java.lang.System").getProperty("java.version"))
    assert int(version.split(".")[0]) >= 21
    assert VECTOR_MODULE_OPTION not in jnius_config.get_options()
    assert any(o.startswith("-Xmx") for o in jnius_config.get_options())


def test_bm25_returns_a_sorted_run_with_the_query(tiny_index: Path) -> None:
    run = Bm25(tiny_index)(TOPICS)
    assert run.columns.tolist() == [QID, DOCNO, SCORE, RANK, QUERY]
    pd.testing.assert_frame_equal(run, sort_run(run)[run.columns])
    tops = run[run[RANK] == 1].set_index(QID)[DOCNO].to_dict()
    assert tops == {"2": "cats", "7": "notitle", "10": "dup-a"}
    assert "3" not in set(run[QID])  # no document matches "zebra"
    assert run.groupby(QID)[SCORE].apply(lambda s: s.is_monotonic_decreasing).all()
    assert (run[QUERY] == run[QID].map(TOPICS.set_index(QID)[QUERY])).all()


def test_tied_documents_come_out_docno_ascending_whatever_the_index_order(tiny_index: Path) -> None:
    run = Bm25(tiny_index)(TOPICS[TOPICS[QID] == "10"])
    assert run[DOCNO].tolist()[:2] == ["dup-a", "dup-b"]  # indexed as dup-b first, on two threads


def test_k_limits_hits_and_cutoff_composes(tiny_index: Path) -> None:
    assert Bm25(tiny_index, k=1)(TOPICS).groupby(QID).size().max() == 1
    piped = (Bm25(tiny_index) % 1)(TOPICS)
    assert piped[DOCNO].tolist() == Bm25(tiny_index, k=1)(TOPICS)[DOCNO].tolist()


def test_a_stage_is_picklable_and_usable_from_several_threads(tiny_index: Path) -> None:
    stage = Bm25(tiny_index, k=2)
    expected = stage(TOPICS)
    copy = pickle.loads(pickle.dumps(stage))
    assert copy.config == stage.config
    pd.testing.assert_frame_equal(copy(TOPICS), expected)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(stage, [TOPICS] * 4))
    for run in runs:
        pd.testing.assert_frame_equal(run, expected)


def test_close_releases_the_searcher_and_the_next_use_reopens_it(tiny_index: Path) -> None:
    with Bm25(tiny_index, k=1) as stage:
        first = stage(TOPICS)
    assert stage._searcher is None
    pd.testing.assert_frame_equal(stage(TOPICS), first)
    stage.close()
    with LuceneDocs(tiny_index) as docs:
        assert docs["dogs"].title == "Dogs"
    assert docs._searcher is None


def test_batched_threads_give_the_same_run_as_sequential(tiny_index: Path) -> None:
    one = Bm25(tiny_index, threads=1)(TOPICS)
    two = Bm25(tiny_index, threads=2)(TOPICS)
    pd.testing.assert_frame_equal(one, two)


def test_fetch_text_fills_title_and_text_only_for_the_top_hits(tiny_index: Path) -> None:
    run = Bm25(tiny_index, fetch_text=1)(TOPICS)
    assert run.columns.tolist()[-2:] == [TITLE, TEXT]
    top = run[run[RANK] == 1].set_index(DOCNO)
    assert top.loc["cats", TITLE] == "Cats" and top.loc["cats", TEXT].startswith("Cats purr")
    assert top.loc["notitle", TITLE] == ""
    assert run.loc[run[RANK] > 1, [TITLE, TEXT]].isna().all().all()


def test_rm3_runs_and_changes_the_scores(tiny_index: Path) -> None:
    bm25 = Bm25(tiny_index)(TOPICS)
    rm3 = Bm25(tiny_index, rm3=Rm3(fb_docs=2, fb_terms=5))(TOPICS)
    assert rm3.columns.tolist() == bm25.columns.tolist()
    assert set(rm3[QID]) == set(bm25[QID])
    merged = bm25.merge(rm3, on=[QID, DOCNO], suffixes=("_bm25", "_rm3"))
    assert not (merged["score_bm25"] == merged["score_rm3"]).all()


def test_bad_topics_are_refused(tiny_index: Path) -> None:
    stage = Bm25(tiny_index)
    with pytest.raises(ColumnsError, match="query"):
        stage(pd.DataFrame({QID: ["1"]}))
    with pytest.raises(ValueError, match="repeated qids"):
        stage(make_topics([("1", "cats"), ("1", "dogs")]))
    empty = stage(make_topics([]))
    assert empty.empty and empty.columns.tolist() == [QID, DOCNO, SCORE, RANK, QUERY]


def test_empty_and_stopword_only_queries_retrieve_nothing_and_a_warning_names_them(
    tiny_index: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topics = make_topics([("1", ""), ("2", "the of and"), ("3", "( ) * ? : ~ ^ AND"), ("4", "cats")])
    for threads in (1, 2):
        caplog.clear()
        run = Bm25(tiny_index, rm3=Rm3(), threads=threads)(topics)
        assert set(run[QID]) == {"4"}
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 1
        assert "3 of 4 queries retrieved no document and are absent from the run" in warned[0]
        assert "2 ('the of and')" in warned[0] and "stop word" in warned[0]


def test_missing_index_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="evirank index"):
        Bm25(tmp_path / "nope")(TOPICS)


def test_lucene_docs_returns_title_and_text_and_names_missing_ids(tiny_index: Path) -> None:
    docs = LuceneDocs(tiny_index)
    got = docs.get(["dogs", "notitle", "dogs"])
    assert got == {
        "dogs": Document("dogs", "Dogs", "Dogs bark at strangers and wag their tails at friends."),
        "notitle": Document("notitle", "", "Hamsters store food in their cheek pouches."),
    }
    assert len(docs) == 6 and docs["cats"].title == "Cats"
    with pytest.raises(KeyError, match="'unicorn'"):
        docs.get(["cats", "unicorn"])


def write_beir(folder: Path, docs: list[Document]) -> Path:
    folder.mkdir()
    lines = [json.dumps({"_id": d.docno, "title": d.title, "text": d.text}) for d in docs]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in TOPICS.itertuples(index=False))
    )
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n2\tcats\t1\n10\tdup-a\t1\n")
    return folder


def test_index_and_search_commands_write_an_index_a_run_and_its_config(
    tmp_path: Path, tiny_corpus: list[Document]
) -> None:
    beir = write_beir(tmp_path / "beir", tiny_corpus)
    index, run_path = tmp_path / "idx", tmp_path / "runs" / "rm3.txt"
    assert main(["-q", "index", "--corpus", str(beir), "--index", str(index)]) == 0
    argv = ["-q", "search", "--index", str(index), "--topics", str(beir), "--split", "test"]
    argv += ["--output", str(run_path), "--rm3", "2", "5", "0.6", "--k", "3", "--threads", "2"]
    assert main(argv) == 0
    lines = run_path.read_text().splitlines()
    assert {line.split()[0] for line in lines} == {"2", "10"}  # only the queries of qrels/test.tsv
    assert lines[0].split()[2:4] == ["cats", "1"] and lines[0].endswith(" bm25+rm3")
    meta = json.loads((tmp_path / "runs" / "rm3.txt.json").read_text())
    assert meta["config"]["rm3"] == {"fb_docs": 2, "fb_terms": 5, "original_weight": 0.6}
    assert meta["index_info"]["documents"] == 6
    assert main(argv) == 2  # the run exists: refused without --overwrite
    assert main(["-q", "index", "--corpus", str(beir), "--index", str(index)]) == 2


def test_search_command_rejects_a_partial_rm3(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert main(["search", "--index", "i", "--topics", "t", "--output", "o", "--rm3", "10", "10"]) == 2
    assert "--rm3: takes no value or three (FB_DOCS FB_TERMS ORIG_WEIGHT)" in caplog.text
