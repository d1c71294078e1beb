"""The duo family (duoBERT) and the Duo stage's aggregations: pair probabilities against
transformers, SUM / BINARY / MIN / MAX / SYM-SUM against hand computation, the store (a rerun or
a smaller k scores nothing), ``>>`` after a mono stage, and the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import SCORE
from evirank.score.document_pairs import (
    DUO_AGGREGATES,
    Duo,
    duo_aggregate,
    join_pair,
    pair_binary,
    pair_max,
    pair_min,
    pair_sum,
    split_pair,
    sym_sum,
)

QUERY = "what is bm25"
DOCS = {
    "a": "bm25 ranks documents",
    "b": "the cat sat on mat",
    "c": "dogs bark at night",
    "d": "vaccine virus cells",
    "e": "a model scores passages",
}


class FixedPairs:
    """A pair scorer whose P(first more relevant) comes from a table (no model)."""

    def __init__(self, table: dict[tuple[str, str], float]) -> None:
        self.table = table
        self.model = "fixed"
        self.seen: list[tuple[str, str]] = []

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        pairs = [split_pair(t) for t in frame["text"]]
        self.seen.extend(pairs)
        return frame.assign(**{SCORE: [self.table[p] for p in pairs]})

    def describe(self) -> dict[str, Any]:
        return {"model": "fixed"}


def a_run(n: int = 5) -> pd.DataFrame:
    docs = list(DOCS)[:n]
    return pd.DataFrame(
        {
            "qid": "1",
            "query": QUERY,
            "docno": docs,
            "score": [10.0 - i for i in range(n)],
            "rank": range(1, n + 1),
            "text": [DOCS[d] for d in docs],
        }
    )


# p[i][j] = P(doc i more relevant than doc j), for the top 4 of a_run()
P = {
    ("a", "b"): 0.2, ("a", "c"): 0.7, ("a", "d"): 0.4,
    ("b", "a"): 0.9, ("b", "c"): 0.6, ("b", "d"): 0.3,
    ("c", "a"): 0.1, ("c", "b"): 0.5, ("c", "d"): 0.45,
    ("d", "a"): 0.8, ("d", "b"): 0.9, ("d", "c"): 0.2,
}  # fmt: skip
BY_TEXT = {(DOCS[i], DOCS[j]): value for (i, j), value in P.items()}
HAND = {  # each document's score under each aggregation, worked out by hand from P
    "sum": {"a": 1.3, "b": 1.8, "c": 1.05, "d": 1.9},
    "binary": {"a": 1.0, "b": 2.0, "c": 0.0, "d": 2.0},
    "min": {"a": 0.2, "b": 0.3, "c": 0.1, "d": 0.2},
    "max": {"a": 0.7, "b": 0.9, "c": 0.5, "d": 0.9},
    # sum over j of p_ij + 1 - p_ji
    "sym-sum": {
        "a": 1.3 + (1 - 0.9) + (1 - 0.1) + (1 - 0.8),
        "b": 1.8 + (1 - 0.2) + (1 - 0.5) + (1 - 0.9),
        "c": 1.05 + (1 - 0.7) + (1 - 0.6) + (1 - 0.2),
        "d": 1.9 + (1 - 0.4) + (1 - 0.3) + (1 - 0.45),
    },
}


@pytest.mark.parametrize("aggregate", sorted(HAND))
def test_each_aggregation_orders_the_top_k_as_computed_by_hand(aggregate: str) -> None:
    out = Duo(FixedPairs(BY_TEXT), k=4, aggregate=aggregate)(a_run())
    hand = HAND[aggregate]
    # ties (binary: b and d; min: a and d; max: b and d) keep the earlier rank first
    expected = sorted(hand, key=lambda d: (-round(hand[d], 9), list(DOCS).index(d)))
    assert out["docno"].tolist() == [*expected, "e"]
    np.testing.assert_allclose(out.set_index("docno").loc[list(hand), "duo_score"], list(hand.values()))
    assert out["score"].is_monotonic_decreasing and out["score"].iloc[-1] == 6.0  # e keeps its score
    assert out["rank"].tolist() == [1, 2, 3, 4, 5]


def test_the_aggregation_functions_and_their_names() -> None:
    p = np.array([[0.0, 0.2, 0.7], [0.9, 0.0, 0.6], [0.1, 0.5, 0.0]])
    assert pair_sum(p).tolist() == pytest.approx([0.9, 1.5, 0.6])
    assert pair_binary(p).tolist() == [1.0, 2.0, 0.0]
    assert pair_min(p).tolist() == [0.2, 0.6, 0.1]
    assert pair_max(p).tolist() == [0.7, 0.9, 0.5]
    assert sym_sum(p).tolist() == pytest.approx([0.9 + 0.1 + 0.9, 1.5 + 0.8 + 0.5, 0.6 + 0.3 + 0.4])
    assert set(DUO_AGGREGATES) == {"sum", "binary", "min", "max", "sym-sum"}
    with pytest.raises(ValueError, match="expected one of sum, binary, min, max, sym-sum"):
        duo_aggregate("mean")
    with pytest.raises(ValueError, match="unknown duo aggregation"):
        Duo(FixedPairs(BY_TEXT), k=3, aggregate="avg")
    assert pair_min(np.zeros((1, 1))).tolist() == [0.0]  # a query with one document


def test_a_duo_stage_composes_after_a_mono_stage_with_rshift() -> None:
    from evirank.aggregate import MaxP
    from evirank.frames import Document
    from evirank.rerank import FetchText, Rerank
    from evirank.segment import Whole
    from evirank.stage import Stage

    class Length(Stage):
        def transform(self, p: pd.DataFrame) -> pd.DataFrame:
            return p.assign(score=p["text"].str.len().astype(float))

    docs = {d: Document(d, "", t) for d, t in DOCS.items()}
    mono = Rerank(Whole(), Length(), MaxP(normalise="none"), fetch=FetchText(docs=docs), depth=5)
    table = {(DOCS[i], DOCS[j]): P.get((i, j), 0.5) for i in DOCS for j in DOCS if i != j}
    duo = Duo(FixedPairs(table), k=3, aggregate="sum", fetch=FetchText(docs=docs))
    run = a_run().drop(columns=["text"])
    out = (mono >> duo)(run)
    mono_order = mono(run)["docno"].tolist()  # longest text first
    top = mono_order[:3]
    sums = {d: sum(table[(DOCS[d], DOCS[o])] for o in top if o != d) for d in top}
    assert out["docno"].tolist()[:3] == sorted(top, key=lambda d: (-sums[d], mono_order.index(d)))
    assert out["docno"].tolist()[3:] == mono_order[3:]


# -- duoBERT -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def duo_model(tmp_path_factory: pytest.TempPathFactory, tiny_bert_builder: Callable[..., Path]) -> Path:
    return tiny_bert_builder(tmp_path_factory.mktemp("duo"), head="classify", num_labels=1, seed=5)


@pytest.fixture(scope="module")
def three_type_duo_model(tmp_path_factory: pytest.TempPathFactory, duo_model: Path) -> Path:
    """A duoBERT checkpoint with three token types (type_vocab_size 3), as the reference duoBERT has."""
    import shutil

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("duo3")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        if (duo_model / name).exists():
            shutil.copy(duo_model / name, folder / name)
    config = transformers.BertConfig.from_pretrained(duo_model, type_vocab_size=3)
    torch.manual_seed(7)
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder


def reference_probabilities(
    folder: Path, query: str, pairs: list[tuple[str, str]], three_types: bool = False
) -> list[float]:
    """P(first more relevant) by transformers: [CLS] q [SEP] d_i [SEP] d_j [SEP]; q, d_i type 0, d_j 1
    (``three_types``: [CLS] q [SEP] type 0, d_i [SEP] type 1, d_j [SEP] type 2, as castorini's duoBERT)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for first, second in pairs:
            q = tokenizer(query, add_special_tokens=False)["input_ids"]
            a = tokenizer(first, add_special_tokens=False)["input_ids"]
            b = tokenizer(second, add_special_tokens=False)["input_ids"]
            cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
            ids = [cls, *q, sep, *a, sep, *b, sep]
            types = [0] * (len(q) + len(a) + 3) + [1] * (len(b) + 1)
            if three_types:
                types = [0] * (len(q) + 2) + [1] * (len(a) + 1) + [2] * (len(b) + 1)
            logit = model(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                token_type_ids=torch.tensor([types]),
            ).logits[0, 0]
            out.append(float(torch.sigmoid(logit)))
    return out


class CountingDuoBERT:
    """Wraps a DuoBERT, counting the pairs its model runs."""

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer
        self.model = scorer.model
        self.computed = 0

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame:
        out = self.scorer.transform(frame)
        self.computed += self.scorer.stats_.computed
        self.stats_ = self.scorer.stats_
        return out

    def describe(self) -> dict[str, Any]:
        return dict(self.scorer.describe())


def test_duobert_pair_probabilities_equal_transformers(duo_model: Path) -> None:
    pytest.importorskip("torch")
    from evirank.score.families.duo import DuoBERT

    texts = list(DOCS.values())[:3]
    pairs = [(a, b) for a in texts for b in texts if a != b]
    frame = pd.DataFrame(
        {"qid": "1", "query": QUERY, "docno": "", "pid": 0, "text": [join_pair(a, b) for a, b in pairs]}
    )
    scored = DuoBERT(duo_model, Runtime(device="cpu", batch_tokens=40))(frame)
    np.testing.assert_allclose(
        scored[SCORE].to_numpy(), reference_probabilities(duo_model, QUERY, pairs), atol=1e-5
    )
    assert scored[SCORE].between(0, 1).all()


@pytest.mark.parametrize("layout", ["padded", "unpadded"])
def test_a_duobert_with_three_token_types_reads_query_d_i_and_d_j_as_types_0_1_2(
    three_type_duo_model: Path, duo_model: Path, layout: str
) -> None:
    pytest.importorskip("torch")
    from evirank.score.families.duo import DuoBERT

    texts = list(DOCS.values())[:3]
    pairs = [(a, b) for a in texts for b in texts if a != b]
    frame = pd.DataFrame(
        {"qid": "1", "query": QUERY, "docno": "", "pid": 0, "text": [join_pair(a, b) for a, b in pairs]}
    )
    scorer = DuoBERT(three_type_duo_model, Runtime(device="cpu", batch_tokens=40, batch_layout=layout))
    expected = reference_probabilities(three_type_duo_model, QUERY, pairs, three_types=True)
    np.testing.assert_allclose(scorer(frame)[SCORE].to_numpy(), expected, atol=1e-5)
    assert (scorer.load().unpadded is not None) is (layout == "unpadded")
    assert scorer.token_types == 3 and "token types 0 1 2" in scorer.settings()["input"]
    batch = scorer.pair_inputs([QUERY, "cat"], [join_pair("cat", "dog dog"), join_pair("a", "b")])
    assert batch.token_type_ids is not None
    for row, mask in zip(batch.token_type_ids.tolist(), batch.attention_mask.tolist(), strict=True):
        kept = row[: sum(mask)]
        assert kept == sorted(kept) and set(kept) == {0, 1, 2} and not any(row[sum(mask) :])
    two = DuoBERT(duo_model, Runtime(device="cpu"))
    assert two.token_types == 2 and "token types 0 0 1" in two.settings()["input"]


def test_duobert_cuts_both_documents_to_their_share(duo_model: Path) -> None:
    pytest.importorskip("torch")
    from evirank.score.families.duo import DuoBERT

    scorer = DuoBERT(duo_model, Runtime(device="cpu", max_length=24), query_max_tokens=4)
    long_a, long_b = " ".join(["cat"] * 40), " ".join(["dog"] * 40)
    batch = scorer.pair_inputs([QUERY], [join_pair(long_a, long_b)])
    ids = batch.input_ids[0].tolist()
    tokenizer = scorer.encoder_.tokenizer
    assert len(ids) == 24 and ids.count(tokenizer.sep_token_id) == 3
    # 4 special tokens and the query: the rest is shared, half each (odd: the second gets one more)
    room = 24 - 4 - min(4, len(tokenizer(QUERY, add_special_tokens=False)["input_ids"]))
    cat, dog = tokenizer.convert_tokens_to_ids("cat"), tokenizer.convert_tokens_to_ids("dog")
    assert (ids.count(cat), ids.count(dog)) == (room // 2, room - room // 2)
    frame = pd.DataFrame(
        {"qid": "1", "query": QUERY, "docno": "", "pid": 0, "text": [join_pair(long_a, long_b)]}
    )
    assert (
        DuoBERT(duo_model, Runtime(device="cpu", max_length=24), query_max_tokens=4)(frame)[SCORE]
        .notna()
        .all()
    )


def test_duobert_pair_scores_go_to_the_store_and_a_rerun_or_smaller_k_scores_nothing(
    duo_model: Path, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    from evirank.score.families.duo import DuoBERT

    store = tmp_path / "duo.sqlite"
    counted = CountingDuoBERT(DuoBERT(duo_model, Runtime(device="cpu", store=store)))
    run = a_run()
    out = Duo(counted, k=4, aggregate="sum")(run)
    assert counted.computed == 4 * 3
    top = list(DOCS)[:4]
    pairs = [(DOCS[i], DOCS[j]) for i in top for j in top if i != j]
    probs = dict(zip(pairs, reference_probabilities(duo_model, QUERY, pairs), strict=True))
    sums = {d: sum(probs[(DOCS[d], DOCS[o])] for o in top if o != d) for d in top}
    np.testing.assert_allclose(
        out.set_index("docno").loc[top, "duo_score"], [sums[d] for d in top], atol=1e-5
    )
    again = CountingDuoBERT(DuoBERT(duo_model, Runtime(device="cpu", store=store)))
    pd.testing.assert_frame_equal(Duo(again, k=4, aggregate="sum")(run), out)
    smaller = CountingDuoBERT(DuoBERT(duo_model, Runtime(device="cpu", store=store)))
    Duo(smaller, k=3, aggregate="binary")(run)
    assert again.computed == 0 and smaller.computed == 0
    assert again.stats_.cached == 12 and smaller.stats_.cached == 6


def test_a_classifier_given_as_the_duo_model_reads_as_duobert(duo_model: Path) -> None:
    from evirank.score import detect_family, get_family

    assert Duo(duo_model, k=2, runtime=Runtime(device="cpu")).scorer.family == "duo"
    assert detect_family(duo_model).name == "cross"  # as a passage scorer, a classifier is a cross-encoder
    assert get_family("duo").pairwise and get_family("duo").recipe == "evirank.train.pairwise:DuoRecipe"


def test_rerank_with_duobert_through_the_cli_records_the_aggregation(
    tiny_cross_encoder_path: Path, duo_model: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS.items()))
    topics = tmp_path / "topics.tsv"
    topics.write_text(f"1\t{QUERY}\n2\tthe cat\n")
    run = tmp_path / "run.txt"
    run.write_text(
        "".join(f"{q} Q0 {d} {r} {10 - r} bm25\n" for q in ("1", "2") for r, d in enumerate(DOCS, 1))
    )
    base = [
        "-q",
        "rerank",
        "--run",
        str(run),
        "--corpus",
        str(corpus),
        "--topics",
        str(topics),
        "--model",
        str(tiny_cross_encoder_path),
        "--segment",
        "whole",
        "--aggregate",
        "maxp",
        "--device",
        "cpu",
    ]
    mono, duo = tmp_path / "mono.txt", tmp_path / "duo.txt"
    assert main([*base, "--output", str(mono)]) == 0
    duo_args = ["--duo", "3", "--duo-model", f"duo:{duo_model}", "--duo-aggregate", "binary"]
    assert main([*base, *duo_args, "--output", str(duo), "--scores", str(tmp_path / "s.sqlite")]) == 0
    record = json.loads(Path(f"{duo}.json").read_text())
    assert record["duo"]["aggregate"] == "binary" and record["duo"]["kind"] == "duo"
    assert record["counts"]["duo_computed"] == 2 * 6
    m = [line.split()[2] for line in mono.read_text().splitlines()]
    d = [line.split()[2] for line in duo.read_text().splitlines()]
    assert sorted(d[:3]) == sorted(m[:3]) and d[3:5] == m[3:5]
    smaller = tmp_path / "k2.txt"
    k2 = ["--duo", "2", "--duo-model", f"duo:{duo_model}", "--duo-aggregate", "sum"]
    assert main([*base, *k2, "--output", str(smaller), "--scores", str(tmp_path / "s.sqlite")]) == 0
    assert json.loads(Path(f"{smaller}.json").read_text())["counts"]["duo_computed"] == 0
    bad = ["--duo", "3", "--duo-model", str(duo_model), "--duo-aggregate", "avg"]
    with pytest.raises(SystemExit):  # argparse names the aggregations
        main([*base, *bad, "--output", str(tmp_path / "bad.txt")])
