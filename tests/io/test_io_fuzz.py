"""Property-based tests of every reader: whatever the bytes, evirank's own error or a correct result.

For each input format (JSONL/BEIR corpus, the papers' collection formats, TREC and Microblog
topics, TREC Web XML topics, TSV and BEIR queries, qrels, runs): random bytes, truncations, other
encodings and valid files with random edits never raise anything but an
:class:`~evirank.errors.EvirankError`; and a valid frame round-trips through its writer and reader.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from evirank.errors import EvirankError  # noqa: E402
from evirank.frames import Document, make_qrels, make_run, make_topics  # noqa: E402
from evirank.io import (  # noqa: E402
    read_corpus,
    read_qrels,
    read_run,
    read_topic_fields,
    read_topics,
    write_corpus,
    write_qrels,
    write_run,
    write_topics,
)

# The default suite draws the same examples every run (EVIRANK_FUZZ_RANDOM=1 explores new ones).
_FIXED = os.environ.get("EVIRANK_FUZZ_RANDOM", "") != "1"
FUZZ = settings(
    derandomize=_FIXED,
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ROUND_TRIP = settings(
    derandomize=_FIXED,
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

SAMPLES: dict[str, tuple[str, bytes]] = {
    "corpus-beir": (
        "corpus.jsonl",
        '{"_id": "d1", "title": "Cats", "text": "Cats purr. Café au lait."}\n'
        '{"_id": "d2", "title": "", "text": "Dogs bark."}\n'.encode(),
    ),
    "corpus-pyserini": (
        "docs.jsonl",
        b'{"id": "7", "contents": "Fish swim."}\n{"id": "8", "title": "T", "text": "x y"}\n',
    ),
    "topics-trec": (
        "topics.txt",
        b"<top>\n<num> Number: 301\n<title> Organized Crime\n\n<desc> Description:\nFind groups.\n\n"
        b"<narr> Narrative:\nRelevant ones.\n</top>\n\n"
        b"<top>\n<num> Number: 302\n<title> Poliomyelitis\n</top>\n",
    ),
    "topics-microblog": (
        "mb.txt",
        b"<top>\n<num> Number: MB001 </num>\n<query> BBC World Service staff cuts </query>\n"
        b"<querytime> Tue Feb 08 12:30:27 +0000 2011 </querytime>\n<querytweettime> 34952194402811904 "
        b"</querytweettime>\n</top>\n",
    ),
    "topics-webxml": (
        "web.xml",
        b'<webtrack2013>\n<topic number="201" type="single">\n  <query>raspberry pi</query>\n'
        b"  <description>What is it?</description>\n</topic>\n</webtrack2013>\n",
    ),
    "topics-tsv": ("q.tsv", "1\tdo goldfish grow\n2\twhat is café\n".encode()),
    "topics-beir": (
        "queries.jsonl",
        b'{"_id": "0", "text": "0-dimensional biomaterials"}\n{"_id": "2", "text": "x"}\n',
    ),
    "qrels-trec": ("qrels.txt", b"1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n"),
    "qrels-beir": ("test.tsv", b"query-id\tcorpus-id\tscore\n1\td1\t1\n2\td3\t0\n"),
    "run": ("run.txt", b"1 Q0 d1 1 2.5 bm25\n1 Q0 d2 2 1.25 bm25\n2 Q0 d3 1 0.5 bm25\n"),
    "collection-trec": (
        "la010189",
        b"<DOC>\n<DOCNO> LA010189-0001 </DOCNO>\n<HEADLINE>\n<P>Cats &amp; dogs</P>\n</HEADLINE>\n"
        b"<TEXT>\n<P>Cats purr; p &lt; 0.05.</P>\n</TEXT>\n</DOC>\n<DOC>\n<DOCNO>FT911-2</DOCNO>\n"
        b"<TEXT>Dogs bark.</TEXT>\n</DOC>\n",
    ),
    "collection-nyt": (
        "0000001.xml",
        b'<?xml version="1.0" encoding="UTF-8"?>\n<nitf><head><docdata><doc-id id-string="1"/></docdata>'
        b"</head>\n<body><body.head><hedline><hl1>Cats</hl1></hedline><abstract><p>A cat.</p></abstract>"
        b'</body.head>\n<body.content><block class="full_text"><p>Cats purr.</p><p>And sleep.</p>'
        b"</block></body.content></body></nitf>\n",
    ),
    "collection-wapo": (
        "wapo.jl",
        b'{"id": "a1", "title": "Cats", "contents": [{"type": "kicker", "content": "Pets"}, '
        b'{"type": "sanitized_html", "content": "<p>Cats &amp; dogs.</p>"}, null, '
        b'{"type": "image", "fullcaption": "A cat."}]}\n{"id": "a2", "title": "Dogs", "contents": []}\n',
    ),
    "collection-msmarco": ("msmarco-docs.tsv", b"D1\thttp://x/\tCats\tCats purr.\nD2\thttp://y/\t\tDogs.\n"),
    "collection-warc": (
        "00.warc",
        b"WARC/0.18\r\nWARC-Type: response\r\nWARC-TREC-ID: clueweb09-en0000-00-00000\r\n"
        b"Content-Length: 74\r\n\r\nHTTP/1.1 200 OK\r\n\r\n<title>Cats</title><p>Cats purr &amp; sleep.</p>"
        b"</html>\r\n\r\n",
    ),
}


def _read_corpus(path: Path) -> Any:
    return list(read_corpus(path))


def _read_topics_all(path: Path) -> Any:
    return read_topics(path), read_topic_fields(path)


READERS: dict[str, Callable[[Path], Any]] = {
    "corpus": _read_corpus,
    "topics": _read_topics_all,
    "qrels": read_qrels,
    "run": read_run,
}


def _read_collection(kind: str) -> Callable[[Path], Any]:
    fmt = {"msmarco": "msmarco-docs"}.get(kind.split("-")[1], kind.split("-")[1])
    return lambda path: list(read_corpus(path, format=fmt))


def _reader(kind: str) -> Callable[[Path], Any]:
    if kind.startswith("collection-"):
        return _read_collection(kind)
    return READERS[kind.split("-")[0]]


@contextlib.contextmanager
def _written(name: str, data: bytes | None) -> Iterator[Path]:
    """A file ``name`` holding ``data`` (no file when None) in a folder removed afterwards.

    Hypothesis runs a test body hundreds of times within one test, so ``tmp_path`` (one folder per
    test) would mix the examples' files: each example gets its own folder, and leaves nothing behind.
    """
    with tempfile.TemporaryDirectory(prefix="evirank-fuzz-") as folder:
        path = Path(folder) / name
        if data is not None:
            path.write_bytes(data)
        yield path


def _only_our_errors(kind: str, name: str, data: bytes) -> None:
    for file_name, payload in ((name, data), (name + ".gz", gzip.compress(data)), (name + ".gz", data)):
        with _written(file_name, payload) as path, contextlib.suppress(EvirankError):
            _reader(kind)(path)  # any other error fails the test


KINDS = sorted(SAMPLES)


@FUZZ
@given(kind=st.sampled_from(KINDS), data=st.binary(max_size=600))
def test_random_bytes_give_our_error_or_a_result(kind: str, data: bytes) -> None:
    _only_our_errors(kind, SAMPLES[kind][0], data)


@FUZZ
@given(kind=st.sampled_from(KINDS), cut=st.integers(min_value=0, max_value=10_000))
def test_truncated_files_give_our_error_or_a_result(kind: str, cut: int) -> None:
    name, sample = SAMPLES[kind]
    _only_our_errors(kind, name, sample[: cut % (len(sample) + 1)])


@FUZZ
@given(
    kind=st.sampled_from(KINDS),
    encoding=st.sampled_from(["latin-1", "utf-16", "utf-16-le", "cp1252", "utf-32"]),
)
def test_other_encodings_give_our_error_or_a_result(kind: str, encoding: str) -> None:
    name, sample = SAMPLES[kind]
    text = sample.decode("utf-8").replace("Cats", "Çåts ünïcödé")
    _only_our_errors(kind, name, text.encode(encoding, errors="replace"))


_EDIT = st.tuples(
    st.sampled_from(["insert", "delete", "replace", "duplicate-line", "drop-line", "swap-lines"]),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=40),
    st.binary(min_size=1, max_size=8)
    | st.sampled_from(
        [b"\t", b" ", b"\n", b"\r\n", b'"', b"{", b"}", b"<", b">", b"</top>", b"<top>", b"\x00", b"\xff"]
    ),
)


def _apply(sample: bytes, edits: list[tuple[str, int, int, bytes]]) -> bytes:
    data = sample
    for op, where, span, piece in edits:
        at = where % (len(data) + 1)
        lines = data.split(b"\n")
        line = where % len(lines)
        if op == "insert":
            data = data[:at] + piece + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + span :]
        elif op == "replace":
            data = data[:at] + piece + data[at + len(piece) :]
        elif op == "duplicate-line":
            data = b"\n".join([*lines[: line + 1], lines[line], *lines[line + 1 :]])
        elif op == "drop-line":
            data = b"\n".join(lines[:line] + lines[line + 1 :])
        else:
            other = span % len(lines)
            lines[line], lines[other] = lines[other], lines[line]
            data = b"\n".join(lines)
    return data


@FUZZ
@given(kind=st.sampled_from(KINDS), edits=st.lists(_EDIT, min_size=1, max_size=4))
def test_valid_files_with_random_edits_give_our_error_or_a_result(
    kind: str, edits: list[tuple[str, int, int, bytes]]
) -> None:
    name, sample = SAMPLES[kind]
    _only_our_errors(kind, name, _apply(sample, edits))


def test_every_sample_is_valid() -> None:
    for kind, (name, sample) in SAMPLES.items():
        with _written(name, sample) as path:
            assert len(_reader(kind)(path)) > 0, kind


# --- round trips -----------------------------------------------------------------------------

_ID_CHARS = st.characters(
    codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp", "Co", "Cn")
).filter(lambda c: not c.isspace() and c != "\ufeff")  # a leading U+FEFF reads as a byte-order mark
IDS = st.text(_ID_CHARS, min_size=1, max_size=12)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Co", "Cn")), max_size=60)


@ROUND_TRIP
@given(
    docs=st.lists(st.tuples(IDS, TEXT, TEXT), min_size=1, max_size=8, unique_by=lambda d: d[0]).filter(
        lambda docs: all((title + text).strip() for _, title, text in docs)
    ),
    gz=st.booleans(),
)
def test_a_corpus_round_trips(docs: list[tuple[str, str, str]], gz: bool) -> None:
    with _written("corpus.jsonl.gz" if gz else "corpus.jsonl", None) as path:
        written = [Document(*d) for d in docs]
        write_corpus(written, path)
        assert list(read_corpus(path)) == written


@ROUND_TRIP
@given(
    rows=st.lists(
        st.tuples(IDS.filter(lambda q: not q.startswith(("{", "<"))), TEXT.filter(lambda t: t.strip())),
        min_size=1,
        max_size=8,
        unique_by=lambda r: r[0],
    )
)
@example(rows=[("1", "what does the <top> tag mean"), ("2", '<topic number="3"> in XML')])
def test_tsv_topics_round_trip(rows: list[tuple[str, str]]) -> None:
    with _written("topics.tsv", None) as path:
        write_topics(make_topics(rows), path)
        expected = [(qid, " ".join(query.split())) for qid, query in rows]
        assert read_topics(path).values.tolist() == [list(r) for r in expected]


@ROUND_TRIP
@given(
    rows=st.lists(
        st.tuples(IDS, IDS, st.integers(min_value=-2, max_value=4)),
        min_size=1,
        max_size=12,
        unique_by=lambda r: r[:2],
    ),
    shape=st.sampled_from(["trec", "beir"]),
)
def test_qrels_round_trip(rows: list[tuple[str, str, int]], shape: str) -> None:
    with _written("qrels.txt", None) as path:
        qrels = make_qrels(rows)
        write_qrels(qrels, path, format=shape)
        back = read_qrels(path)
        key = ["qid", "docno"]
        pd.testing.assert_frame_equal(
            back.sort_values(key).reset_index(drop=True), qrels.sort_values(key).reset_index(drop=True)
        )


@ROUND_TRIP
@given(
    rows=st.lists(
        st.tuples(IDS, IDS, st.floats(allow_nan=False, allow_infinity=False, width=64)),
        min_size=1,
        max_size=12,
        unique_by=lambda r: r[:2],
    )
)
def test_runs_round_trip_exactly(rows: list[tuple[str, str, float]]) -> None:
    with _written("run.txt", None) as path:
        run = make_run(rows)
        write_run(run, path, tag="fuzz")
        back = read_run(path)
        assert back[["qid", "docno"]].values.tolist() == run[["qid", "docno"]].values.tolist()
        np.testing.assert_array_equal(back["score"].to_numpy(), run["score"].to_numpy())
