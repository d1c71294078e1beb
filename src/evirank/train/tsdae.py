"""TSDAE: a bi-encoder learns a collection's sentences by rebuilding each from its own embedding.

TSDAE (Wang, Reimers & Gurevych 2021, a Transformer-based Sequential Denoising Auto-Encoder)
deletes most words of a sentence (60%, the paper's best ratio), embeds what is left with the
bi-encoder, and trains a decoder to write the whole sentence back while it sees nothing of the
input but that one vector (its cross-attention has a single key: the embedding). To rebuild the
sentence, the embedding has to hold what the sentence says, in the collection's own words.

As in the paper and in sentence-transformers' ``DenoisingAutoEncoderLoss``, the decoder is the
encoder's own architecture with causal self-attention and cross-attention added, and its weights
are the encoder's (tied): only the cross-attention and the language-model head's transform are
new. The embedding is the bi-encoder's own (mean-pooled, normalised, as evirank scores with it),
so the adapted encoder is used as it was trained. The decoder is thrown away at the end: the
output is an ordinary bi-encoder folder.

The sentences are the collection's own (:func:`evirank.train.pseudo.sentence_examples`); the noise
is drawn afresh at every step from torch's generator, which the trainer seeds and checkpoints, so
a resumed run draws what the uninterrupted one would have.

Example:
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> delete_words("the cell cycle is arrested in G1", 0.6)
    'cell in'
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import QID, TEXT
from evirank.score.backends import mean_pooled
from evirank.train.recipe import PairRecipe
from evirank.train.trainer import TrainResult, examples_fingerprint, fit_prepared

if TYPE_CHECKING:
    from evirank.train.adaptation import AdaptConfig
    from evirank.train.config import TrainConfig

#: The share of a sentence's words deleted before it is embedded (the paper's best).
DELETE_RATIO = 0.6
#: The decoder's own weights (cross-attention, the head's transform) in a training checkpoint.
DECODER_FILE = "tsdae-decoder.safetensors"


def delete_words(text: str, ratio: float, generator: Any = None) -> str:
    """``text`` with each word deleted with probability ``ratio`` (one word kept at least).

    The draws come from torch's generator (``generator``, else the global one).
    """
    torch = require("torch", "torch")
    words = text.split()
    if not words:
        return text
    keep = (torch.rand(len(words), generator=generator) >= ratio).tolist()
    kept = [w for w, k in zip(words, keep, strict=True) if k]
    if not kept:
        kept = [words[int(torch.randint(len(words), (1,), generator=generator))]]
    return " ".join(kept)


def _decoder(source: str | Path) -> Any:
    """``source``'s architecture and weights as a causal decoder with cross-attention added."""
    from evirank.train import _model

    transformers = require("transformers", "torch")
    config = transformers.AutoConfig.from_pretrained(source)
    config.is_decoder = True
    config.add_cross_attention = True
    logging_utils = transformers.utils.logging
    verbosity = logging_utils.get_verbosity()
    # its load report lists the cross-attention and the head's transform as missing: they are new
    logging_utils.set_verbosity_error()
    try:
        with _model.quiet_transformers():
            return transformers.AutoModelForCausalLM.from_pretrained(source, config=config)
    except ValueError as exc:
        raise ValueError(
            f"tsdae: {source} has no causal language-model class with cross-attention to serve as "
            f"its decoder ({exc}); adapt it with --method crop instead"
        ) from None
    finally:
        logging_utils.set_verbosity(verbosity)


def _tie(encoder: Any, decoder: Any) -> None:
    """Make every encoder weight the decoder's weight of the same name (one tensor, shared)."""
    modules = dict(encoder.named_modules())
    base = getattr(decoder, decoder.base_model_prefix)
    tied = 0
    for name, param in base.named_parameters():
        module_name, _, attribute = name.rpartition(".")
        module = modules.get(module_name)
        if module is not None and hasattr(module, attribute):
            setattr(module, attribute, param)
            tied += 1
    if not tied:
        raise ValueError("tsdae: no encoder weight matches the decoder's: they are not one architecture")


@functools.cache
def _denoiser_type() -> type:
    torch = require("torch", "torch")

    class Denoiser(torch.nn.Module):  # type: ignore[name-defined]
        """The bi-encoder and its tied decoder, trained, checkpointed and reloaded as one model."""

        def __init__(self, encoder: Any, decoder: Any) -> None:
            super().__init__()
            _tie(encoder, decoder)
            self.encoder = encoder
            self.decoder = decoder

        def own_decoder_weights(self) -> dict[str, Any]:
            """The decoder's weights that are not the encoder's (by identity)."""
            shared = {id(p) for p in self.encoder.parameters()}
            return {n: p for n, p in self.decoder.named_parameters() if id(p) not in shared}

        def save_pretrained(self, folder: str | Path) -> None:
            """The encoder as a model folder, the decoder's own weights beside it."""
            from safetensors.torch import save_file

            self.encoder.save_pretrained(folder)
            own = {n: p.detach().contiguous().cpu() for n, p in self.own_decoder_weights().items()}
            save_file(own, str(Path(folder) / DECODER_FILE))

    return Denoiser


