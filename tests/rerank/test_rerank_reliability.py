"""``evirank rerank`` never writes a wrong or partial answer (no shared query, failing outputs, huge text)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from test_rerank_cli import rerank_args

import evirank.rerank.pipeline as pipeline
from evirank.cli import main
from evirank.segment import Sentences, Windows
from evirank.segment.base import DEFAULT_MAX_PASSAGES


def test_topics_sharing_no_query_with_the_run_are_an_error(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topics = tmp_path / "unrelated.tsv"
    topics.write_text("901\tsomething else\n902\tand more\n")
    out = tmp_path / "run.txt"
    args = rerank_args(collection, tiny_cross_encoder_path, out)
    args[args.index("--topics") + 1] = str(topics)
    assert main(args) == 2
    assert "no query of the run has a topic" in caplog.text
    assert not out.exists() and not out.with_name("run.txt.json").exists()


def test_a_partial_overlap_says_how_many_queries_were_dropped(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topics = tmp_path / "one.tsv"
    topics.write_text("1\twhere did the cat sit\n")
    args = rerank_args(collection, tiny_cross_encoder_path, tmp_path / "run.txt")
    args[args.index("--topics") + 1] = str(topics)
    assert main(args) == 0
    assert "2 of the run's 3 quer(ies) have no topic" in caplog.text


def test_a_failing_passages_file_leaves_neither_the_run_nor_its_record(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", str(tmp_path / "p.parquet"))

    monkeypatch.setattr(pipeline, "save_passages", disk_full)
    out = tmp_path / "run.txt"
    args = rerank_args(
        collection, tiny_cross_encoder_path, out, "--save-passages", str(tmp_path / "p.parquet")
    )
    assert main(args) == 2
    names = sorted(p.name for p in tmp_path.iterdir() if p.name != "data" and ".sqlite" not in p.name)
    assert names == []  # the score store is kept (it is the checkpoint); no run, no record, no temporary


def test_outputs_are_checked_for_writability_before_the_work(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "afile").write_text("x")
    args = rerank_args(collection, tiny_cross_encoder_path, tmp_path / "afile" / "run.txt")
    assert main(args) == 2
    assert "cannot write this output" in caplog.text
    assert "re-ranking" not in caplog.text  # nothing was scored


def test_embeddings_reused_from_the_store_are_counted(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    store = tmp_path / "scores.sqlite"
    first = rerank_args(collection, tiny_bi_encoder_path, tmp_path / "a.txt", "--scorer", "bi")
    assert main([*first, "--scores", str(store)]) == 0
    # new query texts: no (query, passage) pair is in the store, but every passage embedding is
    topics = tmp_path / "new.tsv"
    topics.write_text("1\tcat mat\n2\tquery evidence\n3\tvirus\n")
    second = rerank_args(collection, tiny_bi_encoder_path, tmp_path / "b.txt", "--scorer", "bi")
    second[second.index("--topics") + 1] = str(topics)
    assert main([*second, "--scores", str(store)]) == 0
    counts = json.loads((tmp_path / "b.txt.json").read_text())["counts"]
    assert counts["scorer_cached"] == 0
    assert counts["scorer_embeddings_cached"] > 0
    assert counts["scorer_computed"] == 3  # only the three new queries ran through the model


def test_a_huge_document_keeps_its_first_max_passages_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import pandas as pd

    text = " ".join(f"Sentence number {i} is here." for i in range(50_000))  # about 1.4 MB
    run = pd.DataFrame({"qid": ["1"], "docno": ["huge"], "score": [1.0], "text": [text]})
    with caplog.at_level(logging.WARNING):
        passages = Sentences(title="skip").with_max_passages(20)(run)
    assert passages["text"].tolist()[:2] == ["Sentence number 0 is here.", "Sentence number 1 is here."]
    assert len(passages) == 20
    assert "document huge is long" in caplog.text and "first 20 segments" in caplog.text
    windows = Windows(4, 2).with_max_passages(3)(run)
    assert windows["text"].tolist() == [
        "Sentence number 0 is",
        "0 is here. Sentence",
        "here. Sentence number 1",
    ]
    assert Sentences().max_passages == DEFAULT_MAX_PASSAGES


def test_the_cli_default_of_max_passages_is_the_library_default() -> None:
    from evirank.config import SETTINGS

    CLI_DEFAULT = SETTINGS.default("max_passages")

    assert CLI_DEFAULT == DEFAULT_MAX_PASSAGES
