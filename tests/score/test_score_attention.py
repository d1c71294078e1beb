"""The attention view: the families' hooks against matrices computed here with transformers directly
(eager attention, ``output_attentions=True``), word merging, the PNG and HTML, and ``explain --attention``."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from evirank.cli import main  # noqa: E402
from evirank.config import Runtime  # noqa: E402
from evirank.errors import OutputExistsError, UsageError  # noqa: E402
from evirank.frames import make_passages  # noqa: E402
from evirank.score import BiEncoder, CrossEncoder  # noqa: E402
from evirank.score.attention import (  # noqa: E402
    AttentionView,
    NoAttentionError,
    TokenSide,
    attention_families,
    attention_hook,
    merge_pieces,
    resolve_layers,
)

QUERY = "where the cats sat"
# "purring" and "zebra" are not in the tiny vocabulary: they split into letter pieces
PASSAGE = "The cat sat purring on the mat, zebra evidence!"


def reference_cross(folder: Path, query: str, passage: str, **cut: int) -> tuple[list[np.ndarray], float]:
    """Each layer's [heads, query tokens, passage tokens] attention and the logit, by transformers alone:
    the tokenizer's own pair encoding, the rows and columns told apart by token types and special tokens."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(folder), attn_implementation="eager"
    ).eval()
    enc = tokenizer(query, passage, return_tensors="pt", **cut)
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    ids = enc["input_ids"][0].tolist()
    special = np.array(tokenizer.get_special_tokens_mask(ids, already_has_special_tokens=True), bool)
    types = enc["token_type_ids"][0].numpy()
    rows = np.flatnonzero((types == 0) & ~special)
    cols = np.flatnonzero((types == 1) & ~special)
    maps = [layer[0].numpy()[:, rows][:, :, cols] for layer in out.attentions]
    return maps, float(out.logits[0, 0])


def test_cross_encoder_attention_equals_transformers_eager_attention(tiny_cross_encoder_path: Path) -> None:
    scorer = CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu"))
    view = scorer.attention(QUERY, PASSAGE, layers=[0, -1])
    expected, logit = reference_cross(tiny_cross_encoder_path, QUERY, PASSAGE)
    assert view.layers == (0, 1) and view.n_layers == 2 and view.kind == "attention"
    assert view.weights.shape == (2, 2, *expected[0].shape[1:])  # layers, heads, query, passage
    for i in range(2):
        np.testing.assert_allclose(view.weights[i], expected[i], atol=1e-6)
    assert view.score == pytest.approx(logit, abs=1e-5)
    scored = scorer(make_passages([("1", "d1", 0, PASSAGE)]).assign(query=QUERY))
    assert view.score == pytest.approx(float(scored["score"].iloc[0]), abs=1e-4)  # the same model scores
    assert view.query.labels[:2] == ("w", "##h")  # word pieces, as the tokenizer writes them
    assert [PASSAGE[a:b] for a, b in view.passage.spans][:4] == ["The", "cat", "sat", "p"]


def test_cross_encoder_attention_cuts_the_passage_as_scoring_does(tiny_cross_encoder_path: Path) -> None:
    scorer = CrossEncoder(
        str(tiny_cross_encoder_path), Runtime(device="cpu", max_length=16), query_max_tokens=6
    )
    view = scorer.attention("cats", PASSAGE)
    expected, _ = reference_cross(
        tiny_cross_encoder_path, "cats", PASSAGE, truncation="only_second", max_length=16
    )
    assert len(view.passage) == 16 - 3 - 1  # the rest of max_length after [CLS] cats [SEP] ... [SEP]
    np.testing.assert_allclose(view.weights[0], expected[-1], atol=1e-6)  # default: the last layer


