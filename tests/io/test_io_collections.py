"""The papers' collection formats: read back as their JSONL form, told apart, and refused when malformed."""

from __future__ import annotations

import gzip
import io
import json
import logging
import tarfile
from pathlib import Path

import pytest

from collection_writers import WRITERS, nitf, wapo_article, warc_record
from evirank.errors import InputFormatError
from evirank.frames import Document
from evirank.io import count_corpus, load_texts, read_corpus, write_corpus
from evirank.io.collections import FORMATS, collection_files, detect_format
from evirank.io.collections.markup import markup_text
from evirank.io.corpus import CORPUS_FORMATS, corpus_format
from evirank.rerank import FetchText

DOCS = [
    Document("FBIS3-1", "Cats & dogs <together>", "Cats purr when content. Dogs bark at strangers."),
    Document("LA010189-0001", "", "A study found p < 0.05 and p<0.01 for AT&T's rats; see &amp; too."),
    Document("FT911-3", "Goldfish", "Goldfish grow to the size of their bowl. Or so people say, in Zürich."),
    Document("FR940104-0-00001", "Parrots", 'Parrots "mimic" speech.\nThey learn words; tabs\tand all.'),
    Document("d5", "Hamsters", "Hamsters store food in their cheek pouches. They sleep by day."),
    Document("d6", "Only a title", ""),
]


def same_words(docs: list[Document]) -> dict[str, tuple[str, str]]:
    return {d.docno: (" ".join(d.title.split()), " ".join(d.text.split())) for d in docs}


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_each_format_reads_back_the_documents_of_its_jsonl_form(tmp_path: Path, fmt: str) -> None:
    folder = WRITERS[fmt](DOCS, tmp_path / fmt)
    assert detect_format(folder) == fmt and corpus_format(folder) == fmt
    docs = list(read_corpus(folder))
    assert same_words(docs) == same_words(DOCS)
    assert list(read_corpus(folder, format=fmt)) == docs  # given, the same as detected
    assert count_corpus(folder) == len(DOCS)
    jsonl = tmp_path / "corpus.jsonl"
    write_corpus(DOCS, jsonl)
    wanted = ["LA010189-0001", "FT911-3"]
    assert same_words(list(load_texts(folder, wanted).values())) == same_words(
        list(load_texts(jsonl, wanted).values())
    )


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_rerank_text_fetching_reads_each_format(tmp_path: Path, fmt: str) -> None:
    from evirank.frames import make_run

    folder = WRITERS[fmt](DOCS, tmp_path / fmt)
    run = make_run([("1", "FT911-3", 2.0), ("1", "FBIS3-1", 1.0)])
    fetched = FetchText(corpus=folder, corpus_format=fmt)(run)
    jsonl = tmp_path / "corpus.jsonl"
    write_corpus(DOCS, jsonl)
    expected = FetchText(corpus=jsonl)(run)
    assert fetched["title"].tolist() == expected["title"].str.split().str.join(" ").tolist()
    assert fetched["text"].str.split().tolist() == expected["text"].str.split().tolist()


def test_a_single_file_of_each_format_is_read_and_detected(tmp_path: Path) -> None:
    for fmt in WRITERS:
        folder = WRITERS[fmt](DOCS, tmp_path / fmt)
        files = collection_files(folder, fmt)
        assert len(files) >= 2, fmt  # several files, as asked of the writers
        one = files[-1]
        assert corpus_format(one) == fmt, one
        assert {d.docno for d in read_corpus(one, empty="skip")} <= {d.docno for d in DOCS}


def test_formats_are_the_cli_choices() -> None:
    from evirank.config.settings import CORPUS_FORMATS as CHOICES

    assert CHOICES == CORPUS_FORMATS
    assert set(FORMATS) == set(WRITERS)


def test_jsonl_and_beir_stay_as_they_were(tmp_path: Path) -> None:
    write_corpus(DOCS, tmp_path / "corpus.jsonl")
    assert corpus_format(tmp_path) == "jsonl" and corpus_format(tmp_path / "corpus.jsonl") == "jsonl"
    assert list(read_corpus(tmp_path, format="beir")) == DOCS
    with pytest.raises(ValueError, match="unknown corpus format 'sgml'"):
        read_corpus(tmp_path, format="sgml")
    with pytest.raises(ValueError, match="carries its own format"):
        read_corpus("irds:beir/scifact", format="trec")


