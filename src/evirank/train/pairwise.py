"""duoBERT's training recipe: (query, relevant, non-relevant) triples in both orders.

From the examples every family trains on (:mod:`evirank.train.examples`), each relevant text of
a query is paired with up to ``group_size - 1`` of the query's non-relevant texts (drawn once,
seeded; with ``negatives_from="source"`` only from its own builder's, e.g. a gold sentence against
sentences), and every pair becomes two items: ``join_pair(relevant, other)`` labelled 1 and
``join_pair(other, relevant)`` labelled 0. The loss is the binary cross-entropy of the pair logit,
which is duoBERT's -sum ln p_ij (i relevant, j not) - sum ln(1 - p_ji) (Nogueira et al. 2019).
Inputs are cut as :class:`evirank.score.families.duo.DuoBERT` cuts them.

Validation ranks each validation query's texts (at most :data:`VALIDATION_TEXTS`: its relevant
ones first, then the others in order) by the SUM of their pair probabilities, every ordered
pair scored by ``DuoBERT`` itself, as the ``Duo`` stage would rank them.

Example:
    >>> DuoRecipe().losses
    ('pairwise',)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import LABEL, PID, QID, QUERY, SCORE, TEXT
from evirank.score.document_pairs import join_pair, pair_sum
from evirank.train import _model
from evirank.train.listwise import NEGATIVES, listwise_items, listwise_validation_loss
from evirank.train.recipe import PairRecipe

if TYPE_CHECKING:
    from evirank.score.families.duo import DuoBERT
    from evirank.train.config import TrainConfig

logger = logging.getLogger(__name__)

#: Texts per validation query that are compared pairwise (k(k-1) pairs each).
VALIDATION_TEXTS = 8


def pair_items(examples: pd.DataFrame, negatives: int, seed: int, *, same_source: bool) -> pd.DataFrame:
    """Ordered pairs [qid, query, text = join_pair(first, second), label] of each query's relevant
    and non-relevant texts, both orders, each relevant text with up to ``negatives`` others.

    Example:
        >>> ex = pd.DataFrame({"qid": ["1"] * 3, "query": ["q"] * 3, "text": ["good", "bad", "worse"],
        ...                    "label": [1, 0, 0]})
        >>> items = pair_items(ex, 2, 0, same_source=False)
        >>> [(t.replace("\\x1e", " | "), y) for t, y in zip(items["text"], items["label"])]
        [('good | bad', 1), ('bad | good', 0), ('good | worse', 1), ('worse | good', 0)]
    """
    grouped = listwise_items(examples, same_source=same_source)
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, int]] = []
    for qid, query, positive, pool in zip(
        grouped[QID], grouped[QUERY], grouped[TEXT], grouped[NEGATIVES], strict=True
    ):
        chosen = list(pool) if len(pool) <= negatives else rng.choice(list(pool), negatives, replace=False)
        for other in chosen:
            rows.append((str(qid), str(query), join_pair(str(positive), str(other)), 1))
            rows.append((str(qid), str(query), join_pair(str(other), str(positive)), 0))
    return pd.DataFrame(rows, columns=[QID, QUERY, TEXT, LABEL])


def training_scorer(
    model: Any, tokenizer: Any, max_length: int, batch_size: int, device: str, bf16: bool
) -> DuoBERT:
    """A :class:`~evirank.score.families.duo.DuoBERT` over a model in memory, with training's caps."""
    from evirank.score.families.duo import DuoBERT

    scorer: DuoBERT = _model.adopted_scorer(
        DuoBERT, model, tokenizer, max_length, batch_size, device, bf16, query_share=4
    )
    return scorer


class PairClassification:
    """Binary cross-entropy of the pair logit: is the first text the more relevant one?"""

    name = "duo-bce"
    columns: tuple[str, ...] = (QUERY, TEXT, LABEL)
    pairs_per_item = 1

    def __init__(self) -> None:
        self._scorer: tuple[Any, DuoBERT] | None = None

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: Any, device: str) -> Any:
        torch = require("torch", "torch")
        if self._scorer is None or self._scorer[0] is not model:
            self._scorer = (model, training_scorer(model, tokenizer, config.max_length, 1, device, False))
        batch = self._scorer[1].pair_inputs(rows[QUERY].astype(str).tolist(), rows[TEXT].astype(str).tolist())
        inputs = {
            "input_ids": torch.from_numpy(batch.input_ids).to(device),
            "attention_mask": torch.from_numpy(batch.attention_mask).to(device),
        }
        if batch.token_type_ids is not None:
            inputs["token_type_ids"] = torch.from_numpy(batch.token_type_ids).to(device)
        logits = model(**inputs).logits.float()
        labels = _model.tensor_labels(rows[LABEL].to_numpy(dtype=np.int64), device)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 0], labels)

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        """Each relevant text's softmax cross-entropy of the SUM scores against its query's others."""
        return listwise_validation_loss(scores, rows)


