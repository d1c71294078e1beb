"""Text out of SGML and HTML markup, the way Anserini's readers get it (Jsoup's ``text()``).

Anserini turns a TREC document's kept fields, a Washington Post paragraph and a web page into
plain text with Jsoup: tags are dropped, character references decoded, scripts and styles
removed, and whitespace collapsed to single spaces. :func:`markup_text` does the same with the
standard library. Tags of HTML's block elements (``<p>``, ``<div>``, ``<br>``, ``<h1>``, ...)
stand for a space; others, and the SGML tags of the TREC disks (``<F P=105>``, ``<HEADLINE>``),
for nothing, as in Jsoup. A ``<`` that does not open a tag (``p < 0.05``, ``p<0.01``) is text.
Where the two can differ (tags that an HTML tree builder moves or ignores, such as a ``<td>``
outside a table), the words are the same and only a space may differ. Jsoup also drops zero-width
spaces and soft hyphens; they are kept here, as the JSONL form of the same text keeps them, so
that a collection indexes to the same terms in every format.

Example:
    >>> markup_text("<P>Cats &amp; dogs</P><P>p &lt; 0.05</P>")
    'Cats & dogs p < 0.05'
    >>> html_title_and_text("<html><title>Pets</title><body><p>Cats purr.</p></body></html>")
    ('Pets', 'Cats purr.')
"""

from __future__ import annotations

import html
import re
from html.entities import html5

#: HTML elements whose tags separate words in Jsoup's ``text()`` (its block tags, and ``br``).
BLOCK_TAGS = frozenset(
    {
        *("address", "applet", "article", "aside", "audio", "blockquote", "body", "br", "canvas"),
        *("caption", "center", "col", "colgroup", "dd", "del", "details", "dir", "div", "dl", "dt"),
        *("fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset", "h1", "h2"),
        *("h3", "h4", "h5", "h6", "head", "header", "hgroup", "hr", "html", "ins", "li", "link"),
        *("listing", "main", "marquee", "math", "menu", "meta", "nav", "noframes", "noscript", "ol"),
        *("p", "plaintext", "pre", "script", "section", "style", "svg", "table", "tbody", "td"),
        *("template", "tfoot", "th", "thead", "title", "tr", "ul", "video"),
    }
)

_HIDDEN = re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|\Z)", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
# A tag starts with "<" and a letter ("</" and a letter for an end tag); "<!", "<?" and any other
# "</" open declarations, processing instructions and bogus comments, dropped up to the next ">";
# a tag left open at the end of the text is dropped.
_TAG = re.compile(r"<(/?)([A-Za-z][^\s/>]*)[^>]*(?:>|\Z)|<[!?/][^>]*(?:>|\Z)")
_REFERENCE = re.compile(r"&(?:#[xX][0-9a-fA-F]+|#[0-9]+|[A-Za-z][A-Za-z0-9]*)(;?)")
_TITLE = re.compile(r"<title\b[^>]*>(.*?)(?:</title\s*>|\Z)", re.IGNORECASE | re.DOTALL)


def _reference(match: re.Match[str]) -> str:
    """A character reference decoded as Jsoup decodes it: numeric ones always, a named one when the
    whole name is an entity (followed by ``;``, or one of the legacy names that may omit it)."""
    text = match.group(0)
    if text[1] == "#" or text[1:] in html5:
        return html.unescape(text)
    return text


def _tag(match: re.Match[str]) -> str:
    name = match.group(2)
    return " " if name is not None and name.lower() in BLOCK_TAGS else ""


def markup_text(markup: str) -> str:
    """The text of ``markup``: tags removed, references decoded, whitespace collapsed.

    Example:
        >>> markup_text("Language: <F P=105> English </F>\\n<b>A</b>T&amp;T &hyph; x<br>y")
        'Language: English AT&T &hyph; x y'
    """
    if "<" in markup:
        markup = _HIDDEN.sub(" ", _COMMENT.sub("", markup))
        markup = _TAG.sub(_tag, markup)
    if "&" in markup:
        markup = _REFERENCE.sub(_reference, markup)
    return " ".join(markup.split())


def html_title_and_text(page: str) -> tuple[str, str]:
    """A web page's ``<title>`` and the text of the rest of the page.

    Example:
        >>> html_title_and_text("<title>A &amp; B</title><h1>Hi</h1>there")
        ('A & B', 'Hi there')
    """
    match = _TITLE.search(page)
    if match is None:
        return "", markup_text(page)
    title = markup_text(match.group(1))
    return title, markup_text(page[: match.start()] + " " + page[match.end() :])
