"""Fine-tuning cross-encoders: :func:`train_cross_encoder`, with validation, best checkpoint,
early stopping and exact resume.

The output folder is a standard Hugging Face model folder (``config.json``,
``model.safetensors``, tokenizer files) that ``transformers``, sentence-transformers'
``CrossEncoder`` and ``evirank.score.CrossEncoder`` load, plus:

* ``evirank-train.json``: config, library versions, data provenance, validation history,
  the best step, timings; written last, so its presence means the folder is complete;
* ``train-log.jsonl``: one JSON record per optimizer step (loss, learning rate) and per
  validation (loss and ranking measures);
* ``checkpoint/`` while training (removed at the end unless ``keep_checkpoints``):
  ``last/`` (weights, optimizer, scheduler, RNG states, step counters: what resume needs) and
  ``best/`` (the best validated weights).

Resume is exact: the data order of each epoch is a function of (seed, epoch), and the
checkpoint holds the optimizer, scheduler and RNG states, so an interrupted run resumed with
``resume=True`` ends with the same weights as an uninterrupted one (bitwise on CPU).

Example:
    >>> from evirank.train import TrainConfig, train_cross_encoder  # doctest: +SKIP
    >>> result = train_cross_encoder(examples, TrainConfig(epochs=1), "models/mb",
    ...                              validation=validation)  # doctest: +SKIP
    >>> result.best["AP"]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import pandas as pd

from evirank._extras import require
from evirank.errors import OutputExistsError
from evirank.frames import DOCNO, LABEL, PID, QID, QUERY, SCORE, SOURCE, TEXT, require_columns
from evirank.outputs import atomic_file, check_output, recovered
from evirank.progress import progress_bar
from evirank.record import plain, write_record
from evirank.score.devices import resolve_device
from evirank.train import _model
from evirank.train.config import TrainConfig
from evirank.train.contrastive import (
    Contrastive,
    keep_hardest,
    load_encoder,
    predict_similarity,
    write_sentence_transformers_files,
)
from evirank.train.examples import summarize_examples
from evirank.train.listwise import NEGATIVES, Listwise, listwise_items
from evirank.train.recipe import Recipe, recipe_for

logger = logging.getLogger(__name__)

TRAIN_JSON = "evirank-train.json"
TRAIN_LOG = "train-log.jsonl"
CHECKPOINT_DIR = "checkpoint"
OUTPUT_MARKERS = (TRAIN_JSON, CHECKPOINT_DIR, TRAIN_LOG)
"""A folder holding one of these is a training output that ``overwrite``/``resume`` may replace."""

# Config fields that may change between an interrupted run and its resumption.
_RESUMABLE_CHANGES = {"device", "eval_batch_size", "keep_checkpoints"}


@dataclass
class TrainResult:
    """What a training run produced.

    Attributes:
        output_dir: the model folder.
        steps: optimizer steps taken.
        best_step: the step of the kept weights' validation (None without validation).
        best: validation loss and measures at ``best_step`` (None without validation).
        history: every validation record, in order.
        stopped_early: whether patience ran out.
        wall_time_s: training time, summed over interruptions.
    """

    output_dir: Path
    steps: int
    best_step: int | None
    best: dict[str, float] | None
    history: list[dict[str, Any]]
    stopped_early: bool
    wall_time_s: float


class Objective(Protocol):
    """How a batch of item rows becomes a loss, and how validation is scored."""

    @property
    def name(self) -> str:
        """The objective's name, written into ``evirank-train.json``."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The item columns the objective reads (fingerprinted for resumes)."""

    @property
    def pairs_per_item(self) -> int:
        """(query, text) pairs the model scores per item (for the pairs/s timing)."""

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        """The mean loss of ``rows`` (a torch scalar with gradient)."""

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        """The loss of the validation rows given their relevance scores."""


def _bce(scores: np.ndarray, labels: np.ndarray) -> float:
    """Binary cross-entropy with logits, numerically stable (also 2-class CE on z1 - z0)."""
    return float(np.mean(np.maximum(scores, 0) - scores * labels + np.log1p(np.exp(-np.abs(scores)))))


