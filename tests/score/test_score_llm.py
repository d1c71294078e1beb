"""The yes/no LLM family on a tiny random Qwen2 causal LM: scores against an independent computation
written here with transformers (whole prompt strings, left padding, the full model's logits), the
prompt's tokens, detection, the CLI (store, resume, explain, Ray) and the service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import QUERY, SCORE, make_passages
from evirank.score import detect_family, make_scorer, open_store
from evirank.score.backends import TorchBackend
from evirank.score.families.llm import PROMPTS, YesNoReranker, choose_prompt

WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "the a an of and or to in is are was be for on with by as at from that this it not bm25 rank ranks "
    "ranking document documents passage passages sentence query evidence relevant model score search "
    "retrieval cat cats dog dogs sat mat vaccine virus cell cells trains sit where did bark night"
).split()

QUERIES = ["where did the cat sit", "bm25", "vaccine cells"]
TEXTS = [
    "The cat sat on the mat.",
    "Dogs bark at night.",
    "A vaccine trains cells. The virus is in the cell and the cell is not a dog.",
    "BM25 ranks documents.",
    "cat",
]


#: Qwen2's pre-tokenizer pattern (as transformers' Qwen2Tokenizer builds it).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<bos>"]


def build_tiny_llm(folder: Path, seed: int = 0, extra: tuple[str, ...] = ()) -> Path:
    """A random 2-layer Qwen2ForCausalLM (hidden 16) with a Qwen-style byte-level BPE tokenizer
    trained on the prompts' pieces and the test texts, and ``extra`` texts (transformers reads it as
    Qwen2Tokenizer)."""
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    # the pieces and the texts apart (never the whole prompts), as a real vocabulary would not
    # merge across them either; the answer words often enough to be one token each
    pieces = [piece for p in PROMPTS.values() for piece in p.pieces()]
    answers = [f"{p.yes} {p.no} " * 20 for p in PROMPTS.values()]
    texts = [*TEXTS, *QUERIES, *WORDS, *(" " + w for w in WORDS)]
    backend.train_from_iterator([*pieces, *answers, *texts, *extra] * 3, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<|endoftext|>", eos_token="<|im_end|>", bos_token="<bos>"
    )
    config = Qwen2Config(
        vocab_size=backend.get_vocab_size(),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        initializer_range=0.3,  # large random weights, so different inputs get clearly different scores
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def tiny_llm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_llm(tmp_path_factory.mktemp("tiny-llm"))


def reference_p_yes(folder: Path, prompts: list[str], yes: str = "yes", no: str = "no") -> np.ndarray:
    """P(yes) as the Qwen3-Reranker model card computes it: whole prompt strings, left padding,
    the full causal LM, the softmax over the [no, yes] logits at the last position."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    inputs = tokenizer(prompts, padding=True, add_special_tokens=False, return_tensors="pt")
    assert (inputs["attention_mask"][:, 0] == 0).any(), "the batch should need padding"
    with torch.no_grad():
        last = model(**inputs).logits[:, -1, :]
    ids = tokenizer.convert_tokens_to_ids([no, yes])
    return torch.softmax(last[:, ids].double(), dim=-1)[:, 1].numpy()


def pairs_frame(queries: list[str], texts: list[str]) -> pd.DataFrame:
    rows = [(str(q), f"d{t}", 0, text) for q in range(len(queries)) for t, text in enumerate(texts)]
    frame = make_passages(rows)
    frame[QUERY] = frame["qid"].map({str(i): q for i, q in enumerate(queries)})
    return frame


def test_scores_are_the_model_cards_p_yes_computed_independently(tiny_llm: Path) -> None:
    frame = pairs_frame(QUERIES, TEXTS)
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu", batch_tokens=300))  # several padded batches
    got = scorer(frame)[SCORE].to_numpy()
    prompt = PROMPTS["qwen3"]
    texts = [prompt.text(q, t) for q, t in zip(frame[QUERY], frame["text"], strict=True)]
    expected = reference_p_yes(tiny_llm, texts)
    np.testing.assert_allclose(np.exp(got), expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got, np.log(expected), atol=1e-5, rtol=0)
    assert np.unique(np.round(got, 6)).size > len(got) // 2  # the random model tells inputs apart
    assert scorer.settings()["prompt"] == "qwen3" and scorer.stats_.batches > 1


