"""The "pruned" analysis (Birch's Table 5.6): evidence only from passages with no query term.

Birch removed every sentence that contains a query term and re-ran the aggregation, to see how
much of the gain comes from semantic rather than exact matching. Here the passages of an earlier
``evirank tune`` folder are read again (from its score store or passages file: no model runs),
every passage holding a query term (:mod:`evirank.terms`: stopwords excluded, plurals
folded) is dropped, and the same aggregator is tuned again by cross-validation with the same
folds, grid and metric.

A document whose passages all contain query terms keeps one empty placeholder passage scored
at its query's lowest remaining passage score (0 when the query has none left): it stays in the
ranking on its first-stage score, with no evidence above the weakest left.

Example:
    >>> import pandas as pd
    >>> passages = pd.DataFrame({"qid": ["1"] * 3, "query": ["cat food"] * 3, "docno": ["a", "a", "b"],
    ...                          "pid": [0, 1, 0], "text": ["Cats eat.", "Dogs bark.", "A cat."],
    ...                          "score": [0.9, 0.2, 0.8]})
    >>> pruned = prune_passages(passages)
    >>> pruned[["docno", "pid", "text", "score"]].values.tolist()
    [['a', 1, 'Dogs bark.', 0.2], ['b', -1, '', 0.2]]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT, require_columns
from evirank.terms import contains_any, query_terms
from evirank.tune.folds import read_folds
from evirank.tune.grid import parse_grid
from evirank.tune.runner import FOLDS_FILE, load_passages, load_record
from evirank.tune.search import TuneResult, cross_validate

logger = logging.getLogger(__name__)

#: pid of the placeholder passage of a document left without passages.
PLACEHOLDER_PID = -1


def prune_passages(passages: pd.DataFrame, *, stem: bool = True) -> pd.DataFrame:
    """Drop the passages that contain a term of their query (see the module docstring).

    Args:
        passages: scored passages with query and text.
        stem: fold plurals when matching terms (``False``: exact tokens).

    Returns:
        The kept passages, plus one placeholder passage (pid -1, empty text) per document
        left with none.
    """
    require_columns(passages, (QID, QUERY, DOCNO, TEXT, SCORE), "prune_passages")
    terms = {q: query_terms(str(text), stem=stem) for q, text in passages.groupby(QID)[QUERY].first().items()}
    holds = np.fromiter(
        (
            contains_any(str(t), terms[q], stem=stem)
            for q, t in zip(passages[QID], passages[TEXT], strict=True)
        ),
        dtype=bool,
        count=len(passages),
    )
    kept = passages[~holds]
    docs = passages.drop_duplicates([QID, DOCNO]).drop(
        columns=[SCORE, TEXT] + ([PID] if PID in passages else [])
    )
    empty = docs.merge(kept[[QID, DOCNO]].drop_duplicates(), on=[QID, DOCNO], how="left", indicator=True)
    empty = empty[empty["_merge"] == "left_only"].drop(columns="_merge")
    if len(empty):
        floor = kept.groupby(QID)[SCORE].min()
        placeholder = empty.assign(
            **{
                PID: PLACEHOLDER_PID,
                TEXT: "",
                SCORE: empty[QID].map(floor).fillna(0.0).to_numpy(dtype=np.float64),
            }
        )
        kept = pd.concat([kept, placeholder[kept.columns]], ignore_index=True)
    logger.info(
        "pruning: %d of %d passages hold a query term and were dropped; %d documents kept only a placeholder",
        int(holds.sum()),
        len(passages),
        len(empty),
    )
    order = kept.sort_values([QID, DOCNO, PID] if PID in kept else [QID, DOCNO], kind="mergesort").index
    return kept.loc[order].reset_index(drop=True)


@dataclass
class PrunedRun:
    """The result of re-tuning one ``tune`` folder on pruned passages.

    Attributes:
        name: the system's name in the report.
        run: the cross-validated run on pruned passages (tail of the first stage below).
        result: the search's result.
        dropped: fraction of passages dropped.
        placeholders: documents left with only a placeholder.
    """

    name: str
    run: pd.DataFrame
    result: TuneResult
    dropped: float
    placeholders: int


def pruned_run(name: str, tune_folder: str | Path, *, stem: bool = True) -> PrunedRun:
    """Re-tune the aggregator of ``tune_folder`` with passages holding no query term.

    The folder's folds (``folds.json``), grid, aggregator, normalisation, metric and inputs are
    reused; only the passages change.
    """
    from evirank.aggregate import AggregateSpec, merge_tail
    from evirank.io import read_qrels

    config, record = load_record(tune_folder)
    passages, first_stage, _ = load_passages(config)
    if isinstance(passages, dict):
        raise ValueError(
            f"{tune_folder}: it combines several scorers ({', '.join(passages)}); the pruned analysis "
            "reads one scorer's passages"
        )
    if QUERY not in passages.columns or TEXT not in passages.columns:
        raise ValueError(
            f"{tune_folder}: its passages have no query or text columns; the pruned analysis needs both"
        )
    pruned = prune_passages(passages, stem=stem)
    placeholders = int((pruned[PID] == PLACEHOLDER_PID).sum()) if PID in pruned else 0
    real = len(pruned) - placeholders
    qrels = read_qrels(config.qrels)
    folds = read_folds(Path(tune_folder) / FOLDS_FILE)
    aggregator = AggregateSpec.parse(record["aggregate"], record["normalise"])
    result = cross_validate(
        pruned,
        qrels,
        aggregator,
        parse_grid(record["grid"]),
        folds,
        metric=record["metric"],
        relevance_level=config.relevance_level,
    )
    run = result.run
    if first_stage is not None:
        run = merge_tail(run, first_stage[first_stage[QID].astype(str).isin(set(result.folds.qids))])
    return PrunedRun(name, run, result, 1.0 - real / max(len(passages), 1), placeholders)
