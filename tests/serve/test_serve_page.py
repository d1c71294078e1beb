"""The server-rendered page: highlighting, escaping, excerpts, errors, no external assets."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest

from evirank.frames import Document
from evirank.serve.page import EXCERPT_ABOVE, excerpt, highlight
from evirank.serve.searcher import Evidence

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from evirank.serve.app import create_app
from evirank.serve.config import ServeConfig
from evirank.serve.searcher import Searcher
from evirank.serve.testing import TOY_DOCUMENTS, ToyIndex, ToyMaxP, ToyScorer, ToySentences, toy_searcher


class Marks(HTMLParser):
    """Collect the text inside each <mark> (without its number badge), and check tags balance."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[str] = []
        self.stack: list[str] = []
        self._in_mark = 0
        self._in_badge = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ("meta", "input", "br", "link"):
            self.stack.append(tag)
        if tag == "mark":
            self._in_mark += 1
            self.marks.append("")
        if tag == "span" and ("class", "evn") in attrs:
            self._in_badge += 1

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> after {self.stack[-3:]}"
        self.stack.pop()
        if tag == "mark":
            self._in_mark -= 1
        if tag == "span" and self._in_badge:
            self._in_badge -= 1

    def handle_data(self, data: str) -> None:
        if self._in_mark and not self._in_badge:
            self.marks[-1] += data


def marks_of(html: str) -> list[str]:
    parser = Marks()
    parser.feed(html)
    parser.close()
    return parser.marks


def test_highlight_wraps_each_span_and_escapes_everything() -> None:
    text = "A <b> & B. Second one."
    html = highlight(text, [Evidence("Second one.", 0.5, 1, 11, 22), Evidence("A <b> & B.", 0.2, 0, 0, 10)])
    assert marks_of(html) == ["A <b> & B.", "Second one."]
    assert "<b>" not in html and "&lt;b&gt; &amp; B." in html
    assert 'class="ev ev1"' in html and 'class="ev ev2"' in html


def test_overlapping_evidence_keeps_the_better_span() -> None:
    text = "one two three four"
    html = highlight(text, [Evidence("two three", 0.9, 0, 4, 13), Evidence("three four", 0.5, 1, 8, 18)])
    assert marks_of(html) == ["two three"]


def test_unlocated_evidence_is_not_highlighted() -> None:
    assert marks_of(highlight("Body.", [Evidence("Title", 0.9, 0, None, None)])) == []


def test_long_texts_become_excerpts_around_the_evidence() -> None:
    text = " ".join(f"w{i}" for i in range(800)) + " THE EVIDENCE. " + " ".join(f"v{i}" for i in range(800))
    start = text.index("THE EVIDENCE.")
    ev = [Evidence("THE EVIDENCE.", 1.0, 5, start, start + 13)]
    html = excerpt(text, ev)
    assert marks_of(html) == ["THE EVIDENCE."]
    assert html.startswith("… ") and html.endswith(" …")
    assert len(html) < 900
    assert not re.search(r"\bw\d*…|…v\d", html)  # cut at word boundaries


def page_client(**config: Any) -> TestClient:
    return TestClient(create_app(toy_searcher(), ServeConfig(**config)), raise_server_exceptions=False)


def test_excerpt_windows_are_joined_by_one_ellipsis() -> None:
    words = [f"w{i}" for i in range(600)]
    text = " ".join(words)
    spans = []
    for i in (100, 400):
        start = text.index(f" w{i} ") + 1
        spans.append(Evidence(f"w{i}", 1.0 / i, i, start, start + len(f"w{i}")))
    html = excerpt(text, spans)
    assert marks_of(html) == ["w100", "w400"]
    assert html.count("…") == 3 and "… …" not in html


def test_page_without_a_query_shows_the_form_and_no_results() -> None:
    response = page_client().get("/")
    assert response.status_code == 200
    html = response.text
    assert re.search(r'<form id="search" method="get" action="/"', html)
    assert 'name="q"' in html and 'class="intro"' in html and "<mark" not in html