def test_word_merging_sums_passage_pieces_and_averages_query_pieces(tiny_cross_encoder_path: Path) -> None:
    view = CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu")).attention(QUERY, PASSAGE)
    words = view.by_word()
    assert words.query.labels == ("where", "the", "cats", "sat")
    assert words.passage.labels == (
        "The",
        "cat",
        "sat",
        "purring",
        "on",
        "the",
        "mat",
        ",",
        "zebra",
        "evidence",
        "!",
    )
    pieces = [i for i, w in enumerate(view.passage.words) if view.passage.labels[i] in ("p", "##u") or w == 3]
    assert len(pieces) == len("purring")
    q_where = [i for i, w in enumerate(view.query.words) if w == 0]
    assert len(q_where) == len("where")
    expected = view.weights[:, :, q_where][:, :, :, pieces].sum(axis=3).mean(axis=2)
    np.testing.assert_allclose(words.weights[:, :, 0, 3], expected, atol=1e-12)
    # attention mass is kept: a query word's row over passage words sums as its pieces' rows do on average
    np.testing.assert_allclose(
        words.weights[0, :, 0].sum(axis=-1),
        view.weights[0][:, q_where].sum(axis=-1).mean(axis=-1),
        atol=1e-12,
    )
    assert words.passage.spans[3] == (PASSAGE.index("purring"), PASSAGE.index("purring") + 7)
    assert "query side mean, passage side sum" in words.describe()


def test_merge_pieces_by_each_rule() -> None:
    values = np.array([[1.0, 2.0, 4.0], [3.0, 0.0, 1.0]])
    assert merge_pieces(values, [[0, 1], [2]], axis=1, how="sum").tolist() == [[3.0, 4.0], [3.0, 1.0]]
    assert merge_pieces(values, [[0, 1], [2]], axis=1, how="max").tolist() == [[2.0, 4.0], [3.0, 1.0]]
    assert merge_pieces(values, [[0, 1]], axis=0, how="mean").tolist() == [[2.0, 1.0, 2.5]]
    with pytest.raises(ValueError, match="sum, mean, max"):
        merge_pieces(values, [[0]], axis=0, how="median")


def test_layers_default_to_the_last_and_a_missing_layer_is_a_clear_error() -> None:
    assert resolve_layers(None, 6) == (5,) and resolve_layers([], 6) == (5,)
    assert resolve_layers([-1, 0, 5], 6) == (5, 0)
    with pytest.raises(UsageError, match="layer 6: the model has 6 layers, 0 to 5"):
        resolve_layers([6], 6)


def test_bi_encoder_view_is_the_exact_decomposition_of_its_cosine(tiny_bi_encoder_path: Path) -> None:
    scorer = BiEncoder(str(tiny_bi_encoder_path), Runtime(device="cpu"))
    view = scorer.attention(QUERY, PASSAGE)
    assert view.kind == "contribution" and not view.heads and "no token of one attends" in view.note
    score = float(scorer(make_passages([("1", "d1", 0, PASSAGE)]).assign(query=QUERY))["score"].iloc[0])
    assert view.score == pytest.approx(score, abs=1e-5)
    # independently: last hidden states of each text alone, every token pair's term of the cosine
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(tiny_bi_encoder_path))
    model = transformers.AutoModel.from_pretrained(str(tiny_bi_encoder_path)).eval()
    with torch.no_grad():
        h = model(**tokenizer(QUERY, return_tensors="pt")).last_hidden_state[0].double().numpy()
        g = model(**tokenizer(PASSAGE, return_tensors="pt")).last_hidden_state[0].double().numpy()
    pairs = (h @ g.T) / (len(h) * len(g) * np.linalg.norm(h.mean(0)) * np.linalg.norm(g.mean(0)))
    assert pairs.sum() == pytest.approx(score, abs=1e-5)
    np.testing.assert_allclose(view.weights[0, 0], pairs[1:-1, 1:-1], atol=1e-7)  # [CLS] and [SEP] left out
    assert f"of the score {score:.4f}" in view.note
    with pytest.raises(UsageError, match="view is of its output, layer 1"):
        scorer.attention(QUERY, PASSAGE, layers=[0])


def test_bi_encoder_view_leaves_a_prefix_out_of_the_rows(tiny_bi_encoder_path: Path) -> None:
    view = BiEncoder(str(tiny_bi_encoder_path), Runtime(device="cpu"), query_prefix="a ").attention(
        "cats", "the cat"
    )
    assert view.query.labels == ("cats",) and view.query.spans == ((0, 4),)


def test_a_scorer_without_the_hook_is_told_which_families_have_one() -> None:
    assert {"bi", "colbert", "cross", "seq2seq"} <= set(attention_families())
    assert "llm" not in attention_families()  # a causal LM's query cannot attend to the passage after it

    class Plain:
        family = "llm"

    with pytest.raises(NoAttentionError, match=r"the llm family has no attention view; .*bi, colbert, cross"):
        attention_hook(Plain())


