"""Topics: every accepted format detected automatically, fields, id normalisation, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evirank.errors import InputFormatError, OutputExistsError
from evirank.io import (
    detect_topics_format,
    normalize_qid,
    parse_field,
    read_topic_fields,
    read_topics,
    write_topics,
)

ROBUST = """<top>

<num> Number: 301·
<title> International Organized Crime·

<desc> Description:·
Identify organizations that participate in international criminal
activity.

<narr> Narrative:·
A relevant document must identify the organization.

</top>

<top>

<num> Number: 651
<title>
U.S. ethnic population

<desc> Description:
How is the ethnic make-up of the U.S. population changing?

<narr> Narrative:
Documents must indicate a shift.

</top>
""".replace("·", " ")

CORE = """<top>
<num> Number: 321 </num>
<title>
Women in
Parliaments·
</title>
<desc> Description:
Pertinent documents will reflect the fact.··
</desc>
<narr> Narrative
Pertinent documents relating to this issue.
</narr>
</top>
""".replace("·", " ")

MICROBLOG = """<top>
<num> Number: MB001 </num>
<title> BBC World Service staff cuts </title>
<querytime> Tue Feb 08 12:30:27 +0000 2011 </querytime>
<querytweettime> 34952194402811904 </querytweettime>
</top>

<top>
<num> Number: MB051 </num>
<query> British Government cuts </query>
<querytime> Tue Feb 08 23:56:46 +0000 2011 </querytime>
</top>
"""

WEBXML = """<webtrack2009>
<topic number="1" type="faceted">
  <query>obama family tree</query>
  <description>Find information on President Barack Obama's family
  history.</description>
  <subtopic number="1" type="nav">Find the TIME magazine photo essay.</subtopic>
</topic>
</webtrack2009>
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_robust04_style_unclosed_tags_and_prefixes(tmp_path: Path) -> None:
    fields = read_topic_fields(write(tmp_path / "t.txt", ROBUST))
    assert fields.to_dict("records") == [
        {
            "qid": "301",
            "title": "International Organized Crime",
            "description": "Identify organizations that participate in international criminal activity.",
            "narrative": "A relevant document must identify the organization.",
        },
        {
            "qid": "651",
            "title": "U.S. ethnic population",
            "description": "How is the ethnic make-up of the U.S. population changing?",
            "narrative": "Documents must indicate a shift.",
        },
    ]


def test_core_style_closing_tags_multiline_title_and_bare_narrative_label(tmp_path: Path) -> None:
    fields = read_topic_fields(write(tmp_path / "t.txt", CORE))
    assert fields.iloc[0].tolist() == [
        "321",
        "Women in Parliaments",
        "Pertinent documents will reflect the fact.",
        "Pertinent documents relating to this issue.",
    ]


def test_field_selection_and_combination(tmp_path: Path) -> None:
    path = write(tmp_path / "t.txt", ROBUST)
    assert read_topics(path)["query"].tolist()[0] == "International Organized Crime"
    assert read_topics(path, field="desc")["query"].tolist()[1].startswith("How is the ethnic")
    combined = read_topics(path, field="title+description")["query"].tolist()[1]
    assert combined == "U.S. ethnic population How is the ethnic make-up of the U.S. population changing?"
    with pytest.raises(ValueError, match="unknown topic field"):
        read_topics(path, field="summary")


def test_microblog_title_or_query_and_id_normalisation(tmp_path: Path) -> None:
    topics = read_topics(write(tmp_path / "t.txt", MICROBLOG))
    assert topics.values.tolist() == [
        ["1", "BBC World Service staff cuts"],
        ["51", "British Government cuts"],
    ]
    raw = read_topics(tmp_path / "t.txt", normalize_ids=False)
    assert raw["qid"].tolist() == ["MB001", "MB051"]


def test_missing_field_names_the_topic_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.txt", "\n\n" + MICROBLOG)
    with pytest.raises(InputFormatError, match="description in topic 1") as info:
        read_topics(path, field="description")
    assert info.value.line == 3


def test_webxml_topics(tmp_path: Path) -> None:
    fields = read_topic_fields(write(tmp_path / "web.xml", WEBXML))
    assert fields.iloc[0].tolist()[:3] == [
        "1",
        "obama family tree",
        "Find information on President Barack Obama's family history.",
    ]


