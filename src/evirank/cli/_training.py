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
from typing import TYPE_CHECKING, Any

import pandas as pd

from evirank.errors import UsageError
from evirank.frames import QID
from evirank.train.config import TrainConfig

if TYPE_CHECKING:
    from evirank.train.mine import HardNegatives

logger = logging.getLogger(__name__)

_KINDS = (
    (
        "short_texts",
        "short-texts",
        ("TOPICS", "QRELS", "RUN", "CORPUS"),
        "judged candidates of a run over short texts (graded labels collapsed to binary)",
    ),
    (
        "documents",
        "documents",
        ("TOPICS", "QRELS", "RUN", "CORPUS"),
        "documents with document-level qrels: passages of relevant documents are relevant",
    ),
    (
        "evidence",
        "evidence",
        ("TOPICS", "EVIDENCE", "QRELS", "RUN", "CORPUS"),
        "sentence-level gold (JSONL query-id, corpus-id, evidence); negatives from the run",
    ),
)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The training/validation data flags and the builders' options."""
    data = parser.add_argument_group("training data (repeatable; all are concatenated)")
    for prefix, help_prefix in (("", ""), ("val-", "validation: ")):
        group = data if not prefix else parser.add_argument_group("validation data (default: split by query)")
        for dest, flag, metavar, text in _KINDS:
            group.add_argument(
                f"--{prefix}{flag}",
                dest=f"{prefix.replace('-', '_')}{dest}",
                nargs=len(metavar),
                metavar=metavar,
                action="append",
                default=[],
                help=help_prefix + text,
            )
        group.add_argument(
            f"--{prefix}pairs",
            dest=f"{prefix.replace('-', '_')}pairs",
            metavar="FILE",
            action="append",
            default=[],
            help=help_prefix + "a pair file: TSV query<TAB>text<TAB>label, or JSONL examples",
        )
    parser.add_argument(
        "--validation-fraction",
        type=float,
        default=0.25,
        help="without --val-* data: share of training queries held out (0: no validation)",
    )
    options = parser.add_argument_group("example builders")
    options.add_argument(
        "--unjudged",
        choices=("skip", "negative"),
        default="skip",
        help="short texts: unjudged candidates skipped (default; Birch trained on judged "
        "tweets) or used as negatives",
    )
    options.add_argument(
        "--depth", type=int, default=None, help="short texts: candidates ranked at most this deep"
    )
    options.add_argument(
        "--val-depth",
        type=int,
        default=None,
        help="validation short texts: candidates ranked at most this deep",
    )
    options.add_argument(
        "--passage-words",
        type=int,
        default=0,
        help="documents: passages of this many words (0: the whole document; Dai & Callan: 150)",
    )
    options.add_argument(
        "--passage-stride", type=int, default=75, help="documents: words between passage starts"
    )
    options.add_argument(
        "--segment",
        metavar="SPEC",
        default=None,
        help="documents: the passages as a segmenter spec, as rerank's --segment (sentences:prepend, "
        "windows:150:75, whole); overrides --passage-words, and the spec's title rule replaces --no-title",
    )
    options.add_argument(
        "--max-passages", type=int, default=4, help="documents: passages per document (0: all)"
    )
    options.add_argument(
        "--negative-depth",
        type=int,
        default=100,
        help="documents/evidence: negatives from the run's top this many documents",
    )
    options.add_argument(
        "--negatives-per-query",
        type=int,
        default=10,
        help="documents/evidence: negative documents per query (0: all within the depth)",
    )
    options.add_argument(
        "--hard-negatives",
        metavar="SOURCE",
        default=None,
        help="documents/evidence: mine the negatives from this ranking instead of the data flags' "
        "RUN: run:FILE (any TREC run, e.g. a first-round cross-encoder's) or vectors:PATH (the "
        "bi-encoder's ranking over an index's stored passage vectors); judged-relevant documents "
        "and gold evidence are never negatives; validation keeps the data flags' runs",
    )
    options.add_argument(
        "--negative-skip",
        type=int,
        default=0,
        metavar="N",
        help="with --hard-negatives: leave out the top N ranks (likely unjudged positives)",
    )
    options.add_argument(
        "--negative-pick",
        choices=("top", "random"),
        default="top",
        help="with --hard-negatives: the best-ranked --negatives-per-query documents of the window, "
        "or a seeded random sample of it",
    )
    options.add_argument("--no-title", action="store_true", help="documents: do not prepend the title")
    options.add_argument(
        "--evidence-title", action="store_true", help="evidence: prepend the document title to each sentence"
    )
    options.add_argument(
        "--evidence-gold-only",
        action="store_true",
        help="evidence: the relevant documents' other sentences are not negatives (only other "
        "documents' sentences are): for models that rank documents by their best sentences",
    )
    options.add_argument("--relevant-grade", type=int, default=1, help="the lowest grade counted as relevant")
    options.add_argument(
        "--examples-out",
        metavar="FILE",
        help="also write the training examples as JSONL (inspect them, or reuse with --pairs)",
    )


