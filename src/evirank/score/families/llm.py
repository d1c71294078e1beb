"""The yes/no LLM family: a causal language model asked whether a passage meets a query.

The input is the model's own prompt: an instruction, the query and the passage between literal
prompt pieces (a chat template), and the score is read from the language model's next-token
logits of its two answer words at the prompt's last token: ``log P(yes)`` under the softmax over
the two (``yes`` against ``no``), a monotone function of the model card's ``P(yes)``.

How the reference implementations compute it (read, then written here anew):

- Qwen3-Reranker's model card (Qwen/Qwen3-Reranker-0.6B, its transformers example; the same
  pieces in vLLM's and OpenVINO GenAI's Qwen3-Reranker code): the prefix
  ``<|im_start|>system\\nJudge whether the Document meets the requirements based on the Query and
  the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\\n<|im_start|>user\\n``,
  then ``<Instruct>: {instruction}\\n<Query>: {query}\\n<Document>: {doc}``, then the suffix
  ``<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n``; the default instruction is
  "Given a web search query, retrieve relevant passages that answer the query". The tokenizer pads
  on the left, ``logits[:, -1, :]`` gives the last position, the ``no`` and ``yes`` logits are
  stacked, log-softmaxed, and ``exp`` of the ``yes`` entry is the score.
- bge-reranker-v2-gemma (FlagEmbedding's ``FlagLLMReranker``, and rerankers' LLM ranker): ``<bos>``
  ``A: {query}`` ``\\n`` ``B: {passage}`` ``\\n`` then the prompt "Given a query A and a passage B,
  determine whether the passage contains an answer to the query by providing a prediction of
  either 'Yes' or 'No'."; FlagEmbedding ranks by the raw ``Yes`` logit (here: ``Yes`` against
  ``No``, as for the others).
- mxbai-rerank-v2 (mixedbread's mxbai-rerank, as rerankers' ``mxbai_v2.py`` reads it): a Qwen2 chat
  prefix, ``query: {query}`` ``\\n`` ``document: {doc}`` ``\\n`` a task prompt ending
  ``Relevance:``, the chat suffix; the score is ``logit('1') - logit('0')``, which ranks exactly
  as ``log P('1')`` against ``'0'`` does.

Why ``log P(yes)`` rather than ``P(yes)``: both rank alike, but ``P(yes)`` in float64 rounds to
exactly 1.0 once the ``yes`` logit leads by about 37, which would tie confident passages at the
top of a ranking; ``log P(yes) = -log(1 + exp(no - yes))`` stays distinct (and it is the read-out
of the seq2seq family's monoT5, so fusing the two weighs like with like). ``exp(score)`` is the
model card's ``P(yes)``.

Example:
    >>> PROMPTS["qwen3"].yes, PROMPTS["qwen3"].no
    ('yes', 'no')
    >>> claims_causal_lm(ModelInfo({"architectures": ["Qwen3ForCausalLM"]}))
    2
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.config import Runtime
from evirank.extras import require
from evirank.score.backends import TokenBatch
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.query_passage import PairScorer
from evirank.score.token_cache import KEEP_TOKENS
from evirank.score.tokenize import Template, TextEncoder, TextIds, TokenTable, assemble
from evirank.score.transformer import DistinctPairs, ScoringStats

logger = logging.getLogger(__name__)

#: Where the instruction goes in a prompt piece.
INSTRUCTION = "{instruction}"


@dataclass(frozen=True)
class Prompt:
    """A yes/no reranker's prompt: literal pieces around the query and the passage, and its answers.

    The model reads ``prefix`` query ``middle`` passage ``suffix`` (after the tokenizer's
    beginning-of-sequence token when ``bos``); ``{instruction}`` in a piece is replaced by
    ``instruction``. ``yes`` and ``no`` are the answer words, one token each.

    Example:
        >>> Prompt("Q: ", " D: ", " Relevant:", "", "yes", "no").pieces()
        ('Q: ', ' D: ', ' Relevant:')
    """

    prefix: str
    middle: str
    suffix: str
    instruction: str
    yes: str
    no: str
    bos: bool = False

    def pieces(self) -> tuple[str, str, str]:
        """(prefix, middle, suffix) with the instruction in its place."""
        prefix, middle, suffix = (
            p.replace(INSTRUCTION, self.instruction) for p in (self.prefix, self.middle, self.suffix)
        )
        return prefix, middle, suffix

    def text(self, query: str, passage: str) -> str:
        """The whole prompt of one pair, as a string (without the bos token).

        Example:
            >>> Prompt("Q: ", " D: ", " Relevant:", "", "yes", "no").text("cat", "a cat")
            'Q: cat D: a cat Relevant:'
        """
        prefix, middle, suffix = self.pieces()
        return f"{prefix}{query}{middle}{passage}{suffix}"


_QWEN_CHAT_USER = "<|im_start|>user\n"
_QWEN_ASSISTANT = "<|im_end|>\n<|im_start|>assistant\n"
_MXBAI_TASK = (
    "You are a search relevance expert who evaluates how well documents match search queries. "
    "For each query-document pair, carefully analyze the semantic relationship between them, then "
    "provide your binary relevance judgment (0 for not relevant, 1 for relevant).\nRelevance:"
)

#: The prompts of the yes/no rerankers evirank knows, by name (see the module docstring).
PROMPTS: dict[str, Prompt] = {
    "qwen3": Prompt(
        prefix=(
            "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
            'and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
            f"{_QWEN_CHAT_USER}<Instruct>: {INSTRUCTION}\n<Query>: "
        ),
        middle="\n<Document>: ",
        suffix=f"{_QWEN_ASSISTANT}<think>\n\n</think>\n\n",
        instruction="Given a web search query, retrieve relevant passages that answer the query",
        yes="yes",
        no="no",
    ),
    "bge-gemma": Prompt(
        prefix="A: ",
        middle="\nB: ",
        suffix=f"\n{INSTRUCTION}",
        instruction=(
            "Given a query A and a passage B, determine whether the passage contains an answer to the "
            "query by providing a prediction of either 'Yes' or 'No'."
        ),
        yes="Yes",
        no="No",
        bos=True,
    ),
    "mxbai": Prompt(
        prefix=(
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
            f"<|im_end|>\n{_QWEN_CHAT_USER}query: "
        ),
        middle="\ndocument: ",
        suffix=f"\n{_MXBAI_TASK}{_QWEN_ASSISTANT}",
        instruction="",
        yes="1",
        no="0",
    ),
}
#: The prompt name that picks one from the model (see :func:`choose_prompt`).
AUTO_PROMPT = "auto"


def choose_prompt(name: str, model: str | os.PathLike[str], model_type: str | None) -> str:
    """The prompt name for ``name`` (``auto``: told from the model).

    ``auto`` reads a Gemma model as bge-reranker-v2-gemma, a model whose id or folder names
    ``mxbai-rerank`` as mxbai-rerank-v2, and anything else as Qwen3-Reranker.

    Raises:
        ValueError: an unknown prompt name.

    Example:
        >>> choose_prompt("auto", "BAAI/bge-reranker-v2-gemma", "gemma")
        'bge-gemma'
        >>> choose_prompt("auto", "models/Qwen3-Reranker-0.6B", "qwen3")
        'qwen3'
    """
    wanted = name.strip().lower()
    if wanted == AUTO_PROMPT:
        if (model_type or "").lower() == "gemma":
            return "bge-gemma"
        return "mxbai" if "mxbai-rerank" in str(model).lower() else "qwen3"
    if wanted not in PROMPTS:
        raise ValueError(f"unknown prompt {name!r}; expected one of {AUTO_PROMPT}, {', '.join(PROMPTS)}")
    return wanted


def answer_id(encoder: TextEncoder, word: str) -> int:
    """The token id of an answer word, which must be exactly one token.

    Raises:
        ValueError: the word is not one token for this tokenizer.
    """
    ids = encoder.tokenizer.encode(word, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(
            f"the answer word {word!r} is {len(ids)} tokens for this tokenizer; a yes/no reranker reads "
            "the logit of one token: give a word that is one token (yes=..., no=...)"
        )
    return int(ids[0])


def space_joins_text(encoder: TextEncoder, pieces: Sequence[str], probe: str = "relevance") -> bool:
    """Whether a text must be tokenised with the space before it, for these prompt pieces.

    Byte-level BPE tokenizers (Qwen, Llama 3) and SentencePiece-style ones without a dummy prefix
    (Gemma) attach a space to the word after it: ``"<Query>: what"`` reads ``":"``, ``" what"``,
    while ``"<Query>: "`` and ``"what"`` tokenised apart read ``":"``, ``" "``, ``"what"``. The
    texts are tokenised once each, apart from the prompt, so when a piece ending in a space
    tokenises so, the space moves from the piece to the front of each text and the joined ids
    are those of the whole prompt string. Word-level and BERT-style tokenizers split at spaces
    whatever their position, and keep the pieces as they are.
    """

    def ids(text: str) -> list[int]:
        return list(encoder.tokenizer.encode(text, add_special_tokens=False)) if text else []

    moves = []
    for piece in pieces:
        if not piece.endswith(" "):
            return False
        joint = ids(piece + probe)
        moved = ids(piece[:-1]) + ids(" " + probe)
        moves.append(joint == moved and joint != ids(piece) + ids(probe))
    return all(moves)


class SpacedTextEncoder(TextEncoder):
    """A :class:`TextEncoder` that tokenises every text with a space before it (see
    :func:`space_joins_text`)."""

    text_before = " "


@dataclass(frozen=True)
class YesNoHead:
    """The torch module of a yes/no reranker: a causal LM's ``[no, yes]`` logits at the last real token.

    ``load_torch`` loads the ``*ForCausalLM`` checkpoint and wraps it so that ``forward`` returns
    a (rows, 2) float32 tensor of the ``no`` and ``yes`` next-token logits: the model's body gives
    the hidden states, the last real token's state of each row is taken, and only the two answer
    rows of the output embedding are applied to it (never the full vocabulary at every position).

    Example:
        >>> YesNoHead(no_id=7, yes_id=9).name
        'causal-lm:yes_no:7,9'
    """

    no_id: int
    yes_id: int

    @property
    def name(self) -> str:
        return f"causal-lm:yes_no:{self.no_id},{self.yes_id}"

    def load_torch(self, model_dir: Path) -> tuple[Any, tuple[str, ...]]:
        transformers = require("transformers", "torch")
        auto = transformers.AutoModelForCausalLM
        try:  # fused attention (FlashAttention / memory-efficient kernels on GPUs)
            model, info = auto.from_pretrained(
                str(model_dir), output_loading_info=True, attn_implementation="sdpa"
            )
        except (ValueError, TypeError, ImportError):  # an architecture without an SDPA path
            model, info = auto.from_pretrained(str(model_dir), output_loading_info=True)
        vocab = int(model.get_output_embeddings().weight.shape[0])
        for token in (self.no_id, self.yes_id):
            if not 0 <= token < vocab:
                raise ValueError(
                    f"{model_dir}: answer token id {token} is outside the model's {vocab} logits"
                )
        module = _yes_no_module_class()(model, self.no_id, self.yes_id)
        return module, tuple(sorted(info.get("missing_keys", ())))


@functools.cache
def _yes_no_module_class() -> type:
    """The torch module class (defined on first use, so importing this family stays light)."""
    torch = require("torch", "torch")

    class YesNoLogits(torch.nn.Module):  # type: ignore[name-defined]
        """``forward(input_ids, attention_mask)`` -> (rows, 2) float32 ``[no, yes]`` logits."""

        def __init__(self, causal_lm: Any, no_id: int, yes_id: int) -> None:
            super().__init__()
            self.causal_lm = causal_lm
            self.register_buffer("answer_ids", torch.tensor([no_id, yes_id], dtype=torch.long))
            # Gemma 2/3 squash their logits (tanh soft-capping) after the output layer.
            self.softcap = getattr(causal_lm.config, "final_logit_softcapping", None)

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any = None) -> Any:
            body = self.causal_lm.base_model
            hidden = body(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            states = hidden.last_hidden_state
            # The batch is right-padded: row i's real tokens sit at 0 .. n_i - 1, so its last real
            # token is at attention_mask.sum(-1) - 1. This is the reference code's logits[:, -1]
            # under left padding: causal attention lets no real token see the padding after it,
            # and every row's positions start at 0 as they would unpadded (left padding shifts a
            # row's positions, which rotary embeddings cancel: they see only relative offsets).
            last = attention_mask.sum(dim=-1) - 1
            rows = torch.arange(states.shape[0], device=states.device)
            final = states[rows, last]
            head = self.causal_lm.get_output_embeddings()
            weight = head.weight[self.answer_ids]
            bias = None if getattr(head, "bias", None) is None else head.bias[self.answer_ids]
            # The two logits in float32 even under bf16/fp16 autocast: in bf16, 'yes' and 'no'
            # logits keep 8 bits and many passages would tie.
            with torch.autocast(device_type=final.device.type, enabled=False):
                logits = torch.nn.functional.linear(
                    final.float(), weight.float(), None if bias is None else bias.float()
                )
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            return logits

    return YesNoLogits


def log_p_yes(logits: Any) -> np.ndarray:
    """``log P(yes)`` under the softmax over ``[no, yes]`` logits, per row, in float64.

    Example:
        >>> [round(float(v), 4) for v in log_p_yes(np.array([[0.0, 0.0], [0.0, 50.0]]))]
        [-0.6931, -0.0]
        >>> bool(log_p_yes(np.array([[0.0, 40.0]]))[0] > log_p_yes(np.array([[0.0, 39.0]]))[0])
        True
    """
    values = np.asarray(logits, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != 2:
        raise ValueError(f"expected [no, yes] logits of shape (rows, 2), found {values.shape}")
    return -np.logaddexp(0.0, values[:, 0] - values[:, 1])


class YesNoReranker(PairScorer):
    """Score (query, passage) pairs with a causal LM asked for "yes" or "no" (Qwen3-Reranker style).

    Input ``Passages`` [qid, query, docno, pid, text, ...]; output the same frame with ``score``.
    Each pair becomes the model's prompt (``prefix`` query ``middle`` passage ``suffix``, with the
    instruction in its place; see :data:`PROMPTS`); the passage is cut first (the query keeps at
    most ``query_max_tokens`` tokens, the passage the rest of ``max_length``). The score is
    ``log P(yes)`` under the softmax over the answer words' next-token logits at the prompt's last
    token (``exp(score)`` is the model card's ``P(yes)``; see the module docstring).

    Batching, the score store, resuming and Ray are :class:`~evirank.score.query_passage.PairScorer`'s.
    On a GPU the model runs under bf16 autocast (``dtype="auto"``), its weights held in float32;
    the two answer logits are computed in float32.

    Args:
        model: a Hugging Face id or local folder of a ``*ForCausalLM`` checkpoint.
        prompt: ``qwen3``, ``bge-gemma``, ``mxbai``, or ``auto`` (see :func:`choose_prompt`).
        instruction: the task instruction (default: the prompt's own); ``{instruction}`` in a
            piece is where it goes.
        prefix / middle / suffix: replace the prompt's pieces (literal text; ``\\n`` is a newline).
        yes / no: replace the answer words (one token each).
        runtime: where and how it runs (:class:`~evirank.config.Runtime`).
        query_max_tokens: the query's token cap.

    Example:
        >>> scorer = YesNoReranker("Qwen/Qwen3-Reranker-0.6B", instruction="Find claims")  # doctest: +SKIP
        >>> scorer(passages)["score"]  # doctest: +SKIP
    """

    family = "llm"

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        prompt: str = AUTO_PROMPT,
        instruction: str | None = None,
        prefix: str | None = None,
        middle: str | None = None,
        suffix: str | None = None,
        yes: str | None = None,
        no: str | None = None,
        query_max_tokens: int = 64,
    ) -> None:
        if prompt.strip().lower() != AUTO_PROMPT:
            choose_prompt(prompt, model, None)  # an unknown name fails here, before any loading
        super().__init__(model, runtime, query_max_tokens=query_max_tokens)
        self.prompt = prompt
        self.instruction = instruction
        self.prefix = prefix
        self.middle = middle
        self.suffix = suffix
        self.yes = yes
        self.no = no

    # -- the prompt -----------------------------------------------------------------------
    def _check_settings(self) -> None:
        """Resolve the prompt, its token ids and the answer ids once the tokenizer is known."""
        name = choose_prompt(self.prompt, self.model, getattr(self.config_, "model_type", None))
        preset = PROMPTS[name]
        chosen = replace(
            preset,
            prefix=preset.prefix if self.prefix is None else self.prefix,
            middle=preset.middle if self.middle is None else self.middle,
            suffix=preset.suffix if self.suffix is None else self.suffix,
            instruction=preset.instruction if self.instruction is None else self.instruction,
            yes=preset.yes if self.yes is None else self.yes,
            no=preset.no if self.no is None else self.no,
        )
        if self.instruction and not any(
            INSTRUCTION in p for p in (chosen.prefix, chosen.middle, chosen.suffix)
        ):
            raise ValueError(
                f"the {name} prompt has no {INSTRUCTION} place for an instruction; put one in prefix, "
                "middle or suffix"
            )
        encoder = self.encoder_
        prefix, middle, suffix = chosen.pieces()
        spaced = space_joins_text(encoder, (prefix, middle))
        if spaced:  # the space goes with the text (see space_joins_text)
            prefix, middle = prefix[:-1], middle[:-1]
            encoder = SpacedTextEncoder(encoder.tokenizer)
            self.encoder_ = encoder
        bos: tuple[int, ...] = ()
        if chosen.bos:
            if encoder.tokenizer.bos_token_id is None:
                raise ValueError(f"the {name} prompt starts with the bos token, but this tokenizer has none")
            bos = (int(encoder.tokenizer.bos_token_id),)
        literal = encoder.prompt_template(prefix, middle, suffix)
        self.prompt_ = chosen
        self.prompt_name_ = name
        self.spaced_ = spaced
        self.template_ = Template((*bos, *literal.prefix), literal.middle, literal.suffix, literal.types)
        self.answer_ids_ = (answer_id(encoder, chosen.no), answer_id(encoder, chosen.yes))
        if self.answer_ids_[0] == self.answer_ids_[1]:
            raise ValueError(f"the answer words {chosen.yes!r} and {chosen.no!r} are the same token")
        super()._check_settings()

    def pair_template(self) -> Template:
        """The prompt's pieces as token ids around the query and the passage (what the passage's
        room is reckoned from; the model's inputs are :meth:`prompt_ids`)."""
        return self.template_

    # -- the prompt as one text ------------------------------------------------------------
    def cut_query(self, query: str) -> str:
        """The query, cut after its first ``query_max_tokens`` tokens (tokenised alone).

        Example:
            >>> YesNoReranker(m, query_max_tokens=2).cut_query("why do cats purr")  # doctest: +SKIP
            'why do'
        """
        return self._cut_queries([query])[0]

    def _cut_queries(self, queries: Sequence[str]) -> list[str]:
        self.prepare()
        cap = self.query_max_tokens
        return [
            query if len(encoding.ids) <= cap else query[: encoding.offsets[cap - 1][1]]
            for query, encoding in zip(queries, self.encoder_.encodings(queries), strict=True)
        ]

    def prompt_ids(self, queries: Sequence[str], passages: Sequence[str]) -> list[list[int]]:
        """The model's input ids of (query, passage) pairs: each whole prompt's ids, as the model
        card's code tokenises the prompt as one text (``?\n`` after a question is one token there,
        as it is here), after the beginning-of-sequence token when the prompt has one. The query is
        cut as :meth:`cut_query` cuts it; a passage too long for ``max_length`` loses its last
        tokens, the prompt's pieces and the query are kept whole.

        Built as scoring builds them (see :class:`PromptRows`): each distinct query's and passage's
        ids once, joined; a pair whose pieces would join differently is tokenised whole.

        Example:
            >>> scorer.prompt_ids(["where did the cat sit?"], ["On the mat."])  # doctest: +SKIP
            [[151644, 8948, ...]]
        """
        self.prepare()
        if not queries:
            return []
        q_codes, q_uniq = pd.factorize(pd.Series(list(queries), dtype=object), sort=False)
        p_codes, p_uniq = pd.factorize(pd.Series(list(passages), dtype=object), sort=False)
        rows = PromptRows(self, [str(q) for q in q_uniq], [str(p) for p in p_uniq])
        q_idx, p_idx = np.asarray(q_codes, dtype=np.int64), np.asarray(p_codes, dtype=np.int64)
        items = np.arange(len(q_idx))
        lengths = rows.prepare(items, q_idx, p_idx)
        batch = rows.batch(items, q_idx, p_idx)
        return [row[:n].tolist() for row, n in zip(batch.input_ids, lengths.tolist(), strict=True)]

    def _whole_prompt_ids(self, queries: Sequence[str], passages: Sequence[str]) -> list[list[int]]:
        """:meth:`prompt_ids` of pairs each tokenised as one text (a passage too long is cut at the
        end of its token that fits, then the query, and the prompt tokenised again)."""
        prefix, middle, suffix = self.prompt_.pieces()
        bos = list(self.template_.prefix[: 1 if self.prompt_.bos else 0])
        room = self.max_length_ - len(bos)
        cut = self._cut_queries(queries)
        texts = list(passages)
        out: list[list[int] | None] = [None] * len(texts)
        todo = list(range(len(texts)))
        while todo:
            encodings = self.encoder_.encodings([f"{prefix}{cut[i]}{middle}{texts[i]}{suffix}" for i in todo])
            again = []
            for i, encoding in zip(todo, encodings, strict=True):
                over = len(encoding.ids) - room
                if over <= 0:
                    out[i] = [*bos, *encoding.ids]
                    continue
                if texts[i]:  # the passage loses its last tokens first
                    texts[i] = _cut_passage(
                        texts[i], len(prefix) + len(cut[i]) + len(middle), encoding.offsets, over
                    )
                elif cut[i]:  # then the query (its tokens in the prompt may outnumber its own)
                    cut[i] = _cut_passage(cut[i], len(prefix), encoding.offsets, over)
                else:
                    raise ValueError(
                        f"the {self.prompt_name_} prompt alone takes {len(encoding.ids) + len(bos)} tokens, "
                        f"more than max_length={self.max_length_}; raise max_length"
                    )
                again.append(i)
            todo = again
        return [ids for ids in out if ids is not None]

    def pair_inputs(self, queries: list[str], texts: list[str]) -> TokenBatch:
        """The padded inputs of (query, passage) pairs, the prompts tokenised whole (:meth:`prompt_ids`)."""
        rows = self.prompt_ids(queries, texts)
        return self.encoder_.pair_batch(rows, [[] for _ in rows], template=_AS_IS)

    def joins(self) -> PromptJoins:
        """The prompt's pieces as :class:`PromptRows` joins them (made once per scorer)."""
        self.prepare()
        if getattr(self, "joins_", None) is None:
            self.joins_ = PromptJoins(self)
        return self.joins_

    def _token_encoders(self) -> list[TextEncoder]:
        """The passages are kept as tokenised between the prompt's pieces."""
        return [self.joins().tail]

    def _run_pairs(
        self,
        pairs: DistinctPairs,
        todo: np.ndarray,
        consume: Callable[[np.ndarray, np.ndarray], None],
        stats: ScoringStats,
    ) -> None:
        """Run the model on the distinct pairs ``todo``: each distinct query's and passage's ids once,
        joined into the whole prompt's ids (see :class:`PromptRows`)."""
        rows = PromptRows(self, pairs.queries, pairs.texts, pairs.query_hash, pairs.text_hash)
        row_q, row_p = pairs.pair_query[todo], pairs.pair_text[todo]

        def tokenize(items: np.ndarray) -> np.ndarray:
            return rows.prepare(items, row_q[items], row_p[items])

        def build(items: np.ndarray, pad_multiple: int) -> TokenBatch:
            return rows.batch(items, row_q[items], row_p[items], pad_multiple)

        self._run_batches(len(todo), tokenize, build, consume, stats, desc=self.family, positions=todo)

    @property
    def task(self) -> YesNoHead:  # type: ignore[override]
        """The torch module's recipe: the answer ids are the tokenizer's."""
        self.prepare()
        no_id, yes_id = self.answer_ids_
        return YesNoHead(no_id=no_id, yes_id=yes_id)

    def settings(self) -> dict[str, Any]:
        prompt = self.prompt_
        prefix, middle, suffix = prompt.pieces()
        return {
            **super().settings(),
            "prompt": self.prompt_name_,
            "instruction": prompt.instruction,
            "pieces": [prefix, middle, suffix],
            "bos": prompt.bos,
            "text_after_space": self.spaced_,  # how the passage's room is reckoned
            "tokenised": "the whole prompt as one text",  # with the tokenizer's files: the ids
            "answers": {"no": [prompt.no, self.answer_ids_[0]], "yes": [prompt.yes, self.answer_ids_[1]]},
            "head": "log_softmax(no,yes)[yes]@last",
        }

    def read_out(self, output: np.ndarray) -> np.ndarray:
        return log_p_yes(output)


#: A template that adds nothing: rows already assembled (whole prompts) are only padded.
_AS_IS = Template((), (), (), (0, 0, 0, 0, 0))
#: A passage tokenised with the prompt around it to check that the query joins nothing after the middle.
_PROBE = "relevance"


class PromptJoins:
    """How a yes/no reranker's whole prompt is built from pieces tokenised once.

    The whole prompt is ``prefix`` query ``middle`` passage ``suffix``. A query's *head*
    (``prefix`` query ``middle``, after the bos token) is tokenised as one text, once per distinct
    query, so the query's last character joins the middle's first as in the whole prompt (Qwen's
    ``?\n``). A passage is tokenised once, between the middle and the suffix
    (:attr:`tail`, whose cache keeps it), and its own ids are those between the middle's and the
    suffix's: a passage whose first or last token joins a piece (the tail does not start with the
    middle's ids or end with the suffix's) is marked, and its pairs are tokenised whole. A query
    is checked likewise with a probe passage. Where no piece joins, the joined ids are the whole
    prompt's (the tests compare them for byte-level BPE, the Qwen pre-tokenizer included).
    """

    def __init__(self, scorer: YesNoReranker) -> None:
        prefix, middle, suffix = scorer.prompt_.pieces()
        space = " " if scorer.spaced_ else ""  # the space moved from the middle to the passage
        core = middle[: len(middle) - len(space)]
        self.scorer = scorer
        self.prefix, self.core, self.space = prefix, core, space
        self.bos = list(scorer.template_.prefix[: 1 if scorer.prompt_.bos else 0])
        tail = TextEncoder(scorer.encoder_.tokenizer)
        tail.text_before, tail.text_after = core + space, suffix
        #: passages tokenised between the middle and the suffix (its cache keeps them)
        self.tail = tail

        def ids(text: str) -> list[int]:
            return list(tail.encodings([text])[0].ids) if text else []

        self.core_ids = np.asarray(ids(core), dtype=np.int64)
        self.suffix_ids = np.asarray(ids(suffix), dtype=np.int64)
        self.probe_ids = ids(core + space + _PROBE + suffix)[len(self.core_ids) :]

    def heads(self, queries: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
        """(each query's head ids, whether it joins nothing after the middle)."""
        cut = self.scorer._cut_queries(queries)
        texts = [f"{self.prefix}{q}{self.core}" for q in cut]
        probes = [f"{t}{self.space}{_PROBE}{self.tail.text_after}" for t in texts]
        encodings = self.tail.encodings(texts + probes)
        heads = [[*self.bos, *e.ids] for e in encodings[: len(texts)]]
        ok = np.array(
            [
                list(whole.ids) == list(head.ids) + self.probe_ids
                for head, whole in zip(encodings[: len(texts)], encodings[len(texts) :], strict=True)
            ],
            dtype=bool,
        )
        return heads, ok

    def passages_ok(self, table: TokenTable, chosen: np.ndarray) -> np.ndarray:
        """Whether each passage ``chosen`` (rows of the tail table) starts with the middle's ids and
        ends with the suffix's, and was kept whole."""
        n_core, n_suffix = len(self.core_ids), len(self.suffix_ids)
        starts, lengths = table.starts[chosen], table.lengths[chosen]
        ok = (lengths >= n_core + n_suffix) & (lengths < KEEP_TOKENS)
        if not ok.any():
            return ok
        # where a row is not whole, any position does: its answer is already False
        if n_core:
            at = np.where(ok, starts, starts[ok][0])
            ok &= (table.ids[at[:, None] + np.arange(n_core)] == self.core_ids).all(axis=1)
        if n_suffix and ok.any():
            at = np.where(ok, starts + lengths - n_suffix, starts[ok][0])
            ok &= (table.ids[at[:, None] + np.arange(n_suffix)] == self.suffix_ids).all(axis=1)
        return ok


class PromptRows:
    """The whole prompts' ids of one call's pairs, from each distinct query and passage tokenised
    once (see :class:`PromptJoins`); a pair whose pieces join, or whose passage must be cut, is
    tokenised whole (:meth:`YesNoReranker._whole_prompt_ids`), so every row is the whole prompt's.

    Args:
        scorer: the reranker. queries / passages: the distinct texts. query_keys / passage_keys:
        their digests, when known.
    """

    def __init__(
        self,
        scorer: YesNoReranker,
        queries: Sequence[str],
        passages: Sequence[str],
        query_keys: Sequence[bytes] | None = None,
        passage_keys: Sequence[bytes] | None = None,
    ) -> None:
        self.scorer = scorer
        self.joins = scorer.joins()
        self.queries, self.passages = queries, passages
        self.tails = TextIds(self.joins.tail, passages, KEEP_TOKENS, passage_keys)
        self.passage_ok = np.zeros(len(passages), dtype=bool)
        self.head_rows: list[list[int]] = [[] for _ in queries]
        self.head_ok = np.zeros(len(queries), dtype=bool)
        self.head_done = np.zeros(len(queries), dtype=bool)
        self.heads = TokenTable.of(self.head_rows)
        self.whole: dict[int, list[int]] = {}  # item -> ids, for the pairs tokenised whole
        self.lengths: dict[int, int] = {}

    def prepare(self, items: np.ndarray, q: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Tokenise what the pairs ``items`` (query ``q``, passage ``p`` each) need; their lengths."""
        joins = self.joins
        new_q = np.unique(q[~self.head_done[q]])
        if len(new_q):
            heads, ok = joins.heads([self.queries[i] for i in new_q.tolist()])
            for i, head in zip(new_q.tolist(), heads, strict=True):
                self.head_rows[i] = head
            self.head_ok[new_q] = ok
            self.head_done[new_q] = True
            self.heads = TokenTable.of(self.head_rows)
        fresh = np.unique(p[self.tails.starts[p] < 0])
        self.tails.need(p)
        if len(fresh):
            self.passage_ok[fresh] = joins.passages_ok(self.tails.table(), fresh)
        n_fixed = len(joins.core_ids) + len(joins.suffix_ids)
        lengths = self.heads.lengths[q] + self.tails.lengths[p] - n_fixed + len(joins.suffix_ids)
        joined = self.head_ok[q] & self.passage_ok[p] & (lengths <= self.scorer.max_length_)
        alone = np.flatnonzero(~joined)
        if len(alone):
            rows = self.scorer._whole_prompt_ids(
                [self.queries[i] for i in q[alone].tolist()], [self.passages[i] for i in p[alone].tolist()]
            )
            for k, row in zip(alone.tolist(), rows, strict=True):
                self.whole[int(items[k])] = row
                lengths[k] = len(row)
        return lengths

    def batch(self, items: np.ndarray, q: np.ndarray, p: np.ndarray, pad_multiple: int = 1) -> TokenBatch:
        """The padded inputs of the pairs ``items`` (prepared before)."""
        joins = self.joins
        whole = [self.whole.pop(int(i), None) for i in items.tolist()] if self.whole else [None] * len(items)
        alone = np.array([row is not None for row in whole], dtype=bool)
        heads, head_rows = self.heads, q.copy()
        if alone.any():  # rows tokenised whole go in the first column, after the heads
            extra = TokenTable.of([row for row in whole if row is not None])
            heads = TokenTable(
                np.concatenate([heads.ids, extra.ids]),
                np.concatenate([heads.starts, extra.starts + len(heads.ids)]),
                np.concatenate([heads.lengths, extra.lengths]),
            )
            head_rows[alone] = len(self.head_rows) + np.arange(int(alone.sum()))
        tails = self.tails.table()
        n_core, n_suffix = len(joins.core_ids), len(joins.suffix_ids)
        passages = TokenTable(tails.ids, tails.starts + n_core, tails.lengths - n_core - n_suffix)
        suffix = TokenTable(joins.suffix_ids, np.zeros(1, dtype=np.int64), np.array([n_suffix]))
        zero = np.zeros(len(items), dtype=np.int64)
        parts = (
            heads.take(head_rows, heads.lengths[head_rows]),
            passages.take(p, np.where(alone, 0, passages.lengths[p])),
            suffix.take(zero, np.where(alone, 0, n_suffix)),
        )
        encoder = self.scorer.encoder_
        return assemble(parts, (0, 0, 0), encoder.pad_id, pad_multiple, encoder.uses_token_types)


def _cut_passage(passage: str, start: int, offsets: Sequence[tuple[int, int]], over: int) -> str:
    """``passage`` (at ``start`` in a prompt whose tokens end at ``offsets``) without the text of its
    last ``over`` tokens; always shorter than it was.

    Example:
        >>> _cut_passage("a b c", 2, [(0, 2), (2, 3), (3, 5), (5, 7), (7, 9)], 1)
        'a b'
    """
    end = start + len(passage)
    ends = [b for a, b in offsets if start < b <= end]  # the passage's tokens (one may begin before it)
    keep = len(ends) - over
    cut = ends[keep - 1] - start if keep > 0 else 0
    return passage[: min(cut, len(passage) - 1)]


def claims_causal_lm(info: ModelInfo) -> int:
    """A causal language model reads as a yes/no reranker."""
    return 2 if info.has_architecture("ForCausalLM") else 0


FAMILY = register_family(
    Family(
        "llm",
        scorer=YesNoReranker,
        summary="a yes/no LLM reranker: log P(yes) of a causal LM asked in its prompt (Qwen3-Reranker)",
        claims=claims_causal_lm,
        backends=("torch",),
        scale="log-probability",
    )
)