class Classification:
    """Relevance as classification: BCE on one logit, or cross-entropy over two classes."""

    columns: tuple[str, ...] = (QUERY, TEXT, LABEL)
    pairs_per_item = 1

    def __init__(self, num_labels: int) -> None:
        self.num_labels = num_labels
        self.name = "bce" if num_labels == 1 else "cross-entropy"

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        torch = require("torch", "torch")
        inputs = _model.encode(
            tokenizer, rows[QUERY].tolist(), rows[TEXT].tolist(), config.max_length, device
        )
        logits = model(**inputs).logits.float()
        labels = rows[LABEL].to_numpy(dtype=np.int64, copy=True)
        if self.num_labels == 1:
            return torch.nn.functional.binary_cross_entropy_with_logits(
                logits[:, 0], _model.tensor_labels(labels, device)
            )
        return torch.nn.functional.cross_entropy(
            logits, torch.as_tensor(labels, dtype=torch.long, device=device)
        )

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        return _bce(scores, rows[LABEL].to_numpy(dtype=np.float64))


@dataclass
class _State:
    """Counters saved with every checkpoint."""

    step: int = 0
    epoch: int = 0
    batch: int = 0  # micro-batches of the current epoch already consumed
    best_metric: float | None = None
    best_step: int | None = None
    bad_validations: int = 0
    stopped_early: bool = False
    elapsed_s: float = 0.0
    examples_seen: int = 0
    loss_ema: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)


def fingerprint(frame: pd.DataFrame, columns: tuple[str, ...]) -> str:
    """A SHA-256 of ``columns`` of ``frame``, row by row (detects changed data on resume)."""
    digest = hashlib.sha256()
    for column in columns:
        values = frame[column]
        if len(values) and isinstance(values.iloc[0], (tuple, list)):  # e.g. listwise negatives
            values = values.map(lambda texts: "\x1f".join(map(str, texts)))
        digest.update(column.encode())
        digest.update(pd.util.hash_pandas_object(values, index=False).to_numpy().tobytes())
    return digest.hexdigest()


def _validation_measures(
    scores: np.ndarray, rows: pd.DataFrame, measures: tuple[str, ...]
) -> dict[str, float]:
    """Ranking measures of the validation rows, each query's rows ranked by score.

    Each row is one ranked item with its binary label as relevance; queries without a
    relevant row are left out (they carry no ranking signal). Evaluated by
    :class:`evirank.evaluate.Evaluator`: its measure names and its tie rule (equal scores in
    docno descending order, as trec_eval), the row's position being its docno.

    Example:
        >>> rows = pd.DataFrame({"qid": ["1", "1", "2"], "label": [1, 0, 0]})
        >>> _validation_measures(np.array([0.2, 0.9, 0.5]), rows, ("RR", "P@1"))
        {'RR': 0.5, 'P@1': 0.0}
    """
    from evirank.evaluate import Evaluator

    items = pd.DataFrame(
        {
            QID: rows[QID].astype(str).to_numpy(),
            DOCNO: np.arange(len(rows)).astype(str),
            LABEL: rows[LABEL].astype(int).to_numpy(),
            SCORE: np.asarray(scores, dtype=np.float64),
        }
    )
    items = items[items.groupby(QID)[LABEL].transform("max") > 0]
    if items.empty:
        return {m: float("nan") for m in measures}
    evaluator = Evaluator(items[[QID, DOCNO, LABEL]], measures)
    means = evaluator.mean(items[[QID, DOCNO, SCORE]])
    return {given: float(means[name]) for given, name in zip(measures, evaluator.names, strict=True)}