def test_the_passage_is_cut_first_and_the_query_capped(tiny_llm: Path) -> None:
    long_query = "where did the cat sit on the mat at night"
    long_text = " ".join(["the cat sat on the mat"] * 10)  # each word one token, with its space
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu"), query_max_tokens=4)
    scorer.prepare()
    room = 12
    scorer.runtime = scorer.runtime.with_changes(max_length=scorer.pair_template().n_special + 4 + room)
    scorer.encoder_ = None  # prepare again with the new max_length
    got = scorer(pairs_frame([long_query, "cat"], [long_text, "cat"]))[SCORE].to_numpy()
    cut_query = " ".join(long_query.split()[:4])
    prompt = PROMPTS["qwen3"]
    texts = [
        prompt.text(cut_query, " ".join(long_text.split()[:room])),
        prompt.text(cut_query, "cat"),
        prompt.text("cat", " ".join(long_text.split()[: room + 3])),  # a short query leaves more room
        prompt.text("cat", "cat"),
    ]
    np.testing.assert_allclose(np.exp(got), reference_p_yes(tiny_llm, texts), atol=1e-5, rtol=0)


@pytest.mark.parametrize("prompt", ["bge-gemma", "mxbai"])
def test_other_prompts_and_answer_words_are_read_as_their_model_cards_write_them(
    tiny_llm: Path, prompt: str
) -> None:
    frame = pairs_frame(QUERIES[:2], TEXTS[:3])
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu"), prompt=prompt)
    got = scorer(frame)[SCORE].to_numpy()
    chosen = PROMPTS[prompt]
    bos = "<bos>" if chosen.bos else ""
    texts = [bos + chosen.text(q, t) for q, t in zip(frame[QUERY], frame["text"], strict=True)]
    expected = reference_p_yes(tiny_llm, texts, yes=chosen.yes, no=chosen.no)
    np.testing.assert_allclose(np.exp(got), expected, atol=1e-5, rtol=0)
    assert scorer.settings()["answers"]["yes"][0] == chosen.yes


def test_the_last_real_token_of_a_right_padded_batch_gives_the_unpadded_logits(tiny_llm: Path) -> None:
    """The head's gather at attention_mask.sum(-1) - 1 equals running each row alone."""
    torch = pytest.importorskip("torch")
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu"))
    module = scorer.load().model
    rows = [[5, 6, 7, 8, 9, 10], [5, 6, 7], [11]]
    width = max(map(len, rows))
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    with torch.no_grad():
        batched = module(input_ids=ids, attention_mask=mask)
        alone = torch.cat([module(torch.tensor([r]), torch.ones(1, len(r), dtype=torch.long)) for r in rows])
    assert batched.shape == (3, 2)
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize("prompt", sorted(PROMPTS))
def test_a_byte_level_tokenizer_gets_the_whole_prompts_tokens(tiny_llm: Path, prompt: str) -> None:
    """With Qwen's byte-level BPE, the model's input ids are those of the whole prompt string."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_llm))
    scorer = YesNoReranker(tiny_llm, Runtime(device="cpu"), prompt=prompt)
    chosen = PROMPTS[prompt]
    bos = [tokenizer.bos_token_id] if chosen.bos else []
    for query in QUERIES:
        got = scorer.prompt_ids([query] * len(TEXTS), TEXTS)
        for ids, text in zip(got, TEXTS, strict=True):
            assert ids == bos + tokenizer.encode(chosen.text(query, text), add_special_tokens=False)


#: Questions whose "?" the prompt's newline follows: Qwen's pre-tokenizer keeps "?\n" together.
QUESTIONS = ["where did the cat sit?", "is bm25 a model?", "what trains cells?"]


@pytest.fixture(scope="module")
def question_llm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny LLM with a tokenizer that also learnt the prompt with questions: "?\n" is one token."""
    prompts = tuple(PROMPTS["qwen3"].text(q, t) for q in QUESTIONS for t in TEXTS)
    return build_tiny_llm(tmp_path_factory.mktemp("question-llm"), seed=3, extra=prompts * 5)


