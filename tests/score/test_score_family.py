"""The model-family registry: names, detection from a model's files, and a plug-in family end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime
from evirank.frames import SCORE, TEXT
from evirank.score import (
    Family,
    ModelInfo,
    UnknownFamilyError,
    detect_family,
    family_names,
    get_family,
    make_scorer,
    register_family,
)
from evirank.score.multi import ScorerSpec


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Families a test registers are gone after it."""
    import evirank.score.family as registry

    family_names()  # the built-ins first
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))


def test_the_classic_families_are_registered() -> None:
    assert {"cross", "bi"} <= set(family_names())
    assert get_family("bi").stores_passages and not get_family("cross").stores_passages
    assert get_family("CROSS").name == "cross"


def test_an_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(UnknownFamilyError, match=r"unknown model family 'lstm'.*cross"):
        get_family("lstm")


@pytest.mark.parametrize(
    ("config", "modules", "family"),
    [
        ({"architectures": ["BertForSequenceClassification"]}, (), "cross"),
        ({"architectures": ["XLMRobertaForSequenceClassification"]}, (), "cross"),
        (
            {"architectures": ["BertModel"]},
            ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling"),
            "bi",
        ),
        ({"architectures": ["BertModel"]}, (), "bi"),
    ],
)
def test_the_family_is_told_from_the_model_config(config: dict, modules: tuple, family: str) -> None:
    assert detect_family(ModelInfo(config, modules)).name == family


def test_a_model_nobody_recognises_asks_for_scorer() -> None:
    with pytest.raises(UnknownFamilyError, match="--scorer"):
        detect_family(ModelInfo({"architectures": ["WhisperForAudioClassification2"]}))


def test_detection_reads_a_model_folder(tmp_path: Path, tiny_cross_encoder_path: Path) -> None:
    assert detect_family(tiny_cross_encoder_path).name == "cross"
    assert ScorerSpec.parse(f"auto:{tiny_cross_encoder_path}").family == "cross"
    with pytest.raises(FileNotFoundError):
        detect_family(tmp_path / "missing")


def test_a_backend_the_family_does_not_run_on_is_refused() -> None:
    register_family(Family("demo-torch-only", scorer=lambda model, **kw: None, summary="demo"))
    with pytest.raises(UnknownFamilyError, match="runs on the torch backend, not 'onnx'"):
        make_scorer("demo-torch-only", "m", Runtime(backend="onnx"))


class WordOverlap:
    """A plug-in family's scorer that needs no model: the share of query words in the passage."""

    family = "overlap"
    block_columns = ("query", "text")

    def __init__(self, model: Any = None, runtime: Any = None, **options: Any) -> None:
        self.model = model
        self.runtime = runtime
        self.options = options

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        def share(q: str, t: str) -> float:
            words = set(q.lower().split())
            return len(words & set(t.lower().split())) / max(len(words), 1)

        return frame.assign(
            **{SCORE: [share(q, t) for q, t in zip(frame["query"], frame[TEXT], strict=True)]}
        )

    __call__ = transform

    @property
    def fingerprint(self) -> str:
        return "overlap-v1"

    def describe(self) -> dict[str, Any]:
        return {"model": "word overlap"}

    def settings(self) -> dict[str, Any]:
        return {}


def test_a_family_registered_from_outside_reranks_through_the_cli(tmp_path: Path) -> None:
    register_family(Family("overlap", scorer=WordOverlap, summary="word overlap", needs_model=False))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(
            json.dumps(d)
            for d in (
                {"id": "a", "contents": "Dogs bark at night. Nothing about felines here."},
                {"id": "b", "contents": "The cat sat on the mat. A cat likes the mat."},
            )
        )
        + "\n"
    )
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tcat mat\n")
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 a 1 2.0 bm25\n1 Q0 b 2 1.0 bm25\n")
    out = tmp_path / "out.txt"
    from evirank.cli import main

    argv = ["-q", "rerank", "--run", str(run), "--corpus", str(corpus), "--topics", str(topics)]
    assert (
        main([*argv, "--scorer", "overlap", "--aggregate", "maxp", "--output", str(out), "--no-scores"]) == 0
    )
    ranked = [line.split()[2] for line in out.read_text().splitlines()]
    assert ranked == ["b", "a"]
    record = json.loads(Path(str(out) + ".json").read_text())
    assert record["scorer"]["fingerprint"] == "overlap-v1"
    assert np.isfinite([float(line.split()[4]) for line in out.read_text().splitlines()]).all()


def test_a_family_is_registered_and_found_in_one_spelling_and_usable_as_a_scorer() -> None:
    """register_family kept case while get_family lowercased: 'Word-Overlap' was registered and never
    found; a hyphen in a family name made its default scorer label invalid."""
    family = register_family(
        Family("Word-Overlap", scorer=WordOverlap, summary="word overlap", needs_model=False)
    )
    assert family.name == "word-overlap" and "word-overlap" in family_names()
    assert get_family("WORD-OVERLAP") is family and get_family("word-overlap") is family
    spec = ScorerSpec.parse("Word-Overlap")
    assert (spec.label, spec.family) == ("word_overlap", "word-overlap")
    assert isinstance(spec.build(), WordOverlap)
    with pytest.raises(ValueError, match="two model families are named 'word-overlap'"):
        register_family(Family("WORD-overlap", scorer=lambda *a, **k: None, summary="another"))
    for bad in ("", "a:b", "x=y", "two words", "9lives"):
        with pytest.raises(ValueError, match="a model family's name must start with a letter"):
            register_family(Family(bad, scorer=WordOverlap, summary="bad"))


def test_every_registered_family_can_be_named_in_a_scorer_spec() -> None:
    """Each family parses as --scorer FAMILY[:MODEL] with a valid default label (a pairwise one is then
    refused by the pipeline spec, with words that say where it goes)."""
    for name in family_names():
        spec = ScorerSpec.parse(f"{name}:models/m")
        assert spec.family == name and spec.model == "models/m"
