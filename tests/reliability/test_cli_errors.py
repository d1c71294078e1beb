"""Bad inputs end in evirank's own one-line error naming the file and what was expected, never a traceback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evirank.cli import interrupted_message, main
from evirank.errors import InputFormatError, InputPathError
from evirank.io import read_corpus, read_qrels, read_topics
from evirank.io.corpus import load_texts

RUN = "1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n"


def _error(caplog: pytest.LogCaptureFixture) -> str:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None  # one line, no traceback
    return errors[0].getMessage()


def test_qrels_cut_to_qid_iter_docno_are_refused_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "q3"
    path.write_text("1 0 31715818\n3 0 14717500\n")  # TREC qrels without the label column
    with pytest.raises(InputFormatError, match=r"q3:1: .*without their label column"):
        read_qrels(path)
    path.write_text("1 d7 1\n3 31715818 14717500\n")  # document ids where labels belong
    with pytest.raises(InputFormatError, match=r"q3:2: .*the label 14717500, which looks like a document id"):
        read_qrels(path)
    path.write_text("1 d7 1\n3 d8 x\n")
    with pytest.raises(InputFormatError, match=r"q3:2: expected an integer relevance label"):
        read_qrels(path)
    path.write_text("1 d7 2\n3 d8 -1\n")  # the accepted 3-column layout
    assert read_qrels(path)["label"].tolist() == [2, -1]


@pytest.mark.parametrize("flag", ["--qrels", "--run"])
def test_a_folder_given_as_an_input_file_is_a_clear_error(
    tmp_path: Path, flag: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "q.txt").write_text("1 0 d1 1\n")
    (tmp_path / "r.txt").write_text(RUN)
    args = {"--qrels": str(tmp_path / "q.txt"), "--run": str(tmp_path / "r.txt"), flag: str(tmp_path)}
    assert main(["-q", "evaluate", *[x for kv in args.items() for x in kv]]) == 2
    message = _error(caplog)
    assert f"{tmp_path}: expected a" in message and message.endswith("found a folder")


def test_tune_qrels_and_rerank_run_folders_are_clear_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(InputPathError, match="expected a qrels file"):
        read_qrels(tmp_path)
    (tmp_path / "t.tsv").write_text("1\tcats\n")
    args = ["-q", "rerank", "--run", str(tmp_path), "--topics", str(tmp_path / "t.tsv")]
    args += ["--corpus", str(tmp_path / "c.jsonl"), "--scorer", "bi", "--output", str(tmp_path / "o.txt")]
    assert main(args) == 2
    assert "expected a TREC run file, found a folder" in _error(caplog)


def test_a_score_store_that_is_a_folder_fails_before_any_work(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "r.txt").write_text(RUN)
    (tmp_path / "t.tsv").write_text("1\tcats\n")
    args = ["-q", "rerank", "--run", str(tmp_path / "r.txt"), "--topics", str(tmp_path / "t.tsv")]
    args += ["--corpus", str(tmp_path / "c.jsonl"), "--scorer", "bi", "--output", str(tmp_path / "o.txt")]
    assert main([*args, "--scores", str(tmp_path)]) == 2
    # a folder is a Parquet-shard store: an empty one or one with store.json, never another folder
    assert "expected a score store (a SQLite file, or a folder of Parquet shards), found a folder" in _error(
        caplog
    )
    assert not (tmp_path / "o.txt").exists()


def test_negative_digits_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--qrels", "q", "--run", "r", "--digits", "-1"])
    assert exit_info.value.code == 2
    assert "--digits: expected an integer from 0 to" in capsys.readouterr().err


def test_ctrl_c_tells_what_a_rerun_does_per_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import evirank.cli.index as index_cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(index_cli, "run", interrupted)
    assert main(["index", "--corpus", "c", "--index", str(tmp_path / "i")]) == 130
    assert "a rerun starts over" in caplog.text and "resumes" not in caplog.text
    assert "resumes" in interrupted_message("rerank") and "--resume" in interrupted_message("train")


def test_an_interrupted_index_embed_says_a_complete_index_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    import evirank.cli.index as index_cli
    from evirank.lucene.index import INFO_FILE

    index = tmp_path / "i"

    def interrupted_while_embedding(args: object) -> int:
        index.mkdir()
        (index / INFO_FILE).write_text(json.dumps({"documents": 1}))
        raise KeyboardInterrupt

    monkeypatch.setattr(index_cli, "run", interrupted_while_embedding)
    assert main(["index", "--corpus", "c", "--index", str(index), "--embed"]) == 130
    assert "the index is complete and kept" in caplog.text and "nothing was written" not in caplog.text
    assert "embeds the rest" in interrupted_message("embed")


def test_json_errors_are_worded_once(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a", "text": "unterminated}\n')
    with pytest.raises(InputFormatError) as info:
        list(read_corpus(path))
    assert "at at" not in str(info.value) and "starting at column" in str(info.value)
    path.write_text('{"_id": "a", "text": ' + "[" * 100_000 + "\n")
    with pytest.raises(InputFormatError, match=r"c.jsonl:1"):
        list(read_corpus(path))


def test_a_trec_topic_without_its_closing_tag_warns_with_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t.trec"
    path.write_text("<top>\n<num> Number: 1\n<title> cats\n\n<top>\n<num> Number: 2\n<title> dogs\n")
    with caplog.at_level(logging.WARNING):
        topics = read_topics(path)
    assert topics["qid"].tolist() == ["1", "2"]
    assert f"{path}:1: this <top> is not closed by </top> before the next <top> on line 5" in caplog.text
    assert f"{path}:5: this <top> is not closed by </top> at the end of the file" in caplog.text


def test_a_skipped_empty_document_is_named_with_its_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a", "text": "cats"}\n{"_id": "b", "text": "  "}\n')
    with caplog.at_level(logging.WARNING):
        docs = list(read_corpus(path, empty="skip"))
    assert [d.docno for d in docs] == ["a"]
    assert f"{path}:2: skipped a document with neither title nor text" in caplog.text


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (
            ['{"_id": "a", "text": "x"}', '{"_id": "a", "text": "y"}', '{"_id": "b", "text": "z"}'],
            r":2: .*unique",
        ),
        (['{"_id": "a", "text": "x"}', '{"_id": "b", "text": "z"}', '{"_id": "c" "text"}'], r":3: .*JSON"),
    ],
)
def test_rerank_corpus_reads_under_the_index_rule(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFormatError, match=message):
        load_texts(path, ["a"])  # the wanted document comes first: the whole file is still checked
    with pytest.raises(InputFormatError, match=message):
        list(read_corpus(path, empty="skip"))  # what evirank index reads


def test_evaluating_a_run_that_shares_no_query_with_the_qrels_is_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "q.txt").write_text("7 0 d1 1\n8 0 d2 1\n")
    (tmp_path / "r.txt").write_text(RUN)
    assert main(["-q", "evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt")]) == 2
    assert "no query of this run is judged" in _error(caplog)


def test_a_folder_that_is_not_a_model_is_a_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from evirank.score import CrossEncoder

    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(InputPathError, match=r"expected a model folder with config\.json"):
        CrossEncoder(str(tmp_path)).passage_budget()
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(InputFormatError, match="a Hugging Face model folder"):
        CrossEncoder(str(tmp_path)).passage_budget()


def test_a_file_given_as_an_index_is_a_clear_error(tmp_path: Path) -> None:
    from evirank.lucene.index import check_index

    (tmp_path / "idx").write_text("x")
    with pytest.raises(InputFormatError, match="expected an index folder"):
        check_index(tmp_path / "idx")


def test_an_unforeseen_error_is_one_line_and_minus_vv_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import evirank.cli.index as index_cli

    def broken(args: object) -> int:
        raise TypeError("something unforeseen")

    monkeypatch.setattr(index_cli, "run", broken)
    assert main(["-q", "index", "--corpus", "c", "--index", str(tmp_path / "i")]) == 2
    assert "something unforeseen (TypeError; run again with -vv" in _error(caplog)
    caplog.clear()
    assert main(["-vv", "index", "--corpus", "c", "--index", str(tmp_path / "i")]) == 2
    assert any(r.exc_info for r in caplog.records)
