"""The PARADE family: document scores against an independent computation (transformers for the
encoder, numpy for each aggregation), the passage vectors in the store, the passage bound, the
``document`` aggregator and the command line."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import DOCUMENT_SCORE, SCORE

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from evirank.score import detect_family  # noqa: E402
from evirank.score.families.parade import Parade  # noqa: E402
from evirank.score.passage_aggregation import HeadConfig, make_head, save_head  # noqa: E402

QUERIES = {"1": "what is bm25", "2": "the cat"}
DOCS = {  # documents as their passages, in order
    "a": ["bm25 ranks documents", "a model scores passages", "the evidence is relevant"],
    "b": ["the cat sat on mat"],
    "c": ["dogs bark", "cats sat", "vaccine virus cells", "a cell", "the query is a sentence"],
}


def build_parade(folder: Path, aggregation: str, builder: Callable[..., Path], max_passages: int = 4) -> Path:
    """A tiny random PARADE model: a 2-layer BERT encoder (hidden 32) and a head with large weights."""
    builder(folder, head="embed", seed=3)
    config = HeadConfig(
        aggregation,
        hidden_size=32,
        max_passages=max_passages,
        num_heads=2,
        intermediate_size=64,
        max_length=64,
    )
    torch.manual_seed(7)
    head = make_head(config)
    with torch.no_grad():
        for param in head.parameters():
            param.normal_(0.0, 0.3)
    save_head(head, folder)
    return folder


@pytest.fixture(scope="module")
def parade_models(
    tmp_path_factory: pytest.TempPathFactory, tiny_bert_builder: Callable[..., Path]
) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("parade")
    return {a: build_parade(root / a, a, tiny_bert_builder) for a in ("avg", "max", "attn", "transformer")}


def passages() -> pd.DataFrame:
    rows = [
        (q, query, d, pid, text)
        for q, query in QUERIES.items()
        for d, texts in DOCS.items()
        for pid, text in enumerate(texts)
    ]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "pid", "text"])


# -- the independent computation -------------------------------------------------------------------
def cls_vectors(folder: Path, query: str, texts: list[str]) -> np.ndarray:
    """[CLS] of the last layer for each (query, text), by transformers on the tokenizer's own pairs."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        rows = [model(**tokenizer(query, t, return_tensors="pt")).last_hidden_state[0, 0] for t in texts]
    return torch.stack(rows).double().numpy()


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def encoder_layer(x: np.ndarray, w: dict[str, np.ndarray], prefix: str, heads: int) -> np.ndarray:
    """A post-norm transformer encoder layer (GELU), written out."""
    hidden = x.shape[1]
    size = hidden // heads
    qkv = x @ w[f"{prefix}self_attn.in_proj_weight"].T + w[f"{prefix}self_attn.in_proj_bias"]
    q, k, v = qkv[:, :hidden], qkv[:, hidden : 2 * hidden], qkv[:, 2 * hidden :]
    out = np.zeros_like(x)
    for h in range(heads):
        part = slice(h * size, (h + 1) * size)
        logits = q[:, part] @ k[:, part].T / math.sqrt(size)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        out[:, part] = weights @ v[:, part]
    attended = out @ w[f"{prefix}self_attn.out_proj.weight"].T + w[f"{prefix}self_attn.out_proj.bias"]
    x = layer_norm(x + attended, w[f"{prefix}norm1.weight"], w[f"{prefix}norm1.bias"])
    inner = x @ w[f"{prefix}linear1.weight"].T + w[f"{prefix}linear1.bias"]
    inner = 0.5 * inner * (1 + np.vectorize(math.erf)(inner / math.sqrt(2)))
    ff = inner @ w[f"{prefix}linear2.weight"].T + w[f"{prefix}linear2.bias"]
    return layer_norm(x + ff, w[f"{prefix}norm2.weight"], w[f"{prefix}norm2.bias"])


def reference_score(folder: Path, vectors: np.ndarray) -> float:
    """PARADE's document score of passage vectors [n, H], from the saved head's weights."""
    from safetensors.numpy import load_file

    config = HeadConfig.read(folder)
    w = {k: v.astype(np.float64) for k, v in load_file(str(folder / "parade_head.safetensors")).items()}
    if config.aggregation == "avg":
        document = vectors.mean(0)
    elif config.aggregation == "max":
        document = vectors.max(0)
    elif config.aggregation == "attn":
        logits = vectors @ w["attention.weight"][0]
        weights = np.exp(logits - logits.max())
        document = (weights / weights.sum()) @ vectors
    else:
        x = np.vstack([w["cls"], vectors]) + w["position.weight"][: len(vectors) + 1]
        for i in range(config.layers):
            x = encoder_layer(x, w, f"layers.{i}.", config.num_heads)
        document = x[0]
    return float(document @ w["score.weight"][0] + w["score.bias"][0])


