"""Listwise training: each positive against negatives of its own query, softmax cross-entropy.

Pointwise BCE asks every (query, text) pair for an absolute probability of relevance; on
skewed data (SciFact's train set is about one positive in ten) a freshly initialised head
can settle on the prior and stop learning. The listwise objective asks only for an order:
a group holds one positive and ``group_size - 1`` negatives of the same query, and the loss
is the cross-entropy of the softmax over the group's scores with the positive as the target
(the "localized contrastive estimation" of Gao, Dai & Callan 2021, who trained BERT
re-rankers on groups of first-stage negatives). A constant score costs ``log(group_size)``,
so a model that ignores its input is never a minimum.

Each training item is a positive with all negatives of its query; the ``group_size - 1``
negatives of its group are drawn afresh at every step from torch's random generator, so each
epoch sees other negatives, and a resumed run (whose checkpoint holds that generator's state)
draws the same ones as an uninterrupted run.

Example:
    >>> import pandas as pd
    >>> rows = pd.DataFrame({"qid": ["1"] * 4, "query": ["q"] * 4,
    ...                      "text": ["gold", "n1", "n2", "n3"], "label": [1, 0, 0, 0]})
    >>> items = listwise_items(rows)
    >>> items["text"].tolist(), items["negatives"].tolist()
    (['gold'], [('n1', 'n2', 'n3')])
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import LABEL, QID, QUERY, SOURCE, TEXT, require_columns
from evirank.score import relevance_from_logits
from evirank.train import _model
from evirank.train.config import TrainConfig
from evirank.train.examples import EVIDENCE_ROW_KINDS

logger = logging.getLogger(__name__)

NEGATIVES = "negatives"  # column of an item: the tuple of its query's negative texts


def builder_of(source: str) -> str:
    """The builder call that made a row: its ``source`` without the evidence builder's row kind.

    Example:
        >>> builder_of("evidence:train.jsonl/run-negative"), builder_of("documents:qrels/train.tsv")
        ('evidence:train.jsonl', 'documents:qrels/train.tsv')
    """
    head, _, kind = source.rpartition("/")
    return head if head and kind in EVIDENCE_ROW_KINDS else source


def listwise_items(examples: pd.DataFrame, *, same_source: bool = False) -> pd.DataFrame:
    """One item per positive example: [qid, query, text (the positive), negatives (a tuple)].

    The negatives are all negative examples of the positive's query; with ``same_source``,
    only those its own builder made (:func:`builder_of` of the ``source`` column), so that a
    gold sentence competes with sentences and a relevant abstract with abstracts: mixing them
    lets a model learn text length instead of relevance. Positives without a negative are left
    out, and counted in the log.

    Raises:
        ValueError: no positive has a negative.
    """
    keys = [examples[QID].astype(str)]
    if same_source:
        require_columns(examples, (SOURCE,), "listwise_items(same_source=True)")
        keys.append(examples[SOURCE].astype(str).map(builder_of))
    out: list[tuple[str, str, str, tuple[str, ...]]] = []
    lonely = 0
    for key, group in examples.groupby(keys, sort=False):
        labels = group[LABEL].to_numpy()
        texts = group[TEXT].astype(str).to_numpy()
        negatives = tuple(texts[labels == 0])
        positives = texts[labels == 1]
        if not negatives:
            lonely += len(positives)
            continue
        qid, query = str(key[0]), str(group[QUERY].iloc[0])
        out.extend((qid, query, str(text), negatives) for text in positives)
    if lonely:
        logger.warning(
            "listwise: %d positives without a negative (same query%s) are left out",
            lonely,
            ", same source" if same_source else "",
        )
    if not out:
        raise ValueError("listwise training needs positives with a negative example of the same query")
    return pd.DataFrame(out, columns=[QID, QUERY, TEXT, NEGATIVES])


def draw_negatives(torch: Any, negatives: tuple[str, ...], count: int) -> list[str]:
    """``count`` of ``negatives`` from torch's generator: without replacement when there are enough."""
    if len(negatives) >= count:
        picks = torch.randperm(len(negatives))[:count]
    else:
        picks = torch.randint(len(negatives), (count,))
    return [negatives[int(i)] for i in picks]


class Listwise:
    """Softmax cross-entropy over (positive, negatives...) groups of one query."""

    name = "listwise-softmax"
    columns: tuple[str, ...] = (QUERY, TEXT, NEGATIVES)

    def __init__(self, group_size: int) -> None:
        self.pairs_per_item = group_size  # (query, text) pairs scored per training item

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        torch = require("torch", "torch")
        queries: list[str] = []
        texts: list[str] = []
        width = self.pairs_per_item
        for query, positive, negatives in zip(rows[QUERY], rows[TEXT], rows[NEGATIVES], strict=True):
            queries.extend([query] * width)
            texts.append(positive)
            texts.extend(draw_negatives(torch, negatives, width - 1))
        inputs = _model.encode(tokenizer, queries, texts, config.max_length, device)
        scores = relevance_from_logits(model(**inputs).logits.float()).view(len(rows), width)
        target = torch.zeros(len(rows), dtype=torch.long, device=scores.device)
        return torch.nn.functional.cross_entropy(scores, target)

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        """Mean over positives of -log softmax(positive | it and all negatives of its query)."""
        return listwise_validation_loss(scores, rows)


def listwise_validation_loss(scores: np.ndarray, rows: pd.DataFrame) -> float:
    """Each positive's softmax cross-entropy against all negatives of its query, averaged.

    Queries without a positive or without a negative carry no signal and are left out (NaN
    when none is left).

    Example:
        >>> rows = pd.DataFrame({"qid": ["1", "1", "1"], "label": [1, 0, 0]})
        >>> round(listwise_validation_loss(np.array([0.0, 0.0, 0.0]), rows), 4)  # log(3)
        1.0986
    """
    frame = pd.DataFrame(
        {"qid": rows[QID].astype(str).to_numpy(), "label": rows[LABEL].to_numpy(), "s": scores}
    )
    losses: list[float] = []
    for _, group in frame.groupby("qid", sort=False):
        s, labels = group["s"].to_numpy(dtype=np.float64), group["label"].to_numpy()
        positives, negatives = s[labels == 1], s[labels == 0]
        if len(positives) == 0 or len(negatives) == 0:
            continue
        top = max(positives.max(), negatives.max())
        negative_mass = np.exp(negatives - top).sum()
        losses.extend(np.log(np.exp(positives - top) + negative_mass) - (positives - top))
    return float(np.mean(losses)) if losses else float("nan")
