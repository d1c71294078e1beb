"""The attention view drawn: a PNG heat map (matplotlib, the ``plots`` extra) and a self-contained HTML page.

Both show, per chosen layer, the matrix of an :class:`~evirank.score.attention.AttentionView`: query
units as rows, passage units as columns, the mean over heads first and each head after it on request.
The HTML page also shows the passage once per query word with each word shaded by that query word's
weight (the view of Birch's Figure 5.3), at word level, and the token-level matrices folded under it.
Every text in the page is escaped; it loads nothing from elsewhere.

Example:
    >>> from evirank.score.attention import AttentionView, TokenSide
    >>> view = AttentionView(family="demo", kind="attention",
    ...     query=TokenSide.of("art", ("art",), ((0, 3),), (0,)),
    ...     passage=TokenSide.of("paintings <b>", ("paintings", "<b>"), ((0, 9), (10, 13)), (0, 1)),
    ...     layers=(5,), n_layers=6, weights=np.array([[[[0.6, 0.1]]]]))
    >>> attention_png(view)[:4] == b"\\x89PNG"
    True
    >>> "&lt;b&gt;" in attention_html(view) and "<b>" not in attention_html(view)
    True
"""

from __future__ import annotations

import html
import io
import os
import textwrap
from pathlib import Path

import numpy as np

from evirank.outputs import atomic_outputs
from evirank.report.plots import _pyplot
from evirank.score.attention import AttentionView

#: Inches per matrix cell in the PNG (labels at 7 points stay readable).
CELL = 0.26
#: Panels per row when every head is drawn.
HEAD_COLUMNS = 3


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _panels(view: AttentionView, heads: bool) -> list[tuple[int, str, np.ndarray]]:
    """(layer position, title, matrix) of every panel: per layer the mean over heads, then each head."""
    means = view.head_mean()
    panels = []
    for i, layer in enumerate(view.layers):
        n_heads = view.weights.shape[1]
        what = f"mean over {n_heads} heads" if view.heads else view.kind
        panels.append((i, f"layer {layer} of 0-{view.n_layers - 1}: {what}", means[i]))
        if heads and view.heads:
            panels += [(i, f"layer {layer}, head {h}", view.weights[i, h]) for h in range(n_heads)]
    return panels


def _limits(view: AttentionView, matrix: np.ndarray) -> tuple[float, float]:
    top = float(np.nanmax(np.abs(matrix))) if matrix.size else 0.0
    top = top or 1.0
    return (-top, top) if view.signed else (0.0, top)