def test_a_question_is_tokenised_with_the_prompt_that_follows_it_as_the_model_card_does(
    question_llm: Path,
) -> None:
    """The query used to be tokenised apart from the newline after it: "?" and "\n" where the model
    card's prompt has the one token "?\n" (log P(yes) off by up to 0.41 on tiny models)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(question_llm))
    assert len(tokenizer.encode("?\n", add_special_tokens=False)) == 1  # the tokenizer merges them
    scorer = YesNoReranker(question_llm, Runtime(device="cpu"))
    prompt = PROMPTS["qwen3"]
    frame = pairs_frame(QUESTIONS, TEXTS)
    queries, texts = frame[QUERY].tolist(), frame["text"].tolist()
    prompts = [prompt.text(q, t) for q, t in zip(queries, texts, strict=True)]
    whole = [tokenizer.encode(text, add_special_tokens=False) for text in prompts]
    assert scorer.prompt_ids(queries, texts) == whole
    apart = [  # the old assembly: each text's own tokens between the prompt's pieces
        scorer.pair_template().pair(q, p)[0]
        for q, p in zip(
            scorer.encoder_.token_ids(queries, 64), scorer.encoder_.token_ids(texts, 400), strict=True
        )
    ]
    assert all(a != w for a, w in zip(apart, whole, strict=True))
    got = scorer(frame)[SCORE].to_numpy()
    np.testing.assert_allclose(
        np.exp(got),
        reference_p_yes(question_llm, prompts),
        atol=1e-5,
        rtol=0,
    )


def test_a_long_passage_loses_its_last_tokens_and_the_prompt_stays_whole(question_llm: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(question_llm))
    prompt = PROMPTS["qwen3"]
    query, words = QUESTIONS[0], ("the cat sat on the mat " * 30).split()
    full = tokenizer.encode(prompt.text(query, " ".join(words)), add_special_tokens=False)
    scorer = YesNoReranker(question_llm, Runtime(device="cpu", max_length=len(full) - 25))
    (ids,) = scorer.prompt_ids([query], [" ".join(words)])
    assert len(ids) <= len(full) - 25
    kept = [
        k
        for k in range(len(words))
        if tokenizer.encode(prompt.text(query, " ".join(words[:k])), add_special_tokens=False) == ids
    ]
    assert kept and kept[0] < len(words)  # the prompt of the passage's first words, suffix and all
    suffix = tokenizer.encode(prompt.pieces()[2], add_special_tokens=False)
    assert ids[-len(suffix) :] == suffix
    assert len(ids) > len(full) - 25 - 3  # the room is used (a word is one token or two here)


def test_a_causal_lm_is_told_from_its_config(tiny_llm: Path) -> None:
    assert detect_family(tiny_llm).name == "llm"
    assert isinstance(make_scorer("auto", tiny_llm, Runtime(device="cpu")), YesNoReranker)
    assert choose_prompt("auto", "mixedbread-ai/mxbai-rerank-base-v2", "qwen2") == "mxbai"
    with pytest.raises(ValueError, match="unknown prompt 'monot5'"):
        YesNoReranker(tiny_llm, prompt="monot5")


def test_the_instruction_and_the_prompt_are_in_the_fingerprint(tiny_llm: Path) -> None:
    base = YesNoReranker(tiny_llm, Runtime(device="cpu"))
    same = YesNoReranker(tiny_llm, Runtime(device="cpu"), instruction=PROMPTS["qwen3"].instruction)
    other = YesNoReranker(
        tiny_llm, Runtime(device="cpu"), instruction="Given a claim, find passages that support it"
    )
    suffix = YesNoReranker(tiny_llm, Runtime(device="cpu"), suffix="<|im_end|>\n<|im_start|>assistant\n")
    assert base.fingerprint == same.fingerprint
    assert len({base.fingerprint, other.fingerprint, suffix.fingerprint}) == 3
    assert other.describe()["instruction"].startswith("Given a claim")
    frame = pairs_frame(QUERIES[:1], TEXTS[:2])
    assert not np.allclose(base(frame)[SCORE], other(frame)[SCORE])


def test_bad_prompts_and_answer_words_are_refused_clearly(tiny_llm: Path) -> None:
    with pytest.raises(ValueError, match=r"answer word 'yes please' is \d+ tokens"):
        YesNoReranker(tiny_llm, yes="yes please").prepare()
    with pytest.raises(ValueError, match=r"mxbai prompt has no \{instruction\} place"):
        YesNoReranker(tiny_llm, prompt="mxbai", instruction="find claims").prepare()


def test_an_interrupted_scoring_resumes_from_the_store(
    tiny_llm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = pairs_frame(QUERIES, TEXTS)
    expected = YesNoReranker(tiny_llm, Runtime(device="cpu"))(frame)[SCORE].to_numpy()
    store = tmp_path / "scores.sqlite"
    real, calls = TorchBackend.forward, []

    def dying(self: TorchBackend, batch: Any) -> np.ndarray:
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(batch.shape[0])
        return real(self, batch)

    monkeypatch.setattr(TorchBackend, "forward", dying)
    first = YesNoReranker(tiny_llm, Runtime(device="cpu", store=store, batch_tokens=200, commit_every=1))
    with pytest.raises(KeyboardInterrupt):
        first(frame)
    monkeypatch.setattr(TorchBackend, "forward", real)
    again = YesNoReranker(tiny_llm, Runtime(device="cpu", store=store, batch_tokens=200))
    got = again(frame)[SCORE].to_numpy()
    assert again.stats_.cached == sum(calls) > 0
    assert again.stats_.computed == len(frame) - sum(calls)
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    third = YesNoReranker(tiny_llm, Runtime(device="cpu", store=store))
    np.testing.assert_array_equal(third(frame)[SCORE].to_numpy(), got)
    assert third.stats_.computed == 0 and open_store(store).count_scores(third.fingerprint) == len(frame)


DOCS = {
    "d1": "The cat sat on the mat. A cat is not a dog.",
    "d2": "Dogs bark at night. The dog sat.",
    "d3": "BM25 ranks documents. A passage is evidence.",
    "d4": "A vaccine trains cells. The virus is in the cell.",
}
TOPICS = {"1": "where did the cat sit", "2": "vaccine cells"}


@pytest.fixture
def collection(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items()))
    topics = folder / "topics.tsv"
    topics.write_text("".join(f"{q}\t{t}\n" for q, t in TOPICS.items()))
    run = folder / "run.txt"
    run.write_text("".join(f"{q} Q0 {d} {r} {10 - r} bm25\n" for q in TOPICS for r, d in enumerate(DOCS, 1)))
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
        "--scorer",
        "llm",
        "--model",
        str(model),
        "--device",
        "cpu",
        "--depth",
        "4",
        "--output",
        str(out),
        *extra,
    ]


def test_rerank_reuses_its_stored_scores_and_explain_reads_them(
    tiny_llm: Path, collection: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "scores.sqlite"
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    assert main(rerank_args(collection, tiny_llm, first, "--scores", str(store), "--aggregate", "maxp")) == 0
    record = json.loads(Path(f"{first}.json").read_text())
    assert record["scorer"]["kind"] == "llm" and record["scorer"]["prompt"] == "qwen3"
    assert record["counts"]["scorer_computed"] == record["counts"]["scorer_distinct"] > 0
    auto = rerank_args(collection, tiny_llm, second, "--scores", str(store), "--aggregate", "maxp")
    auto[auto.index("--scorer") + 1] = "auto"
    assert main(auto) == 0
    again = json.loads(Path(f"{second}.json").read_text())
    assert again["counts"]["scorer_computed"] == 0
    assert again["counts"]["scorer_cached"] == record["counts"]["scorer_distinct"]
    assert first.read_text().split("\n") == second.read_text().split("\n")
    capsys.readouterr()
    assert main(["explain", "--scores", str(store), "--qid", "1", "--docno", "d1", "--format", "tsv"]) == 0
    printed = capsys.readouterr().out
    assert "The cat sat on the mat." in printed


@pytest.fixture
def ray_session() -> Any:
    """A local Ray (logical resources), shut down afterwards only if this test started it."""
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    started = not ray.is_initialized()
    if started:
        from evirank.scale.engine import init_on_loopback, keeping_signal_handlers
        from evirank.scale.reaper import watch_ray_processes

        watch_ray_processes()
        with keeping_signal_handlers():  # a JVM in this process keeps its handlers
            init_on_loopback(ray, num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def one_thread() -> Any:
    """One torch thread on both sides, as Ray's one-core workers run (float sums group alike)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_rerank_on_ray_writes_the_same_run(
    ray_session: Any, one_thread: None, tiny_llm: Path, collection: dict[str, Path], tmp_path: Path
) -> None:
    plain, on_ray = tmp_path / "plain.txt", tmp_path / "ray.txt"
    assert main(rerank_args(collection, tiny_llm, plain)) == 0
    ray_flags = ["--ray", "local", "--ray-workers", "2", "--scores", str(tmp_path / "shards")]
    assert main(rerank_args(collection, tiny_llm, on_ray, *ray_flags)) == 0
    assert on_ray.read_bytes() == plain.read_bytes()
    record = json.loads(on_ray.with_name("ray.txt.json").read_text())
    assert record["counts"]["scorer_computed"] == record["counts"]["scorer_distinct"] > 0


