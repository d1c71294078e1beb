"""The duo family: a pairwise cross-encoder, duoBERT (Nogueira, Yang, Cho & Lin 2019).

A BERT-style sequence classifier reads ``[CLS] q [SEP] d_i [SEP] d_j [SEP]`` and its one logit
(or the log-odds of its relevant class) is read as P(d_i is more relevant than d_j) through a
sigmoid. The query keeps at most ``query_max_tokens`` (64) tokens and the two documents share the
rest of ``max_length``, half each (what one leaves unused goes to the other). Token types follow
the checkpoint (its config's ``type_vocab_size``): with three, as the reference duoBERT's inputs
are built, ``[CLS] q [SEP]`` is type 0, ``d_i [SEP]`` type 1 and ``d_j [SEP]`` type 2; with two
(a BERT or MiniLM initialisation), the query and d_i are the first segment (type 0) and d_j the
second (type 1) (with both documents in one segment, a MiniLM initialisation did not learn the
order here: its training loss stayed at ln 2). The :class:`~evirank.score.document_pairs.Duo`
stage re-ranks the top ``k`` of an earlier ranking with it (``rerank --duo K --duo-model
duo:MODEL --duo-aggregate sum``): ``k(k-1)`` model calls per query, every pair score kept in
the score store under (query, both texts).

``evirank train --scorer duo`` trains one from the same examples as every family: each query's
(relevant, non-relevant) texts, in both orders (label 1 for relevant-first, 0 for the other), with
binary cross-entropy, which is the duoBERT loss -sum ln p_ij (i relevant, j not) - sum ln(1 - p_ji).

A duo model is a sequence classifier like a cross-encoder; ``--duo-model`` finds this family for
it (the only pairwise family that reads classifiers), while ``--scorer auto`` reads it as a
cross-encoder: say ``duo:MODEL`` where a family is asked for.

Example:
    >>> from evirank.score import get_family
    >>> get_family("duo").pairwise, get_family("duo").recipe
    (True, 'evirank.train.pairwise:DuoRecipe')
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
from scipy.special import expit

from evirank.config import Runtime
from evirank.score.document_pairs import TwoDocumentScorer
from evirank.score.families.cross import relevance_from_logits
from evirank.score.family import Family, ModelInfo, register_family
from evirank.score.tokenize import Part, Ragged

logger = logging.getLogger(__name__)


class DuoBERT(TwoDocumentScorer):
    """P(d_i is more relevant than d_j to q) with a duoBERT-style classifier (see the module).

    Input Passages [qid, query, text, ...] whose ``text`` is two documents joined by
    :func:`~evirank.score.document_pairs.join_pair`; output the same frame with ``score`` in (0, 1). Use
    it through :class:`~evirank.score.document_pairs.Duo`.

    Args:
        model: a Hugging Face id or local folder of a pairwise sequence classifier.
        runtime: where and how it runs (:class:`~evirank.config.Runtime`).
        query_max_tokens: the query's token cap.
        relevant_class: the "first is more relevant" label of a multi-logit head.

    Example:
        >>> from evirank.score.document_pairs import Duo
        >>> duo = Duo(DuoBERT("models/duo-scifact"), k=10, aggregate="sum")  # doctest: +SKIP
    """

    family = "duo"
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

    def between_ids(self) -> list[int]:
        """The separator token between d_i and d_j."""
        sep = self.encoder_.tokenizer.sep_token_id
        return [] if sep is None else [int(sep)]

    @property
    def token_types(self) -> int:
        """How many token types the checkpoint has (its config's ``type_vocab_size``): with three,
        the query, d_i and d_j are types 0, 1 and 2, as the reference duoBERT's inputs are built;
        with two, the query and d_i are type 0 and d_j type 1."""
        self.prepare()
        return int(getattr(self.config_, "type_vocab_size", 2) or 2)

    def input_parts(self, query: Ragged, first: Ragged, second: Ragged) -> tuple[list[Part], list[int]]:
        """``[CLS] q [SEP] d_i [SEP] d_j [SEP]``, as duoBERT's reference code builds its inputs: the
        query and d_i are the first segment, d_j the second, so which document is which is told by
        the token type as well as by position. With three token types, ``[CLS] q [SEP]`` is type 0,
        ``d_i [SEP]`` type 1 and ``d_j [SEP]`` type 2 (padding 0).

        Example:
            >>> duo = DuoBERT("models/duobert-3-types")  # doctest: +SKIP
            >>> duo.input_batch([([7], [8], [9])]).token_type_ids.tolist()  # doctest: +SKIP
            [[0, 0, 0, 1, 1, 2, 2]]
        """
        template = self.pair_template()
        parts: list[Part] = [
            template.prefix,
            query,
            tuple(self.between_ids()),
            first,
            template.middle,
            second,
        ]
        parts.append(template.suffix)
        t = template.types
        if self.token_types >= 3:
            return parts, [0, 0, 0, 1, 1, 2, 2]
        return parts, [t[0], t[1], t[1], t[1], t[2], t[3], t[4]]

    def settings(self) -> dict[str, Any]:
        labels = int(getattr(self.config_, "num_labels", 1))
        head = "sigmoid(logit)" if labels == 1 else f"sigmoid(log_odds:{self.relevant_class}/{labels})"
        types = "0 1 2" if self.token_types >= 3 else "0 0 1"
        return {
            **super().settings(),
            "head": head,
            "pair_text": "first + U+001E + second",
            "input": f"[CLS] q [SEP] d_i [SEP] d_j [SEP], token types {types}",
            "room": "query capped, documents half each",
        }

    def read_out(self, output: np.ndarray) -> np.ndarray:
        return np.asarray(expit(relevance_from_logits(output, self.relevant_class)), dtype=np.float64)


def _claims(info: ModelInfo) -> int:
    """A sequence classifier read as a pairwise model (1: below the cross-encoder's claim, so
    ``auto`` reads it as a cross-encoder, while a pairwise stage finds this family)."""
    return 1 if info.has_architecture("ForSequenceClassification") else 0


FAMILY = register_family(
    Family(
        "duo",
        scorer=DuoBERT,
        summary="duoBERT: P(d_i more relevant than d_j) from '[CLS] q [SEP] d_i [SEP] d_j [SEP]' through "
        "a sequence classifier (a Duo stage's model: rerank --duo K --duo-model duo:MODEL)",
        claims=_claims,
        backends=("torch", "onnx", "onnx-int8"),
        recipe="evirank.train.pairwise:DuoRecipe",
        pairwise=True,
    )
)
