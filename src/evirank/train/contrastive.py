"""Contrastive training of a bi-encoder: each query against in-batch and hard negatives.

A bi-encoder embeds queries and texts apart, so one batch can score every query against every
text: a query's positive competes with the other queries' positives (in-batch negatives) and
with ``group_size - 1`` hard negatives of its own query drawn afresh at each step, and the loss
is the softmax cross-entropy of the scaled cosines with the positive as the target (InfoNCE;
Karpukhin et al. 2020 trained DPR this way, with BM25 hard negatives; Gao, Dai & Callan 2021
argue for negatives from the retriever's own ranking, which ``--hard-negatives`` mines). The
scale (20, a temperature of 0.05) is the one all-MiniLM-L6-v2 was trained with.

With ``hardest_negatives=K`` (``--hardest-negatives K``), each positive keeps only the K negatives of
its pool that the initial bi-encoder scores highest (:func:`keep_hardest`): from the sentences of a
few non-relevant abstracts, the ones that look most like the claim to the model being trained,
rather than a random sentence of them, which is mostly easy. The selection is made once, before
training, with the initial weights, so a resumed run selects the same ones.

A text that is a positive of the same query (a second gold sentence of one claim, say) is
never counted as a negative of it: its column is masked out of that query's row.

Embeddings are mean-pooled and L2-normalised exactly as :class:`evirank.score.BiEncoder` computes
them (:func:`evirank.score.backends.mean_pooled`), and validation scores the held-out pairs through
``BiEncoder`` with the model in memory, so a model is validated as it is used.

Example:
    >>> from evirank.train import TrainConfig
    >>> TrainConfig(encoder="bi", loss="contrastive", group_size=2).scale
    20.0
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import QID, QUERY, TEXT
from evirank.score.backends import mean_pooled
from evirank.train.config import TrainConfig
from evirank.train.listwise import NEGATIVES, draw_negatives, listwise_items, listwise_validation_loss
from evirank.train.recipe import PairRecipe

if TYPE_CHECKING:
    from evirank.train.trainer import TrainResult

logger = logging.getLogger(__name__)


def embed_for_training(model: Any, tokenizer: Any, texts: Sequence[str], max_length: int, device: str) -> Any:
    """Unit-length embeddings of ``texts`` (a torch tensor with gradient), as the bi-encoder pools them."""
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    inputs = {k: v.to(device) for k, v in batch.items()}
    return mean_pooled(model(**inputs).last_hidden_state.float(), inputs["attention_mask"])


class Contrastive:
    """InfoNCE over in-batch and hard negatives, for a bi-encoder (see the module docstring)."""

    name = "contrastive-infonce"
    columns: tuple[str, ...] = (QID, QUERY, TEXT, NEGATIVES)

    def __init__(self, group_size: int, scale: float) -> None:
        self.hard = group_size - 1  # hard negatives per query and step
        self.scale = scale
        self.pairs_per_item = group_size  # texts embedded per item, besides its query

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        torch = require("torch", "torch")
        positives = rows[TEXT].astype(str).tolist()
        negatives: list[str] = []
        for pool in rows[NEGATIVES]:
            negatives.extend(draw_negatives(torch, pool, self.hard))
        queries = embed_for_training(
            model, tokenizer, rows[QUERY].astype(str).tolist(), config.max_length, device
        )
        texts = embed_for_training(model, tokenizer, positives + negatives, config.max_length, device)
        logits = self.scale * queries @ texts.T
        n = len(rows)
        qids = rows[QID].astype(str).to_numpy()
        same_query = torch.as_tensor(qids[:, None] == qids[None, :], device=logits.device)
        same_query.fill_diagonal_(False)  # the own positive stays the target
        # another positive of the same query is not a negative; nor is a hard negative equal to one
        mask = torch.zeros_like(logits, dtype=torch.bool)
        mask[:, :n] = same_query
        if negatives:
            positive_sets: list[set[str]] = [set() for _ in range(n)]
            for i, j in zip(*np.nonzero(qids[:, None] == qids[None, :]), strict=True):
                positive_sets[i].add(positives[j])
            clash = np.array([[t in positive_sets[i] for t in negatives] for i in range(n)])
            mask[:, n:] = torch.as_tensor(clash, device=logits.device)
        logits = logits.masked_fill(mask, float("-inf"))
        target = torch.arange(n, device=logits.device)
        return torch.nn.functional.cross_entropy(logits, target)

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        """Each positive's softmax cross-entropy (scaled cosines) against its query's negatives."""
        return listwise_validation_loss(self.scale * scores, rows)


def keep_hardest(
    items: pd.DataFrame,
    k: int,
    score: Any,
) -> pd.DataFrame:
    """``items`` with each row's negatives cut to the ``k`` that ``score`` rates highest.

    Args:
        items: rows [qid, query, text, negatives] (:func:`~evirank.train.listwise.listwise_items`).
        k: negatives kept per row (all of them where a row has no more).
        score: (queries, texts) -> similarities, one per pair (e.g. :func:`predict_similarity`
            with the initial model).

    Example:
        >>> items = pd.DataFrame({"qid": ["1"], "query": ["cat"], "text": ["a cat"],
        ...                       "negatives": [("a dog", "a cat toy", "a car")]})
        >>> overlap = lambda qs, ts: [len(set(q.split()) & set(t.split())) + len(t) / 100
        ...                           for q, t in zip(qs, ts)]
        >>> keep_hardest(items, 1, overlap)["negatives"].tolist()
        [('a cat toy',)]
    """
    pairs = {(q, t) for q, pool in zip(items[QUERY], items[NEGATIVES], strict=True) for t in pool}
    ordered = sorted(pairs)
    scores = np.asarray(score([q for q, _ in ordered], [t for _, t in ordered]), dtype=np.float64)
    rated = dict(zip(ordered, scores.tolist(), strict=True))

    def hardest(query: str, pool: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(pool, key=lambda text: (-rated[(query, text)], text))[:k])

    kept = [hardest(q, pool) for q, pool in zip(items[QUERY], items[NEGATIVES], strict=True)]
    return items.assign(**{NEGATIVES: kept})


def load_encoder(path: str, *, dropout: float | None) -> tuple[Any, Any]:
    """``path`` as a plain encoder (no head) and its tokenizer, with ``dropout`` set where it applies."""
    from evirank.train import _model

    transformers = require("transformers", "torch")
    path = _model.model_source(path)
    config = transformers.AutoConfig.from_pretrained(path)
    _model.set_dropout(config, dropout)
    with _model.quiet_transformers():
        model = transformers.AutoModel.from_pretrained(path, config=config)
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return model, tokenizer


def write_sentence_transformers_files(folder: Path, *, dim: int, max_length: int) -> None:
    """The sentence-transformers description of a mean-pooled, normalised bi-encoder in ``folder``.

    With these, ``sentence_transformers.SentenceTransformer(folder)`` embeds as evirank does, and
    :class:`evirank.score.BiEncoder` reads ``max_seq_length`` from them.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     write_sentence_transformers_files(Path(d), dim=384, max_length=256)
        ...     json.loads((Path(d) / "sentence_bert_config.json").read_text())["max_seq_length"]
        256
    """
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    pooling = {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    }
    (folder / "1_Pooling").mkdir(parents=True, exist_ok=True)
    (folder / "2_Normalize").mkdir(parents=True, exist_ok=True)
    (folder / "modules.json").write_text(json.dumps(modules, indent=2) + "\n", encoding="utf-8")
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(pooling, indent=2) + "\n", encoding="utf-8")
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_length, "do_lower_case": False}, indent=2) + "\n", encoding="utf-8"
    )


def predict_similarity(
    model: Any,
    tokenizer: Any,
    queries: Sequence[str],
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    max_length: int = 256,
    device: str = "cpu",
    bf16: bool = True,
) -> np.ndarray:
    """Cosines of (query, text) pairs, in input order (float64), through :class:`evirank.score.BiEncoder`.

    The model in memory is used as inference would (eval mode while scoring, its mode restored).
    """
    from evirank.config import Runtime
    from evirank.frames import DOCNO, PID, SCORE
    from evirank.score import BiEncoder

    name = str(getattr(model.config, "_name_or_path", "") or "in-memory model")
    runtime = Runtime(
        device=device,
        dtype="auto" if bf16 else "fp32",
        batch_tokens=max(1, batch_size) * max_length,
        max_length=max_length,
    )
    scorer = BiEncoder(name, runtime, cache_embeddings=False)
    scorer.adopt(model, tokenizer)
    ids = [str(i) for i in range(len(queries))]
    frame = pd.DataFrame({QID: ids, QUERY: list(queries), DOCNO: ids, PID: 0, TEXT: list(texts)})
    was_training = model.training
    model.eval()
    try:
        scored = scorer(frame)
    finally:
        model.train(was_training)
    return scored[SCORE].to_numpy(dtype=np.float64)


class ContrastiveRecipe(PairRecipe):
    """How ``evirank train --scorer bi`` fine-tunes a bi-encoder (see the module): mean-pooled,
    normalised embeddings scored by their cosine, trained with :class:`Contrastive`; the folder
    also gets the sentence-transformers files (:func:`write_sentence_transformers_files`)."""

    kind = "bi-encoder"
    losses: tuple[str, ...] = ("contrastive",)
    continues = False
    score = "cosine"

    def load(self, source: str, config: TrainConfig) -> tuple[Any, Any, dict[str, Any]]:
        model, tokenizer = load_encoder(source, dropout=config.dropout)
        return model, tokenizer, {}

    def reload(self, folder: Path) -> Any:
        return require("transformers", "torch").AutoModel.from_pretrained(folder)

    def objective(self, examples: pd.DataFrame, config: TrainConfig, source: str) -> tuple[pd.DataFrame, Any]:
        items = listwise_items(examples, same_source=config.negatives_from == "source")
        logger.info(
            "contrastive: %d positives, each with %d hard negatives and the batch's other texts (%d queries)",
            len(items),
            config.group_size - 1,
            items[QID].nunique(),
        )
        if config.hardest_negatives is not None:
            items = _hardest(items, config, source)
        return items, Contrastive(config.group_size, config.scale)

    def predict(self, model: Any, tokenizer: Any, queries: Any, texts: Any, **options: Any) -> np.ndarray:
        return predict_similarity(model, tokenizer, queries, texts, **options)

    def finish(self, folder: Path, model: Any, config: TrainConfig) -> None:
        write_sentence_transformers_files(
            folder, dim=int(model.config.hidden_size), max_length=config.max_length
        )


def _hardest(items: pd.DataFrame, config: TrainConfig, source: str) -> pd.DataFrame:
    """Each positive's ``config.hardest_negatives`` negatives the initial bi-encoder scores highest."""
    from evirank.score.devices import resolve_device

    device = resolve_device(config.device)
    model, tokenizer = load_encoder(source, dropout=config.dropout)
    model.to(device)

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        return predict_similarity(
            model,
            tokenizer,
            queries,
            texts,
            batch_size=config.eval_batch_size,
            max_length=config.max_length,
            device=device,
            bf16=config.bf16,
        )

    kept = keep_hardest(items, config.hardest_negatives or 1, score)
    logger.info(
        "contrastive: each positive keeps its %d hardest negatives by the initial model (%d pairs scored)",
        config.hardest_negatives,
        sum(len(pool) for pool in items[NEGATIVES]),
    )
    return kept


def train_bi_encoder(
    examples: pd.DataFrame,
    config: TrainConfig | None = None,
    output_dir: str | os.PathLike[str] = "model",
    **options: Any,
) -> TrainResult:
    """Fine-tune a bi-encoder contrastively on (query, text, label) examples (see the module).

    Takes the arguments of :func:`evirank.train.trainer.train_model`; ``config`` is made a
    bi-encoder's (``encoder="bi"``, ``loss="contrastive"``). The folder also holds the
    sentence-transformers files, so ``evirank rerank --scorer bi --model FOLDER`` and
    sentence-transformers both load it.

    Example:
        >>> from evirank.train import TrainConfig, train_bi_encoder  # doctest: +SKIP
        >>> train_bi_encoder(train, TrainConfig(group_size=2), "models/bi", validation=val)  # doctest: +SKIP
    """
    from evirank.train.trainer import train_model

    config = dataclasses.replace(config or TrainConfig(), encoder="bi", loss="contrastive")
    return train_model(examples, config, output_dir, **options)
