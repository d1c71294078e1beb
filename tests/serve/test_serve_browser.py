"""The page in a real browser: Debian's headless Chromium driven by Playwright, with JavaScript on and off.

Needs ``apt-get install chromium`` (as root; ``make test`` does it when it can) and the ``playwright``
package (the dev extra). Playwright's own browser downloads are never used: the executable is Debian's.
Set ``EVIRANK_SCREENSHOTS=DIR`` to keep screenshots of the pages.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("EVIRANK_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the dev extra)")
pytest.importorskip("fastapi")
if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (as root)", allow_module_level=True)

from evirank.config import Runtime  # noqa: E402
from evirank.serve.app import create_app  # noqa: E402
from evirank.serve.config import ServeConfig  # noqa: E402
from evirank.serve.testing import toy_searcher  # noqa: E402

BEST = "Cats purr when they are content."


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def url(live_server: Any) -> Iterator[str]:
    with live_server(create_app(toy_searcher(), ServeConfig(default_top=3, default_depth=5))) as base:
        yield base


def shoot(page: Any, name: str) -> None:
    folder = os.environ.get("EVIRANK_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def check_results(page: Any) -> None:
    results = page.locator("li.result")
    assert results.count() == 3
    first = results.nth(0)
    assert first.locator("h2").inner_text() == "Why cats purr"
    best_mark = first.locator(".doctext mark.ev1")
    assert best_mark.count() == 1
    assert best_mark.inner_text().removeprefix("1").strip() == BEST
    colour = best_mark.evaluate("m => getComputedStyle(m).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")  # really highlighted, not just tagged
    scores = [float(t) for t in first.locator("ol.evidence .evscore").all_inner_texts()]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)
    assert "ms" in page.locator(".timing").inner_text()


def test_search_with_javascript_swaps_results_in_without_a_page_load(browser: Any, url: str) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url + "/")
    assert page.get_attribute("html", "data-enhanced") == "1"
    page.evaluate("window.__sameDocument = true")
    page.fill("#q", "cats purr")
    page.click("button[type=submit]")
    page.wait_for_selector("li.result mark.ev1")
    check_results(page)
    assert page.evaluate("window.__sameDocument") is True  # swapped in, no navigation
    assert "q=cats+purr" in page.url
    assert page.title().startswith("cats purr")
    shoot(page, "results-js.png")
    page.go_back()
    page.wait_for_selector(".intro")
    assert page.locator("li.result").count() == 0
    assert errors == []
    context.close()


def test_search_without_javascript_is_rendered_by_the_server(browser: Any, url: str) -> None:
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.goto(url + "/")
    assert page.get_attribute("html", "data-enhanced") is None
    page.fill("#q", "cats purr")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    assert "q=cats+purr" in page.url
    check_results(page)
    shoot(page, "results-nojs.png")
    context.close()


def test_bad_input_shows_a_message_in_the_page(browser: Any, url: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    response = page.goto(url + "/?q=cats&k=2&depth=5")  # k in its old meaning: 2 results
    assert response is not None and response.status == 400
    assert "to get 2 results write top=2" in page.locator("[role=alert]").inner_text()
    context.close()


def test_a_query_on_an_index_with_stored_vectors_shows_evidence_model_and_time(
    browser: Any, live_server: Any, embedded_index: Path, tiny_bi_encoder_path: Path
) -> None:
    from evirank.serve.build import build_searcher

    searcher = build_searcher(embedded_index, model=str(tiny_bi_encoder_path), device="cpu")
    with live_server(create_app(searcher, ServeConfig(default_top=2, default_depth=4))) as base:
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/")
        page.fill("#q", "where did the cat sit")
        page.click("button[type=submit]")
        page.wait_for_selector("li.result mark.ev1")
        assert page.locator("li.result").count() == 2
        mark = page.locator("li.result").nth(0).locator(".doctext mark.ev1")
        colour = mark.evaluate("m => getComputedStyle(m).backgroundColor")
        assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
        status = page.locator(".status").inner_text()
        assert "stored passage vectors" in status and "tiny-bi" in status
        assert "answered in" in page.locator(".timing").inner_text()
        assert searcher.scorer.stats_.computed == 1  # only the query was embedded
        shoot(page, "results-stored-vectors.png")
        assert errors == []
        context.close()


def test_the_terms_of_a_score_open_under_it_and_add_up(browser: Any, live_server: Any) -> None:
    from evirank.aggregate import Birch
    from evirank.serve.searcher import Searcher
    from evirank.serve.testing import TOY_DOCUMENTS, ToyIndex, ToyScorer, ToySentences

    index = ToyIndex(TOY_DOCUMENTS)
    searcher = Searcher(index.retrieve, ToySentences(), ToyScorer(), Birch(top_n=2, alpha=0.3), index.lookup)
    with live_server(create_app(searcher, ServeConfig(default_top=3, default_depth=5))) as base:
        context = browser.new_context(java_script_enabled=True)
        page = context.new_page()
        page.goto(base + "/?q=cats+purr")
        first = page.locator("li.result").nth(0)
        why = first.locator("details.why")
        table = why.locator("table.terms")
        assert not table.is_visible()  # folded until asked
        why.locator("summary").click()
        assert table.is_visible()
        cells = table.locator("tbody tr td.term").all_inner_texts()
        assert cells == ["first stage", "passage 1", "passage 2"]
        parts = [
            float(t.removeprefix("= ")) for t in table.locator("tbody tr td:last-child").all_inner_texts()
        ]
        score = float(first.locator(".chip.score b").inner_text())
        assert sum(parts) == pytest.approx(score, abs=2e-3)  # three decimals shown per cell
        assert "passage 1" in (first.locator(".chip.score").get_attribute("title") or "")
        shoot(page, "why.png")
        context.close()


def test_the_attention_toggle_shades_the_best_sentences_words_by_what_the_model_links(
    browser: Any, live_server: Any, tiny_cross_encoder_path: Path
) -> None:
    import re

    import numpy as np

    from evirank.score import CrossEncoder
    from evirank.serve.searcher import Searcher
    from evirank.serve.testing import ToyIndex, ToyMaxP, ToySentences

    index = ToyIndex()
    searcher = Searcher(
        index.retrieve, ToySentences(), CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu")),
        ToyMaxP(),
        index.lookup, info={"index": "toy", "model": "tiny cross-encoder"},
    )  # fmt: skip

    def alpha(colour: str) -> float:
        found = re.match(r"rgba?\(([^)]*)\)", colour)
        parts = found.group(1).split(",") if found else []
        return float(parts[3]) if len(parts) == 4 else (1.0 if len(parts) == 3 else 0.0)

    with live_server(create_app(searcher, ServeConfig(default_top=3, default_depth=5))) as base:
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda exc: problems.append(str(exc)))
        page.on(  # a refused script (the page's policy) or a failed fetch shows here
            "console",
            lambda msg: (
                problems.append(msg.text)
                if msg.type == "error" and "Failed to load resource" not in msg.text
                else None
            ),
        )
        page.on(
            "response",
            lambda r: (
                problems.append(f"{r.status} {r.url}")
                if r.status >= 400 and not r.url.endswith("/favicon.ico")
                else None
            ),
        )
        page.goto(base + "/?q=cats+purr")
        first = page.locator("li.result").nth(0)
        mark = first.locator(".doctext mark.ev1")
        sentence = (
            mark.inner_text().removeprefix(first.locator(".doctext mark.ev1 .evn").inner_text()).strip()
        )
        toggle = first.locator("button.attn")
        assert toggle.is_visible() and toggle.get_attribute("aria-pressed") == "false"
        toggle.click()
        mark.locator("span.att").first.wait_for()
        words = mark.locator("span.att")
        api = page.request.get(
            base + "/v1/attention",
            params={"q": "cats purr", "docno": first.get_attribute("data-docno") or "",
                    "pid": toggle.get_attribute("data-pid") or ""},
        ).json()  # fmt: skip
        assert words.all_inner_texts() == [u["text"] for u in api["passage_units"]]  # word level, each word
        assert mark.inner_text().endswith(sentence)  # the sentence reads the same, only shaded
        shades = [alpha(w.evaluate("e => getComputedStyle(e).backgroundColor")) for w in words.all()]
        totals = api["layers"][-1]["passage_totals"]
        assert int(np.argmax(shades)) == int(np.argmax(totals)) and max(shades) > 0.5
        chips = first.locator(".attq button")
        assert chips.all_inner_texts() == ["all query words", "cats", "purr"]
        chips.nth(2).click()  # what "purr" attends to
        assert chips.nth(2).get_attribute("aria-pressed") == "true"
        row = api["layers"][-1]["weights"][1]
        shades = [alpha(w.evaluate("e => getComputedStyle(e).backgroundColor")) for w in words.all()]
        assert int(np.argmax(shades)) == int(np.argmax(row))
        assert "purr" in (words.nth(int(np.argmax(row))).get_attribute("title") or "")
        assert "layer 1 of 0-1" in first.locator(".attq .attm").inner_text()
        shoot(page, "attention.png")
        toggle.click()  # off: the sentence as it was
        assert mark.locator("span.att").count() == 0 and not first.locator(".attq").is_visible()
        assert mark.inner_text().endswith(sentence)
        assert problems == []
        context.close()
        no_js = browser.new_context(java_script_enabled=False)
        plain = no_js.new_page()
        plain.goto(base + "/?q=cats+purr")
        assert not plain.locator("li.result button.attn").first.is_visible()  # it needs the script
        no_js.close()
