"""Tiny random T5 models for the seq2seq family's tests, and an independent monoT5/duoT5 read-out."""

from __future__ import annotations

from pathlib import Path

WORDS = [
    *("Query:", "Document:", "Document0:", "Document1:", "Relevant:", "true", "false"),
    *("what", "is", "bm25", "ranks", "documents", "the", "cat", "sat", "on", "mat", "dogs", "bark"),
    *("at", "night", "vaccine", "virus", "cells", "evidence", "sentence", "score", "a", "of", "and"),
    *("in", "to"),
]


def build_tiny_t5(
    folder: Path, *, seed: int = 0, layers: int = 1, words: tuple[str, ...] = (), init_factor: float = 2.0
) -> Path:
    """Save a random T5 (d_model 16) with a WordLevel tokenizer (whitespace-split words) in ``folder``.

    The tokenizer appends ``</s>`` to every text, as T5's does. ``words`` join the vocabulary;
    ``init_factor`` scales the random weights (large: inputs get clearly different scores).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    for word in (*WORDS, *words):
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tok.save(str(folder / "tokenizer.json"))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"),
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=128,
        model_input_names=["input_ids", "attention_mask"],
    )
    tokenizer.save_pretrained(str(folder))
    config = T5Config(
        vocab_size=len(vocab),
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=2,
        relative_attention_num_buckets=8,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
        initializer_factor=init_factor,
    )
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config)
    model.eval()
    model.save_pretrained(str(folder))
    return folder


def reference_true_false(folder: Path, prompts: list[str]) -> list[tuple[float, float]]:
    """(log P(true), P(true)) of whole prompt strings, computed with transformers directly."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSeq2SeqLM.from_pretrained(str(folder)).eval()
    true_id = tokenizer.convert_tokens_to_ids("true")
    false_id = tokenizer.convert_tokens_to_ids("false")
    out = []
    with torch.no_grad():
        for prompt in prompts:
            enc = tokenizer(prompt, return_tensors="pt")
            start = torch.tensor([[model.config.decoder_start_token_id]])
            logits = model(**enc, decoder_input_ids=start).logits[0, 0, [true_id, false_id]]
            log_p = torch.log_softmax(logits, dim=0)[0].item()
            out.append((log_p, float(torch.exp(torch.tensor(log_p)))))
    return out