def demo_view() -> AttentionView:
    return AttentionView(
        family="demo",
        kind="attention",
        query=TokenSide.of(
            "art <crime>", ("art", "<", "crime", ">"), ((0, 3), (4, 5), (5, 10), (10, 11)), (0, 1, 2, 3)
        ),
        passage=TokenSide.of(
            "renaissance paintings & robbers",
            ("renaissance", "paint", "##ings", "&", "robbers"),
            ((0, 11), (12, 17), (17, 21), (22, 23), (24, 31)),
            (0, 1, 1, 2, 3),
        ),
        layers=(0, 5),
        n_layers=6,
        weights=np.random.default_rng(0).dirichlet(np.ones(5), size=(2, 3, 4)) * 0.8,
        score=1.5,
        note="a note",
        model="models/demo",
    )


def test_png_and_html_are_written_together_and_never_overwritten(tmp_path: Path) -> None:
    from evirank.report.attention import attention_html, write_attention

    pytest.importorskip("matplotlib")
    view = demo_view()
    paths = write_attention(view, tmp_path / "out" / "view", heads=True)
    assert [p.name for p in paths] == ["view.png", "view.html"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = paths[1].read_text()
    assert "&lt;crime&gt;" in page and "<crime>" not in page  # escaped
    assert "http" not in page.replace("http-equiv", "")  # self-contained
    assert page.count("<h3>layer") == 4  # two layers, at word and token level
    assert "head 2" in page and "paintings" in page and "##ings" in page  # heads; words and pieces
    assert "passage side by the sum" in page
    before = paths[0].read_bytes()
    with pytest.raises(OutputExistsError):
        write_attention(view, tmp_path / "out" / "view")
    assert paths[0].read_bytes() == before
    write_attention(view, tmp_path / "out" / "view", level="token", overwrite=True)
    assert paths[0].read_bytes() != before
    assert "mean over 3 heads" in attention_html(view)


def test_png_draws_one_panel_per_layer_and_each_head_on_request() -> None:
    from evirank.report.attention import _panels

    view = demo_view()
    assert [title for _, title, _ in _panels(view, heads=False)] == [
        "layer 0 of 0-5: mean over 3 heads",
        "layer 5 of 0-5: mean over 3 heads",
    ]
    assert len(_panels(view, heads=True)) == 2 * (1 + 3)


# ---- explain --attention -------------------------------------------------------------------------
@pytest.fixture
def scored_store(tmp_path: Path, tiny_cross_encoder_path: Path) -> Path:
    store = tmp_path / "scores.sqlite"
    passages = make_passages(
        [("1", "d1", 0, "A dog barked."), ("1", "d1", 1, PASSAGE), ("1", "d2", 0, "A virus infects cells.")]
    ).assign(query=QUERY)
    CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu", store=store))(passages)
    return store


def test_explain_attention_draws_the_best_passage(
    scored_store: Path, tmp_path: Path, tiny_cross_encoder_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    scores = CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu"))(
        make_passages([("1", "d1", 0, "A dog barked."), ("1", "d1", 1, PASSAGE)]).assign(query=QUERY)
    )["score"].tolist()
    best = ("A dog barked.", PASSAGE)[int(np.argmax(scores))]
    prefix = tmp_path / "views" / "q1-d1"
    argv = [
        "explain",
        "--scores",
        str(scored_store),
        "--qid",
        "1",
        "--docno",
        "d1",
        "--attention",
        "0",
        "-1",
        "--attention-output",
        str(prefix),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cross view of passage" in out and "layer 0 of 0-1" in out and "layer 1 of 0-1" in out
    assert f"{QUERY.split()[2]} -> " in out
    page = prefix.with_name("q1-d1.html").read_text()
    assert prefix.with_name("q1-d1.png").read_bytes()[:4] == b"\x89PNG"
    import html

    assert html.escape(best) in page  # the best passage, as the store ranks it
    assert main(argv) != 0  # exists: refused without --overwrite
    assert main([*argv, "--overwrite", "--pid", "0", "--heads"]) == 0
    assert "head 1" in prefix.with_name("q1-d1.html").read_text()


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--attention"], "--attention needs --attention-output"),
        (["--heads"], "--heads go with --attention"),
        (["--attention", "9", "--attention-output", "OUT"], "layer 9: the model has 2 layers"),
        (
            ["--attention", "--attention-output", "OUT", "--pid", "7"],
            "has no passage 7 for query 1; its passages: 0, 1",
        ),
    ],
)
def test_explain_attention_bad_flags_say_what_is_wrong(
    scored_store: Path, tmp_path: Path, extra: list[str], needle: str, caplog: pytest.LogCaptureFixture
) -> None:
    extra = [str(tmp_path / "v") if x == "OUT" else x for x in extra]
    assert main(["explain", "--scores", str(scored_store), "--qid", "1", "--docno", "d1", *extra]) != 0
    assert needle in " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert not list(tmp_path.glob("v.*"))


