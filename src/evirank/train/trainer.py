"""Fine-tuning relevance models: :func:`train_model`, with validation, best checkpoint, early
stopping and exact resume, for every model family that has a training recipe.

What differs between families (how the initial model loads, the items and loss, how validation
examples are scored, how a checkpoint reloads, what is written beside the weights) is the
family's :class:`~evirank.train.recipe.Recipe`; this module never asks which kind of model it
trains.

The output folder is a standard Hugging Face model folder (``config.json``,
``model.safetensors``, tokenizer files) that ``transformers``, sentence-transformers'
``CrossEncoder`` and ``evirank.score.CrossEncoder`` load, plus:

* ``evirank-train.json``: config, library versions, data provenance, validation history,
  the best step, timings; written last, so its presence means the folder is complete;
* ``train-log.jsonl``: one JSON record per optimizer step (loss, learning rate) and per
  validation (loss and ranking measures);
* ``checkpoint/`` while training (removed at the end unless ``keep_checkpoints``):
  ``last/`` (weights, optimizer, scheduler, RNG states, step counters: what resume needs) and
  ``best/`` (the best validated weights), each with the size and sha256 of its files
  (``checksums.json``), checked before it is read: a damaged checkpoint is an error naming it.

Resume is exact, and checked: a resume with other settings or other examples is refused, even
of a finished model (which a resume otherwise returns as it is). The data order of each epoch is
a function of (seed, epoch), and the checkpoint holds the optimizer, scheduler and RNG states, so
an interrupted run resumed with ``resume=True`` ends with the same weights as an uninterrupted
one (bitwise on CPU).

Example:
    >>> from evirank.train import TrainConfig, train_cross_encoder  # doctest: +SKIP
    >>> result = train_cross_encoder(examples, TrainConfig(epochs=1), "models/mb",
    ...                              validation=validation)  # doctest: +SKIP
    >>> result.best["AP"]  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import pandas as pd

from evirank.checksums import has_checksums, verify_checksums, write_checksums
from evirank.errors import EvirankError, OutputExistsError, OutputWriteError
from evirank.extras import require
from evirank.frames import DOCNO, LABEL, QID, QUERY, SCORE, SOURCE, TEXT, require_columns
from evirank.outputs import atomic_file, check_output, recovered, write_failure
from evirank.progress import progress_bar
from evirank.record import plain, write_record
from evirank.score.devices import resolve_device
from evirank.train import _model
from evirank.train.config import TrainConfig
from evirank.train.examples import summarize_examples
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


def examples_fingerprint(examples: pd.DataFrame, validation: pd.DataFrame | None = None) -> str:
    """A SHA-256 of every column of the training (and validation) examples, row by row: what a
    resume of a finished model checks its data against.

    Example:
        >>> a = pd.DataFrame({"qid": ["1"], "query": ["q"], "text": ["t"], "label": [1]})
        >>> examples_fingerprint(a) == examples_fingerprint(a.assign(label=0))
        False
    """
    parts = [fingerprint(examples, tuple(sorted(map(str, examples.columns))))]
    if validation is not None:
        parts.append(fingerprint(validation, tuple(sorted(map(str, validation.columns)))))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class ResumeMismatchError(EvirankError, ValueError):
    """``resume`` was asked with other settings or other examples than the run it would continue."""


def settings_changed(record: dict[str, Any], config: TrainConfig) -> list[str]:
    """The settings of ``config`` that differ from those a finished model's record holds."""
    return _compatible(dict(record.get("config") or {}), config.to_dict())


