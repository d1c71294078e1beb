"""The late-interaction (ColBERT) family: a tiny PyLate-style folder, scores against an independent
MaxSim written here with transformers and torch, detection, the CLI, the store, serve and explain."""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evirank.config import Runtime

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

QUERY_LENGTH = 12
DOCUMENT_LENGTH = 24


WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "the a an of and or to in is are was what bm25 ranks documents by their terms cat cats sat on mat dog "
    "dogs too vaccine virus cells query model score evidence relevant passages search retrieval"
).split()


def build_colbert(folder: Path, *, bias: bool = True, seed: int = 5) -> Path:
    """A tiny random BERT (hidden 16) with a WordPiece vocabulary holding PyLate's marker tokens, a
    Dense projection (16 -> 8) and the sentence-transformers files PyLate writes."""
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    folder.mkdir(parents=True, exist_ok=True)
    letters = list(string.ascii_lowercase + string.digits)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *letters]
    vocab += [f"##{c}" for c in letters] + [w for w in WORDS if w not in vocab]
    backend = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    tokenizer.add_tokens(["[Q] ", "[D] "])  # as PyLate adds them
    tokenizer.save_pretrained(str(folder))
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    torch.manual_seed(seed)
    transformers.BertModel(config, add_pooling_layer=False).eval().save_pretrained(str(folder))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    dense = folder / "1_Dense"
    dense.mkdir()
    (dense / "config.json").write_text(
        json.dumps(
            {
                "in_features": 16,
                "out_features": 8,
                "bias": bias,
                "activation_function": "torch.nn.modules.linear.Identity",
                "use_residual": False,
            }
        )
    )
    generator = torch.Generator().manual_seed(7)
    weights = {"linear.weight": torch.randn(8, 16, generator=generator)}
    if bias:
        weights["linear.bias"] = torch.randn(8, generator=generator)
    save_file(weights, str(dense / "model.safetensors"))
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "query_prefix": "[Q] ",
                "document_prefix": "[D] ",
                "query_length": QUERY_LENGTH,
                "document_length": DOCUMENT_LENGTH,
                "do_query_expansion": True,
                "attend_to_expansion_tokens": False,
                "skiplist_words": list(string.punctuation),
            }
        )
    )
    return folder


@pytest.fixture(scope="module")
def colbert_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_colbert(tmp_path_factory.mktemp("tiny-colbert"))


