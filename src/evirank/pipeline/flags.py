"""The pipeline's flags, from the one settings table: the bundles of settings a command takes, and
the spec of a parsed command line.

Every flag is a setting of :data:`evirank.config.SETTINGS` (name, default, help, check); a command
adds the bundles it needs with :func:`add_flags`, so a flag has one name, one meaning and one help
text in every command, and :func:`spec_from_args` turns any of them into the one
:class:`~evirank.pipeline.PipelineSpec`. The vocabulary:

=====================  ==============================================================
``--k``                first-stage depth: documents retrieved per query
``--depth``            documents re-ranked per query (the rest keep first-stage order)
``--top``              results shown (serve, rank, explain)
``--show-passages``    evidence passages shown per result
``--scorer``           a scorer: FAMILY, or ``[LABEL=]FAMILY[:MODEL]``; repeat for several
``--model``            the model of the one scorer (a Hugging Face id or a local folder)
``--scorer-weights``   weights of the scorers after the first (``LABEL=W``)
=====================  ==============================================================

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_flags(parser, SCORING + PASSAGES)
    >>> args = parser.parse_args(["--scorer", "bi", "--aggregate", "maxp"])
    >>> spec_from_args(args, corpus="c.jsonl").aggregate.spec
    'maxp'
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from evirank.config import SETTINGS
from evirank.config.runtime import RUNTIME_SETTINGS

if TYPE_CHECKING:
    from evirank.pipeline.spec import PipelineSpec

#: Where documents come from (``--index`` or ``--corpus``, one of them).
TEXT_SOURCE = ["index", "corpus", "corpus_format", "missing_docs"]
#: The queries of a topics file.
TOPICS = ["topics", "field", "split"]
#: The first stage.
FIRST_STAGE = ["run", "first_stage", "k", "bm25", "rm3", "threads"]
#: The scorers and where models run (the runtime's settings: :class:`evirank.config.Runtime`).
SCORING = ["scorer", "model", "scorer_weights", *RUNTIME_SETTINGS, "vectors", "scores"]
#: The cascade.
CASCADE = ["prune", "prune_by"]
#: Segmentation and aggregation.
PASSAGES = ["segment", "max_passages", "aggregate", "alpha", "weights", "normalise", "depth"]
#: The pairwise stage.
DUO = ["duo", "duo_model", "duo_aggregate"]
#: What a ranking shows.
DISPLAY = ["top", "show_passages"]
#: Scoring on Ray.
RAY = ["ray", "ray_workers", "ray_cpus", "ray_gpus"]


def add_flags(
    parser: Any,
    names: Iterable[str],
    *,
    defaults: Mapping[str, Any] | None = None,
    required: Iterable[str] = (),
    helps: Mapping[str, str] | None = None,
    changes: Mapping[str, Mapping[str, Any]] | None = None,
    exclusive: bool = True,
) -> None:
    """Add the flags of ``names`` (settings of :data:`~evirank.config.SETTINGS`) to ``parser``.

    The help of ``--scorer`` names the registered model families. The keyword arguments are
    :meth:`~evirank.config.table.SettingsTable.add_flags`'s: a command's own defaults, required
    flags, help texts and argparse options, by setting name.
    """
    names = list(names)
    helps = dict(helps or {})
    if "scorer" in names:
        from evirank.score.family import family_names

        text = helps.get("scorer", SETTINGS["scorer"].help)
        helps["scorer"] = text.replace("{families}", ", ".join(family_names()))
    SETTINGS.add_flags(
        parser, names, defaults=defaults, required=required, helps=helps, changes=changes, exclusive=exclusive
    )


def spec_from_args(args: argparse.Namespace, **overrides: Any) -> PipelineSpec:
    """The :class:`~evirank.pipeline.PipelineSpec` of parsed flags (``overrides`` win).

    Raises:
        PipelineSpecError: flags that do not fit together, or a bad spec (a usage error).
    """
    from evirank.pipeline.spec import PipelineSpec

    return PipelineSpec.from_mapping(vars(args), **overrides)
