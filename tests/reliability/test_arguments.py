"""Public arguments are checked at the door, by one layer the Python API, the commands and the files
share: a bad value ends in evirank's own error naming the argument (or the flag, or the file and
line), before any model work; never in a silently wrong answer or an error from deep inside."""

from __future__ import annotations

import inspect
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

import evirank
from evirank.cli import main
from evirank.errors import EvirankError, InputFormatError
from evirank.io import read_topics
from evirank.ranker import RankedDocument, Ranker

DOCS = ["Cats purr when they are content.", "Dogs bark at night.", "A vaccine trains immune cells."]
SURROGATE = "cats \udc00 purr"

#: Hostile values tried for every parameter of the Python API.
HOSTILE: list[Any] = [
    None,
    -1,
    0,
    True,
    3.0,
    math.nan,
    math.inf,
    "",
    "   ",
    SURROGATE,
    "text",
    [math.nan, 1.0, 2.0],
    [1.0, 2.0],
    {"a": 1},
    object(),
]


@pytest.fixture(scope="module")
def ranker(tiny_bi_encoder_path: Path) -> Ranker:
    return Ranker(tiny_bi_encoder_path, scorer="bi", device="cpu")


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def _is_ranking(result: Any, documents: int) -> bool:
    return (
        isinstance(result, list)
        and all(isinstance(d, RankedDocument) for d in result)
        and (len(result) <= documents)
    )


@pytest.mark.parametrize("name", ["query", "documents", "first_stage_scores", "top"])
@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: type(v).__name__ + ":" + ascii(v)[:12])
def test_every_argument_of_rank_is_a_correct_result_or_our_error_naming_it(
    ranker: Ranker, name: str, value: Any
) -> None:
    """Each parameter of Ranker.rank (a new one is tried too) with each hostile value: a ranking of
    the right size, or evirank's error whose message begins with the argument's name (a document's
    own errors name the document)."""
    params = list(inspect.signature(Ranker.rank).parameters)[1:]
    assert params == ["query", "documents", "first_stage_scores", "top"], "try hostile values on new ones"
    given: dict[str, Any] = {"query": "cats", "documents": DOCS, "first_stage_scores": None, "top": None}
    given[name] = value
    try:
        result = ranker.rank(given.pop("query"), given.pop("documents"), **given)
    except EvirankError as exc:
        message = str(exc)
        assert isinstance(exc, ValueError)
        assert message.startswith((name, "document ")), message
        return
    assert _is_ranking(result, len(DOCS))
    if name == "top" and value is not None:
        assert len(result) == min(int(value), len(DOCS))
    if name == "documents":
        assert len(result) == len(value)


