"""The cross-encoder family: ``[CLS] query [SEP] passage [SEP]`` through a sequence classifier."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import logsumexp

from evirank.config import Runtime
from evirank.extras import require
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.query_passage import PairScorer

if TYPE_CHECKING:
    from evirank.score.attention import AttentionView

logger = logging.getLogger(__name__)


def relevance_from_logits(logits: Any, relevant_class: int = 1) -> Any:
    """The relevance score of classifier logits, as the log-odds of the relevant class.

    One logit: the logit itself (the log-odds under a sigmoid head). Two or more logits:
    ``logit[relevant] - logsumexp(other logits)`` = ``log(P(relevant) / (1 - P(relevant)))``
    under the softmax, which is ``logit[1] - logit[0]`` for two classes. It is a strictly
    increasing function of P(relevant), so it ranks exactly as the relevant-class probability
    does, and unlike the log-probability it does not flatten to 0.0 in float32 for confident
    pairs (which would create ties at the top of a ranking).

    Scoring and training read a model's relevance through this one function: an array (or a
    list) gives float64 numpy values; a torch tensor gives a tensor (in its dtype, on its device,
    differentiable), as training's losses need.

    Example:
        >>> relevance_from_logits(np.array([[0.5, 2.0], [1.0, -1.0]])).tolist()
        [1.5, -2.0]
        >>> relevance_from_logits([[0.5], [2.0]]).tolist()
        [0.5, 2.0]
    """
    tensor = type(logits).__module__.startswith("torch")
    values: Any = logits if tensor else np.asarray(logits, dtype=np.float64)
    shape = tuple(values.shape)
    if len(shape) != 2 or shape[1] < 1:
        raise ValueError(f"expected logits of shape (rows, labels), found {shape}")
    if shape[1] == 1:
        return values[:, 0]
    if not 0 <= relevant_class < shape[1]:
        raise ValueError(f"relevant_class {relevant_class} is not one of the model's {shape[1]} labels")
    others = values[:, [i for i in range(shape[1]) if i != relevant_class]]
    if shape[1] == 2:
        return values[:, relevant_class] - others[:, 0]
    rest = others.logsumexp(dim=1) if tensor else logsumexp(others, axis=1)
    return values[:, relevant_class] - rest


class CrossEncoder(PairScorer):
    """Score (query, passage) pairs with a Hugging Face sequence-classification model.

    Input ``Passages`` [qid, query, docno, pid, text, ...]; output the same frame with ``score``
    (a ``score`` column already there is replaced). The input is ``[CLS] query [SEP] passage [SEP]``
    (the model's own template): the query keeps at most ``query_max_tokens`` tokens and the
    passage takes the rest of ``max_length``.

    Scores: a one-logit head gives the logit; a head with two or more logits gives the log-odds
    of ``relevant_class``, ``logit[rel] - logsumexp(other logits)`` (``logit[1] - logit[0]`` for
    two), which ranks exactly as P(relevant) (see :func:`relevance_from_logits`).

    Speed and memory: each distinct query and passage is tokenised once and each distinct
    (query, passage) pair is scored once per call; pairs are sorted by length and batched under a
    token budget (padded rows x padded length), so long passages never run out of memory. With
    ``store``, stored scores are reused and new ones are written every ``commit_every`` batches, so
    an interrupted run resumes where it stopped. Scores do not depend on batch size or order
    (fp32: within 1e-5).

    Args:
        model: a Hugging Face model id or local folder (a sequence-classification checkpoint).
        runtime: where and how it runs (:class:`~evirank.config.Runtime`: device, backend,
            precision, batch budget, input cap (at most 512), score store, Ray).
        query_max_tokens: the query's token cap.
        relevant_class: the relevant label of multi-logit heads.

    Example:
        >>> from evirank.config import Runtime
        >>> from evirank.frames import make_passages
        >>> passages = make_passages([("1", "d1", 0, "BM25 ranks documents.")]).assign(query="what is bm25")
        >>> scorer = CrossEncoder("models/minilm-msmarco", Runtime(device="cpu"))  # doctest: +SKIP
        >>> scored = scorer(passages)  # doctest: +SKIP
        >>> scored["score"].dtype  # doctest: +SKIP
        dtype('float64')
    """

    family = "cross"
    task = "classify"

    def __init__(
        self,
        model: str | os.PathLike[str],
        runtime: Runtime | None = None,
        *,
        query_max_tokens: int = 64,
        relevant_class: int = 1,
    ) -> None:
        super().__init__(model, runtime, query_max_tokens=query_max_tokens)
        self.relevant_class = relevant_class

    def settings(self) -> dict[str, Any]:
        labels = int(getattr(self.config_, "num_labels", 1))
        head = "logit" if labels == 1 else f"log_odds:{self.relevant_class}/{labels}"
        return {**super().settings(), "head": head}

    def read_out(self, output: np.ndarray) -> np.ndarray:
        return np.asarray(relevance_from_logits(output, self.relevant_class), dtype=np.float64)

    def attention(self, query: str, text: str, layers: Sequence[int] | None = None) -> AttentionView:
        """The attention from each query token to each passage token in ``layers`` (default: the last),
        per head, over the ``[CLS] query [SEP] passage [SEP]`` input that scoring builds; the view's
        ``score`` is the pair's score from the same forward pass.

        Example:
            >>> scorer = CrossEncoder("models/minilm-scifact")  # doctest: +SKIP
            >>> view = scorer.attention("art crime", "Robbers took paintings.")  # doctest: +SKIP
            >>> view.by_word().passage.labels  # doctest: +SKIP
            ('Robbers', 'took', 'paintings', '.')
        """
        from evirank.score.attention import attention_maps, eager_model, joint_attention, torch_inputs

        torch = require("torch", "torch")
        model = eager_model(self, "AutoModelForSequenceClassification")

        def run(batch: Any) -> tuple[list[np.ndarray], float | None]:
            with torch.inference_mode():
                output = model(**torch_inputs(batch, self.device_), output_attentions=True)
            logits = output.logits.float().cpu().numpy()
            return attention_maps(output.attentions), float(self.read_out(logits)[0])

        return joint_attention(
            self,
            query,
            text,
            layers,
            run,
            note="The rest of a query token's attention goes to the query itself and to [CLS] and [SEP]",
        )


def _claims(info: ModelInfo) -> int:
    """A sequence classifier is a cross-encoder."""
    return 2 if info.has_architecture("ForSequenceClassification") else 0


FAMILY = register_family(
    Family(
        "cross",
        scorer=CrossEncoder,
        summary="a cross-encoder: [CLS] query [SEP] passage [SEP] through a sequence classifier (monoBERT)",
        claims=_claims,
        backends=("torch", "onnx", "onnx-int8", "openvino", "openvino-int8"),
        recipe="evirank.train.classifier:ClassifierRecipe",
    )
)
