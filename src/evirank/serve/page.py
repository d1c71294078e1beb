"""The web page at ``/``, rendered on the server by hand: works with JavaScript off, no external assets.

Every value from a query or a document goes through :func:`html.escape`. The page is one HTML document
with inline CSS; a small inline script only makes searching smoother (results swap in without a page
load, the URL stays shareable); without it the form is a plain ``GET`` and the server renders the list.

Example:
    >>> from evirank.serve.searcher import Evidence
    >>> html = highlight("Cats purr. Dogs bark.", [Evidence("Dogs bark.", 0.9, 1, 11, 21)])
    >>> html.split("<mark")[0], html.endswith('<span class="evn">1</span>Dogs bark.</mark>')
    ('Cats purr. ', True)
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from evirank.rerank.timing import SCORING_PARTS
from evirank.serve.config import ServeConfig
from evirank.serve.searcher import Candidate, Evidence, SearchResult

#: Texts longer than this are shown as excerpts around their evidence, the full text one click away.
EXCERPT_ABOVE = 1000
#: Characters of context kept on each side of a highlighted span in an excerpt.
CONTEXT = 160


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _spans(evidence: Sequence[Evidence]) -> list[tuple[int, int, int, Evidence]]:
    """Non-overlapping (start, end, number, evidence) in text order; the better evidence wins an overlap."""
    taken: list[tuple[int, int, int, Evidence]] = []
    for number, ev in enumerate(evidence, start=1):
        if ev.start is None or ev.end is None or ev.end <= ev.start:
            continue
        if any(ev.start < end and start < ev.end for start, end, _, _ in taken):
            continue
        taken.append((ev.start, ev.end, number, ev))
    return sorted(taken, key=lambda span: span[0])


def _mark(text: str, number: int, ev: Evidence, start: int) -> str:
    """A numbered evidence span; ``data-start``/``data-end`` say where its text is in the document (the
    attention toggle shades its words by those offsets)."""
    return (
        f'<mark class="ev ev{min(number, 3)}" title="evidence {number} · score {ev.score:.3f}" '
        f'data-start="{start}" data-end="{start + len(text)}">'
        f'<span class="evn">{number}</span>{_e(text)}</mark>'
    )


def highlight(text: str, evidence: Sequence[Evidence], window: tuple[int, int] | None = None) -> str:
    """``text`` as escaped HTML with each located evidence span wrapped in a numbered ``<mark>``.

    Args:
        text: the document text.
        evidence: best first; spans come from :attr:`Evidence.start`/``end``.
        window: render only ``text[window[0]:window[1]]`` (spans are clipped to it).
    """
    lo, hi = window if window is not None else (0, len(text))
    out, pos = [], lo
    for start, end, number, ev in _spans(evidence):
        start, end = max(start, lo), min(end, hi)
        if start >= end:
            continue
        out.append(_e(text[pos:start]))
        out.append(_mark(text[start:end], number, ev, start))
        pos = end
    out.append(_e(text[pos:hi]))
    return "".join(out)


def _snap(text: str, index: int, backwards: bool) -> int:
    """Move ``index`` to a word boundary so excerpts do not cut words in half."""
    if index <= 0 or index >= len(text):
        return max(0, min(index, len(text)))
    step = -1 if backwards else 1
    limit = 40
    while 0 < index < len(text) and not text[index].isspace() and limit:
        index += step
        limit -= 1
    return index


def excerpt(text: str, evidence: Sequence[Evidence]) -> str:
    """Escaped HTML of the parts of ``text`` around its evidence, joined by ellipses.

    Example:
        >>> ev = [Evidence("b", 1.0, 0, 500, 501)]
        >>> excerpt("a" * 400 + " " + "x" * 99 + "b" + "y" * 99 + " " + "c" * 400, ev).count("<mark")
        1
    """
    spans = _spans(evidence)
    if not spans:
        head = _snap(text, min(len(text), 2 * CONTEXT), backwards=True)
        return _e(text[:head]) + (" …" if head < len(text) else "")
    windows: list[list[int]] = []
    for start, end, _, _ in spans:
        lo = _snap(text, start - CONTEXT, backwards=True)
        hi = _snap(text, end + CONTEXT, backwards=False)
        if windows and lo <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], hi)
        else:
            windows.append([lo, hi])
    body = " … ".join(highlight(text, evidence, (lo, hi)).strip() for lo, hi in windows)
    return ("… " if windows[0][0] > 0 else "") + body + (" …" if windows[-1][1] < len(text) else "")


def _fmt_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.1f} s"
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def _movement(candidate: Candidate) -> str:
    delta = candidate.first_stage_rank - candidate.rank
    if delta > 0:
        return f'<span class="move up" title="moved up {delta} from first-stage rank">▲ {delta}</span>'
    if delta < 0:
        return f'<span class="move down" title="moved down {-delta} from first-stage rank">▼ {-delta}</span>'
    return '<span class="move same" title="same rank as the first stage">= BM25 rank</span>'


def _attention_toggle(candidate: Candidate) -> str:
    """The toggle that shades the words of the best evidence by what the model links to the query
    (fetched from ``/v1/attention`` when pressed; shown only with JavaScript)."""
    if not candidate.evidence or candidate.evidence[0].start is None:
        return ""
    best = candidate.evidence[0]
    return (
        f'<div class="attbar"><button type="button" class="attn" data-docno="{_e(candidate.docno)}" '
        f'data-pid="{best.pid}" aria-pressed="false" title="shade the words of evidence 1 by what the '
        'model links to each query word (computed on request)">attention</button>'
        '<div class="attq" hidden></div></div>'
    )


def _candidate(candidate: Candidate, best: float, worst: float, attention: bool = False) -> str:
    chips = []
    spread = (best - worst) or 1.0
    for number, ev in enumerate(candidate.evidence, start=1):
        width = 8 + 92 * max(0.0, min(1.0, (ev.score - worst) / spread))
        # evidence not found verbatim in the text (e.g. a title segment) is quoted here instead
        quoted = f'<span class="evtext">“{_e(ev.text)}”</span>' if ev.start is None else ""
        chips.append(
            f'<li class="evs ev{min(number, 3)}" title="passage {ev.pid} · score {ev.score:.3f}">'
            f'<span class="evn">{number}</span><span class="bar"><span style="width:{width:.0f}%"></span>'
            f'</span><span class="evscore">{ev.score:.3f}</span>{quoted}</li>'
        )
    text = candidate.text
    if len(text) > EXCERPT_ABOVE:
        body = (
            f'<p class="doctext">{excerpt(text, candidate.evidence)}</p>'
            f'<details class="full"><summary>Full text ({len(text.split()):,} words)</summary>'
            f'<p class="doctext">{highlight(text, candidate.evidence)}</p></details>'
        )
    else:
        body = f'<p class="doctext">{highlight(text, candidate.evidence)}</p>'
    title = candidate.title.strip() or candidate.docno
    heading = _e(title)
    if candidate.url and candidate.url.startswith(("http://", "https://")):  # never javascript: and the like
        heading = f'<a class="source" href="{_e(candidate.url)}" rel="noopener noreferrer">{heading}</a>'
    return (
        f'<li class="result" data-docno="{_e(candidate.docno)}">'
        f'<span class="rank">{candidate.rank}</span><div class="rbody">'
        f"<h2>{heading}</h2>"
        f'<div class="meta"><a class="docno" href="/v1/doc/{_e(quote(candidate.docno, safe=""))}" '
        f'title="the stored document as JSON">{_e(candidate.docno)}</a>'
        f'<span class="chip score" title="{_e(_breakdown_text(candidate))}">score '
        f"<b>{candidate.score:.3f}</b></span>"
        f'<span class="chip" title="first-stage (BM25) score and rank">BM25 '
        f"<b>{candidate.first_stage_score:.2f}</b> · #{candidate.first_stage_rank}</span>"
        f"{_movement(candidate)}</div>"
        f'<ol class="evidence" aria-label="evidence scores, best first">'
        f'<li class="label">evidence</li>{"".join(chips)}</ol>'
        f"{_attention_toggle(candidate) if attention else ''}"
        f"{_breakdown(candidate)}"
        f"{body}</div></li>"
    )


def _breakdown_text(candidate: Candidate) -> str:
    """The score's terms in one line (the score chip's tooltip)."""
    if not candidate.terms:
        return "evidence score (aggregated passage scores)"
    parts = " + ".join(f"{t.weight:.3g} × {t.value:.3f} ({t.name})" for t in candidate.terms)
    return f"score {candidate.score:.3f} = {parts}"


def _breakdown(candidate: Candidate) -> str:
    """Why this score: each term's weight, value and contribution, adding up to the score."""
    if not candidate.terms:
        return ""
    rows = "".join(
        f'<tr><td class="term">{_e(t.name)}</td><td>{t.weight:.3g}</td>'
        f"<td>× {t.value:.3f}</td><td>= {t.contribution:.3f}</td></tr>"
        for t in candidate.terms
    )
    return (
        f'<details class="why"><summary>why {candidate.score:.3f}</summary>'
        f'<table class="terms" aria-label="the terms of the score"><thead><tr><th>term</th><th>weight</th>'
        f"<th>value</th><th>contribution</th></tr></thead><tbody>{rows}</tbody>"
        f'<tfoot><tr><td colspan="3">score</td><td>= {candidate.score:.3f}</td></tr></tfoot></table>'
        "<p>The first stage and passage scores are normalised per query (min-max) unless the "
        "aggregator says otherwise; passage 1 is the document's best passage.</p></details>"
    )


