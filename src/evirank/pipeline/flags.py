"""The pipeline's flags, declared once: one argument group per concept, shared by every command.

``rerank``, ``serve``, ``search``, ``rank`` and ``embed`` add the groups they need from here, so
a flag has one name, one meaning and one help text in every command (its default is in
``--help``), and :func:`spec_from_args` turns any of them into the one
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

Spellings from earlier versions still work for a while and say what to write instead.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_scoring(parser)
    >>> add_passages(parser)
    >>> args = parser.parse_args(["--scorer", "bi", "--aggregate", "maxp"])
    >>> spec_from_args(args, corpus="c.jsonl").aggregate.spec
    'maxp'
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from typing import Any

from evirank.aggregate.registry import GRAMMAR as AGGREGATE_GRAMMAR
from evirank.pipeline.spec import BM25_DEFAULTS, MAX_K
from evirank.segment.base import DEFAULT_MAX_PASSAGES
from evirank.segment.spec import GRAMMAR as SEGMENT_GRAMMAR

logger = logging.getLogger(__name__)

#: The engines a scorer can run on (each family says which of them it supports).
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino", "openvino-int8")
#: The values of ``--dtype``.
DTYPES = ("auto", "fp32", "bf16", "fp16")
#: The values of ``--corpus-format`` (:data:`evirank.io.corpus.CORPUS_FORMATS`, repeated here so that
#: ``--help`` imports nothing heavy; a test keeps the two equal).
CORPUS_FORMATS = ("jsonl", "beir", "trec", "nyt", "wapo", "warc", "msmarco-docs")


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1.

    Example:
        >>> positive_int("3")
        3
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**31 - 1:  # a Java int (Lucene's depth), and any count is far below
        raise argparse.ArgumentTypeError(f"expected a positive integer up to {2**31 - 1}, found {text!r}")
    return value


def depth_int(text: str) -> int:
    """An argparse type: a positive integer Lucene can take (at most 2,147,483,647).

    Example:
        >>> depth_int("1000")
        1000
    """
    value = positive_int(text)
    if value > MAX_K:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_K:,}, found {text}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 2**31 - 1:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to {2**31 - 1}, found {text!r}")
    return value


def unit_float(text: str) -> float:
    """An argparse type: a number in [0, 1].

    Example:
        >>> unit_float("0.25")
        0.25
    """
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], found {text!r}")
    return value


def finite_float(text: str) -> float:
    """An argparse type: a finite number (no nan, no inf)."""
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, found {text!r}")
    return value


class Deprecated(argparse.Action):
    """An old spelling of a flag: stores into the new flag's place and says what to write instead.

    Args:
        instead: the spelling to use (shown in the warning).
    """

    def __init__(self, option_strings: Sequence[str], dest: str, instead: str = "", **kwargs: Any) -> None:
        self.instead = instead
        kwargs.setdefault("help", argparse.SUPPRESS)
        kwargs.setdefault("default", argparse.SUPPRESS)  # the new flag's default stands
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        logger.warning("%s is deprecated: write %s", option, self.instead)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


class _AppendDeprecated(Deprecated):
    """An old spelling of a repeatable flag."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        logger.warning("%s is deprecated: write %s", option, self.instead)
        items = list(getattr(namespace, self.dest, None) or [])
        items.append(values)
        setattr(namespace, self.dest, items)