def test_tsv_topics_with_optional_header(tmp_path: Path) -> None:
    path = write(tmp_path / "t.tsv", "qid\tquery\n156493\tdo goldfish grow\n\n1110199\twhat is wifi\n")
    assert read_topics(path).values.tolist() == [["156493", "do goldfish grow"], ["1110199", "what is wifi"]]
    with pytest.raises(InputFormatError, match="one query text only"):
        read_topics(path, field="description")


def test_tsv_line_without_a_tab_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "t.tsv", "1\tfirst query\n2 second query\n")
    with pytest.raises(InputFormatError, match="qid TAB query") as info:
        read_topics(path)
    assert str(info.value).startswith(f"{path}:2:")


def test_beir_queries_jsonl(tmp_path: Path) -> None:
    lines = [{"_id": "0", "text": "claim zero", "metadata": {}}, {"_id": "2", "text": "claim two"}]
    path = write(tmp_path / "queries.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    assert read_topics(path).values.tolist() == [["0", "claim zero"], ["2", "claim two"]]


def test_beir_folder_with_and_without_split(tmp_path: Path) -> None:
    lines = [{"_id": q, "text": f"claim {q}"} for q in ("0", "1", "2", "3")]
    write(tmp_path / "queries.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    (tmp_path / "qrels").mkdir()
    write(tmp_path / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\n3\td1\t1\n1\td2\t1\n1\td3\t1\n")
    assert detect_topics_format(tmp_path) == "beir-folder"
    assert read_topics(tmp_path)["qid"].tolist() == ["0", "1", "2", "3"]
    assert read_topics(tmp_path, split="test")["qid"].tolist() == ["1", "3"]
    with pytest.raises(FileNotFoundError, match="available splits: \\['test'\\]"):
        read_topics(tmp_path, split="dev")


def test_split_on_a_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="BEIR folder"):
        read_topics(write(tmp_path / "t.txt", ROBUST), split="test")


def test_unknown_format_names_the_file_and_the_accepted_formats(tmp_path: Path) -> None:
    path = write(tmp_path / "t.txt", "what is this\nplain lines\n")
    with pytest.raises(InputFormatError) as info:
        read_topics(path)
    message = str(info.value)
    assert message.startswith(f"{path}:1:")
    for name in ("TREC <top>", "TSV", "queries.jsonl", "BEIR folder"):
        assert name in message


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("<top>\n<title> no number\n</top>\n", 1, "<num>"),
        (
            "<top>\n<num> Number: 1\n<title> a\n</top>\n<top>\n<num> Number: 001\n<title> b\n</top>\n",
            5,
            "id 1 again",
        ),
        ('{"_id": "1", "text": "a"}\n{"_id": "2"\n', 2, "malformed JSON"),
        ('{"_id": "1", "text": ""}\n', 1, "non-empty string"),
        ('{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n', 2, "id 1 again"),
    ],
)
def test_bad_topics_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = write(tmp_path / "t.txt", text)
    with pytest.raises(InputFormatError, match=message) as info:
        read_topics(path)
    assert info.value.line == line


def test_non_utf8_topics_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"<top>\n<num> Number: 1\n<title> caf\xe9\n</top>\n")
    with pytest.raises(InputFormatError, match="not valid UTF-8") as info:
        read_topics(path)
    assert info.value.line == 3


def test_normalize_qid_and_parse_field() -> None:
    assert [normalize_qid(x) for x in ("Number: MB001", "mb010", "051", "301", "q7")] == [
        "1",
        "10",
        "51",
        "301",
        "q7",
    ]
    assert parse_field("title+desc") == ("title", "description")
    assert parse_field("narr") == ("narrative",)


def test_topics_round_trip_through_tsv(tmp_path: Path) -> None:
    topics = read_topics(write(tmp_path / "t.txt", ROBUST), field="title+description")
    path = write_topics(topics, tmp_path / "t.tsv")
    assert read_topics(path).equals(topics)
    with pytest.raises(OutputExistsError):
        write_topics(topics, path)


def test_crlf_topics(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(CORE.replace("\n", "\r\n").encode())
    assert read_topics(path, field="narrative")["query"].tolist() == [
        "Pertinent documents relating to this issue."
    ]


def test_a_folder_without_queries_jsonl_is_not_topics(tmp_path: Path) -> None:
    write(tmp_path / "corpus.jsonl", "{}\n")
    with pytest.raises(InputFormatError, match=r"queries\.jsonl"):
        read_topics(tmp_path)