def reference_scores(folder: Path, pairs: list[tuple[str, str]]) -> list[float]:
    """MaxSim as PyLate computes it, written directly: each text tokenised by the tokenizer alone
    (one model call each), the marker id after [CLS], queries padded with [MASK] to query_length
    (not attended), passages' punctuation left out, the projection, L2 normalisation."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.BertModel.from_pretrained(str(folder)).eval()
    from safetensors.torch import load_file

    dense = load_file(str(folder / "1_Dense" / "model.safetensors"))
    skip = {tokenizer.convert_tokens_to_ids(c) for c in string.punctuation}

    def vectors(text: str, marker: str, length: int, expand: bool) -> tuple[torch.Tensor, list[int]]:
        encoded = tokenizer(text, truncation=True, max_length=length - 1)
        ids = encoded["input_ids"]
        ids = [ids[0], tokenizer.convert_tokens_to_ids(marker), *ids[1:]]
        mask = [1] * len(ids)
        if expand:
            mask += [0] * (length - len(ids))
            ids += [tokenizer.mask_token_id] * (length - len(ids))
        with torch.no_grad():
            hidden = model(
                input_ids=torch.tensor([ids]),
                attention_mask=torch.tensor([mask]),
                token_type_ids=torch.zeros(1, len(ids), dtype=torch.long),
            ).last_hidden_state[0]
        projected = hidden @ dense["linear.weight"].T + dense["linear.bias"]
        return torch.nn.functional.normalize(projected, dim=-1), ids

    out = []
    for query, passage in pairs:
        q, _ = vectors(query, "[Q] ", QUERY_LENGTH, True)
        d, ids = vectors(passage, "[D] ", DOCUMENT_LENGTH, False)
        d = d[[i for i, t in enumerate(ids) if t not in skip]]
        out.append(float((q @ d.T).max(dim=1).values.sum()))
    return out


PASSAGES = [
    ("1", "what is bm25", "d1", 0, "BM25 ranks documents by their terms."),
    ("1", "what is bm25", "d1", 1, "A cat sat on the mat, and the dog sat too!"),
    (
        "1",
        "what is bm25",
        "d2",
        0,
        "the vaccine virus cells and the query model score evidence of relevant passages",
    ),
    ("2", "cats and dogs", "d1", 1, "A cat sat on the mat, and the dog sat too!"),
    ("2", "cats and dogs", "d3", 0, "search retrieval"),
]


def passages() -> pd.DataFrame:
    return pd.DataFrame(PASSAGES, columns=["qid", "query", "docno", "pid", "text"])


def test_scores_equal_an_independent_maxsim(colbert_path: Path) -> None:
    from evirank.score.families.colbert import ColBERT

    scorer = ColBERT(colbert_path, Runtime(device="cpu", batch_tokens=40))
    scored = scorer(passages())
    expected = reference_scores(colbert_path, [(q, t) for _, q, _, _, t in PASSAGES])
    np.testing.assert_allclose(scored["score"].to_numpy(), expected, atol=1e-5, rtol=0)
    assert len(set(np.round(expected, 4))) == len(expected)  # the random model tells them apart


def test_detection_reads_pylate_and_stanford_folders(colbert_path: Path) -> None:
    from evirank.score import ModelInfo, detect_family
    from evirank.score.default_model import default_bi_encoder
    from evirank.score.multi import ScorerSpec

    assert detect_family(colbert_path).name == "colbert"
    assert ScorerSpec.parse(f"auto:{colbert_path}").family == "colbert"
    assert detect_family(ModelInfo({"architectures": ["HF_ColBERT"]})).name == "colbert"
    assert detect_family(default_bi_encoder()).name == "bi"  # all-MiniLM-L6-v2 pools: still a bi-encoder


def test_a_stanford_checkpoint_reads_its_linear_layer(tmp_path: Path, colbert_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    from evirank.score.families.colbert import read_layout

    folder = tmp_path / "stanford"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((colbert_path / name).read_bytes())
    config = json.loads((colbert_path / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["HF_ColBERT"]}))
    weights = {f"bert.{k}": v for k, v in load_file(str(colbert_path / "model.safetensors")).items()}
    weights["linear.weight"] = load_file(str(colbert_path / "1_Dense" / "model.safetensors"))["linear.weight"]
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "artifact.metadata").write_text(json.dumps({"query_token_id": "[Q] ", "doc_token_id": "[D] "}))
    layout = read_layout(folder)
    assert (layout.query_prefix, layout.query_length, layout.dim) == ("[Q] ", 32, 8)
    assert not layout.projections[0].bias


def test_each_query_token_names_its_best_passage_word(colbert_path: Path) -> None:
    from evirank.score.families.colbert import ColBERT

    scorer = ColBERT(colbert_path, Runtime(device="cpu"))
    text = "A cat sat on the mat, and the dog sat too!"
    found = scorer.matches("cats and dogs", [text])[0]
    assert [m.query for m in found] == ["cats", "and", "dogs"]
    words = set(text.replace(",", " ").replace("!", " ").split()) | {"[CLS]", "[SEP]", "[D] "}
    assert all(m.passage in words for m in found)
    assert all(-1.0 <= m.similarity <= 1.0 for m in found)
    assert "->" in str(found[0])


def test_the_attention_view_is_the_token_cosines_whose_row_maxima_are_the_matches(colbert_path: Path) -> None:
    from evirank.errors import UsageError
    from evirank.score.families.colbert import ColBERT

    scorer = ColBERT(colbert_path, Runtime(device="cpu"))
    text = "A cat sat on the mat, and the dog sat too!"
    view = scorer.attention("cats and dogs", text)
    assert view.kind == "similarity" and not view.heads and "MaxSim" in view.note
    assert view.score == pytest.approx(reference_scores(colbert_path, [("cats and dogs", text)])[0], abs=1e-5)
    words = view.by_word()
    assert words.query.labels == ("cats", "and", "dogs")
    assert "," not in words.passage.labels and "!" not in words.passage.labels  # the skiplist's
    found = scorer.matches("cats and dogs", [text])[0]
    checked = 0
    for row, match in enumerate(found):  # a row's best word is its match, when a word (not [CLS]) won
        if match.passage in words.passage.labels:
            assert view.weights[0, 0, row].max() == pytest.approx(match.similarity, abs=1e-6)
            checked += 1
    assert checked >= 1
    assert np.all(np.abs(view.weights) <= 1 + 1e-6)
    with pytest.raises(UsageError, match="view is of its output"):
        scorer.attention("cats", text, layers=[0])


def test_the_store_keeps_scores_and_token_vectors(tmp_path: Path, colbert_path: Path) -> None:
    from evirank.score.families.colbert import ColBERT

    frame = passages()
    first = ColBERT(colbert_path, Runtime(device="cpu", store=tmp_path / "scores.sqlite"))
    expected = first(frame)["score"].to_numpy()
    assert first.stats_.computed == frame["query"].nunique() + frame["text"].nunique()
    again = ColBERT(colbert_path, Runtime(device="cpu", store=tmp_path / "scores.sqlite"))
    np.testing.assert_array_equal(again(frame)["score"].to_numpy(), expected)
    assert again.stats_.computed == 0 and again.stats_.cached == len(frame)
    # a new query over the same passages encodes only the query: the passages' vectors are stored
    other = frame.assign(qid="3", query="relevant evidence")
    scored = again(other)["score"].to_numpy()
    assert again.stats_.computed == 1 and again.stats_.embeddings_cached == frame["text"].nunique()
    fresh = ColBERT(colbert_path, Runtime(device="cpu"))(other)["score"].to_numpy()
    np.testing.assert_allclose(scored, fresh, atol=1e-6)


def write_collection(folder: Path) -> dict[str, Path]:
    corpus = folder / "corpus.jsonl"
    docs = {
        "a": "Dogs and cats sat. BM25 ranks documents by their terms.",
        "b": "The cat sat on the mat. A vaccine virus and cells.",
        "c": "Search retrieval of relevant passages. The query model score.",
    }
    corpus.write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in docs.items()))
    topics = folder / "topics.tsv"
    topics.write_text("1\tcat mat\n2\twhat is bm25\n")
    run = folder / "run.txt"
    run.write_text("".join(f"{q} Q0 {d} {r} {3 - r} bm25\n" for q in (1, 2) for r, d in enumerate(docs, 1)))
    return {"corpus": corpus, "topics": topics, "run": run}


def rerank_argv(files: dict[str, Path], model: Path, out: Path, *extra: str) -> list[str]:
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
        "--device",
        "cpu",
        "--aggregate",
        "maxp",
        "--output",
        str(out),
        *extra,
    ]


def test_rerank_scores_reuses_the_store_and_explain_shows_matched_words(
    tmp_path: Path, colbert_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evirank.cli import main

    files = write_collection(tmp_path)
    scores = tmp_path / "scores.sqlite"
    out = tmp_path / "run-auto.txt"
    assert main(rerank_argv(files, colbert_path, out, "--scores", str(scores))) == 0  # --scorer auto
    record = json.loads(Path(f"{out}.json").read_text())
    assert record["scorer"]["kind"] == "colbert" and record["scorer"]["query_length"] == QUERY_LENGTH
    named = tmp_path / "run-named.txt"
    assert main(rerank_argv(files, colbert_path, named, "--scorer", "colbert", "--scores", str(scores))) == 0
    assert named.read_text().replace("named", "auto") == out.read_text().replace("named", "auto")
    counts = json.loads(Path(f"{named}.json").read_text())["counts"]
    assert counts["scorer_cached"] == counts["scorer_distinct"] > 0 and counts["scorer_computed"] == 0
    capsys.readouterr()
    assert main(["explain", "--scores", str(scores), "--qid", "1", "--docno", "b"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("matched: cat -> ") == 2 and ", mat -> " in shown  # both passages, each query word
    assert main(["explain", "--scores", str(scores), "--qid", "1", "--docno", "b", "--no-matches"]) == 0
    assert "matched:" not in capsys.readouterr().out


@pytest.mark.slow  # about 30 s: Ray starts
def test_rerank_on_local_ray_writes_the_same_run(tmp_path: Path, colbert_path: Path) -> None:
    pytest.importorskip("ray.data")
    from evirank.cli import main

    files = write_collection(tmp_path)
    plain, on_ray = tmp_path / "plain.txt", tmp_path / "ray.txt"
    assert main(rerank_argv(files, colbert_path, plain, "--no-scores")) == 0
    ray_flags = ["--ray", "local", "--ray-workers", "1", "--scores", str(tmp_path / "shards")]
    assert main(rerank_argv(files, colbert_path, on_ray, *ray_flags)) == 0
    import ray

    ray.shutdown()
    assert on_ray.read_text() == plain.read_text().replace("plain", "ray")
    counts = json.loads(Path(f"{on_ray}.json").read_text())["counts"]
    assert counts["scorer_computed"] > 0 and counts["scorer_cached"] == 0


def test_serve_searches_with_the_colbert_scorer(tmp_path: Path, colbert_path: Path) -> None:
    pytest.importorskip("pyserini")
    from evirank.cli import main
    from evirank.serve.build import build_searcher

    files = write_collection(tmp_path)
    index = tmp_path / "index"
    assert main(["-q", "index", "--corpus", str(files["corpus"]), "--index", str(index)]) == 0
    searcher = build_searcher(index, model=str(colbert_path), scorer="colbert", device="cpu")
    assert searcher.scorer.family == "colbert"
    result = searcher.search("cat mat", top=2, depth=3)
    assert len(result.candidates) == 2
    best = result.candidates[0].evidence[0]
    from evirank.score.families.colbert import ColBERT

    alone = ColBERT(colbert_path, Runtime(device="cpu"))
    frame = pd.DataFrame(
        [("q", "cat mat", "x", 0, best.text)], columns=["qid", "query", "docno", "pid", "text"]
    )
    assert alone(frame)["score"].iloc[0] == pytest.approx(best.score, abs=1e-5)


def test_a_marker_the_tokenizer_lacks_is_a_clear_error(tmp_path: Path, colbert_path: Path) -> None:
    import shutil

    from evirank.errors import InputFormatError
    from evirank.score.families.colbert import ColBERT

    folder = tmp_path / "model"
    shutil.copytree(colbert_path, folder)
    config = json.loads((folder / "config_sentence_transformers.json").read_text())
    (folder / "config_sentence_transformers.json").write_text(json.dumps({**config, "query_prefix": "[QQ] "}))
    with pytest.raises(InputFormatError, match=r"query marker token '\[QQ\] '"):
        ColBERT(folder, Runtime(device="cpu")).prepare()
