"""Explain a document's score: its passages with their scores, best first.

This is what a user reads to trust a ranking: which sentences or passages of a document carried
its evidence for a query.

Example:
    >>> import pandas as pd
    >>> scored = pd.DataFrame({"qid": ["1"] * 3, "query": ["cats"] * 3, "docno": ["d1"] * 3,
    ...                        "pid": [0, 1, 2], "text": ["A.", "B.", "C."], "score": [0.1, 0.9, 0.5]})
    >>> explain(scored, "1", "d1")[["rank", "pid", "score"]].to_dict("list")
    {'rank': [1, 2, 3], 'pid': [1, 2, 0], 'score': [0.9, 0.5, 0.1]}
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from evirank.errors import EvirankError
from evirank.frames import DOCNO, PID, QID, RANK, SCORE, TEXT, require_columns
from evirank.score.store import FINGERPRINT, FingerprintError, Store, open_store

logger = logging.getLogger(__name__)


class NotScoredError(EvirankError, LookupError):
    """The (qid, docno) asked for has no scored passages in the given source."""


def explain(
    source: pd.DataFrame | Store | str | os.PathLike[str],
    qid: str,
    docno: str,
    *,
    fingerprint: str | None = None,
) -> pd.DataFrame:
    """The passages of ``docno`` for ``qid`` with their scores, best first.

    Args:
        source: a scored Passages frame (qid, docno, pid, text, score), a :class:`ScoreStore`,
            or the path of one.
        qid: the query id.
        docno: the document id.
        fingerprint: with a store holding several scorers' results for this document, which one
            (a full fingerprint or a unique prefix).

    Returns:
        The document's passages with a ``rank`` column (1 = best), ordered by score descending,
        then pid ascending; unscored passages (an interrupted run) come last with a ``nan`` score.

    Raises:
        NotScoredError: nothing is recorded for (qid, docno).
        FingerprintError: a store holds several fingerprints for this document and none was chosen.
    """
    qid, docno = str(qid), str(docno)
    if isinstance(source, pd.DataFrame):
        require_columns(source, (QID, DOCNO, PID, TEXT, SCORE), "explain")
        rows = source[(source[QID].astype(str) == qid) & (source[DOCNO].astype(str) == docno)]
        where = "the scored passages"
    else:
        store = open_store(source, readonly=True)
        where = str(store.path)
        try:
            rows = store.passages_scores(fingerprint, qids=[qid], docnos=[docno])
            found = sorted(rows[FINGERPRINT].unique())
            if len(found) > 1:
                raise FingerprintError(
                    f"{where}: query {qid} document {docno} was scored under {len(found)} fingerprints "
                    f"({'; '.join(store_descriptions(store, found))}); "
                    "choose one with fingerprint= (--fingerprint PREFIX)"
                )
        finally:
            if store is not source:
                store.close()
    if rows.empty:
        raise NotScoredError(f"{where}: no scored passages for query {qid!r}, document {docno!r}")
    out = rows.copy()
    out["_unscored"] = out[SCORE].isna()
    out = out.sort_values(["_unscored", SCORE, PID], ascending=[True, False, True], kind="mergesort")
    out = out.drop(columns="_unscored").reset_index(drop=True)
    out[RANK] = np.arange(1, len(out) + 1, dtype=np.int64)
    return out


def store_descriptions(store: Store, fingerprints: list[str]) -> list[str]:
    """Short readable labels ``prefix (kind model)`` of stored fingerprints."""
    table = store.fingerprints().set_index(FINGERPRINT)
    labels = []
    for fp in fingerprints:
        desc = table.loc[fp, "description"] if fp in table.index else {}
        labels.append(f"{fp[:12]} ({desc.get('kind', '?')} {desc.get('model', '?')})")
    return labels


def passage_matches(
    store: Store, fingerprint: str, query: str, texts: Sequence[str], *, device: str = "cpu"
) -> list[list[str]] | None:
    """Each passage's matched words (``"query token -> passage word (similarity)"``), from the scorer
    that made ``fingerprint`` when its family can tell them (a ``matches`` method: late interaction).

    The scorer is rebuilt from the store's description of the fingerprint (its family and model);
    None when the family has no ``matches``, or the model cannot be rebuilt to the same fingerprint
    (moved, changed, or made with other settings): the scores alone are shown then.

    Example:
        >>> passage_matches(store, fp, "cats", ["A cat sat."])  # doctest: +SKIP
        [['cats -> cat (0.93)']]
    """
    from evirank.score.family import get_family, make_scorer

    table = store.fingerprints().set_index(FINGERPRINT)
    if fingerprint not in table.index:
        return None
    described = dict(table.loc[fingerprint, "description"])
    family = get_family(str(described.get("kind") or table.loc[fingerprint, "kind"]))
    if not callable(getattr(family.scorer, "matches", None)) or not described.get("model"):
        return None
    try:
        scorer = make_scorer(
            family, described["model"], device=device, max_length=described.get("max_length")
        )
        if scorer.fingerprint != fingerprint:
            scorer.load()  # a model with randomly initialised parts knows its fingerprint once loaded
        if scorer.fingerprint != fingerprint:
            logger.warning(
                "%s no longer gives fingerprint %s; matched words are not shown",
                described["model"],
                fingerprint[:12],
            )
            return None
        return [[str(match) for match in found] for found in scorer.matches(query, list(texts))]
    except (OSError, ValueError) as exc:
        logger.warning(
            "the %s model %s could not be loaded (%s); matched words are not shown",
            family.name,
            described["model"],
            exc,
        )
        return None
