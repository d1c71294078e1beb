"""Reading topics (queries) in the formats users have them in, detected automatically.

Formats:

- TREC ``<top>`` files, SGML-like: Robust04 (unclosed ``<title>``/``<desc>``/``<narr>`` with
  ``Description:``/``Narrative:`` prefixes), Core17/18 (closing tags, titles on their own
  lines), Microblog (``<title>`` or ``<query>``, ids ``MB001``). Fields ``title``,
  ``description`` and ``narrative`` are selectable, alone or joined (``"title+description"``),
  and so are the query variants of Dai & Callan's Table 3 (:data:`evirank.io.fields.DERIVED_FIELDS`):
  ``description-keywords`` and ``narrative-keywords`` (:func:`~evirank.io.fields.keywords`) and
  ``narrative-positive`` (:func:`~evirank.io.fields.positive_narrative`).
- TREC Web track XML (``<topic number="..."><query>...<description>...``).
- TSV: ``qid<TAB>query`` per line (an optional header line ``qid<TAB>query`` is skipped).
- BEIR ``queries.jsonl``: ``{"_id": ..., "text": ...}`` per line.
- A BEIR folder: its ``queries.jsonl``, restricted to the qids of ``qrels/<split>.tsv`` when
  ``split`` is given.

Ids of TREC files are normalised as Anserini does (:func:`normalize_qid`): ``Number: 301`` ->
``301``, ``MB001`` -> ``1``, ``051`` -> ``51``; so they match the official qrels and runs.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "topics.txt"
    >>> _ = path.write_text("<top>\\n<num> Number: MB001 </num>\\n<query> BBC cuts </query>\\n</top>\\n")
    >>> read_topics(path).values.tolist()
    [['1', 'BBC cuts']]
"""

from __future__ import annotations

import bisect
import json
import logging
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from evirank.config.values import check_unicode_record
from evirank.errors import InputFormatError
from evirank.frames import QID, QUERY, make_topics, require_columns
from evirank.io.fields import TOPIC_FIELDS, field_text, parse_field
from evirank.io.files import PathLike, iter_lines, json_error, read_text, shorten, type_name
from evirank.outputs import atomic_output

logger = logging.getLogger(__name__)

TOPIC_FORMATS = (
    "TREC <top> topics (Robust04, Core17/18, Microblog)",
    "TREC Web track XML (<topic number=...>)",
    "TSV (qid TAB query)",
    'BEIR queries.jsonl ({"_id", "text"} per line)',
    "a BEIR folder with queries.jsonl (and qrels/<split>.tsv)",
)
# TREC tag names -> our field names; other tags (querytime, dom, con, ...) are ignored.
_TREC_TAGS = {"num": "num", "title": "title", "query": "title", "desc": "description", "narr": "narrative"}
_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z][\w-]*)\s*>")
# A leading label such as "Description:" is dropped when it ends in a colon or stands alone on its line.
_PREFIXES = {
    "num": re.compile(r"^\s*Number\s*:\s*", re.IGNORECASE),
    "title": re.compile(r"^\s*Topic\s*:\s*", re.IGNORECASE),
    "description": re.compile(r"^\s*Description\s*(?::|\n|$)\s*", re.IGNORECASE),
    "narrative": re.compile(r"^\s*Narrative\s*(?::|\n|$)\s*", re.IGNORECASE),
}
_QUERY_ID_KEYS = ("_id", "id", "qid", "query_id")
_QUERY_TEXT_KEYS = ("text", "query", "title")
_TSV_HEADER_IDS = {"qid", "query_id", "query-id", "id", "_id"}


def normalize_qid(raw: str) -> str:
    """Normalise a TREC topic id as Anserini does.

    Drops a ``Number:`` label, the Microblog ``MB`` prefix, and leading zeros of numeric ids;
    other ids are returned stripped.

    Example:
        >>> normalize_qid("Number: MB001"), normalize_qid("051"), normalize_qid("301"), normalize_qid("q-7")
        ('1', '51', '301', 'q-7')
    """
    qid = _PREFIXES["num"].sub("", raw).strip()
    match = re.fullmatch(r"(?:MB)?0*(\d+)", qid, flags=re.IGNORECASE)
    if match:
        return str(int(match.group(1)))
    return qid


