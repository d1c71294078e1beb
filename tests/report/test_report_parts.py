"""Parts of the report: query terms, length buckets, pruning, differences, the HTML renderer."""

from __future__ import annotations

import base64

import pandas as pd
import pytest

from evirank.evaluate import summarize
from evirank.report import (
    ReportError,
    auto_buckets,
    contains_any,
    length_table,
    markdown_to_html,
    parse_buckets,
    per_query_differences,
    query_length,
    query_terms,
    s_stem,
)
from evirank.report.pruned import PLACEHOLDER_PID, prune_passages


def test_query_terms_drop_stopwords_and_fold_plurals() -> None:
    assert query_terms("What are the effects of Vitamin-D on bones?") == ("effect", "vitamin", "d", "bone")
    assert query_terms("bones bone", stem=False) == ("bones", "bone")
    assert query_length("the the cat") == 1 and query_length("") == 0
    assert [s_stem(w) for w in ("ponies", "horses", "gas", "bus", "class", "toes")] == [
        "pony",
        "horse",
        "ga",
        "bus",
        "class",
        "toe",
    ]
    assert contains_any("Two Bones broke.", query_terms("bone"))
    assert not contains_any("Two Bones broke.", query_terms("bone", stem=False), stem=False)
    assert not contains_any("anything", ())


def test_length_buckets_parse_and_choose() -> None:
    assert [b.label for b in parse_buckets("1,2,3,4+")] == ["1", "2", "3", "4+"]
    assert [(b.low, b.high) for b in parse_buckets("1-5, 6-10, 11+")] == [(1, 5), (6, 10), (11, None)]
    for bad in ("", "x", "3-1", "1+,2", "1-3,3"):
        with pytest.raises(ReportError):
            parse_buckets(bad)
    assert [b.label for b in auto_buckets([3, 3, 1, 2])] == ["1", "2", "3"]
    labels = [b.label for b in auto_buckets([4, 5, 7, 8, 9, 10, 12, 13, 15, 18, 20])]
    assert labels[0].startswith("4-") and labels[-1].endswith("+")


def comparison() -> object:
    rows = []
    for qid, base, new in (("1", 0.25, 0.75), ("2", 0.5, 0.25), ("3", 0.5, 0.5), ("4", 0.0, 0.5)):
        rows += [("bm25", qid, "AP", base), ("birch", qid, "AP", new)]
    table = pd.DataFrame(rows, columns=["run", "qid", "measure", "value"])
    return summarize(table, baseline="bm25")


def test_differences_are_sorted_descending_with_qid_ties() -> None:
    diff = per_query_differences(comparison(), "birch", "AP")  # type: ignore[arg-type]
    assert diff.index.tolist() == ["1", "4", "3", "2"]
    assert diff.tolist() == [0.5, 0.5, 0.0, -0.25]
    with pytest.raises(ReportError):
        per_query_differences(comparison(), "nope", "AP")  # type: ignore[arg-type]


def test_length_table_means_per_bucket() -> None:
    queries = {"1": "cat", "2": "cat dog", "3": "the cat dog", "4": "a b c d e"}
    table = length_table(comparison(), queries, "AP", parse_buckets("1,2,3+"))  # type: ignore[arg-type]
    assert table.counts == {"1": 1, "2": 2, "3+": 1}
    assert table.means.loc["birch", "2"] == pytest.approx((0.25 + 0.5) / 2)
    assert table.means.loc["bm25", "2"] == pytest.approx((0.5 + 0.5) / 2)
    assert table.significance is not None and set(table.significance["measure"]) == {"1", "2", "3+"}


def test_pruning_keeps_passages_without_query_terms_and_placeholders() -> None:
    passages = pd.DataFrame(
        {
            "qid": ["1"] * 4 + ["2"],
            "query": ["heart attacks"] * 4 + ["lungs"],
            "docno": ["a", "a", "b", "c", "a"],
            "pid": [0, 1, 0, 0, 0],
            "text": ["A heart attack.", "Risk rose.", "Attacks rose.", "Nothing here.", "The lung."],
            "score": [5.0, 1.0, 4.0, 2.0, 3.0],
        }
    )
    pruned = prune_passages(passages)
    assert pruned[["qid", "docno", "pid", "score"]].values.tolist() == [
        ["1", "a", 1, 1.0],
        ["1", "b", PLACEHOLDER_PID, 1.0],
        ["1", "c", 0, 2.0],
        ["2", "a", PLACEHOLDER_PID, 0.0],
    ]
    one = passages.assign(query="attack")
    assert "Attacks rose." not in prune_passages(one)["text"].tolist()
    assert "Attacks rose." in prune_passages(one, stem=False)["text"].tolist()  # exact tokens only


def test_html_renders_tables_escapes_and_embeds_images() -> None:
    png = b"\x89PNG\r\n\x1a\nfake"
    markdown = (
        "# T <1>\n\nSome **bold** `code` & text.\n\n| run | AP |\n| --- | ---: |\n| a\\|b | 0.5† |\n\n"
        "- one\n- two\n\n![plot](p.png)\n\n![missing](q.png)\n"
    )
    page = markdown_to_html(markdown, title="T", images={"p.png": png})
    assert "<h1>T &lt;1&gt;</h1>" in page and "<strong>bold</strong>" in page and "<code>code</code>" in page
    assert "<td>a|b</td>" in page and '<td class="num">0.5†</td>' in page and "&amp; text" in page
    assert "<li>one</li><li>two</li>" in page
    assert f"data:image/png;base64,{base64.b64encode(png).decode()}" in page
    assert 'src="q.png"' in page