def _provenance(info: Mapping[str, Any] | None) -> str:
    """Which model made the evidence, and how (stored vectors, per query, a cascade)."""
    if not info or not info.get("model"):
        return ""
    how = info.get("evidence")
    text = f"evidence by {info['model']}" + (f" ({how})" if how else "")
    return f'<span class="model">{_e(text)}</span>'


def render_results(
    result: SearchResult | None,
    error: str | None,
    info: Mapping[str, Any] | None = None,
    attention: bool = False,
) -> str:
    """The results section (also served alone, for the script that swaps it in).

    ``info`` is the searcher's description: the model that made the evidence is shown with the time.
    ``attention``: the scorer has an attention view, so each result's best evidence gets a toggle.
    """
    if error:
        return f'<section id="results"><div class="error" role="alert">{_e(error)}</div></section>'
    if result is None:
        name = (info or {}).get("index")
        examples = [str(q) for q in (info or {}).get("examples") or ()]
        tries = ""
        if examples:
            links = "".join(f'<li><a href="/?{_e(urlencode({"q": q}))}">{_e(q)}</a></li>' for q in examples)
            tries = f'<p>Try one of this collection\'s queries:</p><ul class="examples">{links}</ul>'
        return (
            '<section id="results"><div class="intro">'
            + (f"<h1>Search {_e(name)}</h1>" if name else "")
            + "<p>Documents are first retrieved with BM25, then "
            "re-ranked by the evidence their sentences hold: each passage is scored by a neural model and "
            "the best passages decide the document's rank.</p><p>Highlighted sentences are that evidence, "
            "numbered best first; under each score, <i>why</i> shows the terms it adds up from.</p>"
            f"{tries}</div></section>"
        )
    t = result.timings
    scoring = sum(t.get(key, 0.0) for key in SCORING_PARTS)
    steps = " · ".join(
        f"{name} {_fmt_ms(value)}"
        for name, value in (
            ("first stage", t.get("first_stage", 0.0) + t.get("text_fetch", 0.0)),
            ("segmentation", t.get("segmentation", 0.0) + t.get("pruning", 0.0)),
            ("scoring", scoring),
            ("aggregation", t.get("aggregation", 0.0)),
            ("queue", t.get("wait", 0.0)),
        )
    )
    n = len(result.candidates)
    api = "/v1/search?" + urlencode(search_params(result))
    retrieved = f" of {result.k} retrieved" if result.k > result.depth else ""
    status = (
        f'<div class="status"><span><b>{n}</b> result{"s" if n != 1 else ""} for '
        f"<q>{_e(result.query)}</q>, re-ranked from the first stage's top {result.depth}{retrieved} "
        f"({result.passages:,} passages scored)</span>"
        f"{_provenance(info)}"
        f'<span class="timing" title="{_e(steps)}">answered in {_fmt_ms(t.get("total", 0.0))}'
        f'<span class="steps"> — {_e(steps)}</span></span>'
        f'<a class="json" href="{_e(api)}">JSON</a></div>'
    )
    if not result.candidates:
        return f'<section id="results">{status}<div class="empty">No document matched.</div></section>'
    scores = [ev.score for c in result.candidates for ev in c.evidence] or [0.0]
    items = "".join(_candidate(c, max(scores), min(scores), attention) for c in result.candidates)
    return (
        f'<section id="results">{status}<ol class="results" data-query="{_e(result.query)}">{items}</ol>'
        "</section>"
    )