class _Rm3Action(argparse.Action):
    """``--rm3 [FB_DOCS FB_TERMS ORIG_WEIGHT]`` to an Rm3 at parse time (usage errors exit 2)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        try:
            setattr(namespace, self.dest, parse_rm3(list(values)))
        except ValueError as exc:
            parser.error(f"argument --rm3: {exc}")


def parse_rm3(values: list[str] | None) -> Any:
    """``--rm3`` values to an :class:`~evirank.lucene.Rm3` (or ``None`` when the flag is absent).

    Raises:
        ValueError: not zero or three values, or values of the wrong type or range.

    Example:
        >>> parse_rm3([]), parse_rm3(None)
        (Rm3(fb_docs=10, fb_terms=10, original_weight=0.5), None)
        >>> parse_rm3(["20", "5", "0.3"])
        Rm3(fb_docs=20, fb_terms=5, original_weight=0.3)
    """
    from evirank.lucene.search import Rm3

    if values is None:
        return None
    if not values:
        return Rm3()
    if len(values) != 3:
        raise ValueError(f"takes no value or three (FB_DOCS FB_TERMS ORIG_WEIGHT), found {len(values)}")
    try:
        fb_docs, fb_terms, weight = int(values[0]), int(values[1]), float(values[2])
    except ValueError:
        raise ValueError(
            f"expected FB_DOCS FB_TERMS ORIG_WEIGHT as integer integer number, found {values}"
        ) from None
    return Rm3(fb_docs=fb_docs, fb_terms=fb_terms, original_weight=weight)


# ----------------------------------------------------------------------------------------------
def add_text_source(parser: Any, *, required: bool = True, corpus: bool = True, missing: bool = True) -> None:
    """``--index`` or ``--corpus`` (one of them), and ``--missing-docs`` (``corpus=False``: the index
    alone; ``missing=False``: a command that reads every document, so none can be missing)."""
    group = parser.add_argument_group("documents")
    if not corpus:
        group.add_argument(
            "--index",
            required=required,
            metavar="DIR",
            help="a Lucene index with stored documents (evirank index)",
        )
        return
    source = group.add_mutually_exclusive_group(required=required)
    source.add_argument("--index", metavar="DIR", help="a Lucene index with stored documents (evirank index)")
    source.add_argument(
        "--corpus",
        metavar="PATH",
        help="a corpus instead of an index: a BEIR folder, a JSONL file ({_id,title,text} or "
        "{id,contents}), or a collection as distributed, one file or a folder (see --corpus-format)",
    )
    add_corpus_format(group)
    if not missing:
        return
    group.add_argument(
        "--missing-docs",
        choices=("error", "keep"),
        default="error",
        help="candidates absent from the index or corpus: stop (error), or keep them with empty text",
    )


def add_corpus_format(group: Any, *aliases: str) -> None:
    """``--corpus-format`` (and ``aliases``, such as ``index``'s ``--format``): the format of ``--corpus``."""
    group.add_argument(
        *aliases,
        "--corpus-format",
        dest="corpus_format",
        choices=CORPUS_FORMATS,
        metavar="FMT",
        help=f"the corpus format: {', '.join(CORPUS_FORMATS)} (default: told from the files; the "
        "papers' collections: trec for TREC disks, nyt, wapo, warc for ClueWeb, msmarco-docs)",
    )


def add_topics(parser: Any) -> None:
    """``--topics``, ``--field`` and ``--split``."""
    group = parser.add_argument_group("queries")
    group.add_argument("--topics", required=True, metavar="T", help="topics file, BEIR folder, or irds:<id>")
    group.add_argument(
        "--field",
        default="title",
        help="TREC topic field: title, description, narrative, the query variants description-keywords, "
        "narrative-keywords and narrative-positive, or several joined by + (title+description)",
    )
    group.add_argument(
        "--split",
        default=None,
        help="for a BEIR folder: keep the queries judged in qrels/SPLIT.tsv (without it: every "
        "query of queries.jsonl, and the log says how many)",
    )


def add_first_stage(
    parser: Any, *, run: bool = True, k: bool = True, deprecated_search: bool = False
) -> None:
    """The first stage: ``--first-stage``, ``--k``, ``--bm25``, ``--rm3``, ``--threads`` (and ``--run``).

    ``k=False``: the depth is chosen per request (the service retrieves each request's ``depth``).
    """
    group = parser.add_argument_group("first stage")
    if run:
        group.add_argument(
            "--run", metavar="RUN", help="a first-stage TREC run to re-rank (instead of searching --index)"
        )
    group.add_argument(
        "--first-stage",
        default="bm25",
        metavar="SPEC",
        help="bm25, dense (the index's passage vectors), or both fused: rrf[:K] (reciprocal rank "
        "fusion, K 60) or interp[:WEIGHT] (per-query min-max interpolation, WEIGHT on BM25, 0.5)",
    )
    if k:
        group.add_argument(
            "--k", type=depth_int, default=1000, help="first-stage depth: documents retrieved per query"
        )
    group.add_argument(
        "--bm25",
        nargs=2,
        type=finite_float,
        default=BM25_DEFAULTS,
        metavar=("K1", "B"),
        help="BM25 parameters k1 and b, Anserini's",
    )
    group.add_argument(
        "--rm3",
        nargs="*",
        default=None,
        action=_Rm3Action,
        metavar="FB_DOCS FB_TERMS ORIG_WEIGHT",
        help="expand BM25's queries with RM3: no value for Anserini's defaults (10 10 0.5), or all three",
    )
    if k:  # the service searches one query per request
        group.add_argument("--threads", type=positive_int, default=1, metavar="N", help="search threads")
    if deprecated_search:
        group.add_argument(
            "--dense", dest="first_stage", action=_DenseAlias, nargs=0, instead="--first-stage dense"
        )
        group.add_argument("--fuse", dest="first_stage", action=Deprecated, instead="--first-stage SPEC")


class _DenseAlias(Deprecated):
    """The old ``--dense`` switch: a dense first stage, unless ``--fuse`` already chose a fusion."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        logger.warning("%s is deprecated: write %s", option, self.instead)
        if getattr(namespace, self.dest, None) in (None, "bm25"):
            setattr(namespace, self.dest, "dense")


def add_scoring(
    parser: Any, *, deprecated_evidence: bool = False, deprecated_serve: bool = False, scores: str = "none"
) -> None:
    """The scorers and where models run: ``--scorer``, ``--model``, ``--scorer-weights``, ``--device``,
    ``--backend``, ``--batch-tokens``, ``--max-length``, ``--vectors``, ``--scores``."""

    group = parser.add_argument_group("scoring")
    scorer_flag(group)
    model_flag(group)
    group.add_argument(
        "--scorer-weights",
        nargs="+",
        metavar="LABEL=W",
        help="weights of the scorers after the first (the first gets 1 minus their sum; default: "
        "equal shares), e.g. bi=0.3",
    )
    group.add_argument(
        "--evidence-weights", dest="scorer_weights", nargs="+", action=Deprecated, instead="--scorer-weights"
    )
    if deprecated_evidence:
        group.add_argument("--evidence", dest="scorer", action=_AppendDeprecated, instead="--scorer SPEC")
    if deprecated_serve:
        group.add_argument(
            "--evidence-scorer", dest="scorer", action=_AppendDeprecated, instead="--scorer SPEC"
        )
    device_flag(group)
    group.add_argument(
        "--backend",
        choices=BACKENDS,
        default="torch",
        help="engine: torch (CPU or GPU), onnx (ONNX Runtime on CPU, fp32), onnx-int8 (ONNX Runtime, "
        "int8 weights), openvino (OpenVINO on CPU: fp32, or bf16 where the CPU has it), openvino-int8 "
        "(OpenVINO, static int8; the openvino extra); each family says which it runs on",
    )
    group.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="precision the models compute in: auto (bf16 on GPUs, fp32 on CPUs), fp32, bf16 (GPUs; CPUs "
        "with AMX or AVX512_BF16), fp16 (GPUs)",
    )
    group.add_argument(
        "--batch-tokens", type=positive_int, metavar="N", help="token budget per batch (default: by device)"
    )
    max_length_flag(group)
    vectors_flag(group)
    group.add_argument(
        "--scores",
        metavar="STORE",
        help="score store: a .sqlite file, or a folder or URL (s3://, gs://) of Parquet shards; scores "
        "are reused and added as they are computed (scores read from stored vectors are not kept; "
        f"default: {scores})",
    )


def add_query_encoder(parser: Any) -> None:
    """The flags of a dense first stage's query encoder: ``--model``, ``--device``, ``--max-length``,
    ``--vectors`` (the same flags, with the same meaning, as in :func:`add_scoring`)."""
    group = parser.add_argument_group("dense retrieval (the query encoder)")
    model_flag(group)
    device_flag(group)
    max_length_flag(group)
    vectors_flag(group)


def scorer_flag(group: Any, *, repeat: bool = True) -> None:
    """``--scorer``: a model family or a scorer spec (``repeat``: given once per scorer)."""
    from evirank.score.family import AUTO, family_names

    group.add_argument(
        "--scorer",
        action="append" if repeat else "store",
        metavar="SCORER",
        help=f"the model family ({AUTO}: told from --model's files; without --model the offline "
        f"all-MiniLM-L6-v2 bi-encoder; or one of {', '.join(family_names())}), or a scorer spec "
        "[LABEL=]FAMILY[:MODEL]"
        + ("; repeat it for several scorers' evidence in one ranking" if repeat else "")
        + " (default: auto)",
    )


def model_flag(group: Any) -> None:
    """``--model``: the model of the one scorer."""
    group.add_argument(
        "--model",
        metavar="M",
        help="the model of the one scorer: a Hugging Face id or a local folder (with several "
        "--scorer, give each its model in its spec)",
    )


def device_flag(group: Any) -> None:
    """``--device``: where models run."""
    group.add_argument(
        "--device", default="auto", help="auto (cuda, then mps, then cpu), cpu, cuda, cuda:1, mps"
    )


def max_length_flag(group: Any) -> None:
    """``--max-length``: the input token cap."""
    group.add_argument(
        "--max-length", type=positive_int, metavar="N", help="input token cap (default: the model's)"
    )


def vectors_flag(group: Any) -> None:
    """``--vectors``: stored passage vectors."""
    group.add_argument(
        "--vectors",
        metavar="VDIR",
        help="stored passage vectors (evirank embed) read by a scorer that stores passages (a "
        "bi-encoder: only queries are embedded), --prune-by or a dense first stage; default: the "
        "index's own when it has some; none: compute every passage now",
    )


def add_cascade(parser: Any) -> None:
    """``--prune`` and ``--prune-by``."""
    group = parser.add_argument_group("cascade")
    group.add_argument(
        "--prune",
        type=positive_int,
        metavar="N",
        help="a cheap scorer keeps each document's N best passages; only those are scored and "
        "aggregated (birch:n needs n <= N)",
    )
    group.add_argument(
        "--prune-by",
        default="bm25",
        metavar="SCORER",
        help="the cheap scorer of --prune: bm25 over each document's passages, or a scorer "
        "FAMILY[:MODEL] such as bi (by lookup in the stored vectors when there are some)",
    )


def add_passages(
    parser: Any, *, segment: str | None = "sentences", depth: int = 100, depth_help: str = ""
) -> None:
    """Segmentation and aggregation: ``--segment``, ``--max-passages``, ``--aggregate``, ``--alpha``,
    ``--weights``, ``--normalise``, ``--depth``."""
    group = parser.add_argument_group("passages and aggregation")
    group.add_argument(
        "--segment",
        default=segment,
        help=f"{SEGMENT_GRAMMAR}"
        + (
            ""
            if segment is not None
            else " (default: the stored passage vectors' segmenter when the index has some, else "
            "sentences:prepend)"
        ),
    )
    group.add_argument(
        "--max-passages",
        type=non_negative_int,
        default=DEFAULT_MAX_PASSAGES,
        metavar="N",
        help="segments kept per document, its first ones, with a warning naming a longer document "
        "(0: no limit)",
    )
    group.add_argument("--aggregate", default="birch:3", help=AGGREGATE_GRAMMAR)
    group.add_argument(
        "--alpha",
        type=unit_float,
        metavar="A",
        help="first-stage weight in [0, 1] (default: birch 0.5, others 0)",
    )
    group.add_argument(
        "--weights",
        nargs="+",
        type=finite_float,
        metavar="W",
        help="Birch's weights of the top-n passages (default: 1 0.5 0.25)",
    )
    group.add_argument(
        "--normalise",
        "--normalize",
        choices=("none", "minmax"),
        help="minmax: per-query min-max of first-stage and passage scores (default), or none (raw)",
    )
    group.add_argument(
        "--depth",
        type=positive_int,
        default=depth,
        help="documents re-ranked per query; the rest keep their first-stage order" + depth_help,
    )


def add_duo(parser: Any) -> None:
    """``--duo``, ``--duo-model`` and ``--duo-aggregate``."""
    group = parser.add_argument_group("pairwise re-ranking")
    group.add_argument(
        "--duo",
        type=positive_int,
        metavar="K",
        help="after aggregation, re-rank each query's top K documents (their best passages) with a "
        "pairwise model (--duo-model): K(K-1) model calls per query, pair scores kept in the store",
    )
    group.add_argument(
        "--duo-model",
        metavar="[FAMILY:]MODEL",
        help="the pairwise model of --duo (e.g. a duoT5 folder; the family is told from the model)",
    )
    group.add_argument(
        "--duo-aggregate",
        choices=("sum", "binary", "min", "max", "sym-sum"),
        default="sym-sum",
        help="how --duo turns pair probabilities p_ij into document scores: sum, binary (p_ij > 0.5 "
        "counted), min or max over j (duoBERT), or sym-sum, the sum of p_ij + 1 - p_ji (duoT5)",
    )


def add_display(
    parser: Any,
    *,
    top: int = 10,
    show_passages: int = 3,
    top_help: str = "",
    deprecated_serve: bool = False,
) -> None:
    """What is shown: ``--top`` and ``--show-passages``."""
    group = parser.add_argument_group("results shown")
    if deprecated_serve:  # serve's earlier spellings
        group.add_argument("--k", dest="top", type=non_negative_int, action=Deprecated, instead="--top N")
        group.add_argument(
            "--evidence",
            dest="show_passages",
            type=non_negative_int,
            action=Deprecated,
            instead="--show-passages N",
        )
    group.add_argument(
        "--top", type=non_negative_int, default=top, metavar="N", help="results shown" + top_help
    )
    group.add_argument(
        "--show-passages",
        type=non_negative_int,
        default=show_passages,
        metavar="N",
        help="evidence passages shown per result",
    )


def spec_from_args(args: argparse.Namespace, **overrides: Any) -> Any:
    """The :class:`~evirank.pipeline.PipelineSpec` of parsed flags (``overrides`` win).

    Raises:
        PipelineSpecError: flags that do not fit together, or a bad spec (a usage error).
    """
    from evirank.pipeline.spec import PipelineSpec

    return PipelineSpec.from_mapping(vars(args), **overrides)