def attention_png(view: AttentionView, *, heads: bool = False) -> bytes:
    """The heat map(s) of ``view`` (token or word level, as given) as PNG bytes.

    Args:
        view: the view to draw.
        heads: draw every head after each layer's mean (views with heads only).
    """
    plt = _pyplot()
    panels = _panels(view, heads)
    n_q, n_p = len(view.query), len(view.passage)
    columns = HEAD_COLUMNS if len(panels) > len(view.layers) else 1
    rows = -(-len(panels) // columns)
    width = max(4.0, 2.2 + CELL * n_p)
    height = max(1.6, 1.4 + CELL * n_q + 0.07 * max(len(label) for label in view.passage.labels or ("",)))
    fig, axes = plt.subplots(
        rows, columns, figsize=(width * columns, height * rows + 1.2), dpi=110, squeeze=False
    )
    cmap = "RdBu_r" if view.signed else "Reds"
    for ax, (_, title, matrix) in zip(axes.flat, panels, strict=False):
        low, high = _limits(view, matrix)
        image = ax.imshow(matrix, cmap=cmap, vmin=low, vmax=high, aspect="auto", interpolation="nearest")
        ax.set_yticks(range(n_q), view.query.labels, fontsize=8)
        ax.set_xticks(range(n_p), view.passage.labels, fontsize=7, rotation=90)
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    score = f", score {view.score:.4f}" if view.score is not None else ""
    head = f"{view.family} {_model_label(view.model)}{score} ({view.level} level)"
    fig.suptitle(f"{head}\nquery: {_short(view.query.text, 110)}", fontsize=10)
    caption = f"cell: {view.describe()}." + (f" {view.note}." if view.note else "")
    fig.text(0.01, 0.005, textwrap.fill(caption, width=int(16 * width * columns)), fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def _model_label(model: str) -> str:
    """The model's last two path parts (a Hub id, or a folder and its parent): short, still telling."""
    parts = Path(model).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else model


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shade(value: float, low: float, high: float, signed: bool) -> str:
    """A background colour for ``value`` on the scale [low, high]: red for positive, blue for negative."""
    if not np.isfinite(value) or high <= low:
        return "transparent"
    share = min(1.0, abs(value) / max(abs(low), abs(high)))
    colour = "214,39,40" if value >= 0 or not signed else "31,119,180"
    return f"rgba({colour},{share * 0.85:.3f})"


def _sentence_rows(view: AttentionView, layer: int) -> str:
    """The passage once per query unit (and once for the whole query), its text as written, each
    passage unit shaded by that row's weight."""
    matrix = view.head_mean()[layer]
    totals = view.passage_totals()[layer]
    rows = [(label, matrix[r], _limits(view, matrix)) for r, label in enumerate(view.query.labels)]
    rows.append((f"all ({view.merge[0]})", totals, _limits(view, totals)))
    text = view.passage.text
    lines = []
    for label, values, (low, high) in rows:
        parts, pos = [], 0
        for unit, (start, end), v in zip(view.passage.labels, view.passage.spans, values, strict=True):
            if start < pos:  # a unit inside the last one (never with a tokenizer's own spans)
                continue
            parts.append(_e(text[pos:start]))
            shown = text[start:end] if end > start else unit
            parts.append(
                f'<span class="u" style="background:{_shade(float(v), low, high, view.signed)}" '
                f'title="{_e(f"{label} -> {unit}: {float(v):.4f}")}">{_e(shown)}</span>'
            )
            pos = max(pos, end)
        parts.append(_e(text[pos:]))
        lines.append(f'<tr><th scope="row">{_e(label)}</th><td class="s">{"".join(parts)}</td></tr>')
    return f'<table class="sent">{"".join(lines)}</table>'


def _decimals(top: float) -> int:
    """Decimals that show a panel's largest value with two significant digits (at least 2).

    Example:
        >>> _decimals(0.45), _decimals(0.0128)
        (2, 3)
    """
    return 2 if top <= 0 else max(2, 1 - int(np.floor(np.log10(top))))


def _matrix(view: AttentionView, matrix: np.ndarray, caption: str) -> str:
    low, high = _limits(view, matrix)
    places = _decimals(max(abs(low), abs(high)))
    head = "".join(f'<th class="c"><span>{_e(u)}</span></th>' for u in view.passage.labels)
    body = []
    for r, label in enumerate(view.query.labels):
        cells = "".join(
            f'<td style="background:{_shade(float(v), low, high, view.signed)}" '
            f'title="{_e(f"{label} -> {unit}: {float(v):.4f}")}">{float(v):.{places}f}</td>'
            for unit, v in zip(view.passage.labels, matrix[r], strict=True)
        )
        share = ""
        if view.kind == "attention":
            share = f'<td class="share">{float(matrix[r].sum()):.2f}</td>'
        body.append(f'<tr><th scope="row">{_e(label)}</th>{cells}{share}</tr>')
    extra = '<th class="c"><span>to the passage</span></th>' if view.kind == "attention" else ""
    return (
        f'<table class="m"><caption>{_e(caption)}</caption><thead><tr><th></th>{head}{extra}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _layer_sections(view: AttentionView, heads: bool) -> str:
    parts = []
    for i, layer in enumerate(view.layers):
        n_heads = view.weights.shape[1]
        what = f"mean over {n_heads} heads" if view.heads else view.kind
        parts.append(f"<h3>layer {layer} of 0-{view.n_layers - 1} ({_e(what)})</h3>")
        parts.append(_sentence_rows(view, i))
        parts.append(_matrix(view, view.head_mean()[i], f"layer {layer}, {what}"))
        if heads and view.heads:
            per_head = "".join(
                _matrix(view, view.weights[i, h], f"layer {layer}, head {h}") for h in range(n_heads)
            )
            parts.append(f"<details><summary>each of the {n_heads} heads</summary>{per_head}</details>")
    return "".join(parts)


def attention_html(view: AttentionView, *, heads: bool = False) -> str:
    """A self-contained HTML page of ``view`` (a token-level view): word level first, tokens folded.

    Args:
        view: the token-level view (its word level is computed here).
        heads: add every head's matrix, folded, under each layer's mean.
    """
    words = view.by_word()
    score = f"{view.score:.4f}" if view.score is not None else "not computed"
    how_q, how_p = words.merge
    facts = [
        ("query", view.query.text),
        ("passage", view.passage.text),
        ("model", f"{view.family}: {view.model}"),
        ("score", score),
        ("a cell", view.describe()),
        ("words", f"word pieces merged into words: query side by the {how_q}, passage side by the {how_p}"),
    ]
    if view.note:
        facts.append(("note", view.note))
    facts_html = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(f"attention: {_short(view.query.text, 60)}")}</title>
<style>{CSS}</style></head><body>
<h1>What the model links between the query and the passage</h1>
<dl>{facts_html}</dl>
<h2>Words</h2>
{_layer_sections(words, heads)}
<details><summary>Tokens (word pieces)</summary>
{_layer_sections(view, heads)}
</details>
</body></html>
"""


CSS = """
body{font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;color:#1d2330;margin:24px;
max-width:1400px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}dt{font-weight:600;color:#5f6b7a}
dd{margin:0}
h1{font-size:20px}h2{font-size:17px;margin-top:22px}h3{font-size:15px;margin:18px 0 6px}
table.sent{border-collapse:collapse;margin:4px 0 12px}table.sent th{text-align:right;padding:2px 10px 2px 0;
white-space:nowrap;color:#5f6b7a;font-weight:600;vertical-align:top}
.u{border-radius:3px;padding:0 2px}
table.m{border-collapse:collapse;font-size:11px;margin:8px 0 16px}
table.m caption{text-align:left;color:#5f6b7a;padding:2px 0}
table.m td{width:30px;height:22px;text-align:center;border:1px solid #fff;font-variant-numeric:tabular-nums}
table.m th{font-weight:600;padding:0 6px;text-align:right;white-space:nowrap}
table.m th.c{vertical-align:bottom;height:110px;padding:0;width:30px}
table.m th.c span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:500}
table.m td.share{color:#5f6b7a;border-left:2px solid #ccc}
details{margin:10px 0}summary{cursor:pointer;color:#2f5bd3}
"""


def write_attention(
    view: AttentionView,
    prefix: str | os.PathLike[str],
    *,
    level: str = "word",
    heads: bool = False,
    overwrite: bool = False,
) -> list[Path]:
    """Write ``PREFIX.png`` (the heat map at ``level``) and ``PREFIX.html`` together, atomically.

    Neither replaces an existing file without ``overwrite`` (nothing is written then).

    Raises:
        OutputExistsError: a file exists and ``overwrite`` is false.
        ValueError: ``level`` is not ``word`` or ``token``.
    """
    if level not in ("word", "token"):
        raise ValueError(f"level must be word or token, not {level!r}")
    base = Path(prefix)
    paths = [base.with_name(base.name + ".png"), base.with_name(base.name + ".html")]
    drawn = view.by_word() if level == "word" else view
    png, page = attention_png(drawn, heads=heads), attention_html(view, heads=heads)
    with atomic_outputs(*((p, None) for p in paths), overwrite=overwrite) as (png_tmp, html_tmp):
        png_tmp.write_bytes(png)
        html_tmp.write_text(page, encoding="utf-8")
    return paths