def test_the_named_cases_say_what_was_expected(ranker: Ranker, tiny_bi_encoder_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^top: expected an integer from 0"):
        ranker.rank("cats", DOCS, top=-1)  # dropped the last document
    with pytest.raises(ValueError, match=r"^query: expected a query \(a string with some text\), found None"):
        evirank.rank(None, DOCS, tiny_bi_encoder_path, scorer="bi", device="cpu")  # ranked against "None"
    with pytest.raises(
        ValueError, match=r"^first_stage_scores: expected a list of 3 finite .* found float 3.0"
    ):
        ranker.rank("cats", DOCS, first_stage_scores=3.0)  # an IndexError
    with pytest.raises(ValueError, match=r"expected 3 finite first-stage scores .*found nan at position 0"):
        ranker.rank("cats", DOCS, first_stage_scores=[math.nan, 1.0, 2.0])  # "found 3"
    with pytest.raises(
        ValueError, match=r"^query: expected text that UTF-8 can hold, found a lone surrogate"
    ):
        ranker.rank(SURROGATE, DOCS)
    with pytest.raises(ValueError, match=r"document '1' \(position 1\): its text holds a lone surrogate"):
        ranker.rank("cats", [DOCS[0], SURROGATE])
    with pytest.raises(ValueError, match=r"its meta\.tags\[0\] holds a lone surrogate"):
        ranker.rank("cats", [{"id": "a", "text": "x", "meta": {"tags": [SURROGATE]}}])
    with pytest.raises(ValueError, match=r"^documents: expected a list of documents .* found str"):
        ranker.rank("cats", "one long text")  # each character was a document
    with pytest.raises(ValueError, match=r"^queries: expected a list of queries"):
        ranker.rank_many("cats", DOCS)  # each character was a query
    with pytest.raises(ValueError, match=r"^queries\[1\]: expected a query"):
        ranker.rank_many(["cats", ""], DOCS)
    with pytest.raises(ValueError, match=r"^first_stage_scores\[1\]: expected 3 finite"):
        ranker.rank_many(["cats", "dogs"], DOCS, first_stage_scores=[[1, 2, 3], [1, 2]])
    with pytest.raises(ValueError, match=r"document 0: expected its 'id' to be a non-empty string"):
        ranker.rank("cats", [{"id": None, "text": "x"}])
    with pytest.raises(ValueError, match=r"has no text"):
        ranker.rank("cats", ["  "])  # a blank string, as a blank dict is
    with pytest.raises(ValueError, match=r"^show_passages: expected an integer from 0"):
        Ranker(tiny_bi_encoder_path, scorer="bi", show_passages=-1)


def test_valid_arguments_rank_as_before(ranker: Ranker) -> None:
    assert [d.id for d in ranker.rank("cats", DOCS, top=2)] == [d.id for d in ranker.rank("cats", DOCS)][:2]
    assert ranker.rank("cats", DOCS, top=0) == []
    assert len(ranker.rank("cats", tuple(DOCS), first_stage_scores=(3, 2, 1))) == 3
    assert ranker.rank_many(["cats"], [])[0] == []


def test_rank_refuses_an_empty_query_and_text_utf8_cannot_hold_with_the_file_and_line(
    tmp_path: Path, tiny_bi_encoder_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "a", "text": "Cats purr."}\n')
    model = ["--model", str(tiny_bi_encoder_path), "--scorer", "bi", "--device", "cpu"]
    for query in ("", "   ", "cats \udced"):  # the last: a byte that is not UTF-8 on the command line
        with pytest.raises(SystemExit) as exit_:
            main(["rank", "--query", query, "--docs", str(docs), *model])
        assert exit_.value.code == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "Cats purr."}\n{"id": "b", "text": "Dogs \\udc00 bark."}\n')
    caplog.clear()
    assert main(["rank", "--query", "cats", "--docs", str(bad), *model]) == 2
    (error,) = _errors(caplog)
    assert error.startswith(f"{bad}:2: expected text that UTF-8 can hold, found a lone surrogate")
    assert "'text'" in error
    meta = tmp_path / "meta.jsonl"
    meta.write_text('{"id": "a", "text": "Cats purr.", "source": "\\ud800"}\n')
    caplog.clear()
    assert main(["rank", "--query", "cats", "--docs", str(meta), *model]) == 2
    assert _errors(caplog)[0].startswith(f"{meta}:1: expected text that UTF-8 can hold")


def test_index_and_topics_refuse_text_utf8_cannot_hold_with_the_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = [{"_id": "a", "text": "Cats purr."}, {"_id": "b", "title": "T\udc00", "text": "x"}]
    corpus.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["index", "--corpus", str(corpus), "--index", str(tmp_path / "index")]) == 2
    assert _errors(caplog)[0].startswith(f"{corpus}:2: expected text that UTF-8 can hold")
    assert not (tmp_path / "index").exists()
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"_id": "1", "text": "cats"}\n{"_id": "2", "text": "why \\udc00"}\n')
    with pytest.raises(InputFormatError, match=rf"^{queries}:2: expected text that UTF-8 can hold"):
        read_topics(queries)