def check_finished(
    output_dir: Path, changes: Callable[[dict[str, Any]], list[str]], data_fingerprint: str
) -> None:
    """Refuse to "resume" a finished model with other settings or other examples.

    A finished folder is returned as it is by a resume; that is only right when the resume asks
    for what it was trained with (its ``evirank-train.json`` records the settings and the examples'
    fingerprint, :func:`examples_fingerprint`).

    Args:
        output_dir: the finished model folder.
        changes: the settings that differ, given the folder's record (:func:`settings_changed`).
        data_fingerprint: the examples' :func:`examples_fingerprint`.

    Raises:
        ResumeMismatchError: naming the folder and what differs.
    """
    record = json.loads((output_dir / TRAIN_JSON).read_text(encoding="utf-8"))
    changed = changes(record)
    if changed:
        raise ResumeMismatchError(
            f"cannot resume {output_dir}: it is a finished model trained with other settings "
            f"({', '.join(changed)} differ); run with the same settings, train into a new folder, "
            "or pass --overwrite to train it again"
        )
    stored = record.get("examples_fingerprint")
    if stored is None:
        logger.warning(
            "%s records no fingerprint of its examples (an older evirank): not checked", output_dir
        )
    elif stored != data_fingerprint:
        raise ResumeMismatchError(
            f"cannot resume {output_dir}: it is a finished model trained on other examples; "
            "train into a new folder, or pass --overwrite to train it again on these"
        )


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

    Not part of the public API: use :func:`train_model` or :func:`evirank.train.distill`.
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
        recipe: Recipe,
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
        """The model saved in ``folder``, as the family's recipe loads it."""
        return self.recipe.reload(folder)

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
        """AdamW; weight decay on matrices only; the parameters the recipe names as a new head
        train at ``head_learning_rate`` when the config sets one."""
        cfg = self.config
        head = self.recipe.head_parameters(model) if cfg.head_learning_rate is not None else set()
        groups: dict[tuple[bool, bool], list[Any]] = {}
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            decays = not (param.ndim < 2 or "LayerNorm" in name or "layer_norm" in name)
            groups.setdefault((name in head, decays), []).append(param)
        ordered = [(False, True), (False, False), (True, True), (True, False)]
        return self.torch.optim.AdamW(
            [
                {
                    "params": groups.get(key, []),
                    "weight_decay": cfg.weight_decay if key[1] else 0.0,
                    "lr": cfg.head_learning_rate if key[0] else cfg.learning_rate,
                }
                for key in ordered
                if key in groups or not key[0]  # the encoder's two groups always, as before
            ],
            lr=cfg.learning_rate,
        )

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
            write_checksums(tmp)  # checked before a resume reads it
        logger.debug("checkpoint at step %d", self.state.step)

    def _save_best(self, model: Any) -> None:
        with atomic_file(self.checkpoint_dir / "best") as tmp:
            model.save_pretrained(tmp)
            write_checksums(tmp)  # checked before the final model is made of it

    def _checked(self, folder: Path, what: str) -> Path:
        """``folder`` (a checkpoint), after checking its files against their checksums.

        Raises:
            DamagedArtefactError: naming the checkpoint and what differs.
        """
        if not has_checksums(folder):
            logger.warning("%s has no checksums (an older evirank wrote it): not checked", folder)
            return folder
        verify_checksums(
            folder, what, f"it cannot be used: train again with --overwrite (or remove {self.out} first)"
        )
        return folder

    def load_checkpoint(self) -> tuple[Any, Any, dict[str, Any]]:
        """The model and tokenizer of ``checkpoint/last`` and its saved payload (checked)."""
        last = recovered(self.checkpoint_dir / "last")
        if last is None:  # pragma: no cover - prepare_output checked it
            raise FileNotFoundError(self.checkpoint_dir / "last")
        self._checked(last, "training checkpoint")
        payload = json.loads((last / "state.json").read_text(encoding="utf-8"))
        changed = _compatible(payload["config"], self.config.to_dict())
        if changed:
            raise ResumeMismatchError(
                f"cannot resume {self.out}: the config differs in {changed}; resume with the same settings "
                "or train into a new folder"
            )
        if payload["fingerprint"] != self.fingerprint:
            raise ResumeMismatchError(
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
        scores, rows = self.recipe.validate(model, tokenizer, self.validation, cfg, self.device)
        record: dict[str, Any] = {
            "event": "validation",
            "step": self.state.step,
            "epoch": self.state.epoch,
            "val_loss": self.objective.validation_loss(scores, rows),
        }
        record.update(_validation_measures(scores, rows, cfg.validation_measures))
        return record

    # -- the loop ----------------------------------------------------------------------
    def start(self, mode: str, source: str, init: dict[str, Any], announce: str = "") -> TrainResult:
        """Continue from the checkpoint (``mode`` "resume"), or load ``source`` through the recipe
        (its facts added to ``init``), log ``announce`` and train from the start."""
        if mode == "resume":
            model, tokenizer, payload = self.load_checkpoint()
            self.metadata = payload["metadata"]
            return self.run(model, tokenizer, payload)
        model, tokenizer, facts = self.recipe.load(source, self.config)
        init.update(facts)
        if announce:
            logger.info("%s", announce)
        return self.run(model, tokenizer, None)

    def run(self, model: Any, tokenizer: Any, resume_payload: dict[str, Any] | None) -> TrainResult:
        """Train ``model`` (fresh, or restored from the checkpoint's ``resume_payload``) and save it."""
        with _model.quiet_transformers():
            try:
                return self._run(model, tokenizer, resume_payload)
            except OutputWriteError as exc:  # a full disk: say what the rerun continues from
                raise self._write_failed(exc.reason) from exc
            except OSError as exc:
                reason = write_failure(exc)
                if reason is None:
                    raise
                raise self._write_failed(reason) from exc

    def _write_failed(self, reason: str) -> OutputWriteError:
        """The training output could not be written: what is kept, and that ``--resume`` goes on."""
        last = recovered(self.checkpoint_dir / "last")
        kept = (
            f"the last complete checkpoint is kept in {self.checkpoint_dir}"
            if last is not None
            else "no checkpoint was complete yet, so a rerun starts over"
        )
        return OutputWriteError(
            self.out, reason, kept=kept, hint="free some space, then run the same command with --resume"
        )

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

    def _finish(self, model: Any, tokenizer: Any, total: int) -> TrainResult:
        best_dir = recovered(self.checkpoint_dir / "best")
        if best_dir is not None:
            model = self._reload(self._checked(best_dir, "checkpoint of the best validated weights"))
        for name in ("config.json", "model.safetensors"):
            (self.out / name).unlink(missing_ok=True)
        model.save_pretrained(self.out)
        tokenizer.save_pretrained(self.out)
        self.recipe.finish(self.out, model, self.config)
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
            "score": self.recipe.score_rule(self.config),
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
    """Fine-tune the model family ``config.encoder`` names (its recipe: :mod:`evirank.train.recipe`)
    and save it to ``output_dir``.

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
    data_fingerprint = examples_fingerprint(examples, validation)
    if mode == "complete":
        check_finished(out, lambda record: settings_changed(record, config), data_fingerprint)
        logger.info("%s is already complete; nothing to resume", out)
        return result_from_json(out)
    recipe = recipe_for(config.encoder)
    if config.init is not None and not recipe.continues:
        raise ValueError(f"init continues a relevance model with its head; a {recipe.kind} starts from model")
    default = None if config.init or config.model else recipe.default_model()
    if config.init is None and config.model is None and default is None:
        raise ValueError(f"the {config.encoder} family has no default model: give --model (or --init)")
    source = config.init or config.model or default
    assert source is not None
    items, objective = recipe.objective(examples, config, source)
    init: dict[str, Any] = {
        "model": config.init or config.model or _model.DEFAULT_MODEL_NAME,
        "path": source,
        "continued_from_checkpoint": config.init is not None,
    }
    metadata: dict[str, Any] = {
        "examples_fingerprint": data_fingerprint,
        "kind": recipe.kind,
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
    announce = f"training {recipe.kind} {source} on {len(items)} items, {items[QID].nunique()} queries"
    return fit.start(mode, source, init, announce)


def fit_prepared(
    recipe: Recipe,
    config: TrainConfig,
    output_dir: Path,
    data_fingerprint: str,
    prepare: Callable[[str], tuple[pd.DataFrame, Objective, dict[str, Any], str]],
    *,
    overwrite: bool = False,
    resume: bool = False,
    step_callback: Callable[[int], None] | None = None,
) -> TrainResult:
    """Train ``recipe``'s model, from ``config.model`` (else the recipe's default), on the items
    ``prepare(source)`` makes, with no validation: for trainings that build their own items and loss
    (``evirank adapt``'s tsdae).

    ``prepare`` returns (items, objective, facts for ``evirank-train.json``, the line to log) and
    runs only when there is training to do: a completed ``output_dir`` is returned as it is, after
    checking that its settings and ``data_fingerprint`` are these.
    """
    source = config.model or recipe.default_model()
    assert source is not None
    config = replace(config, model=source)
    mode = prepare_output(output_dir, overwrite=overwrite, resume=resume)
    if mode == "complete":
        check_finished(output_dir, lambda record: settings_changed(record, config), data_fingerprint)
        return result_from_json(output_dir)
    items, objective, facts, announce = prepare(source)
    init: dict[str, Any] = {"model": source, "path": source, "continued_from_checkpoint": False}
    metadata = {"examples_fingerprint": data_fingerprint, "kind": recipe.kind, "init": init, **facts}
    fit = Fit(
        items=items,
        objective=objective,
        config=config,
        output_dir=output_dir,
        validation=None,
        metadata=metadata,
        step_callback=step_callback,
        recipe=recipe,
    )
    return fit.start(mode, source, init, announce)
