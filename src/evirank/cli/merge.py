"""``evirank merge``: average the weights of models of one architecture (WiSE-FT, model soups).

Example (WiSE-FT: half the fine-tuned bi-encoder, half the model it started from)::

    $ evirank merge --model models/bi-scifact=0.5 \\
        --model sentence-transformers/all-MiniLM-L6-v2=0.5 --output models/bi-scifact-wise

The first model gives the configuration, tokenizer and sentence-transformers files; the new
folder loads like any model (``embed``, ``rerank``, ``serve``, ``train --model``).
"""

from __future__ import annotations

import argparse
import json

from evirank.cli import DefaultsHelpFormatter


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evirank merge``."""
    parser = subparsers.add_parser(
        "merge",
        help="average the weights of models of one architecture (WiSE-FT, model soups)",
        description="Write the weighted average of models' weights as a new model folder: a fine-tuned "
        "model with the one it started from (WiSE-FT, Wortsman et al. 2022), or several fine-tuned runs "
        "(a model soup). The weights must sum to 1; configuration, tokenizer and sentence-transformers "
        "files come from the first model.",
        formatter_class=DefaultsHelpFormatter,
    )
    from evirank.pipeline.flags import add_flags

    add_flags(
        parser,
        ["model", "output", "overwrite"],
        required={"model", "output"},
        helps={
            "model": "a model folder or Hugging Face id with its weight; repeat (at least twice)",
            "output": "the new model folder",
            "overwrite": "replace an earlier merge at --output",
        },
        changes={"model": {"action": "append", "metavar": "MODEL=WEIGHT"}, "output": {"metavar": "DIR"}},
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Average the models and print the provenance (models, weights) as JSON."""
    from evirank.train.merge import merge_models, parse_weighted_model

    models = [parse_weighted_model(item) for item in args.model]
    provenance = merge_models(models, args.output, overwrite=args.overwrite)
    summary = {
        "output": str(args.output),
        "models": [{"model": m["model"], "weight": m["weight"]} for m in provenance["models"]],
        "tensors": provenance["tensors"],
    }
    print(json.dumps(summary, indent=2))
    return 0
