"""Flags shared by ``evirank train`` and ``evirank distill``: training data and optimisation.

Data flags may repeat; the examples of all of them are concatenated::

    --short-texts TOPICS QRELS RUN CORPUS        judged short texts (Birch's Microblog recipe)
    --documents TOPICS QRELS RUN CORPUS          document qrels -> passages (Dai & Callan)
    --evidence TOPICS EVIDENCE QRELS RUN CORPUS  sentence-level gold (SciFact rationales)
    --pairs FILE                                 TSV query/text/label or JSONL examples

The same flags with a ``val-`` prefix give validation examples; without them, a fraction of
the training queries is held out (split by query).

``--hard-negatives run:FILE|vectors:PATH`` mines the negatives of ``--documents`` and
``--evidence`` from another ranking (:mod:`evirank.train.mine`); validation examples always
come from the data flags' own runs, so recipes with different negatives are validated alike.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evirank.errors import UsageError
from evirank.frames import QID
from evirank.train.config import TrainConfig

if TYPE_CHECKING:
    from evirank.train.mine import HardNegatives

logger = logging.getLogger(__name__)

#: The training data settings (each repeatable, with a ``val_`` twin for validation).
DATA = ["short_texts", "documents", "evidence", "pairs"]
#: The settings of the example builders.
EXAMPLE_BUILDERS = [
    "unjudged",
    "depth",
    "val_depth",
    "passage_words",
    "passage_stride",
    "segment",
    "max_passages",
    "negative_depth",
    "negatives_per_query",
    "hard_negatives",
    "negative_skip",
    "negative_pick",
    "no_title",
    "evidence_title",
    "evidence_gold_only",
    "relevant_grade",
    "examples_out",
]
#: The optimisation settings (:class:`~evirank.train.config.TrainConfig`'s, by the same names).
OPTIMISATION = [
    "epochs",
    "batch_size",
    "gradient_accumulation",
    "learning_rate",
    "head_learning_rate",
    "weight_decay",
    "warmup_fraction",
    "dropout",
    "max_length",
    "max_steps",
    "seed",
    "device",
    "no_bf16",
    "eval_batch_size",
    "measures",
    "validate_every_steps",
    "patience",
    "save_every_steps",
    "keep_checkpoints",
    "model_threads",
    "overwrite",
    "resume",
]
#: What the shared settings mean, and their defaults, in training.
HELPS = {
    "depth": "short texts: candidates ranked at most this deep (default: all)",
    "segment": "documents: the passages as a segmenter spec, as rerank's --segment (sentences:prepend, "
    "windows:150:75, whole); overrides --passage-words, and the spec's title rule replaces --no-title",
    "max_passages": "documents: passages per document (0: all)",
    "max_length": "tokens per (query, text) pair",
    "seed": "seed of the head, the shuffling and the negatives",
    "measures": "validation measures (ir_measures names); the first selects the best checkpoint",
    "model_threads": "torch CPU threads (default: torch's choice)",
    "overwrite": "replace an existing output folder",
}


def add_training_flags(parser: argparse.ArgumentParser, defaults: TrainConfig) -> None:
    """The training/validation data flags, the builders' options and the optimisation flags
    (their defaults: ``defaults``, a :class:`TrainConfig`)."""
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        DATA + [f"val_{name}" for name in DATA] + ["validation_fraction"] + EXAMPLE_BUILDERS + OPTIMISATION,
        defaults={
            "depth": None,
            "segment": None,
            "max_passages": 4,
            **{name: getattr(defaults, name) for name in OPTIMISATION if hasattr(defaults, name)},
            "measures": defaults.validation_measures,
            "device": defaults.device,
        },
        helps=HELPS,
    )


def optimisation_config(args: argparse.Namespace, **fixed: Any) -> TrainConfig:
    """A :class:`TrainConfig` from the optimisation flags (plus ``fixed`` fields).

    Raises:
        UsageError: a flag out of its range (the message names the setting).
    """
    try:
        return _optimisation_config(args, **fixed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _optimisation_config(args: argparse.Namespace, **fixed: Any) -> TrainConfig:
    named = {f.name for f in fields(TrainConfig)}
    given = {name: getattr(args, name) for name in OPTIMISATION if name in named}
    return TrainConfig(
        **given,
        bf16=not args.no_bf16,
        validation_measures=tuple(args.measures),
        **fixed,
    )


def loss_at_both_ends(model_dir: str | Path) -> dict[str, float | int] | None:
    """The mean training loss of a finished run's first and last steps (a fiftieth of the run each,
    :func:`evirank.report.training.auto_window`), for the JSON ``train``, ``distill`` and ``adapt``
    print: did it learn? None, with a warning, when the folder's log cannot be read (the model is
    written all the same)."""
    from evirank.errors import InputFormatError
    from evirank.report.training import read_training_log, training_summary

    try:
        summary = training_summary(read_training_log(model_dir))
    except (FileNotFoundError, InputFormatError) as exc:
        logger.warning("no loss to show: %s", exc)
        return None
    return {"first": summary["first_loss"], "last": summary["last_loss"], "steps_averaged": summary["window"]}


def set_threads(args: argparse.Namespace) -> None:
    """Apply ``--model-threads`` to torch."""
    if args.model_threads:
        from evirank.extras import require

        require("torch", "torch").set_num_threads(args.model_threads)


def hard_negatives_of(args: argparse.Namespace, source: str | None = None) -> HardNegatives | None:
    """The miner ``--hard-negatives`` (or ``source``) asks for, with the builders' depth and count.

    Raises:
        UsageError: a bad source, or mining options without a source.
        InputPathError: the source's file or folder does not exist.
    """
    from evirank.train.mine import HardNegatives, NegativeSource

    spec = source if source is not None else args.hard_negatives
    if spec is None:
        if args.negative_skip or args.negative_pick != "top":
            raise UsageError("--negative-skip and --negative-pick apply to --hard-negatives")
        return None
    if not 0 <= args.negative_skip < args.negative_depth:
        raise UsageError(
            f"--negative-skip must be in [0, --negative-depth), found {args.negative_skip} "
            f"with depth {args.negative_depth}"
        )
    parsed = NegativeSource.parse(spec)
    parsed.check()
    return HardNegatives(
        parsed,
        depth=args.negative_depth,
        skip=args.negative_skip,
        per_query=args.negatives_per_query or None,
        pick=args.negative_pick,
        seed=args.seed,
        device=getattr(args, "device", None),
    )


def _load(
    args: argparse.Namespace, prefix: str, miner: HardNegatives | None = None
) -> tuple[list[pd.DataFrame], list[dict[str, Any]]]:
    from evirank.segment import SegmentSpec, Windows
    from evirank.train.examples import read_pairs
    from evirank.train.sources import load_documents, load_evidence, load_short_texts

    frames: list[pd.DataFrame] = []
    records: list[dict[str, Any]] = []
    depth = args.val_depth if prefix == "val_" else args.depth
    for topics, qrels, run, corpus in getattr(args, f"{prefix}short_texts") or ():
        frame, record = load_short_texts(
            topics,
            qrels,
            run,
            corpus,
            unjudged=args.unjudged,
            depth=depth,
            relevant_grade=args.relevant_grade,
        )
        frames.append(frame)
        records.append(record)
    for topics, qrels, run, corpus in getattr(args, f"{prefix}documents") or ():
        windows = args.passage_words > 0
        segment: Any = Windows(args.passage_words, args.passage_stride, title=True) if windows else None
        name = (
            f"{args.passage_words}-word windows, stride {args.passage_stride}"
            if windows
            else "whole document"
        )
        prepend_title = not args.no_title
        if getattr(args, "segment", None):
            spec = SegmentSpec.parse(args.segment)
            segment, name, prepend_title = spec.build(), spec.spec, True  # the spec's title rule
        frame, record = load_documents(
            topics,
            qrels,
            run,
            corpus,
            segment=segment,
            segment_name=name,
            max_passages=args.max_passages or None,
            negative_depth=args.negative_depth,
            negatives_per_query=args.negatives_per_query or None,
            relevant_grade=args.relevant_grade,
            prepend_title=prepend_title,
            hard_negatives=miner,
        )
        frames.append(frame)
        records.append(record)
    for topics, evidence, qrels, run, corpus in getattr(args, f"{prefix}evidence") or ():
        frame, record = load_evidence(
            topics,
            evidence,
            qrels,
            run,
            corpus,
            negative_depth=args.negative_depth,
            negatives_per_query=args.negatives_per_query or None,
            prepend_title=args.evidence_title,
            other_sentences=not args.evidence_gold_only,
            hard_negatives=miner,
        )
        frames.append(frame)
        records.append(record)
    for path in getattr(args, f"{prefix}pairs") or ():
        frame = read_pairs(path, relevant_grade=args.relevant_grade)
        frames.append(frame)
        records.append({"builder": "read_pairs", "files": {"pairs": str(path)}, "rows": len(frame)})
    for record in records:
        logger.info(
            "%s%s: %d examples",
            "validation " if prefix else "",
            record.get("source", record["files"]),
            record["rows"],
        )
    return frames, records


class TrainingData:
    """The examples the data flags describe, loaded once, with or without mined negatives.

    Validation examples (the ``--val-*`` flags, or the held-out share of the training queries)
    are the same whatever the negatives: they come from the data flags' own runs. The training
    examples with hard negatives are built for the training queries only.

    Example:
        >>> data = TrainingData(args)  # doctest: +SKIP
        >>> miner = hard_negatives_of(args, "run:x.txt")  # doctest: +SKIP
        >>> train, validation, provenance = data.examples(miner)  # doctest: +SKIP
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self._base: tuple[pd.DataFrame, pd.DataFrame | None, dict[str, Any]] | None = None

    def base(self) -> tuple[pd.DataFrame, pd.DataFrame | None, dict[str, Any]]:
        """Training examples, validation examples (or None) and provenance, from the data flags.

        Raises:
            UsageError: when no training data was given.
        """
        if self._base is not None:
            return self._base
        from evirank.train.examples import split_by_query

        args = self.args
        frames, records = _load(args, "")
        if not frames:
            raise UsageError("give training data (--short-texts, --documents, --evidence or --pairs)")
        train = pd.concat(frames, ignore_index=True)
        val_frames, val_records = _load(args, "val_")
        provenance: dict[str, Any] = {
            "command": sys.argv,
            "train_sources": records,
            "validation_sources": val_records,
        }
        validation: pd.DataFrame | None
        if val_frames:
            validation = pd.concat(val_frames, ignore_index=True)
        elif args.validation_fraction > 0:
            train, validation = split_by_query(train, args.validation_fraction, seed=args.seed)
            provenance["validation_split"] = {
                "by": "query",
                "fraction": args.validation_fraction,
                "seed": args.seed,
                "validation_qids": sorted(set(validation[QID])),
            }
        else:
            validation = None
        self._base = (train, validation, provenance)
        return self._base

    def examples(
        self, miner: HardNegatives | None
    ) -> tuple[pd.DataFrame, pd.DataFrame | None, dict[str, Any]]:
        """:meth:`base`, its training examples rebuilt with ``miner``'s negatives (None: as given).

        Raises:
            UsageError: ``miner`` without --documents or --evidence data to mine for.
        """
        train, validation, provenance = self.base()
        if miner is None:
            return train, validation, provenance
        args = self.args
        if not (args.documents or args.evidence):
            raise UsageError("--hard-negatives mines negatives for --documents and --evidence data")
        frames, records = _load(args, "", miner)
        mined = pd.concat(frames, ignore_index=True)
        split = provenance.get("validation_split")
        held_out = set(split["validation_qids"]) if split else set()
        mined = mined[~mined[QID].astype(str).isin(held_out)].reset_index(drop=True)
        provenance = {
            **provenance,
            "train_sources": records,
            "hard_negatives": {
                **miner.options(),
                "validation": "the data flags' own runs (not mined)",
            },
        }
        return mined, validation, provenance


def build_data(args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame | None, dict[str, Any]]:
    """Training examples, validation examples (or None) and the provenance record, from the flags.

    Raises:
        UsageError: when no training data was given.
    """
    from evirank.train.examples import write_examples

    train, validation, provenance = TrainingData(args).examples(hard_negatives_of(args))
    if args.examples_out:
        write_examples(train, args.examples_out, overwrite=args.overwrite or args.resume)
        provenance["examples_out"] = args.examples_out
    return train, validation, provenance