def add_optimisation_arguments(parser: argparse.ArgumentParser, defaults: TrainConfig) -> None:
    """Flags that mirror :class:`TrainConfig`."""
    opt = parser.add_argument_group("optimisation (defaults from the papers)")
    opt.add_argument("--epochs", type=int, default=defaults.epochs, help="passes over the training examples")
    opt.add_argument(
        "--batch-size",
        type=int,
        default=defaults.batch_size,
        help="examples per forward pass (--loss listwise: groups, each --group-size pairs)",
    )
    opt.add_argument(
        "--grad-accum",
        type=int,
        default=defaults.gradient_accumulation,
        help="forward passes per optimizer step",
    )
    opt.add_argument("--lr", type=float, default=defaults.learning_rate, help="AdamW's peak learning rate")
    opt.add_argument(
        "--head-lr",
        type=float,
        default=None,
        help="the peak learning rate of a family's new head (PARADE's aggregation network; default: --lr)",
    )
    opt.add_argument("--weight-decay", type=float, default=defaults.weight_decay, help="AdamW's weight decay")
    opt.add_argument(
        "--warmup",
        type=float,
        default=defaults.warmup_fraction,
        help="share of steps with linear warmup (then linear decay)",
    )
    opt.add_argument(
        "--dropout", type=float, default=defaults.dropout, help="dropout of the encoder and the head"
    )
    opt.add_argument(
        "--max-length", type=int, default=defaults.max_length, help="tokens per (query, text) pair"
    )
    opt.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    opt.add_argument(
        "--seed", type=int, default=defaults.seed, help="seed of the head, the shuffling and the negatives"
    )
    opt.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    opt.add_argument("--no-bf16", action="store_true", help="no bf16 autocast on GPU")
    opt.add_argument(
        "--eval-batch-size", type=int, default=defaults.eval_batch_size, help="pairs per validation batch"
    )
    opt.add_argument(
        "--measures",
        nargs="+",
        default=list(defaults.validation_measures),
        metavar="M",
        help="validation measures (ir_measures names); the first selects the best checkpoint",
    )
    opt.add_argument(
        "--validate-every",
        type=int,
        default=None,
        help="also validate every this many steps (default: each epoch's end)",
    )
    opt.add_argument(
        "--patience",
        type=int,
        default=None,
        help="early stopping: validations without improvement (default: never)",
    )
    opt.add_argument(
        "--save-every",
        type=int,
        default=defaults.save_every_steps,
        help="steps between resumable checkpoints",
    )
    opt.add_argument(
        "--keep-checkpoints", action="store_true", help="keep the resumable checkpoint at the end"
    )
    opt.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output folder")
    parser.add_argument(
        "--resume", action="store_true", help="continue an interrupted run in the output folder"
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
    return TrainConfig(
        epochs=args.epochs,
        batch_size=args.batch_size,
        gradient_accumulation=args.grad_accum,
        learning_rate=args.lr,
        head_learning_rate=getattr(args, "head_lr", None),
        weight_decay=args.weight_decay,
        warmup_fraction=args.warmup,
        dropout=args.dropout,
        max_length=args.max_length,
        max_steps=args.max_steps,
        seed=args.seed,
        bf16=not args.no_bf16,
        device=args.device,
        eval_batch_size=args.eval_batch_size,
        validation_measures=tuple(args.measures),
        validate_every_steps=args.validate_every,
        patience=args.patience,
        save_every_steps=args.save_every,
        keep_checkpoints=args.keep_checkpoints,
        **fixed,
    )


def set_threads(args: argparse.Namespace) -> None:
    """Apply ``--threads`` to torch."""
    if args.threads:
        from evirank._extras import require

        require("torch", "torch").set_num_threads(args.threads)


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
    for topics, qrels, run, corpus in getattr(args, f"{prefix}short_texts"):
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
    for topics, qrels, run, corpus in getattr(args, f"{prefix}documents"):
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
    for topics, evidence, qrels, run, corpus in getattr(args, f"{prefix}evidence"):
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
    for path in getattr(args, f"{prefix}pairs"):
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
