"""A first stage from its name: ``bm25``, ``dense``, ``rrf[:K]`` or ``interp[:WEIGHT]`` over one index.

What ``evirank rerank --first-stage`` builds when it retrieves the candidates itself (no ``--run``):
BM25 (or BM25+RM3) from the Lucene index, dense retrieval over the passage vectors stored beside it,
or the two fused (:class:`~evirank.firststage.fusion.Fusion`).

Example:
    >>> parse_first_stage("interp:0.3")
    'interp:0.3'
    >>> parse_first_stage("BM25")
    'bm25'
"""

from __future__ import annotations

import os
from typing import Any

from evirank.firststage.fusion import Fusion
from evirank.grammar import SpecError, parse_spec
from evirank.stage import Stage

#: The first-stage names besides the fusion specs.
PLAIN = ("bm25", "dense")


def parse_first_stage(spec: str) -> str:
    """The canonical spelling of a first-stage spec.

    Raises:
        ValueError: not ``bm25``, ``dense``, ``rrf[:K]`` or ``interp[:WEIGHT]``.
    """
    try:
        parsed = parse_spec(spec, what="first stage", grammar="bm25, dense, rrf[:K] or interp[:WEIGHT]")
    except SpecError as exc:
        raise ValueError(str(exc)) from None
    if parsed.name in PLAIN and not parsed.args:
        return parsed.name
    name = str(parsed)
    try:
        return Fusion.parse(name).spec
    except ValueError as exc:
        raise ValueError(
            f"expected bm25, dense, rrf[:K] or interp[:WEIGHT], found {spec!r} ({exc})"
        ) from None


def build_first_stage(
    spec: str,
    index: str | os.PathLike[str],
    *,
    k: int = 1000,
    rm3: Any = None,
    vectors: Any = None,
    scorer: Any = None,
) -> Stage:
    """The first stage ``spec`` names, over ``index`` (nothing is opened yet).

    Args:
        spec: ``bm25``, ``dense``, ``rrf[:K]`` or ``interp[:WEIGHT]`` (WEIGHT on BM25).
        index: a Lucene index (with passage vectors beside it for the dense side).
        k: documents per query (each side retrieves ``k``; a fusion keeps the top ``k``).
        rm3: an :class:`~evirank.lucene.Rm3` for the BM25 side, or None.
        vectors: the passage vectors (a folder or :class:`~evirank.vectors.PassageVectors`);
            None: the index's own.
        scorer: the bi-encoder that embeds queries (None: the offline all-MiniLM-L6-v2).

    Raises:
        ValueError: a bad spec, or no passage vectors for a dense side.
    """
    from evirank.firststage.dense import DenseRetriever
    from evirank.firststage.fusion import Hybrid
    from evirank.lucene import Bm25

    name = parse_first_stage(spec)
    if name == "bm25":
        return Bm25(index, rm3=rm3, k=k)
    if vectors is None:
        from evirank.vectors.index import vectors_of_index

        vectors = vectors_of_index(index)
        if vectors is None:
            raise ValueError(
                f"{index} has no passage vectors for a dense first stage: build them with "
                f"`evirank embed --index {index}`, or name a folder with --vectors"
            )
    dense = DenseRetriever(vectors, scorer=scorer, k=k)
    if name == "dense":
        return dense
    return Hybrid(Bm25(index, rm3=rm3, k=k), dense, Fusion.parse(name), k=k)
