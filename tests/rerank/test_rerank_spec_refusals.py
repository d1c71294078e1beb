"""Pipelines that cannot run are refused when the spec is made, in the command line's words, before
any text is fetched or any model runs: a pairwise model as the passage scorer, --duo beyond
--depth, --aggregate document over a scorer without document scores."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from evirank.cli import main
from evirank.pipeline import PipelineSpec
from evirank.pipeline.spec import PipelineSpecError
from evirank.rerank import Rerank


def _spec(**options: Any) -> PipelineSpec:
    return PipelineSpec.from_mapping({"corpus": "corpus.jsonl", **options})


@pytest.mark.parametrize("family", ["duo", "duo-seq2seq"])
def test_a_pairwise_family_as_the_passage_scorer_is_refused_with_what_to_write(family: str) -> None:
    with pytest.raises(PipelineSpecError) as caught:
        _spec(scorer=f"{family}:models/pairwise")
    message = str(caught.value)
    assert message.startswith(
        f"--scorer {family}:models/pairwise: the {family} family compares two documents"
    )
    assert f"--duo K --duo-model {family}:models/pairwise" in message
    listed = message.split("with a passage scorer as --scorer (")[1].rstrip(")").split(", ")
    assert "cross" in listed and "duo" not in listed and "duo-seq2seq" not in listed
    with pytest.raises(PipelineSpecError, match=rf"^--prune-by {family}:m: the {family} family compares"):
        _spec(scorer="bi", prune=2, prune_by=f"{family}:m")


def test_duo_beyond_depth_is_refused_when_the_spec_is_made() -> None:
    with pytest.raises(PipelineSpecError) as caught:
        _spec(scorer="bi", depth=5, duo=6, duo_model="duo:models/pairwise")
    message = str(caught.value)
    assert message.startswith("--duo 6 compares the top 6 documents")
    assert "--depth 5" in message and "FetchText" not in message
    assert _spec(scorer="bi", depth=5, duo=5, duo_model="duo:models/pairwise").duo == 5


def test_the_document_aggregator_needs_a_scorer_that_scores_documents() -> None:
    with pytest.raises(
        PipelineSpecError, match=r"^--aggregate document reads .*--scorer parade.*the bi scorer"
    ):
        _spec(scorer="bi", aggregate="document")
    assert _spec(scorer="parade:models/parade", aggregate="document").aggregate.kind == "document"


def test_the_command_refuses_them_before_fetching_text_or_running_a_model(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_work(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the pipeline ran before the spec was refused")

    monkeypatch.setattr(Rerank, "run", no_work)
    base = [
        "rerank",
        "--corpus",
        str(collection["corpus"]),
        "--run",
        str(collection["run"]),
        "--topics",
        str(collection["topics"]),
        "--device",
        "cpu",
        "--output",
        str(tmp_path / "out.txt"),
    ]
    model = str(tiny_cross_encoder_path)
    cases = [
        (["--scorer", f"duo:{model}"], "the duo family compares two documents"),
        (["--scorer", "bi", "--depth", "5", "--duo", "6", "--duo-model", f"duo:{model}"], "--duo 6 compares"),
        (["--scorer", "bi", "--aggregate", "document"], "--aggregate document reads"),
    ]
    for flags, words in cases:
        caplog.clear()
        assert main([*base, *flags]) == 2
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and words in errors[0] and "FetchText" not in errors[0]
    assert not (tmp_path / "out.txt").exists()