@pytest.mark.parametrize("aggregation", ["avg", "max", "attn", "transformer"])
def test_document_scores_equal_an_independent_computation(
    parade_models: dict[str, Path], aggregation: str
) -> None:
    folder = parade_models[aggregation]
    scored = Parade(folder, Runtime(device="cpu", batch_tokens=50))(
        passages()
    )  # small batches, mixed lengths
    assert scored[DOCUMENT_SCORE].nunique() == len(QUERIES) * len(DOCS)
    for (qid, docno), rows in scored.groupby(["qid", "docno"]):
        vectors = cls_vectors(folder, QUERIES[str(qid)], DOCS[str(docno)])
        expected = reference_score(folder, vectors[:4])  # the model reads 4 passages per document
        np.testing.assert_allclose(rows[DOCUMENT_SCORE].to_numpy(), expected, atol=1e-4)
        # each passage's own score: the document made of it alone
        alone = [reference_score(folder, vectors[i : i + 1]) for i in range(len(vectors))]
        np.testing.assert_allclose(rows.sort_values("pid")[SCORE].to_numpy(), alone, atol=1e-4)


def test_only_the_first_passages_make_the_score(
    tmp_path: Path, tiny_bert_builder: Callable[..., Path]
) -> None:
    folder = build_parade(tmp_path / "m", "transformer", tiny_bert_builder, max_passages=2)
    scorer = Parade(folder, Runtime(device="cpu"))
    frame = passages()
    scored = scorer(frame.sample(frac=1.0, random_state=0))  # order of rows does not matter
    doc = scored[(scored["qid"] == "1") & (scored["docno"] == "c")]
    vectors = cls_vectors(folder, QUERIES["1"], DOCS["c"][:2])
    np.testing.assert_allclose(doc[DOCUMENT_SCORE].to_numpy(), reference_score(folder, vectors), atol=1e-4)
    assert scorer.max_passages == 2 and scorer.aggregation == "transformer"


def test_passage_vectors_go_through_the_store_and_a_rerun_encodes_nothing(
    parade_models: dict[str, Path], tmp_path: Path
) -> None:
    store = tmp_path / "scores.sqlite"
    first_scorer = Parade(parade_models["attn"], Runtime(device="cpu", store=store))
    first = first_scorer(passages())
    n_pairs = len(passages())
    assert first_scorer.stats_.computed == n_pairs and first_scorer.stats_.embeddings_cached == 0
    again = Parade(parade_models["attn"], Runtime(device="cpu", store=store))
    second = again(passages())
    assert again.stats_.computed == 0 and again.stats_.embeddings_cached == n_pairs
    pd.testing.assert_frame_equal(first, second)
    # a subset (another depth) is read from the store too, with the same document scores
    subset = passages()[passages()["docno"] != "b"]
    part = Parade(parade_models["attn"], Runtime(device="cpu", store=store))(subset)
    np.testing.assert_allclose(
        part[DOCUMENT_SCORE].to_numpy(), first.loc[subset.index, DOCUMENT_SCORE].to_numpy(), atol=1e-6
    )
    # another model's vectors are its own
    other = Parade(parade_models["max"], Runtime(device="cpu", store=store))
    other(passages())
    assert other.stats_.computed == n_pairs
    from evirank.score import ScoreStore

    with ScoreStore(store, readonly=True) as opened:
        kinds = opened.fingerprints()["kind"].tolist()
        assert kinds.count("parade") == 2
        stored = opened.passages_scores(first_scorer.fingerprint)
        assert len(stored) == n_pairs and stored[SCORE].notna().all()  # passage scores kept for explain


def test_a_parade_folder_is_told_from_its_files(parade_models: dict[str, Path]) -> None:
    assert detect_family(parade_models["avg"]).name == "parade"
    described = Parade(parade_models["max"], Runtime(device="cpu")).describe()
    assert described["aggregation"] == "max" and described["kind"] == "parade"


def test_rerank_with_parade_aggregates_the_document_scores_and_records_the_aggregation(
    parade_models: dict[str, Path], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": d, "title": "", "text": ". ".join(t) + "."}) + "\n" for d, t in DOCS.items()
        )
    )
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    run = tmp_path / "run.txt"
    run.write_text("".join(f"{q} Q0 {d} {r} {10 - r} bm25\n" for q in QUERIES for r, d in enumerate(DOCS, 1)))
    out = tmp_path / "out.txt"
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
        str(parade_models["transformer"]),
        "--segment",
        "sentences:skip",
        "--device",
        "cpu",
        "--save-passages",
        str(tmp_path / "p.parquet"),
    ]
    assert main([*base, "--aggregate", "document", "--alpha", "0", "--output", str(out)]) == 0
    record = json.loads(Path(f"{out}.json").read_text())
    assert record["scorer"]["kind"] == "parade" and record["scorer"]["aggregation"] == "transformer"
    assert record["aggregate"] == "document"
    saved = pd.read_parquet(tmp_path / "p.parquet")
    for q in QUERIES:
        ranked = [line.split()[2] for line in out.read_text().splitlines() if line.split()[0] == q]
        per_doc = saved[saved["qid"] == q].groupby("docno")[DOCUMENT_SCORE].first()
        assert ranked == per_doc.sort_values(ascending=False).index.tolist()
    again = tmp_path / "again.txt"
    args = [
        *base,
        "--aggregate",
        "document",
        "--alpha",
        "0",
        "--output",
        str(again),
        "--overwrite",
        "--scores",
        f"{out}.scores.sqlite",
    ]
    assert main(args) == 0
    assert json.loads(Path(f"{again}.json").read_text())["counts"]["scorer_computed"] == 0
    assert again.read_text().replace("again", "out") == out.read_text()
