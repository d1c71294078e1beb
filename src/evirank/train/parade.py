"""PARADE's training recipe: an encoder and an aggregation head trained end to end on documents.

The examples are the document-level ones every family trains from (``--documents``: each
passage of a document labelled with the document's label, :func:`evirank.train.document_examples`);
the recipe groups them back into documents: one item per (query, document), its first
``max_passages`` passages in pid order, its label. A step encodes every passage of its documents
(``[CLS] q [SEP] p [SEP]``, cut as :class:`evirank.score.families.parade.Parade` cuts them),
aggregates their [CLS] vectors with the head, and takes the binary cross-entropy of the document
scores (Li et al. 2020 train PARADE as a relevance classifier of documents). Memory grows with
``batch_size x max_passages`` inputs; ``gradient_accumulation`` keeps the effective batch.
Validation scores the validation documents through the ``Parade`` scorer itself.

The encoder starts from ``model`` (all-MiniLM-L6-v2 by default, or a trained cross-encoder's
folder, whose encoder is taken: Li et al. initialise PARADE from a MaxP-trained monoBERT); the
head is new. The saved folder is the encoder (a Hugging Face model folder) with
``parade.json`` and ``parade_head.safetensors`` beside it.

Example:
    >>> ParadeRecipe().losses
    ('pointwise',)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import DOCNO, DOCUMENT_SCORE, LABEL, PID, QID, QUERY, TEXT, require_columns
from evirank.train import _model
from evirank.train.classifier import bce
from evirank.train.recipe import PairRecipe

if TYPE_CHECKING:
    from evirank.score.families.parade import Parade
    from evirank.train.config import TrainConfig

logger = logging.getLogger(__name__)

#: Item column: a document's passages, in pid order.
PASSAGES = "passages"
#: The aggregation trained when the config names none.
DEFAULT_AGGREGATION = "transformer"
#: Passages read per document when the config names no bound.
DEFAULT_MAX_PASSAGES = 16


def document_items(examples: pd.DataFrame, max_passages: int) -> pd.DataFrame:
    """One row per (qid, docno) of passage examples: [qid, query, docno, passages, label].

    ``passages`` holds the document's first ``max_passages`` texts in pid order; a document's
    label is its passages' (document-level examples label every passage alike; a document with
    any relevant passage is relevant).

    Example:
        >>> ex = pd.DataFrame({"qid": ["1"] * 3, "query": ["q"] * 3, "docno": ["a", "a", "b"],
        ...                    "pid": [1, 0, 0], "text": ["a1", "a0", "b0"], "label": [1, 1, 0]})
        >>> document_items(ex, 4)[["docno", "passages", "label"]].values.tolist()
        [['a', ('a0', 'a1'), 1], ['b', ('b0',), 0]]
    """
    require_columns(examples, (QID, QUERY, DOCNO, TEXT, LABEL), "PARADE training examples")
    frame = examples.assign(**{PID: examples[PID] if PID in examples.columns else 0})
    frame = frame.sort_values([QID, DOCNO, PID], kind="stable")
    grouped = frame.groupby([QID, DOCNO], sort=False)
    items = grouped.agg(
        **{
            QUERY: (QUERY, "first"),
            PASSAGES: (TEXT, lambda texts: tuple(str(t) for t in list(texts)[:max_passages])),
            LABEL: (LABEL, "max"),
        }
    ).reset_index()
    return items[[QID, QUERY, DOCNO, PASSAGES, LABEL]]


class ParadeModel:
    """An encoder and a PARADE head, trained together (a torch module made on first use).

    ``ParadeModel.create(encoder, head)`` gives the module; it saves and loads as a model folder
    (:meth:`save_pretrained` / :func:`load_parade_model`).
    """

    @staticmethod
    def create(encoder: Any, head: Any) -> Any:
        """The torch module over ``encoder`` (a transformers encoder) and ``head`` (a PARADE head)."""
        torch = require("torch", "torch")

        class Module(torch.nn.Module):  # type: ignore[name-defined]
            def __init__(self) -> None:
                super().__init__()
                self.encoder = encoder
                self.head = head

            @property
            def config(self) -> Any:
                return self.encoder.config

            def cls_vectors(self, inputs: dict[str, Any]) -> Any:
                return self.encoder(**inputs).last_hidden_state[:, 0]

            def save_pretrained(self, folder: str | Path) -> None:
                from evirank.score.passage_aggregation import save_head

                Path(folder).mkdir(parents=True, exist_ok=True)
                self.encoder.save_pretrained(folder)
                save_head(self.head, folder)

        return Module()


def load_parade_model(folder: str | Path) -> Any:
    """The PARADE module saved in ``folder`` (an encoder with its head)."""
    from evirank.score.passage_aggregation import load_head

    transformers = require("transformers", "torch")
    encoder = transformers.AutoModel.from_pretrained(str(folder))
    head = load_head(folder)
    return ParadeModel.create(encoder, head)


def training_scorer(
    model: Any, tokenizer: Any, max_length: int, batch_size: int, device: str, bf16: bool
) -> Parade:
    """A :class:`~evirank.score.families.parade.Parade` scorer over a model in memory, with
    training's length caps (tokenisation, truncation and read-out as inference does them)."""
    from evirank.score.families.parade import Parade

    scorer: Parade = _model.adopted_scorer(Parade, model, tokenizer, max_length, batch_size, device, bf16)
    return scorer