def denoiser(encoder: Any, decoder: Any) -> Any:
    """The trainable pair (see :func:`_denoiser_type`): the encoder's weights tied into the decoder."""
    return _denoiser_type()(encoder, decoder)


class DenoisingLoss:
    """TSDAE's loss: the cross-entropy of rebuilding each sentence, token by token, from the
    embedding of its noisy copy (see the module)."""

    name = "tsdae-denoising"
    columns: tuple[str, ...] = (QID, TEXT)
    pairs_per_item = 1

    def __init__(self, delete_ratio: float = DELETE_RATIO) -> None:
        self.delete_ratio = delete_ratio

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        sentences = rows[TEXT].astype(str).tolist()
        noisy = [delete_words(s, self.delete_ratio) for s in sentences]
        return reconstruction_loss(model, tokenizer, noisy, sentences, config.max_length, device)

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:  # pragma: no cover
        raise NotImplementedError("tsdae trains without validation")


def reconstruction_loss(
    model: Any, tokenizer: Any, noisy: list[str], sentences: list[str], max_length: int, device: str
) -> Any:
    """Mean token cross-entropy of the decoder writing ``sentences`` from the embeddings of ``noisy``."""
    torch = require("torch", "torch")

    def tokens(texts: list[str]) -> dict[str, Any]:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        return {k: v.to(device) for k, v in batch.items()}

    source, target = tokens(noisy), tokens(sentences)
    hidden = model.encoder(**source).last_hidden_state
    embedding = mean_pooled(hidden.float(), source["attention_mask"]).to(hidden.dtype)
    ids, mask = target["input_ids"], target["attention_mask"]
    logits = model.decoder(
        input_ids=ids[:, :-1],
        attention_mask=mask[:, :-1],
        encoder_hidden_states=embedding[:, None, :],
        use_cache=False,
    ).logits
    labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    flat = logits.float().flatten(0, 1)
    return torch.nn.functional.cross_entropy(flat, labels.flatten(), ignore_index=-100)


class TsdaeRecipe(PairRecipe):
    """How ``evirank adapt --method tsdae`` loads, checkpoints and saves its model: the bi-encoder
    with a tied decoder while training; the bi-encoder alone (with its sentence-transformers
    files) at the end."""

    kind = "bi-encoder"
    losses: tuple[str, ...] = ("tsdae",)
    continues = False
    score = "cosine"

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any, dict[str, Any]]:
        from evirank.train._model import model_source
        from evirank.train.contrastive import load_encoder

        torch = require("torch", "torch")
        encoder, tokenizer = load_encoder(source, dropout=config.dropout)
        torch.manual_seed(config.seed)  # the decoder's new weights: the same for a seed
        decoder = _decoder(model_source(source))
        facts = {"decoder": "tied to the encoder, cross-attention added"}
        return denoiser(encoder, decoder), tokenizer, facts

    def reload(self, folder: Path) -> Any:
        from safetensors.torch import load_file

        from evirank.train import _model

        transformers = require("transformers", "torch")
        with _model.quiet_transformers():
            encoder = transformers.AutoModel.from_pretrained(folder)
        decoder = _decoder(folder)
        own = folder / DECODER_FILE
        if own.exists():  # a checkpoint; the final folder keeps the encoder only
            unknown = decoder.load_state_dict(load_file(str(own)), strict=False).unexpected_keys
            if unknown:
                raise ValueError(f"{own}: weights the decoder does not have: {sorted(unknown)[:3]}")
        return denoiser(encoder, decoder)

    def objective(self, examples: pd.DataFrame, config: TrainConfig, source: str) -> tuple[pd.DataFrame, Any]:
        return examples[[QID, TEXT]], DenoisingLoss()

    def finish(self, folder: Path, model: Any, config: TrainConfig) -> None:
        from evirank.train.contrastive import write_sentence_transformers_files

        (folder / DECODER_FILE).unlink(missing_ok=True)
        write_sentence_transformers_files(
            folder, dim=int(model.encoder.config.hidden_size), max_length=config.max_length
        )


def train_tsdae(
    examples: pd.DataFrame,
    config: AdaptConfig,
    output_dir: Path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    step_callback: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train the bi-encoder to rebuild ``examples``' sentences (rows [qid, text]) into ``output_dir``."""
    items = examples[[QID, TEXT]].reset_index(drop=True)

    def prepare(source: str) -> tuple[pd.DataFrame, Any, dict[str, Any], str]:
        facts = {
            "denoising": {"delete_ratio": DELETE_RATIO, "pooling": "mean, normalised (as scored)"},
            "data": {"train": {"sentences": len(items)}},
        }
        announce = f"tsdae: {source} learns to rebuild {len(items)} sentences from their embeddings"
        return items, DenoisingLoss(), facts, announce

    return fit_prepared(
        TsdaeRecipe(),
        config.train,
        output_dir,
        examples_fingerprint(items),
        prepare,
        overwrite=overwrite,
        resume=resume,
        step_callback=step_callback,
    )