@dataclass
class _Topic:
    line: int
    fields: dict[str, str] = field(default_factory=dict)


# --- detection ------------------------------------------------------------------------


def detect_topics_format(path: PathLike) -> str:
    """Name a topics path's format: ``beir-folder``, ``trec``, ``webxml``, ``jsonl`` or ``tsv``.

    Raises:
        InputFormatError: when the file matches none of the accepted formats (the message
            lists them).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "q.tsv"
        >>> _ = path.write_text("1\\tdo goldfish grow\\n")
        >>> detect_topics_format(path)
        'tsv'
    """
    p = Path(path)
    if p.is_dir():
        if _queries_file(p) is not None:
            return "beir-folder"
        raise InputFormatError(
            p,
            None,
            "a BEIR folder holding queries.jsonl",
            f"a folder with {sorted(x.name for x in p.iterdir())[:10]}",
        )
    head = ""
    first: tuple[int, str] | None = None
    for line_no, line in iter_lines(p):
        if first is None and line.strip():
            first = (line_no, line)
        head += line + "\n"
        if len(head) > 65536 or line_no > 200:
            break
    if first is None:
        raise InputFormatError(p, None, "topics in one of: " + "; ".join(TOPIC_FORMATS), "an empty file")
    stripped = first[1].strip()
    # A first line of JSON or of TSV decides (a query may well mention "<top>"); markup is
    # looked for in the head of the file otherwise (TREC files may open with a preamble).
    if stripped.startswith("{"):
        return "jsonl"
    if "\t" in stripped and not stripped.startswith("<"):
        return "tsv"
    if re.search(r"<\s*top\s*>", head, re.IGNORECASE):
        return "trec"
    if re.search(r"<\s*topic\s+[^>]*number\s*=", head, re.IGNORECASE):
        return "webxml"
    raise InputFormatError(
        p,
        first[0],
        "topics in one of: " + "; ".join(TOPIC_FORMATS),
        f"an unknown format starting with {shorten(stripped)}",
        hint="for other formats, convert to TSV (qid TAB query)",
    )


# --- readers per format ---------------------------------------------------------------


def _line_of(newlines: list[int], position: int) -> int:
    return bisect.bisect_right(newlines, position - 1) + 1 if position else 1


def _clean(name: str, raw: str) -> str:
    prefix = _PREFIXES.get(name)
    if prefix is not None:
        raw = prefix.sub("", raw, count=1)
    return " ".join(raw.split())


def _warn_unclosed(path: Path, topic: _Topic, where: str) -> None:
    logger.warning(
        "%s:%d: this <top> is not closed by </top> %s; read up to there (check the file is complete)",
        path, topic.line, where,
    )  # fmt: skip


def _parse_trec(path: Path, normalize_ids: bool) -> list[tuple[str, _Topic]]:
    text = read_text(path)
    newlines = [m.start() for m in re.finditer("\n", text)]
    topics: list[_Topic] = []
    current: _Topic | None = None
    open_field: tuple[str, int] | None = None  # (our field name, content start)

    def close_field(end: int) -> None:
        nonlocal open_field
        if current is not None and open_field is not None:
            name, start = open_field
            value = _clean(name, text[start:end])
            if current.fields.get(name):
                value = f"{current.fields[name]} {value}".strip()
            current.fields[name] = value
        open_field = None

    for match in _TAG.finditer(text):
        closing, tag = match.group(1) == "/", match.group(2).lower()
        close_field(match.start())
        if tag == "top":
            if closing:
                current = None
            else:
                line = _line_of(newlines, match.start())
                if current is not None:
                    _warn_unclosed(path, current, f"before the next <top> on line {line}")
                current = _Topic(line)
                topics.append(current)
        elif current is not None and not closing:
            name = _TREC_TAGS.get(tag)
            open_field = (name, match.end()) if name is not None else None
    close_field(len(text))
    if current is not None:
        _warn_unclosed(path, current, "at the end of the file")

    out: list[tuple[str, _Topic]] = []
    for topic in topics:
        raw = topic.fields.get("num", "")
        if not raw:
            raise InputFormatError(path, topic.line, "a <num> with the topic id in each <top>", "none")
        qid = normalize_qid(raw) if normalize_ids else _clean("num", raw)
        out.append((qid, topic))
    return out


