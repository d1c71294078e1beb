"""The seq2seq family: monoT5 and duoT5 scores against transformers directly, detection, the CLI,
the store, Ray, serve and explain, and the Duo stage's symmetric sum."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import SCORE
from evirank.score import ModelInfo, detect_family, get_family, make_scorer
from evirank.score.families.seq2seq import (
    Duo,
    DuoT5,
    MonoT5,
    best_passages,
    join_pair,
    share_room,
    split_pair,
    sym_sum,
)
from seq2seq_helpers import build_tiny_t5, reference_true_false

pytest.importorskip("torch")

QUERIES = {"1": "what is bm25", "2": "the cat"}
DOCS = {
    "a": "bm25 ranks documents",
    "b": "the cat sat on mat",
    "c": "dogs bark at night",
    "d": "vaccine virus cells",
}


@pytest.fixture(scope="module")
def t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_t5(tmp_path_factory.mktemp("t5") / "mono", seed=0)


@pytest.fixture(scope="module")
def duo_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_t5(tmp_path_factory.mktemp("t5") / "duo", seed=1, layers=2)


def passages() -> pd.DataFrame:
    rows = [(q, query, d, 0, text) for q, query in QUERIES.items() for d, text in DOCS.items()]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "pid", "text"])


class Counting(MonoT5):
    """A MonoT5 that counts the pairs its model scores."""

    scored = 0

    def _score_pairs(self, pairs: Any, todo: Any, write: Any, stats: Any) -> None:
        type(self).scored += len(todo)
        super()._score_pairs(pairs, todo, write, stats)


def test_monot5_scores_equal_transformers_on_the_whole_prompt(t5: Path) -> None:
    frame = passages()
    scored = MonoT5(t5, Runtime(device="cpu", batch_tokens=40))(frame)
    prompts = [
        f"Query: {q} Document: {t} Relevant:" for q, t in zip(frame["query"], frame["text"], strict=True)
    ]
    expected = [log_p for log_p, _ in reference_true_false(t5, prompts)]
    np.testing.assert_allclose(scored[SCORE].to_numpy(), expected, atol=1e-5)
    assert (scored[SCORE] <= 0).all() and scored[SCORE].nunique() == len(frame)


def test_the_document_is_cut_first_and_the_prompt_kept(t5: Path) -> None:
    long_doc = " ".join(["evidence"] * 200)
    frame = pd.DataFrame(
        {"qid": ["1"], "query": ["what is bm25"], "docno": ["a"], "pid": [0], "text": [long_doc]}
    )
    scorer = MonoT5(t5, Runtime(device="cpu", max_length=32), query_max_tokens=8)
    room = scorer.passage_budget()[1]
    assert room == 32 - 4 - 8  # Query: Document: Relevant: </s>
    shown = " ".join(["evidence"] * (32 - 4 - 3))  # the 3-token query leaves the rest to the document
    expected = reference_true_false(t5, [f"Query: what is bm25 Document: {shown} Relevant:"])[0][0]
    assert scorer(frame)[SCORE].iloc[0] == pytest.approx(expected, abs=1e-5)


def test_the_true_and_false_words_are_settings(t5: Path) -> None:
    plain, swapped = (
        MonoT5(t5, Runtime(device="cpu")),
        MonoT5(t5, Runtime(device="cpu"), true_token="false", false_token="true"),
    )
    frame = passages().head(3)
    a, b = plain(frame)[SCORE].to_numpy(), swapped(frame)[SCORE].to_numpy()
    np.testing.assert_allclose(np.exp(a) + np.exp(b), 1.0, atol=1e-6)
    assert plain.fingerprint != swapped.fingerprint
    assert plain.settings()["prompt"] == ["Query:", "Document:", "Relevant:"]
    with pytest.raises(ValueError, match="not one token"):
        MonoT5(t5, Runtime(device="cpu"), true_token="very true").prepare()


def test_detection_and_the_registry(t5: Path) -> None:
    assert detect_family(t5).name == "seq2seq"
    assert detect_family(ModelInfo({"architectures": ["MT5ForConditionalGeneration"]})).name == "seq2seq"
    generic = {"architectures": ["FooForConditionalGeneration"], "is_encoder_decoder": True}
    assert detect_family(ModelInfo(generic)).name == "seq2seq"
    assert isinstance(make_scorer("auto", str(t5), Runtime(device="cpu")), MonoT5)
    assert get_family("duo-seq2seq").pairwise and get_family("seq2seq").recipe


def test_the_store_serves_a_second_run_without_the_model(t5: Path, tmp_path: Path) -> None:
    store = tmp_path / "scores.sqlite"
    Counting.scored = 0
    first = Counting(t5, Runtime(device="cpu", store=store))(passages())
    assert Counting.scored == len(first)
    again = Counting(t5, Runtime(device="cpu", store=store))
    second = again(passages())
    assert Counting.scored == len(first) and again.stats_.cached == len(first)
    np.testing.assert_array_equal(first[SCORE].to_numpy(), second[SCORE].to_numpy())


def write_collection(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS.items()))
    topics = folder / "topics.tsv"
    topics.write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    run = folder / "run.txt"
    run.write_text("".join(f"{q} Q0 {d} {r} {10 - r} bm25\n" for q in QUERIES for r, d in enumerate(DOCS, 1)))
    return {"corpus": corpus, "topics": topics, "run": run}


def rerank_args(files: dict[str, Path], model: Path, out: Path, *extra: str) -> list[str]:
    return [
        "-q",
        "rerank",
        "--run",
        str(files["run"]),
        "--corpus",
        str(files["corpus"]),
        "--topics",
        str(files["topics"]),
        "--model",
        str(model),
        "--segment",
        "whole",
        "--aggregate",
        "maxp",
        "--alpha",
        "0",
        "--normalise",
        "none",
        "--device",
        "cpu",
        "--output",
        str(out),
        *extra,
    ]


def test_rerank_through_the_cli_ranks_by_monot5_and_explains(
    t5: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_collection(tmp_path / "data")
    out = tmp_path / "out.txt"
    assert main(rerank_args(files, t5, out, "--scorer", "seq2seq")) == 0
    lines = [line.split() for line in out.read_text().splitlines()]
    prompts = {(q, d): f"Query: {QUERIES[q]} Document: {DOCS[d]} Relevant:" for q in QUERIES for d in DOCS}
    expected = dict(
        zip(prompts, (lp for lp, _ in reference_true_false(t5, list(prompts.values()))), strict=True)
    )
    for q in QUERIES:
        ranked = [(line[2], float(line[4])) for line in lines if line[0] == q]
        assert [d for d, _ in ranked] == sorted(DOCS, key=lambda d: -expected[(q, d)])
        for d, score in ranked:
            assert score == pytest.approx(expected[(q, d)], abs=1e-5)
    record = json.loads(Path(f"{out}.json").read_text())
    assert record["scorer"]["kind"] == "seq2seq" and record["counts"]["scorer_computed"] == 8
    # auto detection, and the store: a second run computes nothing
    again = tmp_path / "again.txt"
    assert main(rerank_args(files, t5, again, "--scores", f"{out}.scores.sqlite")) == 0
    assert again.read_text().split("\n")[0].split()[:5] == out.read_text().split("\n")[0].split()[:5]
    assert json.loads(Path(f"{again}.json").read_text())["counts"]["scorer_computed"] == 0
    capsys.readouterr()
    assert main(["explain", "--scores", f"{out}.scores.sqlite", "--qid", "1", "--docno", "a"]) == 0
    shown = capsys.readouterr().out
    assert "what is bm25" in shown and DOCS["a"] in shown


@pytest.mark.slow
def test_rerank_on_ray_writes_the_same_run(t5: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    files = write_collection(tmp_path / "data")
    plain, on_ray = tmp_path / "plain.txt", tmp_path / "ray.txt"
    assert main(rerank_args(files, t5, plain)) == 0
    ray_flags = ["--ray", "local", "--ray-workers", "1", "--scores", str(tmp_path / "ray-scores")]
    assert main(rerank_args(files, t5, on_ray, *ray_flags)) == 0
    plain_rows = [line.split() for line in plain.read_text().splitlines()]
    ray_rows = [line.split() for line in on_ray.read_text().splitlines()]
    assert [r[:3] for r in ray_rows] == [r[:3] for r in plain_rows]
    np.testing.assert_allclose([float(r[4]) for r in ray_rows], [float(r[4]) for r in plain_rows], atol=1e-6)


def test_serve_builds_a_monot5_searcher(t5: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyserini")
    pytest.importorskip("fastapi")
    from evirank.serve.build import build_searcher

    files = write_collection(tmp_path / "data")
    index = tmp_path / "index"
    assert main(["-q", "index", "--corpus", str(files["corpus"]), "--index", str(index)]) == 0
    searcher = build_searcher(index, model=str(t5), scorer="seq2seq", device="cpu", segment="whole")
    try:
        result = searcher.search("the cat ranks documents", top=2, depth=4)
    finally:
        searcher.close()
    assert len(result.candidates) == 2
    for candidate in result.candidates:  # each evidence passage scored as monoT5 scores it
        best = candidate.evidence[0]
        expected = reference_true_false(
            t5, [f"Query: the cat ranks documents Document: {best.text} Relevant:"]
        )[0][0]
        assert best.score == pytest.approx(expected, abs=1e-5)


# -- duoT5 -----------------------------------------------------------------------------------------
def test_a_pair_joins_and_splits_back() -> None:
    assert split_pair(join_pair("x\x1ey", "z")) == ("x y", "z")
    assert share_room(100, 5, 50) == (45, 5)
    with pytest.raises(ValueError):
        split_pair("no separator")


def test_duot5_pair_probabilities_equal_transformers(duo_t5: Path) -> None:
    texts = list(DOCS.values())
    pairs = [(a, b) for a in texts for b in texts if a != b]
    frame = pd.DataFrame(
        {
            "qid": "1",
            "query": "what is bm25",
            "docno": "",
            "pid": 0,
            "text": [join_pair(a, b) for a, b in pairs],
        }
    )
    scored = DuoT5(duo_t5, Runtime(device="cpu"))(frame)
    prompts = [f"Query: what is bm25 Document0: {a} Document1: {b} Relevant:" for a, b in pairs]
    expected = [p for _, p in reference_true_false(duo_t5, prompts)]
    np.testing.assert_allclose(scored[SCORE].to_numpy(), expected, atol=1e-5)


def test_sym_sum_adds_each_documents_wins_both_ways() -> None:
    p = np.array([[0.0, 0.8, 0.6], [0.3, 0.0, 0.9], [0.5, 0.2, 0.0]])
    np.testing.assert_allclose(
        sym_sum(p), [0.8 + 0.6 + 0.7 + 0.5, 0.3 + 0.9 + 0.2 + 0.8, 0.5 + 0.2 + 0.4 + 0.1]
    )


def a_run(k_extra: int = 1) -> pd.DataFrame:
    docs = list(DOCS)
    return pd.DataFrame(
        {
            "qid": "1",
            "query": QUERIES["1"],
            "docno": docs,
            "score": [10.0 - i for i in range(len(docs))],
            "rank": range(1, len(docs) + 1),
            "text": [DOCS[d] for d in docs],
        }
    )


class CountingDuo(DuoT5):
    scored = 0

    def _score_pairs(self, pairs: Any, todo: Any, write: Any, stats: Any) -> None:
        type(self).scored += len(todo)
        super()._score_pairs(pairs, todo, write, stats)


def test_duo_reranks_the_top_k_by_the_symmetric_sum_and_reuses_the_store(
    duo_t5: Path, tmp_path: Path
) -> None:
    store = tmp_path / "duo.sqlite"
    CountingDuo.scored = 0
    run = a_run()
    out = Duo(CountingDuo(duo_t5, Runtime(device="cpu", store=store)), k=3)(run)
    assert CountingDuo.scored == 3 * 2
    top = list(DOCS)[:3]
    prompts = {
        (i, j): f"Query: {QUERIES['1']} Document0: {DOCS[i]} Document1: {DOCS[j]} Relevant:"
        for i in top
        for j in top
        if i != j
    }
    probs = dict(
        zip(prompts, (p for _, p in reference_true_false(duo_t5, list(prompts.values()))), strict=True)
    )
    matrix = np.array([[probs.get((i, j), 0.0) for j in top] for i in top])
    sums = dict(zip(top, sym_sum(matrix), strict=True))
    expected_order = sorted(top, key=lambda d: -sums[d])
    assert out["docno"].tolist() == [*expected_order, "d"]
    np.testing.assert_allclose(
        out.set_index("docno").loc[top, "duo_score"].to_numpy(), [sums[d] for d in top], atol=1e-5
    )
    assert out["rank"].tolist() == [1, 2, 3, 4]
    assert out["score"].is_monotonic_decreasing and out["score"].iloc[3] == 7.0
    again = Duo(CountingDuo(duo_t5, Runtime(device="cpu", store=store)), k=3)(run)
    assert CountingDuo.scored == 6  # every pair from the store
    pd.testing.assert_frame_equal(again, out)
    smaller = Duo(CountingDuo(duo_t5, Runtime(device="cpu", store=store)), k=2)(run)
    assert CountingDuo.scored == 6 and len(smaller) == 4


def test_duo_reads_best_passages_and_needs_text(duo_t5: Path) -> None:
    run = a_run().drop(columns="text")
    with pytest.raises(ValueError, match="text"):
        Duo(duo_t5, k=2, runtime=Runtime(device="cpu"))(run)
    passages_frame = pd.DataFrame(
        {
            "qid": "1",
            "docno": ["a", "a", "b"],
            "pid": [0, 1, 0],
            "text": ["x", "bm25 ranks", "the cat"],
            "score": [0.1, 0.5, 0.2],
        }
    )
    assert best_passages(run, passages_frame).set_index("docno").loc[["a", "b"], "text"].tolist() == [
        "bm25 ranks",
        "the cat",
    ]
    with pytest.raises(ValueError, match="at least 2"):
        Duo(duo_t5, k=1)


def test_rerank_with_duo_through_the_cli(t5: Path, duo_t5: Path, tmp_path: Path) -> None:
    files = write_collection(tmp_path / "data")
    mono, duo = tmp_path / "mono.txt", tmp_path / "duo.txt"
    assert main(rerank_args(files, t5, mono)) == 0
    assert main(rerank_args(files, t5, duo, "--duo", "3", "--duo-model", str(duo_t5))) == 0
    record = json.loads(Path(f"{duo}.json").read_text())
    assert record["duo"]["k"] == 3 and record["duo"]["calls_per_query"] == 6
    assert record["counts"]["duo_computed"] == 2 * 6
    mono_rows = [line.split() for line in mono.read_text().splitlines()]
    duo_rows = [line.split() for line in duo.read_text().splitlines()]
    for q in QUERIES:
        m = [r[2] for r in mono_rows if r[0] == q]
        d = [r[2] for r in duo_rows if r[0] == q]
        assert sorted(d[:3]) == sorted(m[:3]) and d[3:] == m[3:]
    rerun = tmp_path / "rerun.txt"
    args = rerank_args(
        files, t5, rerun, "--duo", "3", "--duo-model", str(duo_t5), "--scores", f"{duo}.scores.sqlite"
    )
    assert main(args) == 0
    assert json.loads(Path(f"{rerun}.json").read_text())["counts"]["duo_computed"] == 0
    assert rerun.read_text().replace("rerun", "") == duo.read_text().replace("rerun", "")


def test_monot5_attention_is_its_encoders_self_attention_over_the_whole_prompt(t5: Path) -> None:
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    query, text = "what is bm25", "bm25 ranks documents"
    view = MonoT5(t5, Runtime(device="cpu")).attention(query, text, layers=[-1])
    tokenizer = AutoTokenizer.from_pretrained(str(t5))
    model = AutoModelForSeq2SeqLM.from_pretrained(str(t5), attn_implementation="eager").eval()
    enc = tokenizer(f"Query: {query} Document: {text} Relevant:", return_tensors="pt")
    with torch.no_grad():
        maps = model.get_encoder()(**enc, output_attentions=True).attentions
    rows, cols = [1, 2, 3], [5, 6, 7]  # after "Query:", after "Document:" (one token each here)
    expected = maps[-1][0].numpy()[:, rows][:, :, cols]
    assert view.kind == "attention" and view.layers == (0,) and view.weights.shape == (1, 2, 3, 3)
    np.testing.assert_allclose(view.weights[0], expected, atol=1e-6)
    assert view.by_word().passage.labels == ("bm25", "ranks", "documents")
    log_p, _ = reference_true_false(t5, [f"Query: {query} Document: {text} Relevant:"])[0]
    assert view.score == pytest.approx(log_p, abs=1e-5)
