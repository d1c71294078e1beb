"""``evirank.rank`` / ``Ranker``: in-memory documents ranked with evidence offsets and score terms."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import evirank
from evirank.cli import main
from evirank.config import SETTINGS
from evirank.ranker import Ranker
from evirank.segment.spans import passage_span as locate

WORDS = [
    "cells",
    "protein",
    "binding",
    "receptor",
    "signal",
    "pathway",
    "mouse",
    "tumour",
    "growth",
    "factor",
    "expression",
    "gene",
    "membrane",
    "calcium",
    "channel",
    "neuron",
    "synapse",
    "immune",
    "response",
    "infection",
    "virus",
    "vaccine",
    "dose",
    "trial",
]


def long_documents(n: int = 20, sentences: int = 30, seed: int = 0) -> list[str]:
    """n documents of many sentences (longer than a tiny model's 64-token input)."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        parts = [
            " ".join(rng.choice(WORDS, size=rng.integers(5, 12))).capitalize() + "." for _ in range(sentences)
        ]
        docs.append("  ".join(parts))
    return docs


@pytest.fixture(scope="module")
def ranker(tiny_bi_encoder_path: Path) -> Ranker:
    return Ranker(tiny_bi_encoder_path, scorer="bi", device="cpu", segment="sentences", aggregate="birch:3")


def test_long_strings_rank_with_evidence_offsets_and_terms_that_add_up(ranker: Ranker) -> None:
    docs = long_documents()
    ranked = ranker.rank("calcium channel in neuron synapse", docs)
    assert sorted(d.id for d in ranked) == sorted(str(i) for i in range(20))
    assert [d.rank for d in ranked] == list(range(1, 21))
    assert all(a.score >= b.score for a, b in itertools.pairwise(ranked))
    for doc in ranked:
        assert sum(t.contribution for t in doc.terms) == pytest.approx(doc.score, abs=1e-12)
        assert len(doc.evidence) == 3
        scores = [e.score for e in doc.evidence]
        assert scores == sorted(scores, reverse=True)
        text = docs[int(doc.id)]
        for item in doc.evidence:
            assert item.field == "text"
            assert text[item.start : item.end].split() == item.text.split()


def test_windows_cover_documents_longer_than_the_model_input(tiny_bi_encoder_path: Path) -> None:
    docs = long_documents(n=3, sentences=60, seed=1)
    ranked = Ranker(tiny_bi_encoder_path, scorer="bi", device="cpu", segment="windows:20:10").rank(
        "gene", docs
    )
    for doc in ranked:
        for item in doc.evidence:
            assert docs[int(doc.id)][item.start : item.end].split() == item.text.split()
    assert max(e.start for d in ranked for e in d.evidence) > 500  # evidence found deep in the documents


def test_dicts_keep_ids_titles_and_metadata(ranker: Ranker) -> None:
    docs = [
        {
            "id": "x",
            "title": "Calcium channels",
            "text": "Neurons use calcium channels. Tumours grow.",
            "url": "u1",
        },
        {"_id": "y", "contents": "A vaccine trial measured the immune response.", "year": 2020},
    ]
    ranked = ranker.rank("calcium channel", docs)
    by_id = {d.id: d for d in ranked}
    assert by_id["x"].document["url"] == "u1" and by_id["y"].document["year"] == 2020
    fields = {e.field for e in by_id["x"].evidence}
    assert "title" in fields  # sentences: the title is its own passage, located in the title


def test_first_stage_scores_bring_a_first_stage_term(ranker: Ranker) -> None:
    docs = long_documents(n=4, sentences=5)
    ranked = ranker.rank("gene expression", docs, first_stage_scores=[4.0, 3.0, 2.0, 1.0])
    for doc in ranked:
        names = [t.name for t in doc.terms]
        assert names[0] == "first stage" and doc.terms[0].weight == SETTINGS.default("alpha")
        assert sum(t.contribution for t in doc.terms) == pytest.approx(doc.score)
        assert doc.first_stage_score == 4.0 - int(doc.id)


def test_rank_many_equals_ranking_each_query_alone(ranker: Ranker) -> None:
    docs = long_documents(n=5, sentences=4, seed=3)
    many = ranker.rank_many(["gene", "immune response"], docs)
    for query, got in zip(["gene", "immune response"], many, strict=True):
        alone = ranker.rank(query, docs)
        assert [(d.id, round(d.score, 10)) for d in got] == [(d.id, round(d.score, 10)) for d in alone]


def test_bad_documents_say_which(ranker: Ranker) -> None:
    with pytest.raises(ValueError, match="repeated: a"):
        ranker.rank("q", [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    with pytest.raises(ValueError, match="has no text"):
        ranker.rank("q", [{"id": "a", "text": "  "}])
    with pytest.raises(ValueError, match="finite first-stage scores"):
        ranker.rank("q", ["a b"], first_stage_scores=[float("nan")])


def test_locate_finds_overlapping_windows_in_order() -> None:
    text = "a b c a b c d"
    assert locate("a b c", "", text, after=3) == ("text", 6, 11)
    assert locate("zz", "", text) == (None, None, None)


def test_the_top_level_function_and_the_cli_agree(
    tiny_bi_encoder_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = [
        {"id": f"d{i}", "text": t, "source": "test"} for i, t in enumerate(long_documents(n=4, sentences=6))
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    expected = evirank.rank("immune response", docs, tiny_bi_encoder_path, scorer="bi", device="cpu")
    argv = [
        "-q",
        "rank",
        "--query",
        "immune response",
        "--docs",
        str(path),
        "--model",
        str(tiny_bi_encoder_path),
    ]
    assert main([*argv, "--scorer", "bi", "--device", "cpu", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["id"] for line in lines] == [d.id for d in expected]
    assert lines[0]["document"]["source"] == "test"
    assert lines[0]["evidence"][0]["start"] is not None
    monkeypatch.setattr("sys.stdin", io.StringIO(path.read_text()))
    assert main([*argv[:5], "-", *argv[6:], "--scorer", "bi", "--device", "cpu", "--top", "2"]) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[0].split()[1] == expected[0].id and " = " in shown


def test_a_bad_line_is_reported_with_its_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "text": "ok"}\n{"id": "b", "text": 3}\n')
    assert main(["rank", "--query", "q", "--docs", str(path)]) == 2
    assert f"{path}:2" in caplog.text