# --- what each reader keeps, as Anserini's collection readers keep it ------------------------


def test_trec_keeps_anserinis_fields_and_reads_the_disks_variants(tmp_path: Path) -> None:
    path = tmp_path / "fb396001"
    path.write_bytes(
        b'<DOC>\n<DOCNO> FBIS3-1 </DOCNO>\n<HT>  "cr00000011094001" </HT>\n<HEADER>\n'
        b"<H3> <TI>      Header title, not kept </TI></H3>\n</HEADER>\n<TEXT>\n"
        b"Language: <F P=105> English </F>\nArticle Type:BFN\nA &amp; B &hyph; caf\xe9.\n</TEXT>\n</DOC>\n"
        b'<doc id="NTCIR-1">\n<text>\nLower-case tags and an id attribute.\n</text>\n</doc>\n'
        b"<DOC>\n<DOCNO>LA010189-0001</DOCNO>\n<DATE><P>January 1, 1989, Sunday</P></DATE>\n"
        b"<HEADLINE><P>AT THE END</P></HEADLINE>\n<BYLINE>By Somebody</BYLINE>\n<TEXT>\n<P>First.</P>\n"
        b"<P>Second.</P>\n</TEXT>\n</DOC>\n<DOC><DOCNO>one-line</DOCNO><SUMMARY>No kept field: read whole."
        b"</SUMMARY></DOC>\n"
    )
    docs = list(read_corpus(path, format="trec"))
    assert docs == [
        Document("FBIS3-1", "", "Language: English Article Type:BFN A & B &hyph; caf\ufffd."),
        Document("NTCIR-1", "", "Lower-case tags and an id attribute."),
        Document("LA010189-0001", "AT THE END", "January 1, 1989, Sunday First. Second."),
        Document("one-line", "", "No kept field: read whole."),
    ]


def test_trec_folders_skip_cr_and_readme_and_refuse_unix_compress(tmp_path: Path) -> None:
    folder = WRITERS["trec"](DOCS, tmp_path / "disk45")
    assert all("cr" not in p.parts and "readme" not in p.name for p in collection_files(folder, "trec"))
    (folder / "ft" / "ft911_1.0z").parent.mkdir()
    (folder / "ft" / "ft911_1.0z").write_bytes(b"\x1f\x9d\x90")
    with pytest.raises(InputFormatError, match=r"ft911_1\.0z: expected a plain or gzip.*gzip -dc"):
        list(read_corpus(folder, format="trec"))


def test_nyt_keeps_headline_abstract_and_full_text(tmp_path: Path) -> None:
    article = nitf(Document("1000001", "Print Headline", "Para one.")).replace(
        '<byline class="print_byline">',
        "<abstract><p>First abstract.</p><p>An <b>abstract</b>.</p></abstract>"
        '<hedline><hl2 class="online_headline">Online headline</hl2></hedline><byline class="print_byline">',
    )
    (tmp_path / "a.xml").write_text(article)
    (doc,) = read_corpus(tmp_path / "a.xml")
    assert doc == Document("1000001", "Print Headline", "An abstract .\nPara one.")


def test_nyt_reads_articles_from_tgz_archives(tmp_path: Path) -> None:
    WRITERS["nyt"](DOCS, tmp_path / "nyt")
    assert (tmp_path / "nyt" / "1988.tgz").is_file()
    docs = list(read_corpus(tmp_path / "nyt" / "1988.tgz"))
    assert docs and {d.docno for d in docs} < {d.docno for d in DOCS}


def test_wapo_keeps_title_kicker_paragraphs_and_captions(tmp_path: Path) -> None:
    record = {
        "id": "wp-1",
        "title": "A Title",
        "published_date": 1,
        "contents": [
            {"type": "kicker", "content": "Kicker"},
            {"type": "title", "content": "A Title"},
            {"type": "byline", "content": "By Jane"},
            {
                "type": "sanitized_html",
                "subtype": "paragraph",
                "content": "<p>Para <b>one</b> &amp; more.</p>",
            },
            {"type": "image", "fullcaption": "A <i>caption</i>."},
            {"type": "tweet", "content": ["tweet", "words"]},
            {"type": "sanitized_html", "content": {"text": "From an object."}},
            None,
        ],
    }
    (tmp_path / "wp.jl").write_text(json.dumps(record) + "\n")
    (doc,) = read_corpus(tmp_path / "wp.jl")
    assert doc == Document(
        "wp-1", "A Title", "Kicker\nPara one & more.\nA caption.\ntweet words\nFrom an object."
    )


