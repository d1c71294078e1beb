"""The seq2seq family: monoT5 (pointwise) and duoT5 (pairwise) relevance from a T5's 'true' / 'false'.

**monoT5** (Nogueira, Jiang, Pradeep & Lin 2020, "Document Ranking with a Pretrained
Sequence-to-Sequence Model") reads ``Query: q Document: d Relevant:`` (then the end-of-sequence
token) in the encoder; the decoder takes one step from its start token, and the score is the
log-probability of the word 'true' in the softmax over the two logits of 'true' and 'false'
at that step. The reference implementations compute it the same way: pygaggle's ``MonoT5``
(``castorini/pygaggle``, ``rerank/transformer.py``) looks the ids of ``▁true`` / ``▁false`` up in the
vocabulary and takes ``log_softmax`` over them at the first decoding step; pyterrier_t5's
``MonoT5ReRanker`` takes ``tokenizer.encode('true')[0]`` (the same ``▁true`` piece), feeds
``decoder_input_ids`` = the config's ``decoder_start_token_id`` and keeps the prompt ``Relevant:``
when it truncates. Here the query keeps at most ``query_max_tokens`` tokens and the document
is cut first (the prompt words are never cut), each distinct text is tokenised once, and batches
are length-sorted under a token budget (:class:`~evirank.score.query_passage.PairScorer`).

The prompt's pieces are tokenised on their own and joined with the query's and document's ids
(as pyterrier_t5 joins ``Query: q Document: d`` with ``Relevant:``); a SentencePiece tokenizer gives
the same ids as for the whole prompt string, since every piece starts at a word boundary.

**duoT5** (Pradeep, Nogueira & Lin 2021, "The Expando-Mono-Duo Design Pattern for Text Ranking with
Pretrained Sequence-to-Sequence Models") reads ``Query: q Document0: d0 Document1: d1 Relevant:``
and gives p_ij = P('true') = P(d_i is more relevant than d_j) by the same read-out
(:class:`DuoT5`). :class:`~evirank.score.document_pairs.Duo` re-ranks the top ``k`` documents of an
earlier ranking with the symmetric sum of the paper, s_i = sum over j != i of (p_ij + (1 - p_ji)):
``k * (k - 1)`` model calls per query. pygaggle's ``DuoT5`` aggregates so (its ``sym_sum``);
pyterrier_t5's ``DuoT5ReRanker`` adds log-probabilities instead.

Example:
    >>> from evirank.score import get_family
    >>> get_family("seq2seq").recipe, get_family("duo-seq2seq").pairwise
    ('evirank.train.seq2seq:Seq2SeqRecipe', True)
    >>> sym_sum(np.array([[0.0, 0.9], [0.2, 0.0]])).round(6).tolist()
    [1.7, 0.3]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evirank.config import Runtime
from evirank.extras import require
from evirank.score.backends import TokenBatch
from evirank.score.document_pairs import (
    Duo,
    TwoDocumentScorer,
    best_passages,
    join_pair,
    share_room,
    split_pair,
    sym_sum,
)
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.query_passage import PairScorer
from evirank.score.tokenize import Template

if TYPE_CHECKING:
    from evirank.score.attention import AttentionView

__all__ = [
    "OBJECTIVE",
    "Duo",
    "DuoT5",
    "MonoT5",
    "TrueFalseHead",
    "best_passages",
    "join_pair",
    "log_p_true",
    "share_room",
    "split_pair",
    "sym_sum",
]

logger = logging.getLogger(__name__)

#: The name of the family's head, the first part of :attr:`TrueFalseHead.name` (in fingerprints).
OBJECTIVE = "seq2seq-true-false"


# -- the model head -----------------------------------------------------------------------------
def true_false_logits(model: Any, input_ids: Any, attention_mask: Any, ids: tuple[int, int, int]) -> Any:
    """The logits of (true, false) at the first decoding step of a seq2seq LM (a batch x 2 tensor).

    ``ids`` = (decoder start, true, false). Training and scoring read the model through this one
    function. Example: see :class:`TrueFalseHead`.
    """
    torch = require("torch", "torch")
    start, true_id, false_id = ids
    decoder = torch.full((input_ids.shape[0], 1), start, dtype=torch.long, device=input_ids.device)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder).logits
    return logits[:, 0, [true_id, false_id]]


def _true_false_module(model: Any, ids: tuple[int, int, int]) -> Any:
    """A torch module over ``model`` whose forward gives :func:`true_false_logits`."""
    torch = require("torch", "torch")

    class TrueFalse(torch.nn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, **_: Any) -> Any:  # token types unused
            return true_false_logits(self.model, input_ids, attention_mask, ids)

    return TrueFalse()


@dataclass
class TrueFalseHead:
    """The :class:`~evirank.score.backends.ModelHead` of the family: a seq2seq LM
    (``AutoModelForSeq2SeqLM``) run one decoder step from ``decoder_start``, giving the logits of
    ``true_id`` and ``false_id`` (rows x 2).

    Example:
        >>> TrueFalseHead(0, 1176, 6136).name
        'seq2seq-true-false:0:1176:6136'
    """

    decoder_start: int
    true_id: int
    false_id: int
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"{OBJECTIVE}:{self.decoder_start}:{self.true_id}:{self.false_id}"

    @property
    def ids(self) -> tuple[int, int, int]:
        return (self.decoder_start, self.true_id, self.false_id)

    def load_torch(self, model_dir: Path) -> tuple[Any, tuple[str, ...]]:
        transformers = require("transformers", "torch")
        model, info = transformers.AutoModelForSeq2SeqLM.from_pretrained(
            str(model_dir), output_loading_info=True
        )
        return self.wrap(model), tuple(sorted(info.get("missing_keys", ())))

    def wrap(self, model: Any) -> Any:
        """The module the backend runs, over a seq2seq LM already in memory."""
        return _true_false_module(model, self.ids)


def log_p_true(logits: Any) -> np.ndarray:
    """log P('true') of (true, false) logit rows: ``log_softmax`` over the two, first column (float64).

    Example:
        >>> round(float(log_p_true(np.array([[0.0, 0.0]]))[0]), 6)
        -0.693147
    """
    values = np.asarray(logits, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != 2:
        raise ValueError(f"expected (true, false) logits of shape (rows, 2), found {values.shape}")
    return values[:, 0] - np.logaddexp(values[:, 0], values[:, 1])


def word_id(tokenizer: Any, word: str, what: str) -> int:
    """The id of ``word`` as one token: its encoding when that is one piece (``true`` -> ``▁true``
    in T5's SentencePiece vocabulary), else the vocabulary entry spelled exactly so.

    Raises:
        ValueError: the word is not one token of the vocabulary.
    """
    ids = tokenizer.encode(word, add_special_tokens=False)
    if len(ids) == 1:
        return int(ids[0])
    vocab = tokenizer.get_vocab()
    if word in vocab:
        return int(vocab[word])
    raise ValueError(
        f"{what} {word!r} is not one token of the model's vocabulary (it reads as {len(ids)} tokens); "
        "give a word the vocabulary holds"
    )


class _TrueFalseScorer(PairScorer):
    """What monoT5 and duoT5 share: the true/false head, its token ids, the prompt's end token."""

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        true_token: str,
        false_token: str,
        query_max_tokens: int,
    ) -> None:
        super().__init__(model, runtime, query_max_tokens=query_max_tokens)
        self.true_token = true_token
        self.false_token = false_token

    def _check_settings(self) -> None:
        tokenizer = self.encoder_.tokenizer
        start = getattr(self.config_, "decoder_start_token_id", None)
        if start is None:
            start = tokenizer.pad_token_id
        if start is None or not getattr(self.config_, "is_encoder_decoder", False):
            raise ValueError(
                f"{self.model}: not an encoder-decoder model with a decoder start token "
                f"(the {self.family} family reads T5-style seq2seq models)"
            )
        self.task = TrueFalseHead(  # type: ignore[misc]
            int(start),
            word_id(tokenizer, self.true_token, "true_token"),
            word_id(tokenizer, self.false_token, "false_token"),
        )
        super()._check_settings()

    def _end_ids(self) -> tuple[int, ...]:
        eos = self.encoder_.tokenizer.eos_token_id
        return () if eos is None else (int(eos),)

    def adopt(self, model: Any, tokenizer: Any) -> None:
        """Score with a seq2seq LM in memory (one being trained); see the base class."""
        from evirank.score.backends import TorchBackend

        super().adopt(model, tokenizer)
        assert isinstance(self.task, TrueFalseHead)
        self.backend_ = TorchBackend.adopting(self.task.wrap(model), self.task, self.device_, self.precision_)

    def _head_settings(self) -> dict[str, Any]:
        assert isinstance(self.task, TrueFalseHead)
        return {
            "head": "log_softmax(true, false)[true] at the first decoder step",
            "true_token": self.true_token,
            "false_token": self.false_token,
            "decoder_start_token_id": self.task.decoder_start,
            "true_id": self.task.true_id,
            "false_id": self.task.false_id,
            "end_ids": list(self._end_ids()),
        }


