"""Dai & Callan's query variants: keyword descriptions and narratives, and positive narratives."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from evirank.errors import InputFormatError
from evirank.io import parse_field, read_topics
from evirank.io.fields import DERIVED_FIELDS, keywords, positive_narrative

ROBUST04 = "trec-newswire-topics/topics.robust04.txt"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What are working conditions and pay for U.S. air traffic controllers?",
         "working conditions pay US air traffic controllers"),
        ("Identify documents that discuss the 'Law of the Sea'; not its non-controversial uses.",
         "Identify documents discuss Law Sea non controversial uses"),
        ("Is there a cure for AIDS in 1990-1995?", "cure AIDS 1990 1995"),
        ("", ""),
    ],
)  # fmt: skip
def test_keywords_drop_punctuation_and_stopwords_and_keep_case(text: str, expected: str) -> None:
    assert keywords(text) == expected


@pytest.mark.parametrize(
    ("narrative", "positive"),
    [
        ("Relevant documents tell about pay. Documents about foreign controllers are not relevant.",
         "Relevant documents tell about pay."),
        ("A statement about the plan would not be relevant. Details of its cost are relevant.",
         "Details of its cost are relevant."),
        ("Cases are relevant, except that letters are not relevant.", "Cases are relevant."),
        ("Reports are relevant; rumours are irrelevant.", "Reports are relevant."),
        ("Documents are relevant even if the name is not mentioned.",
         "Documents are relevant even if the name is not mentioned."),
        ("Details would be helpful but are not necessary to be relevant.",
         "Details would be helpful but are not necessary to be relevant."),
        ("A non-relevant document discusses other systems. Also, not relevant are old ones.", ""),
        ('Relevant documents discuss "clear-cutting." Cutting old forests is not relevant.',
         'Relevant documents discuss "clear-cutting."'),
        ("Relevant documents must name the software: documents that lump it with music are not relevant.",
         "Relevant documents must name the software."),
    ],
)  # fmt: skip
def test_positive_narratives_drop_what_is_not_relevant(narrative: str, positive: str) -> None:
    assert positive_narrative(narrative) == positive


def test_field_names_and_aliases() -> None:
    assert parse_field("desc-keywords+narr-positive") == ("description-keywords", "narrative-positive")
    assert parse_field("narrative-keywords") == ("narrative-keywords",)
    with pytest.raises(ValueError, match="description-keywords"):
        parse_field("narrative-negative")


def test_the_variants_parse_the_shared_robust04_topics(
    datasets: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = datasets / ROBUST04
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    description = read_topics(path, field="description").set_index("qid")["query"]
    with caplog.at_level(logging.WARNING, logger="evirank"):
        variants = {name: read_topics(path, field=name).set_index("qid")["query"] for name in DERIVED_FIELDS}
    for name, queries in variants.items():
        assert len(queries) == 250 and queries.str.strip().ne("").all(), name
    assert description["697"] == "What are working conditions and pay for U.S. air traffic controllers?"
    assert variants["description-keywords"]["697"] == "working conditions pay US air traffic controllers"
    assert variants["narrative-positive"]["697"] == (
        "Relevant documents tell something about working conditions or pay for American controllers."
    )
    words = {name: queries.str.split().str.len().mean() for name, queries in variants.items()}
    narrative = read_topics(path, field="narrative")["query"].str.split().str.len().mean()
    assert words["narrative-keywords"] < words["narrative-positive"] < narrative  # as in the paper's Table 3
    # Five narratives only say what is not relevant: their titles stand in, with a warning.
    assert "392, 404, 405, 437, 653" in caplog.text
    title = read_topics(path, field="title").set_index("qid")["query"]
    assert variants["narrative-positive"]["404"] == title["404"]
    both = read_topics(path, field="title+narrative-positive").set_index("qid")["query"]
    assert both["697"] == f"{title['697']} {variants['narrative-positive']['697']}"


def test_the_variants_need_topics_with_those_fields(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("1\tcats\n")
    with pytest.raises(InputFormatError, match="a description-keywords field"):
        read_topics(path, field="description-keywords")