class DocumentClassification:
    """Binary cross-entropy of PARADE's document scores (one item: a document and its passages)."""

    name = "parade-bce"
    columns: tuple[str, ...] = (QUERY, PASSAGES, LABEL)

    def __init__(self, max_passages: int) -> None:
        self.pairs_per_item = max_passages  # at most; for the pairs/s timing
        self._scorer: tuple[Any, Parade] | None = None

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: Any, device: str) -> Any:
        torch = require("torch", "torch")
        if self._scorer is None or self._scorer[0] is not model:
            self._scorer = (model, training_scorer(model, tokenizer, config.max_length, 1, device, False))
        scorer = self._scorer[1]
        queries: list[str] = []
        texts: list[str] = []
        document: list[int] = []
        position: list[int] = []
        for d, (query, passages) in enumerate(zip(rows[QUERY], rows[PASSAGES], strict=True)):
            for p, text in enumerate(passages):
                queries.append(str(query))
                texts.append(str(text))
                document.append(d)
                position.append(p)
        batch = scorer.pair_inputs(queries, texts)
        inputs = {
            "input_ids": torch.from_numpy(batch.input_ids).to(device),
            "attention_mask": torch.from_numpy(batch.attention_mask).to(device),
        }
        if batch.token_type_ids is not None:
            inputs["token_type_ids"] = torch.from_numpy(batch.token_type_ids).to(device)
        vectors = model.cls_vectors(inputs).float()
        width = max(position) + 1
        rows_index = torch.as_tensor(document, device=device)
        cols_index = torch.as_tensor(position, device=device)
        grid = vectors.new_zeros((len(rows), width, vectors.shape[-1]))
        grid = grid.index_put((rows_index, cols_index), vectors)
        mask = torch.zeros((len(rows), width), dtype=torch.bool, device=device)
        mask[rows_index, cols_index] = True
        scores = model.head(grid, mask)
        labels = _model.tensor_labels(rows[LABEL].to_numpy(dtype=np.int64), device)
        return torch.nn.functional.binary_cross_entropy_with_logits(scores.float(), labels)

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        return bce(scores, rows[LABEL].to_numpy(dtype=np.float64))


class ParadeRecipe(PairRecipe):
    """How ``evirank train --scorer parade`` trains PARADE (see the module)."""

    kind = "PARADE"
    losses: tuple[str, ...] = ("pointwise",)
    continues = False

    def check(self, config: TrainConfig) -> None:
        from evirank.score.passage_aggregation import AGGREGATIONS

        aggregation = config.aggregation or DEFAULT_AGGREGATION
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, found {aggregation!r}")

    def _max_passages(self, config: TrainConfig) -> int:
        return int(config.max_passages or DEFAULT_MAX_PASSAGES)

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any, dict[str, Any]]:
        from evirank.score.passage_aggregation import HeadConfig, make_head

        torch = require("torch", "torch")
        transformers = require("transformers", "torch")
        source = _model.model_source(source)
        model_config = transformers.AutoConfig.from_pretrained(source)
        _model.set_dropout(model_config, config.dropout)
        with _model.quiet_transformers():
            encoder = transformers.AutoModel.from_pretrained(source, config=model_config)
            tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        head_config = HeadConfig(
            aggregation=config.aggregation or DEFAULT_AGGREGATION,
            hidden_size=int(model_config.hidden_size),
            max_passages=self._max_passages(config),
            num_heads=int(model_config.num_attention_heads),
            intermediate_size=int(getattr(model_config, "intermediate_size", 4 * model_config.hidden_size)),
            dropout=config.dropout,
            max_length=config.max_length,
        )
        torch.manual_seed(config.seed)
        head = make_head(head_config)
        logger.info(
            "PARADE-%s over %s: a new head, %d passages per document",
            head_config.aggregation,
            source,
            head_config.max_passages,
        )
        return ParadeModel.create(encoder, head), tokenizer, {"aggregation": head_config.aggregation}

    def reload(self, folder: Path) -> Any:
        return load_parade_model(folder)

    def head_parameters(self, model: Any) -> set[str]:
        """The aggregation network's parameters (``head.*``)."""
        return {name for name, _ in model.named_parameters() if name.startswith("head.")}

    def objective(self, examples: pd.DataFrame, config: TrainConfig, source: str) -> tuple[pd.DataFrame, Any]:
        items = document_items(examples, self._max_passages(config))
        logger.info(
            "PARADE: %d documents (%d relevant) of %d queries, at most %d passages each (%.1f on average)",
            len(items),
            int(items[LABEL].sum()),
            items[QID].nunique(),
            self._max_passages(config),
            float(items[PASSAGES].map(len).mean()) if len(items) else 0.0,
        )
        return items, DocumentClassification(self._max_passages(config))

    def validate(
        self, model: Any, tokenizer: Any, examples: pd.DataFrame, config: TrainConfig, device: str
    ) -> tuple[np.ndarray, pd.DataFrame]:
        items = document_items(examples, self._max_passages(config))
        passages = items.explode(PASSAGES).rename(columns={PASSAGES: TEXT})
        passages[PID] = passages.groupby([QID, DOCNO]).cumcount()
        scorer = training_scorer(
            model, tokenizer, config.max_length, config.eval_batch_size, device, config.bf16
        )
        was_training = model.training
        model.eval()
        try:
            scored = scorer(passages.reset_index(drop=True))
        finally:
            model.train(was_training)
        documents = scored.drop_duplicates([QID, DOCNO]).set_index([QID, DOCNO])[DOCUMENT_SCORE]
        scores = documents.reindex(pd.MultiIndex.from_frame(items[[QID, DOCNO]])).to_numpy(dtype=np.float64)
        return scores, items

    def score_rule(self, config: TrainConfig) -> str:
        return (
            f"PARADE-{config.aggregation or DEFAULT_AGGREGATION}: a linear layer over the document vector "
            "aggregated from the passages' [CLS] vectors (a logit)"
        )