class MonoT5(_TrueFalseScorer):
    """Score (query, passage) pairs with a monoT5 model (see the module).

    Input Passages [qid, query, docno, pid, text, ...]; output the same frame with ``score`` =
    log P('true') in the softmax over the 'true' and 'false' logits at the first decoder step
    (a value <= 0; higher is more relevant). The input is ``{query_prefix} q {document_prefix} d
    {relevant_prompt}`` then the end-of-sequence token; the query keeps at most
    ``query_max_tokens`` tokens and the document takes the rest of ``max_length``.

    Args:
        model: a Hugging Face id or local folder of a T5-style seq2seq model (monoT5).
        runtime: where and how it runs (:class:`~evirank.config.Runtime`; the torch backend only,
            input cap at most 512).
        query_max_tokens: the query's token cap.
        true_token / false_token: the words whose logits are read (one token each).
        query_prefix / document_prefix / relevant_prompt: the prompt's words.

    Example:
        >>> from evirank.frames import make_passages
        >>> passages = make_passages([("1", "d1", 0, "BM25 ranks documents.")]).assign(query="bm25")
        >>> MonoT5("castorini/monot5-base-msmarco")(passages)["score"].dtype  # doctest: +SKIP
        dtype('float64')
    """

    family = "seq2seq"

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        query_max_tokens: int = 64,
        true_token: str = "true",
        false_token: str = "false",
        query_prefix: str = "Query:",
        document_prefix: str = "Document:",
        relevant_prompt: str = "Relevant:",
    ) -> None:
        super().__init__(
            model, runtime, true_token=true_token, false_token=false_token, query_max_tokens=query_max_tokens
        )
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.relevant_prompt = relevant_prompt

    def pair_template(self) -> Template:
        return self.encoder_.prompt_template(
            self.query_prefix, self.document_prefix, self.relevant_prompt, end=self._end_ids()
        )

    def settings(self) -> dict[str, Any]:
        prompt = [self.query_prefix, self.document_prefix, self.relevant_prompt]
        return {**super().settings(), **self._head_settings(), "prompt": prompt}

    def read_out(self, output: np.ndarray) -> np.ndarray:
        return log_p_true(output)

    def attention(self, query: str, text: str, layers: Sequence[int] | None = None) -> AttentionView:
        """The encoder's self-attention from each query token to each document token over
        ``Query: q Document: d Relevant:`` as scoring builds it, in ``layers`` of the encoder
        (default: its last), per head; the view's ``score`` is log P('true') from the same pass.

        The decoder reads the encoder's output in one step; the encoder's layers are where query
        and document tokens meet, as in a cross-encoder.

        Example:
            >>> scorer = MonoT5("castorini/monot5-base-msmarco")  # doctest: +SKIP
            >>> scorer.attention("art crime", "Robbers took paintings.").kind  # doctest: +SKIP
            'attention'
        """
        from evirank.score.attention import attention_maps, eager_model, joint_attention, torch_inputs

        torch = require("torch", "torch")
        model = eager_model(self, "AutoModelForSeq2SeqLM")
        assert isinstance(self.task, TrueFalseHead)
        start, true_id, false_id = self.task.ids

        def run(batch: TokenBatch) -> tuple[list[np.ndarray], float | None]:
            inputs = torch_inputs(batch, self.device_, token_types=False)
            decoder = torch.full((1, 1), start, dtype=torch.long, device=inputs["input_ids"].device)
            with torch.inference_mode():
                output = model(**inputs, decoder_input_ids=decoder, output_attentions=True)
            logits = output.logits[:, 0, [true_id, false_id]].float().cpu().numpy()
            return attention_maps(output.encoder_attentions), float(self.read_out(logits)[0])

        return joint_attention(
            self,
            query,
            text,
            layers,
            run,
            note="Encoder self-attention; the rest of a query token's attention goes to the query, "
            "the prompt words and the end token",
        )