def _parse_webxml(path: Path, normalize_ids: bool) -> list[tuple[str, _Topic]]:
    text = read_text(path)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line, column = exc.position
        raise InputFormatError(
            path, line, "well-formed TREC Web track XML", f"an XML error at column {column}: {exc}"
        ) from None
    out: list[tuple[str, _Topic]] = []
    for element in root.iter("topic"):
        number = element.get("number")
        if not number:
            raise InputFormatError(
                path, None, 'a number="..." attribute on each <topic>', "a topic without one"
            )
        topic = _Topic(0)
        for tag, name in (("query", "title"), ("description", "description"), ("narrative", "narrative")):
            child = element.find(tag)
            if child is not None and child.text:
                topic.fields[name] = " ".join(child.text.split())
        out.append((normalize_qid(number) if normalize_ids else number.strip(), topic))
    return out


def _parse_tsv(path: Path) -> list[tuple[str, _Topic]]:
    out: list[tuple[str, _Topic]] = []
    first = True
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split("\t")
        header = first and len(parts) == 2 and parts[0].strip().lower() in _TSV_HEADER_IDS
        first = False
        if header and parts[1].strip().lower() in _QUERY_TEXT_KEYS:
            continue  # a header line such as "qid<TAB>query"
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            empty = (
                ""
                if len(parts) != 2
                else (" with an empty qid" if not parts[0].strip() else " with an empty query")
            )
            raise InputFormatError(
                path,
                line_no,
                "2 tab-separated columns: qid TAB query",
                f"{len(parts)} column(s){empty}: {shorten(line)}",
            )
        out.append((parts[0].strip(), _Topic(line_no, {"title": " ".join(parts[1].split())})))
    return out


def _parse_jsonl(path: Path) -> list[tuple[str, _Topic]]:
    out: list[tuple[str, _Topic]] = []
    for line_no, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, too-long integers, deep nesting
            raise InputFormatError(path, line_no, "one JSON object per line", json_error(exc)) from None
        if not isinstance(record, dict):
            raise InputFormatError(path, line_no, 'a JSON object {"_id", "text"}', type_name(record))
        id_key = next((k for k in _QUERY_ID_KEYS if k in record), None)
        text_key = next((k for k in _QUERY_TEXT_KEYS if k in record), None)
        if id_key is None or text_key is None:
            raise InputFormatError(
                path, line_no, 'a query {"_id": ..., "text": ...}', f"keys {sorted(record)}"
            )
        qid, query = record[id_key], record[text_key]
        if isinstance(qid, bool) or not isinstance(qid, str | int):
            raise InputFormatError(path, line_no, f'"{id_key}" to be a string', type_name(qid))
        if not isinstance(query, str) or not query.strip():
            raise InputFormatError(path, line_no, f'"{text_key}" to be a non-empty string', shorten(query))
        check_unicode_record({id_key: str(qid), text_key: query}, path, line_no)
        out.append((str(qid).strip(), _Topic(line_no, {"title": " ".join(query.split())})))
    return out