def test_page_renders_results_with_highlighted_evidence_server_side() -> None:
    html = page_client().get("/", params={"q": "cats purr", "top": 3, "depth": 5}).text
    marks_of(html)  # balanced
    first = html[html.index('data-docno="d1"') :]
    first = first[: first.index("</li>", first.index('class="doctext"'))]
    assert "Why cats purr" in first
    assert marks_of(first)[0] == "Cats purr when they are content."
    assert re.search(r"<title>cats purr — evirank</title>", html)
    assert 'value="cats purr"' in html
    assert html.count('class="result"') == 3


def test_page_escapes_titles_texts_and_the_query() -> None:
    html = page_client().get("/", params={"q": 'cats <script>alert("x")</script>'}).text
    assert "<script>alert" not in html
    assert "&lt;script&gt;" in html
    assert "Unsafe &lt;markup&gt; &amp; &quot;quotes&quot;" in html
    marks_of(html)


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"q": ""}, "query is empty"),
        ({"q": "cats", "top": "many"}, "top must be a whole number, found &#x27;many&#x27;"),
        ({"q": "cats", "k": "1.5"}, "k must be a whole number"),
        ({"q": "cats", "depth": "500"}, "depth must be between 1 and 100"),
        ({"q": "cats", "top": "0"}, "top must be between 1 and 100"),
        ({"q": "cats", "k": "101"}, "k must be between 1 and 100"),
        ({"q": "cats", "k": "3"}, "k is the first-stage depth (documents retrieved), 3 here"),
    ],
)
def test_page_shows_bad_input_as_a_message_with_400(params: dict[str, str], needle: str) -> None:
    response = page_client().get("/", params=params)
    assert response.status_code == 400
    assert 'role="alert"' in response.text and needle in response.text


def test_the_form_and_the_json_link_carry_top_depth_and_k_when_given() -> None:
    html = page_client().get("/", params={"q": "cats dogs", "top": "2", "depth": "3", "k": "4"}).text
    assert re.search(r'name="top" type="number" min="1" max="100" value="2"', html)
    assert re.search(r'name="depth" type="number" min="1" max="100" value="3"', html)
    assert re.search(r'name="k" type="number" min="1" max="100" value="4"', html)
    assert 'href="/v1/search?q=cats+dogs&amp;top=2&amp;depth=3&amp;k=4"' in html
    assert "re-ranked from the first stage's top 3 of 4 retrieved" in html
    assert html.count('class="result"') == 2
    html = page_client(default_top=3, default_depth=5).get("/", params={"q": "cats dogs"}).text
    assert 'name="top" type="number" min="1" max="100" value="3"' in html
    assert 'name="depth" type="number" min="1" max="100" value="5"' in html
    assert 'name="k" type="number" min="1" max="100" value=""' in html  # blank: k is the depth
    assert 'href="/v1/search?q=cats+dogs&amp;top=3&amp;depth=5"' in html


def test_the_page_reranks_k_when_k_is_smaller_than_depth() -> None:
    html = page_client().get("/", params={"q": "cats dogs", "top": "5", "depth": "4", "k": "2"}).text
    assert html.count('class="result"') == 2
    assert 'href="/v1/search?q=cats+dogs&amp;top=2&amp;depth=2"' in html  # the same search


def test_partial_page_is_just_the_results_section() -> None:
    html = page_client().get("/", params={"q": "dogs", "partial": "1"}).text
    assert html.startswith('<section id="results">') and "<form" not in html and "<mark" in html


def test_page_loads_nothing_from_elsewhere() -> None:
    html = page_client().get("/", params={"q": "cats"}).text
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)
    assert "<link" not in html and "@import" not in html and "url(" not in html


