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

import inspect
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evirank.errors import EvirankError
from evirank.frames import DOCNO, PID, QID, RANK, SCORE, TEXT, require_columns
from evirank.score.store import FINGERPRINT, FingerprintError, Store
from evirank.score.stores import open_store

if TYPE_CHECKING:
    from evirank.score.attention import AttentionView

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


class ScorerUnavailableError(EvirankError, LookupError):
    """The scorer that made a stored fingerprint cannot be rebuilt here (the message says why)."""


#: Constructor parameters never taken from a stored description (they do not change a score, or
#: they name this machine's resources).
_NOT_REBUILT = frozenset({"model", "runtime", "vectors"})


def rebuild_scorer(store: Store, fingerprint: str, *, device: str = "cpu") -> Any:
    """The scorer that made ``fingerprint``, rebuilt from the store's description of it (its family,
    model and the settings its constructor takes), checked to give the same fingerprint.

    Raises:
        ScorerUnavailableError: the fingerprint is not in the store, names no model, or the model
            no longer gives it (moved, changed, made with other settings, or randomly initialised
            parts: save such a model to a folder first).

    Example:
        >>> rebuild_scorer(store, fp).family  # doctest: +SKIP
        'cross'
    """
    from evirank.config import Runtime
    from evirank.score.family import get_family, make_scorer

    table = store.fingerprints().set_index(FINGERPRINT)
    if fingerprint not in table.index:
        raise ScorerUnavailableError(f"{store.path}: no scorer with fingerprint {fingerprint[:12]}")
    described = dict(table.loc[fingerprint, "description"])
    family = get_family(str(described.get("kind") or table.loc[fingerprint, "kind"]))
    if not described.get("model"):
        raise ScorerUnavailableError(f"{store.path}: fingerprint {fingerprint[:12]} names no model")
    try:
        taken = set(inspect.signature(family.scorer).parameters)
    except (TypeError, ValueError):
        taken = set()
    options = {k: v for k, v in described.items() if k in taken and k not in _NOT_REBUILT}
    runtime = Runtime(
        device=device,
        backend=str(described.get("backend") or "torch"),
        max_length=described.get("max_length"),
    )
    try:
        scorer = make_scorer(family, described["model"], runtime, **options)
        if scorer.fingerprint != fingerprint:
            scorer.load()  # a model with randomly initialised parts knows its fingerprint once loaded
    except (OSError, ValueError) as exc:
        raise ScorerUnavailableError(
            f"the {family.name} model {described['model']} could not be loaded ({exc})"
        ) from exc
    if scorer.fingerprint != fingerprint:
        raise ScorerUnavailableError(
            f"{described['model']} no longer gives fingerprint {fingerprint[:12]} (the model moved or "
            "changed, was made with other settings, or has randomly initialised parts: a model with a "
            "new head must be saved to a folder before it scores)"
        )
    return scorer


def passage_matches(
    store: Store, fingerprint: str, query: str, texts: Sequence[str], *, device: str = "cpu"
) -> list[list[str]] | None:
    """Each passage's matched words (``"query token -> passage word (similarity)"``), from the scorer
    that made ``fingerprint`` when its family can tell them (a ``matches`` method: late interaction).

    The scorer is rebuilt from the store's description of the fingerprint (:func:`rebuild_scorer`);
    None when the family has no ``matches``, or the model cannot be rebuilt to the same fingerprint
    (moved, changed, or made with other settings): the scores alone are shown then.

    Example:
        >>> passage_matches(store, fp, "cats", ["A cat sat."])  # doctest: +SKIP
        [['cats -> cat (0.93)']]
    """
    from evirank.score.family import get_family

    table = store.fingerprints().set_index(FINGERPRINT)
    if fingerprint not in table.index:
        return None
    described = dict(table.loc[fingerprint, "description"])
    family = get_family(str(described.get("kind") or table.loc[fingerprint, "kind"]))
    if not callable(getattr(family.scorer, "matches", None)) or not described.get("model"):
        return None
    try:
        scorer = rebuild_scorer(store, fingerprint, device=device)
        return [[str(match) for match in found] for found in scorer.matches(query, list(texts))]
    except ScorerUnavailableError as exc:
        logger.warning("%s; matched words are not shown", exc)
        return None
    except (OSError, ValueError) as exc:
        logger.warning(
            "the %s model %s could not be loaded (%s); matched words are not shown",
            family.name,
            described["model"],
            exc,
        )
        return None


def passage_attention(
    store: Store,
    fingerprint: str,
    query: str,
    text: str,
    *,
    layers: Sequence[int] | None = None,
    device: str = "cpu",
) -> AttentionView:
    """The attention view (:mod:`evirank.score.attention`) of one (query, passage) by the scorer that
    made ``fingerprint``, rebuilt from the store (:func:`rebuild_scorer`).

    Raises:
        NoAttentionError: the scorer's family has no attention view (the message names those that do).
        ScorerUnavailableError: the scorer cannot be rebuilt to the same fingerprint.
        UsageError: a layer the model does not have.

    Example:
        >>> passage_attention(store, fp, "art crime", "Robbers took the paintings.").layers  # doctest: +SKIP
        (5,)
    """
    from evirank.score.attention import NoAttentionError, attention_families
    from evirank.score.family import get_family

    table = store.fingerprints().set_index(FINGERPRINT)
    if fingerprint in table.index:
        described = dict(table.loc[fingerprint, "description"])
        family = get_family(str(described.get("kind") or table.loc[fingerprint, "kind"]))
        if not callable(getattr(family.scorer, "attention", None)):
            raise NoAttentionError(
                f"the {family.name} family has no attention view; the model families that have one: "
                f"{', '.join(attention_families())}"
            )
    scorer = rebuild_scorer(store, fingerprint, device=device)
    view: AttentionView = scorer.attention(query, text, layers)
    return view