def test_the_service_ranks_with_the_llm(tiny_llm: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyserini")
    from evirank.serve.build import build_searcher

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in DOCS.items()))
    index = tmp_path / "index"
    assert main(["-q", "index", "--corpus", str(corpus), "--index", str(index)]) == 0
    searcher = build_searcher(index, model=str(tiny_llm), scorer="llm", device="cpu", aggregate="maxp")
    result = searcher.search("cat mat", top=2, depth=4)
    assert 1 <= len(result.candidates) <= 2 and result.passages > 0
    assert searcher.info["scorer"] == "llm"
    best = result.candidates[0].evidence[0]
    assert np.isfinite(best.score) and best.score <= 0.0  # a log-probability


def test_the_in_memory_ranker_passes_the_instruction_to_the_llm(tiny_llm: Path) -> None:
    from evirank.ranker import Ranker

    instruction = "Given a claim, find passages that support it"
    ranker = Ranker(tiny_llm, scorer="llm", device="cpu", instruction=instruction)
    assert isinstance(ranker.scorer, YesNoReranker) and ranker.scorer.describe()["instruction"] == instruction
    ranked = ranker.rank("where did the cat sit", list(DOCS.values()))
    assert len(ranked) == len(DOCS) and all(np.isfinite(d.score) for d in ranked)