def test_page_with_long_documents_shows_an_excerpt_and_the_full_text_folded() -> None:
    long_text = "Filler words here. " * (EXCERPT_ABOVE // 10) + "Cats purr loudly. " + "More filler. " * 100
    docs = (Document("long", "Long one", long_text), *TOY_DOCUMENTS)
    index = ToyIndex(docs)
    searcher = Searcher(index.retrieve, ToySentences(), ToyScorer(), ToyMaxP(), index.lookup)
    html = TestClient(create_app(searcher)).get("/", params={"q": "purr loudly"}).text
    card = html[html.index('data-docno="long"') :]
    card = card[: card.index("</details>")]
    assert "<details" in card and "Full text" in card
    assert marks_of(card).count("Cats purr loudly.") == 2  # in the excerpt and in the folded full text


def test_page_sends_a_content_security_policy_that_allows_only_its_own_script() -> None:
    response = page_client().get("/", params={"q": "cats"})
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_start_page_names_the_collection_and_offers_its_example_queries(tmp_path) -> None:
    import json

    from evirank.lucene.index import describe_collection
    from evirank.pipeline import Collection
    from evirank.serve.config import ServeConfig
    from evirank.serve.page import render_page

    beir = tmp_path / "pets"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": "Cats purr."}\n')
    (beir / "queries.jsonl").write_text(
        '{"_id": "1", "text": "why do cats purr"}\n{"_id": "2", "text": "train only"}\n'
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n")
    about = describe_collection(beir)
    assert about == {"name": "pets", "source": str(beir), "examples": ["why do cats purr"]}
    index = tmp_path / "index"
    index.mkdir()
    (index / "evirank-index.json").write_text(json.dumps({"about": about}))
    info = Collection(index).about()
    assert info == {"index": "pets", "examples": ["why do cats purr"]}
    page = render_page(ServeConfig(), info)
    assert "<h1>Search pets</h1>" in page and 'placeholder="Search pets…"' in page
    assert '<a href="/?q=why+do+cats+purr">why do cats purr</a>' in page
    assert "examples" not in page.split("<footer")[1]  # the footer lists facts, not the examples


def test_a_document_links_to_its_source_when_its_corpus_gives_one(tmp_path) -> None:
    """JSONL url -> stored with the raw document (not indexed) -> API and page link; only http(s)."""
    pytest.importorskip("pyserini")
    from evirank.frames import make_topics
    from evirank.io import read_corpus
    from evirank.lucene import Bm25, LuceneDocs, build_index
    from evirank.serve.page import _candidate

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"_id": "d1", "title": "Cats", "text": "Cats purr.", "url": "https://cats.example/d1"}\n'
        '{"_id": "d2", "title": "Dogs", "text": "Dogs bark at cats.", "url": "javascript:alert(1)"}\n'
        '{"_id": "d3", "title": "Fish", "text": "Fish swim."}\n'
    )
    index = tmp_path / "index"
    build_index(read_corpus(corpus), index)
    assert LuceneDocs(index)["d1"].url == "https://cats.example/d1"
    with Bm25(index, k=3, fetch_text=3) as bm25:
        run = bm25(make_topics([("1", "example"), ("2", "cats")]))
    assert run[run["qid"] == "1"].empty  # the address is not indexed
    urls = dict(zip(run["docno"], run["url"], strict=True))
    assert urls["d1"] == "https://cats.example/d1"
    from evirank.serve.searcher import Candidate

    linked = _candidate(Candidate("d1", 1, 1.0, 1.0, 1, "Cats", "Cats purr.", (), url=urls["d1"]), 1.0, 0.0)
    assert '<a class="source" href="https://cats.example/d1"' in linked
    unsafe = _candidate(Candidate("d2", 2, 0.5, 0.5, 2, "Dogs", "Dogs bark.", (), url=urls["d2"]), 1.0, 0.0)
    assert "javascript:" not in unsafe and "<h2>Dogs</h2>" in unsafe
