"""Distillation: a smaller cross-encoder that learns a teacher's scores.

As in Simplified TinyBERT (Chen et al. 2021, measured in Steensland's thesis), the student
starts as the teacher cut down to some of its layers (by default its first half: the
embeddings, the first N encoder layers, the pooler and the classification head are copied),
and is trained on the teacher's relevance logits over (query, text) pairs:

* ``mse``: pointwise, the student's logit regresses the teacher's;
* ``margin-mse``: on (positive, negative) pairs of one query, the student's margin
  regresses the teacher's margin (Hofstätter et al.), which only asks for the same order.

After training, the teacher and the student are measured side by side (validation measures
and pairs per second), and the report goes into the student's ``evirank-train.json``.

Example:
    >>> from evirank.train.distillation import distill  # doctest: +SKIP
    >>> result = distill("models/minilm-mb", examples, DistillConfig(num_layers=3),
    ...                  "models/minilm-mb-l3", validation=validation)  # doctest: +SKIP
    >>> result.report["speedup"]  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evirank.extras import require
from evirank.frames import LABEL, QID, QUERY, TEXT, require_columns
from evirank.outputs import atomic_file
from evirank.record import write_record
from evirank.score import relevance_from_logits
from evirank.score.devices import resolve_device
from evirank.score.fingerprint import model_fingerprint
from evirank.train import _model
from evirank.train.config import DistillConfig, TrainConfig
from evirank.train.recipe import recipe_for
from evirank.train.trainer import (
    CHECKPOINT_DIR,
    TRAIN_JSON,
    Fit,
    TrainResult,
    _compatible,
    _summary,
    _validation_measures,
    check_finished,
    examples_fingerprint,
    fingerprint,
    prepare_output,
    result_from_json,
)

logger = logging.getLogger(__name__)

TARGET = "target"  # internal column: the teacher's relevance logit (or margin) to regress
TEXT_B = "text_b"  # internal column: the negative text of a margin pair
_LAYER = re.compile(r"\.layer\.(\d+)\.")


@dataclass
class DistillResult:
    """A distilled student and its comparison with the teacher.

    Attributes:
        train: the student's training result.
        report: teacher and student side by side: layers, parameters, pairs per second,
            validation measures, and the speed-up.
    """

    train: TrainResult
    report: dict[str, Any]


def num_layers(config: Any) -> int:
    """The encoder depth of a transformers config."""
    for key in ("num_hidden_layers", "n_layers", "num_layers"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    raise ValueError(f"cannot tell the number of layers of a {type(config).__name__}")


def student_layers(teacher_depth: int, config: DistillConfig) -> list[int]:
    """The teacher layers the student keeps: ``config.layers``, or the first ``num_layers``
    (default: half the teacher's depth, rounded up).

    Example:
        >>> student_layers(6, DistillConfig())
        [0, 1, 2]
        >>> student_layers(6, DistillConfig(layers=(0, 2, 4)))
        [0, 2, 4]
    """
    if config.layers is not None:
        layers = list(config.layers)
    else:
        layers = list(range(config.num_layers or math.ceil(teacher_depth / 2)))
    if not layers or max(layers) >= teacher_depth or len(set(layers)) != len(layers):
        raise ValueError(
            f"student layers {layers} must be distinct indices of the teacher's {teacher_depth} layers"
        )
    return layers


def make_student(teacher: Any, layers: Sequence[int]) -> Any:
    """A copy of ``teacher`` (a sequence classifier) that keeps only the encoder ``layers``.

    Embeddings, pooler and classification head are copied as they are; student layer i is
    the teacher's layer ``layers[i]``.

    Raises:
        ValueError: if a student weight has no counterpart in the teacher.
    """
    transformers = require("transformers", "torch")
    depth = num_layers(teacher.config)
    if not layers or max(layers) >= depth:
        raise ValueError(f"layers {list(layers)} are not all among the teacher's {depth} layers")
    config = copy.deepcopy(teacher.config)
    config.num_hidden_layers = len(layers)
    student = transformers.AutoModelForSequenceClassification.from_config(config)
    source = teacher.state_dict()
    weights = {}
    for key in student.state_dict():
        match = _LAYER.search(key)
        origin = (
            key
            if match is None
            else f"{key[: match.start(1)]}{layers[int(match.group(1))]}{key[match.end(1) :]}"
        )
        if origin not in source:
            raise ValueError(f"student weight {key} has no teacher weight {origin}")
        weights[key] = source[origin].detach().clone()
    student.load_state_dict(weights)
    return student


class PointwiseMSE:
    """MSE between the student's and the teacher's relevance logits."""

    name = "distill-mse"
    columns: tuple[str, ...] = (QUERY, TEXT, TARGET)
    pairs_per_item = 1

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        torch = require("torch", "torch")
        inputs = _model.encode(
            tokenizer, rows[QUERY].tolist(), rows[TEXT].tolist(), config.max_length, device
        )
        scores = relevance_from_logits(model(**inputs).logits.float())
        return torch.nn.functional.mse_loss(scores, _model.tensor_labels(rows[TARGET].to_numpy(), device))

    def validation_loss(self, scores: np.ndarray, rows: pd.DataFrame) -> float:
        return float(np.mean((scores - rows[TARGET].to_numpy(dtype=np.float64)) ** 2))


class MarginMSE(PointwiseMSE):
    """MSE between the student's and the teacher's margins on (text, text_b) pairs of a query."""

    name = "distill-margin-mse"
    columns: tuple[str, ...] = (QUERY, TEXT, TEXT_B, TARGET)
    pairs_per_item = 2  # (query, text) and (query, text_b)

    def loss(self, model: Any, tokenizer: Any, rows: pd.DataFrame, config: TrainConfig, device: str) -> Any:
        torch = require("torch", "torch")
        queries = rows[QUERY].tolist()
        inputs = _model.encode(
            tokenizer,
            queries + queries,
            rows[TEXT].tolist() + rows[TEXT_B].tolist(),
            config.max_length,
            device,
        )
        scores = relevance_from_logits(model(**inputs).logits.float())
        margins = scores[: len(rows)] - scores[len(rows) :]
        return torch.nn.functional.mse_loss(margins, _model.tensor_labels(rows[TARGET].to_numpy(), device))


def margin_pairs(scored: pd.DataFrame, per_positive: int, seed: int) -> pd.DataFrame:
    """(text, text_b, target) pairs within each query, target = teacher(text) - teacher(text_b).

    With labels: each positive is paired with ``per_positive`` random negatives of its query.
    Queries without both kinds (or rows without labels) pair each row with ``per_positive``
    random other rows of the query.

    Example:
        >>> rows = pd.DataFrame({"qid": ["1"] * 3, "query": ["q"] * 3, "text": ["a", "b", "c"],
        ...                      "label": [1, 0, 0], "target": [2.0, 0.5, -1.0]})
        >>> sorted(margin_pairs(rows, 2, seed=0)["target"].tolist())
        [1.5, 3.0]
    """
    rng = np.random.default_rng(seed)
    out: list[tuple[str, str, str, str, float]] = []
    for qid, group in scored.groupby(QID, sort=False):
        texts, targets = group[TEXT].to_numpy(), group[TARGET].to_numpy(dtype=np.float64)
        query = str(group[QUERY].iloc[0])
        labels = group[LABEL].to_numpy() if LABEL in group.columns else np.full(len(group), -1)
        positives, negatives = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
        if len(positives) and len(negatives):
            for i in positives:
                for j in rng.choice(negatives, size=min(per_positive, len(negatives)), replace=False):
                    out.append((str(qid), query, texts[i], texts[j], float(targets[i] - targets[j])))
        elif len(group) > 1:
            for a in range(len(group)):
                others = np.delete(np.arange(len(group)), a)
                for b in rng.choice(others, size=min(per_positive, len(others)), replace=False):
                    out.append((str(qid), query, texts[a], texts[b], float(targets[a] - targets[b])))
    return pd.DataFrame(out, columns=[QID, QUERY, TEXT, TEXT_B, TARGET])


def _teacher_scores(
    teacher: Any, tokenizer: Any, frames: dict[str, pd.DataFrame], cfg: TrainConfig, device: str, cache: Path
) -> dict[str, np.ndarray]:
    """The teacher's relevance logits of each frame, cached in ``cache`` (an .npz) for resumes.

    The cache holds a key of what the scores depend on (the teacher's files, the frames' rows, the
    maximum length and precision); a cache of other scores, or one that cannot be read (damaged,
    cut short), is computed again, with a warning naming it.
    """
    key = _teacher_key(teacher, frames, cfg)
    if cache.exists():
        try:
            with np.load(cache) as stored:
                found = {name: np.array(stored[name]) for name in stored.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            logger.warning(
                "%s: the cached teacher scores cannot be read (%s); computing them again", cache, exc
            )
            found = {}
        if found and str(found.get(_KEY, np.array("")).item()) == key:
            logger.info("teacher scores read from %s", cache)
            return {name: found[name] for name in frames}
        if found:
            logger.warning(
                "%s: cached teacher scores of another teacher or other examples; computing them again", cache
            )
    scores = {
        name: _model.predict_relevance(
            teacher,
            tokenizer,
            frame[QUERY].tolist(),
            frame[TEXT].tolist(),
            batch_size=cfg.eval_batch_size,
            max_length=cfg.max_length,
            device=device,
            bf16=cfg.bf16,
            desc=f"teacher {name}",
        )
        for name, frame in frames.items()
    }
    with atomic_file(cache) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **scores, **{_KEY: np.array(key)})  # type: ignore[arg-type]
    return scores


_KEY = "__key__"


def _teacher_key(teacher: Any, frames: dict[str, pd.DataFrame], cfg: TrainConfig) -> str:
    """What the teacher's scores depend on, as one hex string."""
    folder = Path(str(getattr(teacher, "name_or_path", "") or ""))
    model = model_fingerprint(folder, {}) if (folder / "config.json").is_file() else str(folder)
    rows = {name: fingerprint(frame, (QUERY, TEXT)) for name, frame in frames.items()}
    payload = {"teacher": model, "rows": rows, "max_length": cfg.max_length, "bf16": cfg.bf16}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _parameters(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def distill(
    teacher: str | os.PathLike[str],
    examples: pd.DataFrame,
    config: DistillConfig | None = None,
    output_dir: str | os.PathLike[str] = "student",
    *,
    validation: pd.DataFrame | None = None,
    overwrite: bool = False,
    resume: bool = False,
    provenance: dict[str, Any] | None = None,
    speed_pairs: int = 512,
    speed_rounds: int = 3,
    step_callback: Callable[[int], None] | None = None,
) -> DistillResult:
    """Distil ``teacher`` (a relevance model folder or Hub id) into a student in ``output_dir``.

    Args:
        teacher: the teacher cross-encoder (with its classification head).
        examples: the (query, text) pairs to learn the teacher's scores on: [qid, query,
            text] and, for ``margin-mse`` positives, ``label`` (e.g. training examples, or
            a run's candidates).
        config: student layers, loss and optimisation (:class:`DistillConfig`).
        output_dir: the student's model folder.
        validation: labelled Examples of held-out queries: the student is validated as in
            fine-tuning (best checkpoint, early stopping), and the teacher is measured on them.
        overwrite: replace an existing ``output_dir``.
        resume: continue an interrupted distillation (same settings and data).
        provenance: extra facts for ``evirank-train.json``.
        speed_pairs: pairs timed for the teacher/student speed comparison (0: no timing).
        speed_rounds: alternating timing rounds; each model's best round is reported.
        step_callback: as in :func:`~evirank.train.train_cross_encoder`.

    Returns:
        A :class:`DistillResult`.
    """
    config = config or DistillConfig()
    cfg = config.train
    require_columns(examples, (QID, QUERY, TEXT), "distill: examples")
    if examples.empty:
        raise ValueError("distill: no examples")
    if validation is not None:
        require_columns(validation, (QID, QUERY, TEXT, LABEL), "distill: validation")
    out = Path(output_dir)
    mode = prepare_output(out, overwrite=overwrite, resume=resume)
    data_fingerprint = examples_fingerprint(examples, validation)
    if mode == "complete":
        check_finished(out, lambda record: _distill_changes(record, str(teacher), config), data_fingerprint)
        payload = json.loads((out / TRAIN_JSON).read_text(encoding="utf-8"))
        return DistillResult(result_from_json(out), payload.get("distillation", {}))
    device = resolve_device(cfg.device)
    teacher_model, tokenizer = _load_teacher(teacher, device)
    frames = {"train": examples.reset_index(drop=True)}
    if validation is not None:
        frames["validation"] = validation.reset_index(drop=True)
    scores = _teacher_scores(
        teacher_model, tokenizer, frames, cfg, device, out / CHECKPOINT_DIR / "teacher.npz"
    )
    layers = student_layers(num_layers(teacher_model.config), config)
    fit = _student_fit(
        str(teacher), teacher_model, frames, scores, layers, config, out, provenance, step_callback
    )
    fit.metadata["examples_fingerprint"] = data_fingerprint
    if mode == "resume":
        student, tokenizer, payload = fit.load_checkpoint()
        fit.metadata = payload["metadata"]
        result = fit.run(student, tokenizer, payload)
    else:
        torch = require("torch", "torch")
        torch.manual_seed(cfg.seed)
        with _model.quiet_transformers():
            student = make_student(teacher_model, layers)
        logger.info(
            "distilling %s (%d layers) into layers %s on %d %s items",
            teacher,
            num_layers(teacher_model.config),
            layers,
            len(fit.items),
            config.loss,
        )
        result = fit.run(student, tokenizer, None)
    report = _compare(
        teacher_model, out, tokenizer, frames, scores, layers, cfg, device, speed_pairs, speed_rounds
    )
    _add_to_record(out, report)
    return DistillResult(result, report)


def _distill_changes(record: dict[str, Any], teacher: str, config: DistillConfig) -> list[str]:
    """The settings (teacher, distillation, optimisation) that differ from a finished student's."""
    saved = dict(record.get("distill_config") or {})
    current = config.to_dict()
    changed = [f"train.{name}" for name in _compatible(dict(saved.get("train") or {}), current["train"])]
    changed += sorted(k for k in current if k != "train" and saved.get(k) != current[k])
    if (record.get("init") or {}).get("model") != teacher:
        changed.append("teacher")
    return changed


def _load_teacher(teacher: str | os.PathLike[str], device: str) -> tuple[Any, Any]:
    """The teacher model (on ``device``) and its tokenizer.

    Raises:
        InputFormatError: the teacher has no trained relevance head (a bi-encoder or a plain
            encoder: its head would be initialised at random, and the student would learn noise),
            or its weights cannot be read.
    """
    from evirank.errors import InputFormatError
    from evirank.score.fingerprint import reading_model

    transformers = require("transformers", "torch")
    teacher = _model.model_source(str(teacher))
    local = Path(teacher) if Path(teacher).is_dir() else None
    with _model.quiet_transformers(), reading_model(local):
        model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
            teacher, output_loading_info=True
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(teacher)
    missing = sorted(info.get("missing_keys", ()))
    if missing:
        shown = ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise InputFormatError(
            teacher,
            None,
            "a teacher with a trained relevance head (a cross-encoder: *ForSequenceClassification)",
            f"a model whose {len(missing)} parameter(s) {shown} are not in its checkpoint and would be "
            "random (a bi-encoder or a plain encoder?)",
            hint="train a cross-encoder first (evirank train), then distil it",
        )
    return model.to(device), tokenizer


def _student_fit(
    teacher: str,
    teacher_model: Any,
    frames: dict[str, pd.DataFrame],
    scores: dict[str, np.ndarray],
    layers: list[int],
    config: DistillConfig,
    out: Path,
    provenance: dict[str, Any] | None,
    step_callback: Callable[[int], None] | None,
) -> Fit:
    """The training loop of the student: its items (the teacher's targets), objective and metadata."""
    cfg = config.train
    scored = frames["train"].assign(**{TARGET: scores["train"]})
    validation = frames.get("validation")
    scored_validation = None if validation is None else validation.assign(**{TARGET: scores["validation"]})
    if config.loss == "margin-mse":
        items: pd.DataFrame = margin_pairs(scored, config.pairs_per_positive, cfg.seed)
        objective: PointwiseMSE = MarginMSE()
    else:
        items, objective = scored, PointwiseMSE()
    if items.empty:
        raise ValueError("distill: no training pairs (margin-mse needs queries with two or more texts)")
    examples = frames["train"]
    metadata = {
        "kind": "cross-encoder (distilled)",
        "init": {"model": teacher, "teacher_layers_kept": layers, "continued_from_checkpoint": False},
        "distill_config": config.to_dict(),
        "data": {
            "train": _summary(examples) if LABEL in examples.columns else {"rows": len(examples)},
            "validation": None if validation is None else _summary(validation),
            "items": len(items),
            **({"provenance": provenance} if provenance else {}),
        },
    }
    train_config = TrainConfig(
        **{
            **cfg.to_dict(),
            "validation_measures": cfg.validation_measures,
            "model": teacher,
            "init": None,
            "num_labels": teacher_model.config.num_labels,
        }
    )
    return Fit(
        items=items,
        objective=objective,
        config=train_config,
        output_dir=out,
        validation=scored_validation,
        metadata=metadata,
        step_callback=step_callback,
        recipe=recipe_for(train_config.encoder),
    )


def _add_to_record(out: Path, report: dict[str, Any]) -> None:
    """Add the teacher/student comparison to the student's ``evirank-train.json``."""
    payload = json.loads((out / TRAIN_JSON).read_text(encoding="utf-8"))
    for key in ("command", "versions"):  # written afresh
        payload.pop(key, None)
    write_record(out / TRAIN_JSON, "distill", payload.pop("config"), **payload, distillation=report)


def _compare(
    teacher: Any,
    student_dir: Path,
    tokenizer: Any,
    frames: dict[str, pd.DataFrame],
    teacher_scores: dict[str, np.ndarray],
    layers: list[int],
    cfg: TrainConfig,
    device: str,
    speed_pairs: int,
    speed_rounds: int,
) -> dict[str, Any]:
    """Teacher and student side by side: depth, parameters, pairs/s, validation measures."""
    transformers = require("transformers", "torch")
    with _model.quiet_transformers():
        student = transformers.AutoModelForSequenceClassification.from_pretrained(student_dir).to(device)
    rows: dict[str, Any] = {
        "teacher": {"layers": num_layers(teacher.config), "parameters": _parameters(teacher)},
        "student": {"layers": len(layers), "teacher_layers": layers, "parameters": _parameters(student)},
    }
    validation = frames.get("validation")
    if validation is not None:
        student_scores = _model.predict_relevance(
            student,
            tokenizer,
            validation[QUERY].tolist(),
            validation[TEXT].tolist(),
            batch_size=cfg.eval_batch_size,
            max_length=cfg.max_length,
            device=device,
            bf16=cfg.bf16,
            desc="student validation",
        )
        rows["teacher"].update(
            _validation_measures(teacher_scores["validation"], validation, cfg.validation_measures)
        )
        rows["student"].update(_validation_measures(student_scores, validation, cfg.validation_measures))
        rows["student"]["mse_to_teacher"] = float(
            np.mean((student_scores - teacher_scores["validation"]) ** 2)
        )
    if speed_pairs > 0:
        pool = validation if validation is not None else frames["train"]
        sample = pool.sample(n=min(speed_pairs, len(pool)), random_state=cfg.seed)
        queries, texts = sample[QUERY].tolist(), sample[TEXT].tolist()
        # Best of alternating rounds: on a shared machine the fastest round is the least disturbed.
        best = {"teacher": 0.0, "student": 0.0}
        for _ in range(speed_rounds):
            for name, model in (("teacher", teacher), ("student", student)):
                rate = _model.speed(
                    model,
                    tokenizer,
                    queries,
                    texts,
                    batch_size=cfg.eval_batch_size,
                    max_length=cfg.max_length,
                    device=device,
                    bf16=cfg.bf16,
                )
                best[name] = max(best[name], rate)
        for name, rate in best.items():
            rows[name]["pairs_per_s"] = round(rate, 2)
        rows["speedup"] = round(rows["student"]["pairs_per_s"] / rows["teacher"]["pairs_per_s"], 3)
        rows["speed"] = {
            "rounds": speed_rounds,
            "pairs": len(sample),
            "batch_size": cfg.eval_batch_size,
            "device": device,
            "threads": require("torch", "torch").get_num_threads(),
        }
    return rows
