"""A self-contained HTML page from a report's Markdown, with its images embedded as base64.

The report is written once, in Markdown; this module renders the small subset the report uses
(headings, paragraphs, bullet lists, pipe tables with alignment, images, inline code and bold)
so the HTML always says what the Markdown says, and the page needs no other file.

Example:
    >>> page = markdown_to_html("# Title\\n\\n| a | b |\\n| --- | ---: |\\n| x | 1 |\\n", title="demo")
    >>> "<th>a</th>" in page and '<td class="num">1</td>' in page
    True
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)$")
_HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<text>.*)$")

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #212529; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 1px solid #dee2e6; padding-bottom: .3em; }
h2 { font-size: 1.3em; margin-top: 1.8em; }
h3 { font-size: 1.1em; }
table { border-collapse: collapse; margin: 1em 0; font-size: .92em; }
th, td { border: 1px solid #dee2e6; padding: .3em .7em; }
th { background: #f1f3f5; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; border: 1px solid #e9ecef; }
code { background: #f1f3f5; padding: 0 .25em; border-radius: 3px; }
p.note { color: #495057; font-size: .9em; }
"""


def markdown_to_html(markdown: str, *, title: str, images: Mapping[str, bytes] | None = None) -> str:
    """Render ``markdown`` as one HTML page; images named in ``images`` are embedded (PNG).

    Args:
        markdown: the report.
        title: the page title.
        images: file name -> PNG bytes for each ``![alt](file name)`` of the Markdown; an image
            not given here keeps its link.
    """
    images = images or {}
    body: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading["level"])
            body.append(f"<h{level}>{_inline(heading['text'])}</h{level}>")
            i += 1
            continue
        image = _IMAGE.match(line.strip())
        if image:
            body.append(_image(image["alt"], image["src"], images))
            i += 1
            continue
        if line.lstrip().startswith("|"):
            block = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                block.append(lines[i].strip())
                i += 1
            body.append(_table(block))
            continue
        if line.lstrip().startswith(("- ", "* ")):
            items = []
            while i < len(lines) and lines[i].lstrip().startswith(("- ", "* ")):
                items.append(f"<li>{_inline(lines[i].lstrip()[2:])}</li>")
                i += 1
            body.append("<ul>" + "".join(items) + "</ul>")
            continue
        paragraph = []
        while i < len(lines) and lines[i].strip() and not _starts_block(lines[i]):
            paragraph.append(lines[i].strip())
            i += 1
        body.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _starts_block(line: str) -> bool:
    stripped = line.lstrip()
    return bool(_HEADING.match(stripped) or _IMAGE.match(stripped.rstrip())) or stripped.startswith(
        ("|", "- ", "* ")
    )


def _image(alt: str, src: str, images: Mapping[str, bytes]) -> str:
    data = images.get(src)
    if data is None:
        return f'<p><img src="{html.escape(src)}" alt="{html.escape(alt)}"></p>'
    encoded = base64.b64encode(data).decode("ascii")
    return f'<p><img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}"></p>'


def _cells(row: str) -> list[str]:
    text = row.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    cells, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    cells.append("".join(current).strip())
    return cells


def _table(rows: list[str]) -> str:
    header = _cells(rows[0])
    aligns = ["num" if c.strip().endswith(":") else "" for c in _cells(rows[1])] if len(rows) > 1 else []
    body_rows = (
        rows[2:] if len(rows) > 1 and set(rows[1].replace("|", "").strip()) <= set("-: ") else rows[1:]
    )

    def cls(index: int) -> str:
        return f' class="{aligns[index]}"' if index < len(aligns) and aligns[index] else ""

    out = [
        "<table>",
        "<thead><tr>"
        + "".join(f"<th{cls(j)}>{_inline(c)}</th>" for j, c in enumerate(header))
        + "</tr></thead>",
        "<tbody>",
    ]
    for row in body_rows:
        cells = _cells(row)
        out.append("<tr>" + "".join(f"<td{cls(j)}>{_inline(c)}</td>" for j, c in enumerate(cells)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _inline(text: str) -> str:
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", escaped)