# -- duoT5 --------------------------------------------------------------------------------------
class DuoT5(TwoDocumentScorer, _TrueFalseScorer):
    """P(d0 is more relevant than d1 to q) with a duoT5 model (see the module).

    Input Passages [qid, query, docno, pid, text, ...] whose ``text`` is two documents joined
    by :func:`join_pair`; output the same frame with ``score`` = P('true') (between 0 and 1) in
    the softmax over the 'true' and 'false' logits at the first decoder step, the input being
    ``Query: q Document0: d0 Document1: d1 Relevant:`` then the end-of-sequence token. The
    query keeps at most ``query_max_tokens``; the two documents share the rest (half each, what
    one leaves unused goes to the other). Pair scores go to the score store under (query,
    joined text), so a rerun costs nothing. Use it through :class:`Duo`.

    Args:
        model: a Hugging Face id or local folder of a duoT5 model.
        first_prefix / second_prefix: the words before each document.
        others: as for :class:`MonoT5`.

    Example:
        >>> DuoT5("castorini/duot5-base-msmarco").family  # doctest: +SKIP
        'duo-seq2seq'
    """

    family = "duo-seq2seq"

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        query_max_tokens: int = 64,
        true_token: str = "true",
        false_token: str = "false",
        query_prefix: str = "Query:",
        first_prefix: str = "Document0:",
        second_prefix: str = "Document1:",
        relevant_prompt: str = "Relevant:",
    ) -> None:
        super().__init__(
            model, runtime, true_token=true_token, false_token=false_token, query_max_tokens=query_max_tokens
        )
        self.query_prefix = query_prefix
        self.first_prefix = first_prefix
        self.second_prefix = second_prefix
        self.relevant_prompt = relevant_prompt

    def pair_template(self) -> Template:
        """Around the query and the first document (the second and its prefix follow the first)."""
        return self.encoder_.prompt_template(
            self.query_prefix, self.first_prefix, self.relevant_prompt, end=self._end_ids()
        )

    def between_ids(self) -> list[int]:
        """The second document's prefix (``Document1:``), between the two documents."""
        return self.encoder_.token_ids([self.second_prefix], 10_000)[0] if self.second_prefix else []

    def settings(self) -> dict[str, Any]:
        prompt = [self.query_prefix, self.first_prefix, self.second_prefix, self.relevant_prompt]
        return {
            **super().settings(),
            **self._head_settings(),
            "prompt": prompt,
            "pair_text": "first + U+001E + second",
            "room": "query capped, documents half each",
        }

    def read_out(self, output: np.ndarray) -> np.ndarray:
        return np.exp(log_p_true(output))