def test_explain_attention_of_a_family_without_the_hook_names_those_with_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evirank.score.explain import passage_attention
    from evirank.score.stores import open_store

    with open_store(tmp_path / "s.sqlite") as store:
        store.register("f" * 64, kind="llm", description={"kind": "llm", "model": "models/qwen"})
        with pytest.raises(NoAttentionError, match=r"the llm family has no attention view; .*cross"):
            passage_attention(store, "f" * 64, "q", "p")


def test_a_model_that_gives_another_fingerprint_is_refused(scored_store: Path, tmp_path: Path) -> None:
    from evirank.score.explain import ScorerUnavailableError, rebuild_scorer
    from evirank.score.stores import open_store

    with open_store(scored_store) as store:
        fingerprint = str(store.fingerprints()["fingerprint"].iloc[0])
        assert rebuild_scorer(store, fingerprint).fingerprint == fingerprint
        store.register("e" * 64, kind="cross", description={"kind": "cross", "model": str(tmp_path / "gone")})
        with pytest.raises(ScorerUnavailableError, match="could not be loaded"):
            rebuild_scorer(store, "e" * 64)


def test_a_view_keeps_its_shape_honest() -> None:
    side = TokenSide.of("a", ("a",), ((0, 1),), (0,))
    with pytest.raises(ValueError, match="expected"):
        AttentionView(
            family="x",
            kind="attention",
            query=side,
            passage=side,
            layers=(0,),
            n_layers=1,
            weights=np.zeros((1, 1, 2, 1)),
        )
    with pytest.raises(ValueError, match="kind must be one of"):
        AttentionView(
            family="x",
            kind="saliency",
            query=side,
            passage=side,
            layers=(0,),
            n_layers=1,
            weights=np.zeros((1, 1, 1, 1)),
        )


def test_explain_attention_can_look_inside_another_model_for_the_same_passage(
    scored_store: Path, tmp_path: Path, tiny_bi_encoder_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    prefix = tmp_path / "other"
    argv = ["explain", "--scores", str(scored_store), "--qid", "1", "--docno", "d1", "--show-passages", "1",
            "--attention", "--attention-model", f"bi:{tiny_bi_encoder_path}",
            "--attention-output", str(prefix)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bi view of passage" in out and "no token of one attends" in out
    assert "document d1, 2 passages" in out  # the table comes first
    assert "contribution" in prefix.with_name("other.html").read_text()


def test_several_scorers_show_the_first_ones_view(
    tiny_cross_encoder_path: Path, tiny_bi_encoder_path: Path
) -> None:
    from evirank.score.attention import find_attention_hook
    from evirank.score.multi import Scorers

    cross = CrossEncoder(str(tiny_cross_encoder_path), Runtime(device="cpu"))
    both = Scorers([("bi", BiEncoder(str(tiny_bi_encoder_path), Runtime(device="cpu"))), ("cross", cross)])
    hook = find_attention_hook(both)
    assert hook is not None and hook(QUERY, PASSAGE).family == "bi"  # score is the first scorer's
    assert find_attention_hook(Scorers([("cross", cross)])) == cross.attention


def test_explain_attention_rebuilds_a_bi_encoder_with_its_prefixes(
    tmp_path: Path, tiny_bi_encoder_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    store = tmp_path / "bi.sqlite"
    scorer = BiEncoder(str(tiny_bi_encoder_path), Runtime(device="cpu", store=store), query_prefix="a ")
    scorer(make_passages([("1", "d1", 0, PASSAGE), ("1", "d1", 1, "A dog.")]).assign(query=QUERY))
    argv = ["explain", "--scores", str(store), "--qid", "1", "--docno", "d1", "--attention",
            "--attention-output", str(tmp_path / "bi")]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "bi view of passage" in out and "layer 1 of 0-1" in out
