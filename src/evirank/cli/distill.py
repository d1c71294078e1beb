"""``evirank distill``: train a smaller cross-encoder on a teacher's scores, and compare them.

Example (a 3-layer student of the Microblog model, validated on 2013)::

    $ MB=../shared/datasets/microblog
    $ evirank distill --teacher models/minilm-mb --output models/minilm-mb-l3 --num-layers 3 \\
        --short-texts $MB/2011/topics.microblog2011.txt $MB/2011/qrels.microblog2011.txt \\
                      $MB/2011/run.microblog2011.ql.txt $MB/2011/corpus.jsonl \\
        --val-short-texts $MB/2013/topics.microblog2013.txt $MB/2013/qrels.microblog2013.txt \\
                          $MB/2013/run.microblog2013.ql.txt $MB/2013/corpus.jsonl --val-depth 50

It prints the teacher and the student side by side: layers, parameters, pairs per second,
validation measures.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence

from evirank.cli import DefaultsHelpFormatter
from evirank.cli._training import (
    add_training_flags,
    build_data,
    loss_at_both_ends,
    optimisation_config,
    set_threads,
)
from evirank.errors import UsageError
from evirank.train.config import DistillConfig

logger = logging.getLogger(__name__)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evirank distill``."""
    parser = subparsers.add_parser(
        "distill",
        help="train a smaller cross-encoder on a teacher's scores",
        description="Distil a relevance model: the student is the teacher cut down to some of its layers, "
        "trained to reproduce the teacher's logits (MSE) or margins (MarginMSE).",
        formatter_class=DefaultsHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        [
            "teacher",
            "output",
            "num_layers",
            "layers",
            "loss",
            "pairs_per_positive",
            "speed_pairs",
            "speed_rounds",
        ],
        required={"teacher", "output"},
        defaults={"loss": "mse"},
        helps={
            "output": "the student's model folder",
            "loss": "mse on logits, or MarginMSE on (positive, negative) pairs of a query",
        },
        changes={"loss": {"choices": ("mse", "margin-mse")}, "output": {"metavar": "DIR"}},
    )
    add_training_flags(parser, DistillConfig().train)
    return parser


def parse_layers(items: Sequence[str]) -> tuple[int, ...]:
    """Layer indices from ``--layers`` values: indices and ranges such as ``0-2``.

    Raises:
        UsageError: a value that is neither an index nor a range.

    Example:
        >>> parse_layers(["0-2", "5"])
        (0, 1, 2, 5)
    """
    out: list[int] = []
    for part in items:
        low, dash, high = part.partition("-")
        if dash and low.isdecimal() and high.isdecimal():
            out.extend(range(int(low), int(high) + 1))
        elif part.isdecimal():
            out.append(int(part))
        else:
            raise UsageError(f"--layers: expected indices like 0 2 4 or a range 0-2, found {part!r}")
    return tuple(out)


def run(args: argparse.Namespace) -> int:
    """Build the pairs, distil, and print the comparison as JSON on stdout."""
    from evirank.train.distillation import distill
    from evirank.train.trainer import check_train_output

    check_train_output(args.output, overwrite=args.overwrite, resume=args.resume)  # before any work
    set_threads(args)
    try:
        config = DistillConfig(
            layers=parse_layers(args.layers) if args.layers else None,
            num_layers=args.num_layers,
            loss=args.loss,
            pairs_per_positive=args.pairs_per_positive,
            train=optimisation_config(args),
        )
    except ValueError as exc:  # a flag out of its range
        from evirank.errors import EvirankError, UsageError

        if isinstance(exc, EvirankError):
            raise
        raise UsageError(str(exc)) from None
    train, validation, provenance = build_data(args)
    result = distill(
        args.teacher,
        train,
        config,
        args.output,
        validation=validation,
        overwrite=args.overwrite,
        resume=args.resume,
        provenance=provenance,
        speed_pairs=args.speed_pairs,
        speed_rounds=args.speed_rounds,
    )
    output = result.train.output_dir
    printed = {"output": str(output), "steps": result.train.steps, "loss": loss_at_both_ends(output)}
    print(json.dumps({**printed, **result.report}, indent=2))
    return 0