def validation_texts(examples: pd.DataFrame, per_query: int = VALIDATION_TEXTS) -> pd.DataFrame:
    """Each query's texts compared in validation: its relevant ones first, then the others, at most
    ``per_query`` (queries without both kinds are left out: they rank nothing).

    Example:
        >>> ex = pd.DataFrame({"qid": ["1"] * 3 + ["2"], "query": ["q"] * 4, "text": list("abcd"),
        ...                    "label": [0, 1, 0, 0]})
        >>> validation_texts(ex, 2)["text"].tolist()
        ['b', 'a']
    """
    frame = examples.reset_index(drop=True).assign(_row=lambda f: np.arange(len(f)))
    frame = frame.sort_values([QID, LABEL, "_row"], ascending=[True, False, True], kind="stable")
    frame = frame.groupby(QID, sort=False).head(per_query)
    both = frame.groupby(QID)[LABEL].transform(lambda labels: labels.min() == 0 and labels.max() > 0)
    return frame[both.astype(bool)].drop(columns="_row").reset_index(drop=True)


class DuoRecipe(PairRecipe):
    """How ``evirank train --scorer duo`` trains a duoBERT (see the module)."""

    kind = "duo (pairwise cross-encoder)"
    losses: tuple[str, ...] = ("pairwise",)
    continues = True
    score = "sigmoid(logit) = P(the first text is more relevant than the second)"

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any, dict[str, Any]]:
        model, tokenizer, fresh_head = _model.load_classifier(
            source, num_labels=1, dropout=config.dropout, seed=config.seed
        )
        return model, tokenizer, {"fresh_head": fresh_head}

    def reload(self, folder: Path) -> Any:
        return require("transformers", "torch").AutoModelForSequenceClassification.from_pretrained(folder)

    def objective(self, examples: pd.DataFrame, config: TrainConfig, source: str) -> tuple[pd.DataFrame, Any]:
        items = pair_items(
            examples, config.group_size - 1, config.seed, same_source=config.negatives_from == "source"
        )
        logger.info(
            "duo: %d ordered pairs (each relevant text against up to %d others, both orders), %d queries",
            len(items),
            config.group_size - 1,
            items[QID].nunique() if len(items) else 0,
        )
        if items.empty:
            raise ValueError("duo: no (relevant, non-relevant) pair of one query in the training examples")
        return items, PairClassification()

    def validate(
        self, model: Any, tokenizer: Any, examples: pd.DataFrame, config: TrainConfig, device: str
    ) -> tuple[np.ndarray, pd.DataFrame]:
        texts = validation_texts(examples)
        scorer = training_scorer(
            model, tokenizer, config.max_length, config.eval_batch_size, device, config.bf16
        )
        rows: list[tuple[str, str, str, int]] = []
        groups = list(texts.groupby(QID, sort=False))
        for qid, group in groups:
            query, docs = str(group[QUERY].iloc[0]), group[TEXT].astype(str).tolist()
            rows.extend(
                (str(qid), query, join_pair(docs[i], docs[j]), 0)
                for i in range(len(docs))
                for j in range(len(docs))
                if i != j
            )
        pairs = pd.DataFrame(rows, columns=[QID, QUERY, TEXT, PID]).assign(docno="")
        was_training = model.training
        model.eval()
        try:
            probabilities = scorer(pairs)[SCORE].to_numpy(dtype=np.float64) if len(pairs) else np.zeros(0)
        finally:
            model.train(was_training)
        scores: list[float] = []
        at = 0
        for _, group in groups:
            n = len(group)
            matrix = np.zeros((n, n))
            off = ~np.eye(n, dtype=bool)
            matrix[off] = probabilities[at : at + n * (n - 1)]
            at += n * (n - 1)
            scores.extend(pair_sum(matrix).tolist())
        return np.asarray(scores, dtype=np.float64), texts
