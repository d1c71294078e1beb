"""First stages beyond BM25: dense retrieval over stored passage vectors, and its fusion with BM25.

- :class:`DenseRetriever`: Topics -> Run, documents scored by their best passage's inner product
  with the query, over a passage-vector folder (``evirank embed``); the search itself is a
  :class:`PassageSearcher` (:class:`ExactSearcher` by default; an approximate index can replace it).
- :func:`rrf` (reciprocal rank fusion) and :func:`interpolate` (min-max normalised scores, one
  weight) fuse two runs; :class:`Hybrid` runs two first stages and fuses them;
  :func:`fusion_table` writes what ``evirank tune`` needs to choose the weight by cross-validation.

The design and measured figures are in ``docs/first-stage.md``.

Example:
    >>> from evirank.firststage import Fusion
    >>> Fusion.parse("interp:0.3").spec
    'interp:0.3'
"""

from __future__ import annotations

from evirank.firststage.build import build_first_stage, parse_first_stage
from evirank.firststage.dense import DenseRetriever, ExactSearcher, PassageSearcher, max_pool
from evirank.firststage.fusion import RRF_K, Fusion, Hybrid, fusion_table, interpolate, rrf

__all__ = [
    "RRF_K",
    "DenseRetriever",
    "ExactSearcher",
    "Fusion",
    "Hybrid",
    "PassageSearcher",
    "build_first_stage",
    "fusion_table",
    "interpolate",
    "max_pool",
    "parse_first_stage",
    "rrf",
]