# -- the families ---------------------------------------------------------------------------------
def _claims(info: ModelInfo) -> int:
    """A T5 / mT5 conditional generator, or any ``*ForConditionalGeneration`` encoder-decoder."""
    names = info.architectures
    if any(a in ("T5ForConditionalGeneration", "MT5ForConditionalGeneration") for a in names):
        return 2
    if info.has_architecture("ForConditionalGeneration") and info.config.get("is_encoder_decoder"):
        return 2
    return 0


FAMILY = register_family(
    Family(
        "seq2seq",
        scorer=MonoT5,
        summary="monoT5: 'Query: q Document: d Relevant:' through a T5, score = log P('true') vs 'false'",
        claims=_claims,
        recipe="evirank.train.seq2seq:Seq2SeqRecipe",
        scale="log-probability",
    )
)


def _duo_claims(info: ModelInfo) -> int:
    """A T5 read as a pairwise model (1: below monoT5's claim, so ``auto`` reads a T5 as monoT5,
    while a pairwise stage finds this family)."""
    return 1 if _claims(info) else 0


DUO_FAMILY = register_family(
    Family(
        "duo-seq2seq",
        scorer=DuoT5,
        claims=_duo_claims,
        summary="duoT5: P(d0 more relevant than d1) from 'Query: q Document0: d0 Document1: d1 Relevant:'",
        pairwise=True,
    )
)