def test_warc_drops_http_headers_and_scripts_and_keeps_the_page_title(tmp_path: Path) -> None:
    (tmp_path / "00.warc").write_bytes(
        warc_record(Document("clueweb09-en0000-00-00000", "Cats", "Cats purr."))
    )
    (doc,) = read_corpus(tmp_path / "00.warc")
    assert doc == Document("clueweb09-en0000-00-00000", "Cats", "Cats purr.")


def test_msmarco_docs_keeps_title_and_body_not_the_url(tmp_path: Path) -> None:
    (tmp_path / "msmarco-docs.tsv").write_text(
        "D1\thttp://cats.example/\tCats\tCats purr.\tStill the body.\n"
    )
    (tmp_path / "msmarco-docdev-queries.tsv").write_text("1\tdo cats purr\n")
    assert [str(p.name) for p in collection_files(tmp_path, "msmarco-docs")] == ["msmarco-docs.tsv"]
    assert list(read_corpus(tmp_path)) == [Document("D1", "Cats", "Cats purr.\tStill the body.")]


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ("<P>a</P><P>b</P>", "a b"),
        ("<b>a</b><i>b</i>", "ab"),
        ("x<y plus AT&T &hyph; ok.", "x"),
        ("p < 0.05 and p<0.01 and a <= b", "p < 0.05 and p<0.01 and a <= b"),
        (
            "A &amp; B &lt;tag&gt; &nbsp;x&#65;&#x42; &copy &notanentity; &amp",
            "A & B <tag> xAB © &notanentity; &",
        ),
        ("<F P=105>x</F>y", "xy"),
        ("a<br>b", "a b"),
        ("<!-- c > d -->e<? pi ?>f<!DOCTYPE html>g", "efg"),
        ("<script>var a = '<b>';</script>h<style>p{}</style>i", "h i"),
        ("a</>b</ x>c", "abc"),
        ("<TI>ti</TI><H3>h</H3>k", "ti h k"),
        ("&hyph;&blank;&amp;&lsqb;", "&hyph;␣&["),
        ("unterminated <abc def", "unterminated"),
    ],
)
def test_markup_text_matches_jsoup(markup: str, text: str) -> None:
    # Each expected text is what Jsoup 1.x (inside Anserini's jar) returns for the markup.
    assert markup_text(markup) == text


# --- malformed input: the same file:line errors as JSONL -------------------------------------

TREC_BAD = [
    ("<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>x</TEXT>\n", 1, "a </DOC> closing the <DOC> of this line"),
    ("<DOC>\n<TEXT>x</TEXT>\n</DOC>\n", 1, "a <DOCNO>id</DOCNO>"),
    ("<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>x</TEXT>\n</DOC>\nstray words\n", 5, "text outside a document"),
    ("<DOC>\n<DOCNO>a</DOCNO>\n<DOC>\n<DOCNO>b</DOCNO>\n</DOC>\n", 3, "before the next <DOC>"),
    ("<DOC>\n<DOCNO>a b</DOCNO>\n<TEXT>x</TEXT>\n</DOC>\n", 1, "without whitespace"),
    ("<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>x</TEXT>\n</DOC>\n<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>y</TEXT>\n</DOC>\n", 5,
     r"again \(first on line 1\)"),
    ("<DOC>\n<DOCNO>a</DOCNO>\n<TEXT> </TEXT>\n</DOC>\n", 1, "with no text at all"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "words"), TREC_BAD)
def test_malformed_trec_names_the_file_and_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    path = tmp_path / "la010189"
    path.write_text(text)
    with pytest.raises(InputFormatError, match=words) as info:
        list(read_corpus(path, format="trec"))
    assert info.value.line == line and info.value.path == str(path)