def search_params(result: SearchResult) -> dict[str, str | int]:
    """The query string of ``result``'s search: ``q``, ``top``, ``depth``, and ``k`` when it is not
    ``depth`` (its default).

    Example:
        >>> search_params(SearchResult("cats", 3, 20, 50, (), {}, passages=0))
        {'q': 'cats', 'top': 3, 'depth': 20, 'k': 50}
        >>> search_params(SearchResult("cats", 3, 20, 20, (), {}, passages=0))
        {'q': 'cats', 'top': 3, 'depth': 20}
    """
    params: dict[str, str | int] = {"q": result.query, "top": result.top, "depth": result.depth}
    if result.k != result.depth:
        params["k"] = result.k
    return params


def render_page(
    config: ServeConfig,
    info: Mapping[str, Any],
    query: str = "",
    top: int | None = None,
    depth: int | None = None,
    k: int | None = None,
    result: SearchResult | None = None,
    error: str | None = None,
    attention: bool = False,
) -> str:
    """The whole page: header with the search form, the results section, a footer (``attention``: see
    :func:`render_results`).

    ``top``, ``depth`` and ``k`` are the request's numbers, shown in the form: ``top`` and ``depth``
    default to the service's, ``k`` stays blank unless given (it defaults to ``depth``).
    """
    depth = config.default_depth if depth is None else depth
    top = config.shown(depth) if top is None else top
    shown_k = "" if k is None else str(k)
    title = f"{query} — {config.title}" if query else config.title
    described = " · ".join(
        _e(f"{key} {value}") for key, value in info.items() if value not in (None, "") and key != "examples"
    )
    name = info.get("index")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{CSS}</style></head>