def _queries_file(folder: Path) -> Path | None:
    for name in ("queries.jsonl", "queries.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def beir_split_qids(folder: PathLike, split: str) -> list[str]:
    """The qids judged in a BEIR folder's ``qrels/<split>.tsv``, in first-seen order.

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> (folder / "qrels").mkdir()
        >>> _ = (folder / "qrels" / "test.tsv").write_text("query-id\\tcorpus-id\\tscore\\n4\\td1\\t1\\n")
        >>> beir_split_qids(folder, "test")
        ['4']
    """
    from evirank.io.qrels import read_qrels

    qrels_dir = Path(folder) / "qrels"
    qrels_file = qrels_dir / f"{split}.tsv"
    if not qrels_file.is_file():
        available = sorted(p.stem for p in qrels_dir.glob("*.tsv")) if qrels_dir.is_dir() else []
        raise FileNotFoundError(
            f"{qrels_file}: no qrels for split {split!r} in this BEIR folder; available splits: {available}"
        )
    return list(dict.fromkeys(read_qrels(qrels_file)[QID].tolist()))


# --- the public readers ---------------------------------------------------------------


_Parsed = list[tuple[str, _Topic]]


def _say_which_queries(folder: Path, count: int) -> None:
    """Log that a BEIR folder read without a split gives every query of queries.jsonl, naming its splits."""
    qrels = folder / "qrels"
    splits = sorted(f.stem for f in qrels.glob("*.tsv")) if qrels.is_dir() else []
    if not splits:
        return
    sizes = ", ".join(f"{name} ({len(beir_split_qids(folder, name)):,} queries)" for name in splits)
    logger.warning(
        "%s: no split given, so all %d queries of queries.jsonl are used, whichever split judges them "
        "(qrels: %s); give --split NAME to keep one split's queries",
        folder,
        count,
        sizes,
    )


def _irds(path: PathLike, split: str | None) -> str | None:
    from evirank.io.irds import irds_id

    dataset_id = irds_id(path)
    if dataset_id is not None and split is not None:
        raise ValueError(f"split={split!r} does not apply to {path}: name the split in the ir_datasets id")
    return dataset_id


def _read_all(path: PathLike, split: str | None, normalize_ids: bool) -> tuple[Path, str, _Parsed]:
    p = Path(path)
    form = detect_topics_format(p)
    if split is not None and form != "beir-folder":
        raise ValueError(f"{p}: split={split!r} applies to a BEIR folder only, and this is a {form} file")
    if form == "beir-folder":
        file = _queries_file(p) or p / "queries.jsonl"  # detect_topics_format checked it exists
        topics = _parse_jsonl(file)
        if split is not None:
            wanted = beir_split_qids(p, split)
            known = {qid for qid, _ in topics}
            absent = [q for q in wanted if q not in known]
            if absent:
                raise InputFormatError(
                    file,
                    None,
                    f"a query for every qid of qrels/{split}.tsv",
                    f"{len(absent)} qid(s) without a query, e.g. {absent[:5]}",
                )
            keep = set(wanted)
            topics = [t for t in topics if t[0] in keep]
        else:
            _say_which_queries(p, len(topics))
        p = file
    elif form == "trec":
        topics = _parse_trec(p, normalize_ids)
    elif form == "webxml":
        topics = _parse_webxml(p, normalize_ids)
    elif form == "jsonl":
        topics = _parse_jsonl(p)
    else:
        topics = _parse_tsv(p)
    if not topics:
        raise InputFormatError(p, None, f"at least one topic ({form} format)", "none")
    seen: dict[str, int] = {}
    for qid, topic in topics:
        if qid in seen:
            first = f" (first on line {seen[qid]})" if seen[qid] else ""
            raise InputFormatError(p, topic.line or None, "unique topic ids", f"id {qid} again{first}")
        seen[qid] = topic.line
    return p, form, topics


def read_topics(
    path: PathLike,
    field: str = "title",
    split: str | None = None,
    *,
    normalize_ids: bool = True,
) -> pd.DataFrame:
    """Read topics into a Topics frame [qid, query], detecting the format (see the module docstring).

    Args:
        path: a TREC ``<top>`` file, a TREC Web XML file, a TSV file, a BEIR ``queries.jsonl``,
            a BEIR folder (files may be gzipped), or ``irds:<dataset-id>``.
        field: which text is the query: ``title`` (the short query; the only text of TSV and
            JSONL topics), ``description``, ``narrative``, a query variant of Dai & Callan's
            Table 3 (``description-keywords``, ``narrative-keywords``, ``narrative-positive``:
            :mod:`evirank.io.fields`; a narrative that says only what is not
            relevant gives the title, with a warning), or several joined by ``+``.
        split: for a BEIR folder, keep only the qids of ``qrels/<split>.tsv``.
        normalize_ids: normalise TREC ids as Anserini does (``MB001`` -> ``1``).

    Raises:
        InputFormatError: an unknown format (the message lists the accepted ones), a topic
            without an id or without the asked field, repeated ids, malformed lines; each
            naming the file and, where there is one, the line.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "topics.txt"
        >>> _ = path.write_text("<top>\\n<num> Number: 301\\n<title> Organized Crime\\n"
        ...                     "<desc> Description:\\nFind groups.\\n</top>\\n")
        >>> read_topics(path, field="title+description").values.tolist()
        [['301', 'Organized Crime Find groups.']]
    """
    names = parse_field(field)
    dataset_id = _irds(path, split)
    if dataset_id is not None:
        from evirank.io.irds import load_irds

        return load_irds(dataset_id).topics(field)
    file, form, topics = _read_all(path, split, normalize_ids)
    rows: list[tuple[str, str]] = []
    titled: list[str] = []  # topics whose narrative says only what is not relevant
    for qid, topic in topics:
        parts: list[str] = []
        for name in names:
            value = field_text(topic.fields, name)
            if not value and name == "narrative-positive" and topic.fields.get("narrative"):
                value = topic.fields.get("title", "")
                titled.append(qid)
            if not value:
                where = f"topic {qid}"
                if form in ("tsv", "jsonl", "beir-folder") and name != "title":
                    raise InputFormatError(
                        file,
                        None,
                        f"a {name} field",
                        f"{form} topics, which hold one query text only",
                        hint="use field='title' (the query), or TREC <top> topics for descriptions",
                    )
                raise InputFormatError(file, topic.line or None, f"a non-empty {name} in {where}", "none")
            parts.append(value)
        rows.append((qid, " ".join(parts)))
    if titled:
        logger.warning(
            "%s: the narratives of %d topic(s) say only what is not relevant; their title stands in for "
            "the positive narrative: %s",
            file, len(titled), ", ".join(titled),
        )  # fmt: skip
    logger.debug("read %d topics (%s, field %s) from %s", len(rows), form, field, file)
    return make_topics(rows)


def read_topic_fields(
    path: PathLike, split: str | None = None, *, normalize_ids: bool = True
) -> pd.DataFrame:
    """Read all text fields of each topic: a frame [qid, title, description, narrative].

    Fields a format lacks (e.g. descriptions in TSV topics) are empty strings.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "q.tsv"
        >>> _ = path.write_text("1\\tgoldfish\\n")
        >>> read_topic_fields(path).values.tolist()
        [['1', 'goldfish', '', '']]
    """
    _, _, topics = _read_all(path, split, normalize_ids)
    return pd.DataFrame(
        [(qid, *(topic.fields.get(name, "") for name in TOPIC_FIELDS)) for qid, topic in topics],
        columns=[QID, *TOPIC_FIELDS],
    )


def write_topics(topics: pd.DataFrame, path: PathLike, *, overwrite: bool = False) -> Path:
    """Write a Topics frame as TSV (``qid<TAB>query``), atomically; whitespace in queries is collapsed.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.tsv"
        >>> _ = write_topics(make_topics([("1", "do goldfish\\tgrow")]), path)
        >>> path.read_text()
        '1\\tdo goldfish grow\\n'
    """
    require_columns(topics, (QID, QUERY), "write_topics")
    lines: list[str] = []
    for qid, query in zip(topics[QID].astype(str), topics[QUERY].astype(str), strict=True):
        if not qid.strip() or any(c.isspace() for c in qid):
            raise ValueError(f"write_topics: qids must be non-empty and without whitespace, not {qid!r}")
        text = " ".join(query.split())
        if not text:
            raise ValueError(f"write_topics: query {qid} is empty")
        lines.append(f"{qid}\t{text}\n")
    out = Path(path)
    with atomic_output(out, overwrite=overwrite) as tmp:
        tmp.write_text("".join(lines), encoding="utf-8")
    return out