def test_no_prompt_is_longer_than_max_length_even_when_the_query_and_prompt_fill_it(
    question_llm: Path,
) -> None:
    """The passage loses its last tokens first, then the query (its tokens in the prompt may outnumber
    its tokens alone, which its cap counts); a prompt that cannot fit at all is refused."""
    scorer = YesNoReranker(question_llm, Runtime(device="cpu"), query_max_tokens=64)
    scorer.prepare()
    (bare,) = scorer.prompt_ids([""], [""])
    scorer.max_length_ = len(bare) + 3  # the room a query's cap may exceed in the prompt
    query, passage = "where did the cat sit? " * 20, "the cat sat on the mat " * 50
    rows = scorer.prompt_ids([query, "bm25", query], [passage, "", ""])
    assert all(len(row) <= scorer.max_length_ for row in rows), [len(r) for r in rows]
    suffix = scorer.encoder_.tokenizer.encode(scorer.prompt_.pieces()[2], add_special_tokens=False)
    assert all(row[-len(suffix) :] == suffix for row in rows)  # the prompt's end kept whole
    assert rows[0] == rows[2]  # the passage was cut away before the query lost a token
    scorer.max_length_ = len(bare) - 1
    with pytest.raises(ValueError, match=r"the qwen3 prompt alone takes \d+ tokens, more than max_length="):
        scorer.prompt_ids(["q"], ["p"])