<body>
<header><div class="wrap">
<a class="brand" href="/">{_e(config.title)}<span>evidence search</span></a>
<form id="search" method="get" action="/" role="search">
<input id="q" name="q" type="search" value="{_e(query)}" maxlength="{config.max_query_chars}"
 placeholder="Search {_e(name or "the collection")}…" aria-label="query" autocomplete="off" autofocus>
<label>top <input name="top" type="number" min="1" max="{config.max_depth}" value="{top}"
 aria-label="results" title="results shown"></label>
<label>of <input name="depth" type="number" min="1" max="{config.max_depth}" value="{depth}"
 aria-label="re-rank depth" title="first-stage hits re-ranked"></label>
<label>k <input name="k" type="number" min="1" max="{config.max_depth}" value="{shown_k}"
 placeholder="depth" aria-label="first-stage depth"
 title="first-stage depth: documents retrieved (blank: depth)"></label>
<button type="submit">Search</button>
</form></div></header>
<main class="wrap">
{render_results(result, error, info, attention)}
</main>
<footer class="wrap"><span>{described}</span>
<span><a href="/docs">API docs</a> · <a href="/health">health</a></span></footer>
<script>{SCRIPT}</script>
</body></html>"""


CSS = """
:root{--ink:#1d2330;--muted:#5f6b7a;--line:#e3e7ee;--bg:#f6f7f9;--card:#fff;--accent:#2f5bd3;
--ev1:#ffe08a;--ev2:#fff0bf;--ev3:#fff7dd;--up:#177245;--down:#b3261e}
*{box-sizing:border-box}
body{margin:0;font:15px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--ink);background:var(--bg)}
.wrap{max-width:980px;margin:0 auto;padding:0 20px}
header{background:#fff;border-bottom:1px solid var(--line);position:sticky;top:0;z-index:2}
header .wrap{display:flex;align-items:center;gap:22px;padding-top:14px;padding-bottom:14px;flex-wrap:wrap}
.brand{font-weight:700;font-size:20px;color:var(--ink);text-decoration:none;letter-spacing:-.02em}
.brand span{display:block;font-weight:500;font-size:11px;color:var(--muted);letter-spacing:.06em;
text-transform:uppercase}
form{display:flex;gap:8px;align-items:center;flex:1;min-width:280px;flex-wrap:wrap}
form label{font-size:13px;color:var(--muted);white-space:nowrap}
input[type=search]{flex:1;min-width:180px;font:inherit;padding:9px 12px;border:1px solid #c9d0db;
border-radius:8px;background:#fff}
input[type=number]{width:58px;font:inherit;font-size:13px;padding:7px 6px;border:1px solid #c9d0db;
border-radius:8px}
input:focus{outline:2px solid #a9bdf3;border-color:var(--accent)}
button{font:inherit;font-weight:600;padding:9px 18px;border:0;border-radius:8px;background:var(--accent);
color:#fff;cursor:pointer}
button:hover{background:#2449b0}
main{padding-top:18px;padding-bottom:30px}
.status{display:flex;gap:14px;align-items:baseline;flex-wrap:wrap;color:var(--muted);font-size:13px;
margin:0 0 14px}
.status q{color:var(--ink);font-weight:600}
.timing{margin-left:auto;font-variant-numeric:tabular-nums}
.model{font-style:italic}
.steps{color:#8a94a3}
.json{font-size:12px;color:var(--accent)}
ol.results{list-style:none;margin:0;padding:0}
.result{display:flex;gap:14px;background:var(--card);border:1px solid var(--line);border-radius:12px;
padding:16px 20px;margin:0 0 14px;box-shadow:0 1px 2px rgba(16,24,40,.04)}
.rank{flex:none;width:30px;height:30px;border-radius:50%;background:#eef2fb;color:var(--accent);
font-weight:700;font-size:14px;display:flex;align-items:center;justify-content:center;margin-top:1px}
.rbody{flex:1;min-width:0}
h2{font-size:17px;line-height:1.35;margin:0 0 6px;font-weight:650}
h2 a.source{color:inherit;text-decoration:none}h2 a.source:hover{text-decoration:underline}
.meta{display:flex;gap:8px;align-items:center;flex-wrap:wrap;font-size:12px;color:var(--muted)}
.docno{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;color:var(--muted);
text-decoration:none;border-bottom:1px dotted #b8c0cc}
.chip{background:#f1f3f7;border-radius:999px;padding:2px 9px;font-variant-numeric:tabular-nums}
.chip.score{background:#eaf0ff;color:#23408f}
details.why{margin:.3rem 0;font-size:.85rem;color:#444}
details.why summary{cursor:pointer;color:#23408f}
table.terms{border-collapse:collapse;margin:.3rem 0}
table.terms td,table.terms th{padding:.1rem .6rem;text-align:right}
table.terms td.term,table.terms th:first-child{text-align:left}
table.terms tfoot td{border-top:1px solid var(--line);font-weight:600}
.intro h1{font-size:1.3rem;margin:.2rem 0 .6rem}
ul.examples{margin:.3rem 0;padding-left:1.2rem}
.move{font-weight:600;font-size:12px}
.move.up{color:var(--up)}.move.down{color:var(--down)}.move.same{color:#9aa3b0;font-weight:500}
ol.evidence{list-style:none;margin:8px 0 8px;padding:0;display:flex;flex-wrap:wrap;gap:6px 16px;
align-items:center;font-size:12px;color:var(--muted)}
ol.evidence .label{text-transform:uppercase;letter-spacing:.06em;font-size:10.5px;font-weight:600}
.evs{display:flex;align-items:center;gap:6px;font-variant-numeric:tabular-nums}
.evs .evtext{color:var(--ink);font-style:italic}
.bar{display:inline-block;width:48px;height:6px;background:#eef0f4;border-radius:3px;overflow:hidden}
.bar span{display:block;height:100%;background:#d99a00}
.evn{display:inline-flex;align-items:center;justify-content:center;min-width:16px;height:16px;
border-radius:50%;background:#c98b00;color:#fff;font-size:10px;font-weight:700;font-style:normal}
.evs.ev2 .evn,mark.ev2 .evn{background:#d9a93a}.evs.ev3 .evn,mark.ev3 .evn{background:#e2bf6d}
.doctext{margin:0;color:#3a4352;font-size:14px;line-height:1.65}
mark.ev{border-radius:3px;padding:1px 3px;color:var(--ink);box-decoration-break:clone;
-webkit-box-decoration-break:clone}
mark.ev1{background:var(--ev1)}mark.ev2{background:var(--ev2)}mark.ev3{background:var(--ev3)}
mark .evn{font-size:9px;min-width:14px;height:14px;margin-right:4px;vertical-align:1px}
details.full{margin:8px 0 0;font-size:13px}
details.full summary{cursor:pointer;color:var(--accent)}
details.full .doctext{margin:8px 0 0}
.intro,.empty{background:#fff;border:1px solid var(--line);border-radius:12px;padding:18px 22px;
color:var(--muted)}
.intro p{margin:.3em 0}
.error{background:#fdecea;border:1px solid #f5c2bd;color:#8c1d18;border-radius:10px;padding:12px 16px}
footer{display:flex;justify-content:space-between;gap:12px;flex-wrap:wrap;color:#8a94a3;font-size:12px;
padding-bottom:24px}
footer a{color:var(--muted)}
#results[aria-busy=true]{opacity:.45;transition:opacity .15s}
.attbar{margin:0 0 8px}
button.attn{display:none;font:inherit;font-size:11px;font-weight:600;padding:1px 9px;border-radius:999px;
border:1px solid #c9d0db;background:#fff;color:var(--accent)}
html[data-enhanced] button.attn{display:inline-block}
button.attn:hover{background:#eef2fb}button.attn[aria-pressed=true]{background:var(--accent);color:#fff}
.attq{display:flex;flex-wrap:wrap;gap:4px 6px;align-items:center;font-size:12px;color:var(--muted);
margin:6px 0 0}
.attq[hidden]{display:none}
.attq button{font:inherit;font-size:11px;font-weight:500;padding:1px 8px;border-radius:999px;
border:1px solid #d5dae3;background:#fff;color:var(--ink)}
.attq button:hover{background:#f1f3f7}
.attq button[aria-pressed=true]{border-color:var(--accent);background:#eaf0ff}
.attq .attm{flex-basis:100%;font-size:11px}
mark .att{border-radius:2px;padding:0 1px}
@media (max-width:640px){.result{padding:14px}.rank{display:none}.steps{display:none}
input[type=search]{flex-basis:100%}button{margin-left:auto}header{position:static}header .wrap{gap:10px}}
"""

# Progressive enhancement: fetch the rendered results section and swap it in; keep the URL shareable.
SCRIPT = """
(function(){
var form=document.getElementById('search');if(!form||!window.fetch)return;
document.documentElement.setAttribute('data-enhanced','1');
var pending=null;
function clean(params){
  ['top','depth','k'].forEach(function(n){if(params.get(n)==='')params.delete(n);});return params;
}
function load(params,push){
  clean(params);
  var results=document.getElementById('results');
  if(pending)pending.abort();pending=new AbortController();
  results.setAttribute('aria-busy','true');
  params.set('partial','1');
  fetch('/?'+params.toString(),{signal:pending.signal}).then(function(r){return r.text();})
  .then(function(html){
    params.delete('partial');
    var box=document.createElement('div');box.innerHTML=html;
    var fresh=box.querySelector('#results');if(!fresh)return;
    results.replaceWith(fresh);
    var q=params.get('q')||'';document.title=(q?q+' \\u2014 ':'')+document.title.split(' \\u2014 ').pop();
    if(push)history.pushState(null,'','/?'+params.toString());
  }).catch(function(e){if(e.name!=='AbortError'){form.submit();}});
}
form.addEventListener('submit',function(ev){
  ev.preventDefault();load(new URLSearchParams(new FormData(form)),true);
});
window.addEventListener('popstate',function(){
  var p=new URLSearchParams(location.search);
  ['q','top','depth'].forEach(function(n){if(p.has(n))form.elements[n].value=p.get(n);});
  form.elements.k.value=p.get('k')||'';
  load(p,false);
});
function shade(v,top,signed){
  if(!(top>0))return '';var a=(Math.min(1,Math.abs(v)/top)*0.8).toFixed(3);
  return (signed&&v<0)?'rgba(31,119,180,'+a+')':'rgba(214,39,40,'+a+')';
}
function marks(item){return item.querySelectorAll('.doctext mark.ev1[data-start]');}
function paint(item,data,row){
  var layer=data.layers[data.layers.length-1];
  var values=row<0?layer.passage_totals:layer.weights[row];
  var top=0;values.forEach(function(v){top=Math.max(top,Math.abs(v));});
  var signed=data.kind!=='attention';
  marks(item).forEach(function(mark){
    if(!mark._plain){
      mark._plain=Array.prototype.map.call(mark.childNodes,function(n){return n.cloneNode(true);});
      mark._text=Array.prototype.filter.call(mark.childNodes,function(n){return n.nodeType===3;})
        .map(function(n){return n.nodeValue;}).join('');
    }
    var s=+mark.getAttribute('data-start'),e=+mark.getAttribute('data-end'),text=mark._text,pos=0;
    var num=mark.querySelector('.evn');num=num?num.cloneNode(true):null;
    while(mark.firstChild)mark.removeChild(mark.firstChild);
    if(num)mark.appendChild(num);
    data.passage_units.forEach(function(u,j){
      if(u.doc_start===null||u.doc_start<s+pos||u.doc_end>e)return;
      var a=u.doc_start-s,b=u.doc_end-s;
      if(a>pos)mark.appendChild(document.createTextNode(text.slice(pos,a)));
      var w=document.createElement('span');w.className='att';w.textContent=text.slice(a,b);
      w.style.backgroundColor=shade(values[j],top,signed);
      w.title=(row<0?'all query words':data.query_units[row].text)+' \u2192 '+u.text+': '
        +values[j].toFixed(3);
      mark.appendChild(w);pos=b;
    });
    if(pos<text.length)mark.appendChild(document.createTextNode(text.slice(pos)));
  });
}
function unpaint(item){
  marks(item).forEach(function(mark){
    if(!mark._plain)return;
    while(mark.firstChild)mark.removeChild(mark.firstChild);
    mark._plain.forEach(function(n){mark.appendChild(n.cloneNode(true));});
  });
}
function words(box,item,data){
  box.textContent='';
  var layer=data.layers[data.layers.length-1].layer;
  var rows=[{t:'all query words',r:-1}].concat(data.query_units.map(function(u,i){return {t:u.text,r:i};}));
  rows.forEach(function(c){
    var b=document.createElement('button');b.type='button';b.textContent=c.t;
    b.setAttribute('aria-pressed',c.r<0?'true':'false');
    b.addEventListener('click',function(){
      box.querySelectorAll('button').forEach(function(x){x.setAttribute('aria-pressed','false');});
      b.setAttribute('aria-pressed','true');paint(item,data,c.r);
    });
    box.appendChild(b);
  });
  var m=document.createElement('span');m.className='attm';
  m.textContent=data.family+', layer '+layer+' of 0-'+(data.n_layers-1)+': '+data.measure
    +(data.note?'. '+data.note:'');
  box.appendChild(m);
}
document.addEventListener('click',function(ev){
  var b=ev.target&&ev.target.closest?ev.target.closest('button.attn'):null;if(!b)return;
  var item=b.closest('li.result'),box=item.querySelector('.attq'),list=item.closest('ol.results');
  if(b.getAttribute('aria-pressed')==='true'){
    b.setAttribute('aria-pressed','false');box.hidden=true;box.textContent='';unpaint(item);return;
  }
  b.setAttribute('aria-pressed','true');box.hidden=false;box.textContent='computing\u2026';
  var p=new URLSearchParams({q:list.getAttribute('data-query')||'',docno:b.getAttribute('data-docno'),
    pid:b.getAttribute('data-pid')});
  fetch('/v1/attention?'+p.toString()).then(function(r){
    return r.json().then(function(j){if(!r.ok)throw new Error(j.error||r.statusText);return j;});
  }).then(function(data){
    if(b.getAttribute('aria-pressed')!=='true')return;
    words(box,item,data);paint(item,data,-1);
  }).catch(function(e){box.textContent='attention: '+e.message;});
});
document.addEventListener('keydown',function(ev){
  if(ev.key==='/'&&document.activeElement!==form.elements.q){ev.preventDefault();form.elements.q.focus();}
});
})();
"""


def security_headers() -> dict[str, str]:
    """Headers for the page: a Content-Security-Policy that allows only its own inline script (by hash).

    Every value on the page is escaped already; the policy is a second line of defence, and it also
    keeps the page from loading anything from elsewhere.
    """
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
    policy = (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