def _rng_state(torch: Any) -> dict[str, Any]:
    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def _set_rng_state(torch: Any, state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _seed_everything(torch: Any, seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _compatible(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """The config fields that differ (a field a checkpoint predates counts as its default)."""
    defaults = TrainConfig().to_dict()
    keys = (set(saved) | set(current)) - _RESUMABLE_CHANGES
    return sorted(k for k in keys if saved.get(k, defaults.get(k)) != current.get(k, defaults.get(k)))


def check_train_output(output_dir: str | os.PathLike[str], *, overwrite: bool, resume: bool) -> Path:
    """Check, without changing anything, that a training may write ``output_dir``.

    Raises what :func:`prepare_output` would, before the (long) data preparation starts.

    Example:
        >>> import tempfile
        >>> check_train_output(tempfile.mkdtemp() + "/model", overwrite=False, resume=False).name
        'model'
    """
    out = Path(output_dir)
    check_output(out, overwrite or resume, marker=OUTPUT_MARKERS)
    return out


def prepare_output(output_dir: Path, *, overwrite: bool, resume: bool) -> str:
    """Decide what to do with ``output_dir``: "fresh", "resume" or "complete".

    Raises:
        OutputExistsError: if it exists and neither ``overwrite`` nor ``resume`` is set.
        UnsafeOverwriteError: it exists but is not a training output folder (no
            ``evirank-train.json`` and no ``checkpoint/``): it is never removed.
        OutputNotWritableError: it cannot be created.
    """
    check_train_output(output_dir, overwrite=overwrite, resume=resume)  # ours (or empty), or refuse
    if not output_dir.exists():
        return "fresh"
    if resume:
        if (output_dir / TRAIN_JSON).exists():
            return "complete"
        if recovered(output_dir / CHECKPOINT_DIR / "last") is not None:
            return "resume"
        logger.warning("%s has no checkpoint to resume from; training starts over in it", output_dir)
        shutil.rmtree(output_dir)
        return "fresh"
    if overwrite:
        shutil.rmtree(output_dir)
        return "fresh"
    raise OutputExistsError(output_dir)


class Fit:
    """One training run over item rows with an :class:`Objective` (shared by train and distill).

    Not part of the public API: use :func:`train_cross_encoder` or :func:`evirank.train.distill`.
    """

    def __init__(
        self,
        *,
        items: pd.DataFrame,
        objective: Objective,
        config: TrainConfig,
        output_dir: Path,
        validation: pd.DataFrame | None,
        metadata: dict[str, Any],
        step_callback: Callable[[int], None] | None,
        recipe: Recipe | None = None,
    ) -> None:
        self.recipe = recipe
        self.items = items.reset_index(drop=True)
        self.objective = objective
        self.config = config
        self.out = output_dir
        self.validation = None if validation is None else validation.reset_index(drop=True)
        self.metadata = metadata
        self.step_callback = step_callback
        self.torch = require("torch", "torch")
        self.transformers = require("transformers", "torch")
        self.device = resolve_device(config.device)
        self.fingerprint = fingerprint(self.items, objective.columns)
        self.state = _State()

    # -- layout ------------------------------------------------------------------------
    def _reload(self, folder: Path) -> Any:
        """The model saved in ``folder``: by the family's recipe, else with a classification head or
        as a plain encoder (bi)."""
        if self.recipe is not None:
            return self.recipe.reload(folder)
        bi = self.config.encoder == "bi"
        auto = self.transformers.AutoModel if bi else self.transformers.AutoModelForSequenceClassification
        return auto.from_pretrained(folder)

    @property
    def checkpoint_dir(self) -> Path:
        return self.out / CHECKPOINT_DIR

    def _schedule(self) -> tuple[int, int, int]:
        """(micro-batches per epoch, optimizer steps per epoch, total optimizer steps)."""
        cfg = self.config
        batches = math.ceil(len(self.items) / cfg.batch_size)
        steps_per_epoch = math.ceil(batches / cfg.gradient_accumulation)
        total = cfg.epochs * steps_per_epoch
        return batches, steps_per_epoch, min(total, cfg.max_steps) if cfg.max_steps else total

    def _optimizer(self, model: Any) -> Any:
        decay: list[Any] = []
        no_decay: list[Any] = []
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name else decay).append(
                param
            )
        groups = [
            {"params": decay, "weight_decay": self.config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        return self.torch.optim.AdamW(groups, lr=self.config.learning_rate)

    # -- checkpoints -------------------------------------------------------------------
    def _save_checkpoint(self, model: Any, tokenizer: Any, optimizer: Any, scheduler: Any) -> None:
        with atomic_file(self.checkpoint_dir / "last") as tmp:  # a crash keeps the previous one
            tmp.mkdir(parents=True)
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            self.torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            self.torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
            self.torch.save(_rng_state(self.torch), tmp / "rng.pt")
            payload = {
                "state": self.state.__dict__,
                "config": self.config.to_dict(),
                "fingerprint": self.fingerprint,
                "metadata": self.metadata,
            }
            (tmp / "state.json").write_text(json.dumps(plain(payload), indent=2), encoding="utf-8")
        logger.debug("checkpoint at step %d", self.state.step)

    def _save_best(self, model: Any) -> None:
        with atomic_file(self.checkpoint_dir / "best") as tmp:
            model.save_pretrained(tmp)

    def load_checkpoint(self) -> tuple[Any, Any, dict[str, Any]]:
        """The model and tokenizer of ``checkpoint/last`` and its saved payload (checked)."""
        last = recovered(self.checkpoint_dir / "last")
        if last is None:  # pragma: no cover - prepare_output checked it
            raise FileNotFoundError(self.checkpoint_dir / "last")
        payload = json.loads((last / "state.json").read_text(encoding="utf-8"))
        changed = _compatible(payload["config"], self.config.to_dict())
        if changed:
            raise ValueError(
                f"cannot resume {self.out}: the config differs in {changed}; resume with the same settings "
                "or train into a new folder"
            )
        if payload["fingerprint"] != self.fingerprint:
            raise ValueError(
                f"cannot resume {self.out}: the training examples differ from the interrupted run's"
            )
        with _model.quiet_transformers():
            model = self._reload(last)
            tokenizer = self.transformers.AutoTokenizer.from_pretrained(last)
        return model, tokenizer, payload

    def _restore(self, payload: dict[str, Any], optimizer: Any, scheduler: Any) -> None:
        last = recovered(self.checkpoint_dir / "last")
        assert last is not None
        optimizer.load_state_dict(self.torch.load(last / "optimizer.pt", weights_only=False))
        scheduler.load_state_dict(self.torch.load(last / "scheduler.pt", weights_only=False))
        _set_rng_state(self.torch, self.torch.load(last / "rng.pt", weights_only=False))
        self.state = _State(**payload["state"])
        self._truncate_log(self.state.step)

    def _truncate_log(self, step: int) -> None:
        """Drop log records written after the checkpoint (they will be written again)."""
        log = self.out / TRAIN_LOG
        if not log.exists():
            return
        kept = [
            line
            for line in log.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= step
        ]
        log.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")

    # -- validation --------------------------------------------------------------------
    def _validate(self, model: Any, tokenizer: Any) -> dict[str, Any]:
        assert self.validation is not None
        cfg = self.config
        if self.recipe is not None:
            predict: Callable[..., np.ndarray] = self.recipe.predict
        else:
            predict = predict_similarity if cfg.encoder == "bi" else _model.predict_relevance
        scores = predict(
            model,
            tokenizer,
            self.validation[QUERY].tolist(),
            self.validation[TEXT].tolist(),
            batch_size=cfg.eval_batch_size,
            max_length=cfg.max_length,
            device=self.device,
            bf16=cfg.bf16,
        )
        record: dict[str, Any] = {
            "event": "validation",
            "step": self.state.step,
            "epoch": self.state.epoch,
            "val_loss": self.objective.validation_loss(scores, self.validation),
        }
        record.update(_validation_measures(scores, self.validation, cfg.validation_measures))
        return record

    # -- the loop ----------------------------------------------------------------------
    def run(self, model: Any, tokenizer: Any, resume_payload: dict[str, Any] | None) -> TrainResult:
        """Train ``model`` (fresh, or restored from the checkpoint's ``resume_payload``) and save it."""
        with _model.quiet_transformers():
            return self._run(model, tokenizer, resume_payload)

    def _run(self, model: Any, tokenizer: Any, resume_payload: dict[str, Any] | None) -> TrainResult:
        cfg = self.config
        optimizer, scheduler, batches_per_epoch, total = self._start(model, resume_payload)
        bar = progress_bar(desc="train", total=total, unit="step")
        bar.update(self.state.step)
        log = open(self.out / TRAIN_LOG, "a", encoding="utf-8")  # noqa: SIM115 - closed in finally
        started = time.perf_counter()
        base_elapsed = self.state.elapsed_s
        try:
            done = self.state.stopped_early or self.state.step >= total or self.state.epoch >= cfg.epochs
            while not done:
                epoch = self.state.epoch
                order = np.random.default_rng([cfg.seed, epoch]).permutation(len(self.items))
                batches = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
                model.train()
                while self.state.batch < batches_per_epoch:
                    group = batches[self.state.batch : self.state.batch + cfg.gradient_accumulation]
                    size, step_loss = self._step(model, tokenizer, group, optimizer, scheduler)
                    state = self.state
                    state.batch += len(group)
                    state.step += 1
                    state.examples_seen += size
                    state.loss_ema = (
                        step_loss if state.loss_ema is None else 0.98 * state.loss_ema + 0.02 * step_loss
                    )
                    state.elapsed_s = base_elapsed + time.perf_counter() - started
                    log.write(json.dumps(self._step_record(epoch, step_loss, scheduler)) + "\n")
                    bar.update(1)
                    bar.set_postfix(loss=f"{state.loss_ema:.4f}", epoch=epoch)
                    end_of_epoch = state.batch >= batches_per_epoch
                    finished = state.step >= total
                    periodic = (
                        cfg.validate_every_steps is not None and state.step % cfg.validate_every_steps == 0
                    )
                    if self.validation is not None and (end_of_epoch or finished or periodic):
                        self._validate_and_keep_best(model, tokenizer, log, epoch)
                    if end_of_epoch:
                        state.epoch, state.batch = epoch + 1, 0
                    done = state.stopped_early or finished or state.epoch >= cfg.epochs
                    if done or end_of_epoch or state.step % cfg.save_every_steps == 0:
                        log.flush()
                        self._save_checkpoint(model, tokenizer, optimizer, scheduler)
                    if self.step_callback is not None:
                        self.step_callback(state.step)
                    if done or end_of_epoch:
                        break
        finally:
            log.close()
            bar.close()
        if self.state.stopped_early:
            logger.info(
                "early stopping at step %d: no improvement in %d validations", self.state.step, cfg.patience
            )
        return self._finish(model, tokenizer, total)

    def _start(self, model: Any, resume_payload: dict[str, Any] | None) -> tuple[Any, Any, int, int]:
        """Optimizer, schedule, micro-batches per epoch and total steps; the state restored or seeded."""
        self.out.mkdir(parents=True, exist_ok=True)
        model.to(self.device)
        optimizer = self._optimizer(model)
        batches_per_epoch, _, total = self._schedule()
        warmup = round(self.config.warmup_fraction * total)
        scheduler = self.transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
        if resume_payload is not None:
            self._restore(resume_payload, optimizer, scheduler)
            logger.info("resuming %s at step %d of %d", self.out, self.state.step, total)
        else:
            _seed_everything(self.torch, self.config.seed)
        return optimizer, scheduler, batches_per_epoch, total

    def _step(
        self, model: Any, tokenizer: Any, group: list[np.ndarray], optimizer: Any, scheduler: Any
    ) -> tuple[int, float]:
        """One optimizer step over the micro-batches of ``group``; returns (items, mean loss)."""
        cfg = self.config
        size = sum(len(b) for b in group)
        step_loss = 0.0
        for idx in group:
            with _model.autocast(self.device, cfg.bf16):
                loss = self.objective.loss(model, tokenizer, self.items.iloc[idx], cfg, self.device)
            (loss * (len(idx) / size)).backward()
            step_loss += float(loss.detach()) * len(idx) / size
        if cfg.max_grad_norm is not None:
            self.torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return size, step_loss

    def _step_record(self, epoch: int, loss: float, scheduler: Any) -> dict[str, Any]:
        """The ``train-log.jsonl`` line of an optimizer step."""
        return {
            "event": "step",
            "step": self.state.step,
            "epoch": epoch,
            "loss": loss,
            "lr": scheduler.get_last_lr()[0],
            "elapsed_s": round(self.state.elapsed_s, 3),
        }

    def _validate_and_keep_best(self, model: Any, tokenizer: Any, log: IO[str], epoch: int) -> None:
        """Validate, log it, keep the weights when the selection measure improved, count for patience."""
        cfg, state = self.config, self.state
        record = self._validate(model, tokenizer)
        state.history.append(record)
        log.write(json.dumps(record) + "\n")
        value = record[cfg.validation_measures[0]]
        improved = state.best_metric is None or (not math.isnan(value) and value > state.best_metric)
        if improved:
            state.best_metric, state.best_step, state.bad_validations = value, state.step, 0
            self._save_best(model)
        else:
            state.bad_validations += 1
            if cfg.patience is not None and state.bad_validations >= cfg.patience:
                state.stopped_early = True
        logger.info(
            "step %d (epoch %d): val_loss %.4f, %s%s",
            state.step,
            epoch,
            record["val_loss"],
            ", ".join(f"{m} {record[m]:.4f}" for m in cfg.validation_measures),
            " (best)" if improved else "",
        )

    def _score_rule(self, model: Any) -> str:
        if self.recipe is not None:
            return self.recipe.score
        if self.config.encoder == "bi":
            return "cosine"
        return "logit" if model.config.num_labels == 1 else "logit[1] - logit[0]"

    def _finish(self, model: Any, tokenizer: Any, total: int) -> TrainResult:
        best_dir = recovered(self.checkpoint_dir / "best")
        if best_dir is not None:
            model = self._reload(best_dir)
        for name in ("config.json", "model.safetensors"):
            (self.out / name).unlink(missing_ok=True)
        model.save_pretrained(self.out)
        tokenizer.save_pretrained(self.out)
        bi = self.config.encoder == "bi"
        if bi:
            write_sentence_transformers_files(
                self.out, dim=int(model.config.hidden_size), max_length=self.config.max_length
            )
        state = self.state
        best = None
        if state.best_step is not None:
            best = next(r for r in state.history if r["step"] == state.best_step)
            best = {k: v for k, v in best.items() if k not in ("event", "epoch", "step")}
        payload = {
            "status": "complete",
            "finished": datetime.now(UTC).isoformat(timespec="seconds"),
            **self.metadata,
            "objective": self.objective.name,
            "score": self._score_rule(model),
            "data_fingerprint": self.fingerprint,
            "steps": state.step,
            "total_steps": total,
            "epochs_completed": state.epoch,
            "stopped_early": state.stopped_early,
            "best_step": state.best_step,
            "best": best,
            "history": state.history,
            "timings": {
                "device": self.device,
                "wall_time_s": round(state.elapsed_s, 3),
                "examples_seen": state.examples_seen,
                "train_pairs_per_s": round(
                    state.examples_seen * self.objective.pairs_per_item / state.elapsed_s, 2
                )
                if state.elapsed_s
                else None,
                "torch_threads": self.torch.get_num_threads(),
            },
        }
        write_record(self.out / TRAIN_JSON, "train", self.config.to_dict(), **payload)
        if not self.config.keep_checkpoints and self.checkpoint_dir.exists():
            shutil.rmtree(self.checkpoint_dir)
        logger.info("model written to %s (%d steps, %.0f s)", self.out, state.step, state.elapsed_s)
        return result_from_json(self.out)


def _items_and_objective(examples: pd.DataFrame, config: TrainConfig) -> tuple[pd.DataFrame, Objective]:
    """The rows a training step draws from, and the loss over them (``config.loss``)."""
    if config.loss == "contrastive":
        items = listwise_items(examples, same_source=config.negatives_from == "source")
        logger.info(
            "contrastive: %d positives, each with %d hard negatives and the batch's other texts (%d queries)",
            len(items),
            config.group_size - 1,
            items[QID].nunique(),
        )
        return items, Contrastive(config.group_size, config.scale)
    if config.loss == "listwise":
        items = listwise_items(examples, same_source=config.negatives_from == "source")
        logger.info(
            "listwise: %d positives, each in a group of %d texts (%d queries)",
            len(items),
            config.group_size,
            items[QID].nunique(),
        )
        return items, Listwise(config.group_size)
    columns = [c for c in (QID, QUERY, DOCNO, PID, TEXT, LABEL) if c in examples.columns]
    return examples[columns], Classification(config.num_labels)


def _hardest(items: pd.DataFrame, config: TrainConfig, source: str) -> pd.DataFrame:
    """Each positive's ``config.hardest_negatives`` negatives the initial bi-encoder scores highest."""
    model, tokenizer = load_encoder(source, dropout=config.dropout)
    model.to(resolve_device(config.device))

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        return predict_similarity(
            model,
            tokenizer,
            queries,
            texts,
            batch_size=config.eval_batch_size,
            max_length=config.max_length,
            device=resolve_device(config.device),
            bf16=config.bf16,
        )

    kept = keep_hardest(items, config.hardest_negatives or 1, score)
    logger.info(
        "contrastive: each positive keeps its %d hardest negatives by the initial model (%d pairs scored)",
        config.hardest_negatives,
        sum(len(pool) for pool in items[NEGATIVES]),
    )
    return kept


def result_from_json(output_dir: str | os.PathLike[str]) -> TrainResult:
    """The :class:`TrainResult` of a completed model folder (read from ``evirank-train.json``)."""
    out = Path(output_dir)
    payload = json.loads((out / TRAIN_JSON).read_text(encoding="utf-8"))
    return TrainResult(
        output_dir=out,
        steps=payload["steps"],
        best_step=payload["best_step"],
        best=payload["best"],
        history=payload["history"],
        stopped_early=payload["stopped_early"],
        wall_time_s=payload["timings"]["wall_time_s"],
    )


def _summary(examples: pd.DataFrame) -> dict[str, Any]:
    if SOURCE in examples.columns:
        return summarize_examples(examples)
    return {
        "rows": len(examples),
        "queries": int(examples[QID].nunique()),
        "positives": int(examples[LABEL].sum()),
    }


def _check_examples(examples: pd.DataFrame, where: str) -> None:
    require_columns(examples, (QID, QUERY, TEXT, LABEL), where)
    if examples.empty:
        raise ValueError(f"{where}: no examples")
    labels = set(examples[LABEL].unique().tolist())
    if not labels <= {0, 1}:
        raise ValueError(f"{where}: labels must be 0 or 1, found {sorted(labels)[:5]}")


def train_bi_encoder(
    examples: pd.DataFrame,
    config: TrainConfig | None = None,
    output_dir: str | os.PathLike[str] = "model",
    **options: Any,
) -> TrainResult:
    """Fine-tune a bi-encoder contrastively on (query, text, label) examples (see evirank.train.contrastive).

    Takes the arguments of :func:`train_cross_encoder`; ``config`` is made a bi-encoder's
    (``encoder="bi"``, ``loss="contrastive"``). The folder also holds the sentence-transformers
    files, so ``evirank rerank --scorer bi --model FOLDER`` and sentence-transformers both load it.

    Example:
        >>> from evirank.train import TrainConfig, train_bi_encoder  # doctest: +SKIP
        >>> train_bi_encoder(train, TrainConfig(group_size=2), "models/bi", validation=val)  # doctest: +SKIP
    """
    config = dataclasses.replace(config or TrainConfig(), encoder="bi", loss="contrastive")
    return train_model(examples, config, output_dir, **options)


def train_cross_encoder(
    examples: pd.DataFrame,
    config: TrainConfig | None = None,
    output_dir: str | os.PathLike[str] = "model",
    **options: Any,
) -> TrainResult:
    """Fine-tune a cross-encoder on (query, text, label) examples and save it to ``output_dir``.

    Takes the arguments of :func:`train_model`.

    Raises:
        ValueError: ``config`` is a bi-encoder's (use :func:`train_bi_encoder`).

    Example:
        >>> from evirank.train import TrainConfig, train_cross_encoder  # doctest: +SKIP
        >>> cfg = TrainConfig(epochs=1)  # doctest: +SKIP
        >>> train_cross_encoder(train, cfg, "models/mb", validation=val)  # doctest: +SKIP
    """
    if config is not None and config.encoder != "cross":
        raise ValueError("train_cross_encoder trains a cross-encoder; use train_bi_encoder for encoder='bi'")
    return train_model(examples, config, output_dir, **options)


def train_model(
    examples: pd.DataFrame,
    config: TrainConfig | None = None,
    output_dir: str | os.PathLike[str] = "model",
    *,
    validation: pd.DataFrame | None = None,
    overwrite: bool = False,
    resume: bool = False,
    provenance: dict[str, Any] | None = None,
    step_callback: Callable[[int], None] | None = None,
) -> TrainResult:
    """Fine-tune the relevance model ``config`` asks for (cross- or bi-encoder) and save it to ``output_dir``.

    Args:
        examples: Examples [qid, query, text, label, ...] (see :mod:`evirank.train.examples`).
        config: hyper-parameters (defaults: :class:`TrainConfig`).
        output_dir: the model folder to create.
        validation: Examples of held-out queries (split by query!), scored after each epoch
            (and every ``validate_every_steps``); the best weights by the first measure are kept.
        overwrite: replace an existing ``output_dir``.
        resume: continue an interrupted run in ``output_dir`` (same config and data), or
            return at once if it completed.
        provenance: extra facts about the data (commands, files) for ``evirank-train.json``.
        step_callback: called with the step number after each optimizer step (and its
            checkpoint); raising in it interrupts training (as a kill would).

    Returns:
        A :class:`TrainResult`.

    Raises:
        OutputExistsError: ``output_dir`` exists and neither ``overwrite`` nor ``resume``.
        ValueError: bad examples, or a resume whose config or data differ.

    Example:
        >>> from evirank.train import TrainConfig, train_model  # doctest: +SKIP
        >>> train_model(train, TrainConfig(epochs=1), "models/mb", validation=val)  # doctest: +SKIP
    """
    config = config or TrainConfig()
    _check_examples(examples, "train: examples")
    if validation is not None:
        _check_examples(validation, "train: validation")
        leaked = set(examples[QID].astype(str)) & set(validation[QID].astype(str))
        if leaked:
            logger.warning(
                "%d queries are in both the training and validation examples (e.g. %s); split by query",
                len(leaked),
                sorted(leaked)[:3],
            )
    out = Path(output_dir)
    mode = prepare_output(out, overwrite=overwrite, resume=resume)
    if mode == "complete":
        logger.info("%s is already complete; nothing to resume", out)
        return result_from_json(out)
    recipe = recipe_for(config.encoder)
    if recipe is not None and config.init is None and config.model is None:
        raise ValueError(f"the {config.encoder} family has no default model: give --model (or --init)")
    items, objective = (
        recipe.objective(examples, config) if recipe is not None else _items_and_objective(examples, config)
    )
    source = config.init or config.model or _model.default_model_path()
    if config.hardest_negatives is not None:
        items = _hardest(items, config, source)
    init: dict[str, Any] = {
        "model": config.init or config.model or _model.DEFAULT_MODEL_NAME,
        "path": source,
        "continued_from_checkpoint": config.init is not None,
    }
    bi = config.encoder == "bi"
    metadata: dict[str, Any] = {
        "kind": recipe.kind if recipe is not None else "bi-encoder" if bi else "cross-encoder",
        "init": init,
        "data": {
            "train": _summary(examples),
            "validation": None if validation is None else _summary(validation),
            **({"provenance": provenance} if provenance else {}),
        },
    }
    fit = Fit(
        items=items,
        objective=objective,
        config=config,
        output_dir=out,
        validation=validation,
        metadata=metadata,
        step_callback=step_callback,
        recipe=recipe,
    )
    if mode == "resume":
        model, tokenizer, payload = fit.load_checkpoint()
        fit.metadata = payload["metadata"]
        return fit.run(model, tokenizer, payload)
    if recipe is not None:  # the family's own model and loss
        model, tokenizer = recipe.load(source, config)
        logger.info(
            "training %s %s on %d examples, %d queries", recipe.kind, source, len(items), items[QID].nunique()
        )
        return fit.run(model, tokenizer, None)
    if bi:
        model, tokenizer = load_encoder(source, dropout=config.dropout)
        logger.info(
            "training bi-encoder %s on %d positives, %d queries", source, len(items), items[QID].nunique()
        )
        return fit.run(model, tokenizer, None)
    if config.init is not None and not _model.has_classification_head(config.init):
        raise ValueError(
            f"--init {config.init} has no sequence-classification head; use --model for a plain encoder"
        )
    model, tokenizer, fresh_head = _model.load_classifier(
        source, num_labels=config.num_labels, dropout=config.dropout, seed=config.seed
    )
    init["fresh_head"] = fresh_head
    logger.info(
        "training %s (%s head) on %d examples, %d queries",
        source,
        "fresh" if fresh_head else "kept",
        len(items),
        items[QID].nunique(),
    )
    return fit.run(model, tokenizer, None)