def test_malformed_nyt_wapo_msmarco_and_warc_name_the_file_and_line(tmp_path: Path) -> None:
    cases: list[tuple[str, bytes, str, int | None, str]] = [
        ("a.xml", b"<nitf>\n<head>\n<docdata><doc-id id-string='1'/></docdata>\n</head\n</nitf>\n", "nyt", 5,
         "XML error"),
        ("b.xml", b"<nitf><head></head><body/></nitf>\n", "nyt", 1, "without <doc-id"),
        ("c.xml", b"<?xml version='1.0'?>\n<other/>\n", "nyt", None, "no <nitf> element"),
        ("d.jl", b'{"id": "a", "title": "t"}\n{"id": "b", "contents": [\n', "wapo", 2, "malformed JSON"),
        ("e.jl", b'{"title": "t", "contents": []}\n', "wapo", 1, "keys"),
        ("f.jl", b'{"id": "a", "contents": {"type": "x"}}\n', "wapo", 1, '"contents" as a list'),
        ("g.jl", b'{"id": "a", "contents": [{"type": "kicker"}, "oops"]}\n', "wapo", 1, "item 2"),
        ("h.tsv", b"D1\thttp://x/\tT\tbody\nD2\thttp://x/\tno body\n", "msmarco-docs", 2, "4 tab-separated"),
        ("i.warc", b"WARC/0.18\r\nWARC-Type: response\r\n\r\n", "warc", 1, "Content-Length"),
        ("j.warc", b"WARC/0.18\r\nContent-Length: 99\r\n\r\nshort", "warc", 1, "99 bytes of payload"),
        ("k.warc", b"\r\nnot a record\r\n", "warc", 2, "starting with WARC/"),
        ("l.jl", b"\n\n", "wapo", None, "no documents"),
    ]  # fmt: skip
    for name, data, fmt, line, words in cases:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputFormatError, match=words) as info:
            list(read_corpus(path, format=fmt))
        assert info.value.line == line, name


def test_repeated_ids_across_files_name_both_places(tmp_path: Path) -> None:
    folder = tmp_path / "wapo"
    folder.mkdir()
    (folder / "a.jl").write_text(json.dumps(wapo_article(DOCS[0])) + "\n")
    (folder / "b.jl").write_text(json.dumps(wapo_article(DOCS[1])) + "\n" + json.dumps(wapo_article(DOCS[0])))
    with pytest.raises(InputFormatError, match=rf"b\.jl:2: .*again \(first in {folder / 'a.jl'} on line 1\)"):
        list(read_corpus(folder))


def test_empty_documents_are_skipped_with_their_line_on_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "docs.tsv"
    path.write_text("D1\tu\tT\tbody\nD2\tu\t\t \n")
    with pytest.raises(InputFormatError, match=r"docs\.tsv:2: expected a document with some text"):
        list(read_corpus(path))
    with caplog.at_level(logging.WARNING, logger="evirank"):
        assert [d.docno for d in read_corpus(path, empty="skip")] == ["D1"]
    assert "docs.tsv:2: skipped a document with neither title nor text" in caplog.text


def test_a_damaged_gzip_file_is_reported(tmp_path: Path) -> None:
    data = gzip.compress(b"<DOC>\n<DOCNO>a</DOCNO>\n<TEXT>x</TEXT>\n</DOC>\n" * 50)
    (tmp_path / "la.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFormatError, match="complete gzip-compressed data"):
        list(read_corpus(tmp_path / "la.gz", format="trec"))
    with tarfile.open(tmp_path / "x.tgz", "w:gz") as archive:
        member = tarfile.TarInfo("x.xml")
        member.size = 3
        archive.addfile(member, io.BytesIO(b"<a>"))
    (tmp_path / "y.tgz").write_bytes((tmp_path / "x.tgz").read_bytes()[:20])
    with pytest.raises(InputFormatError, match=r"y\.tgz"):
        list(read_corpus(tmp_path / "y.tgz", format="nyt"))


def test_a_folder_that_is_no_collection_says_what_a_corpus_folder_holds(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("just notes\n")
    with pytest.raises(FileNotFoundError, match=r"corpus\.jsonl.*trec, nyt, wapo.*notes\.txt"):
        read_corpus(tmp_path)
    with pytest.raises(InputFormatError, match="no such file among"):
        list(read_corpus(tmp_path, format="warc"))
