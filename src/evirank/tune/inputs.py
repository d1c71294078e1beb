"""Scored passages for tuning and analysis, read from where re-ranking left them (never re-scored).

Two sources:

- a score store (:class:`evirank.score.ScoreStore`, written by ``evirank rerank --scores``):
  its ``segments`` table knows which (qid, docno, pid) got which passage text and score under
  a model fingerprint; the first-stage run gives each document's first-stage score and rank
  (:func:`passages_from_store`);
- a file of scored passages (:func:`read_passages`): Parquet, TSV with a header, or JSON lines
  (``.gz`` allowed), with columns qid, docno, score and first_stage_score (or a run to take it
  from), optionally pid, query, text and first_stage_rank.

Several scorers (:mod:`evirank.aggregate.evidence`) are read one source each
(:class:`EvidenceSource`: ``LABEL=STORE[#FINGERPRINT]`` or ``LABEL=FILE``, :func:`load_evidence`).

Both join the first-stage run with :func:`attach_first_stage`, which keeps the documents of the
run's top ``depth`` and warns about documents there without passages.

Example:
    >>> import pandas as pd
    >>> from evirank.frames import make_run
    >>> passages = pd.DataFrame({"qid": ["1", "1"], "docno": ["a", "b"], "pid": [0, 0], "score": [0.5, 0.7]})
    >>> attach_first_stage(passages, make_run([("1", "a", 9.0), ("1", "b", 8.0)]))[
    ...     ["docno", "first_stage_score", "first_stage_rank"]].values.tolist()
    [['a', 9.0, 1], ['b', 8.0, 2]]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evirank.errors import InputFormatError
from evirank.frames import (
    DOCNO,
    FIRST_STAGE_RANK,
    FIRST_STAGE_SCORE,
    PID,
    QID,
    RANK,
    SCORE,
    require_columns,
    sort_run,
)
from evirank.tune.errors import TuneError

logger = logging.getLogger(__name__)

PASSAGE_FORMATS = (".parquet", ".tsv", ".jsonl", ".json")


def attach_first_stage(passages: pd.DataFrame, run: pd.DataFrame, depth: int | None = None) -> pd.DataFrame:
    """Add the run's score and rank as first_stage_score / first_stage_rank; keep its top ``depth``.

    Passages of documents that are not in the run's top ``depth`` are dropped (a store may hold
    segments of deeper or other runs). Run documents in the top ``depth`` without passages are
    reported in the log: they get no aggregated score (``merge_tail`` puts them below).
    """
    require_columns(passages, (QID, DOCNO), "attach_first_stage (passages)")
    require_columns(run, (QID, DOCNO, SCORE), "attach_first_stage (run)")
    ranked = sort_run(run) if RANK not in run.columns else run.copy()
    ranked[QID] = ranked[QID].astype(str)
    ranked[DOCNO] = ranked[DOCNO].astype(str)
    if depth is not None:
        ranked = ranked[ranked[RANK] <= depth]
    first = ranked[[QID, DOCNO, SCORE, RANK]].rename(
        columns={SCORE: FIRST_STAGE_SCORE, RANK: FIRST_STAGE_RANK}
    )
    out = passages.drop(columns=[c for c in (FIRST_STAGE_SCORE, FIRST_STAGE_RANK) if c in passages.columns])
    out = out.assign(**{QID: out[QID].astype(str), DOCNO: out[DOCNO].astype(str)})
    merged = out.merge(first, on=[QID, DOCNO], how="inner", validate="many_to_one")
    dropped = len(out) - len(merged)
    if dropped:
        logger.info(
            "%d passages of documents outside the run's top %s were left out", dropped, depth or "all"
        )
    covered = merged[[QID, DOCNO]].drop_duplicates()
    missing = len(first) - len(covered)
    if missing:
        logger.warning(
            "%d of the run's %d documents%s have no scored passages; they are ranked below the others",
            missing,
            len(first),
            f" (top {depth})" if depth else "",
        )
    if merged.empty:
        raise TuneError("no passage belongs to a document of the run; are the run and the passages the same?")
    return merged.reset_index(drop=True)


def read_passages(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read scored passages from Parquet, TSV (header) or JSON lines (``.gz`` allowed).

    Raises:
        InputFormatError: an unknown extension, missing columns, or non-numeric scores.
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such passages file")
    suffixes = [s.lower() for s in file.suffixes]
    suffix = (
        suffixes[-2] if suffixes and suffixes[-1] == ".gz" and len(suffixes) > 1 else (suffixes or [""])[-1]
    )
    try:
        if suffix == ".parquet":
            frame = pd.read_parquet(file)
        elif suffix == ".tsv":
            frame = pd.read_csv(file, sep="\t", dtype={QID: str, DOCNO: str}, keep_default_na=False)
        elif suffix in (".jsonl", ".json"):
            frame = pd.read_json(file, lines=True, dtype={QID: str, DOCNO: str}, precise_float=True)
        else:
            raise InputFormatError(
                file,
                None,
                f"a passages file ending in {', '.join(PASSAGE_FORMATS)} (optionally .gz)",
                repr(suffix),
            )
    except (ValueError, OSError) as exc:
        if isinstance(exc, InputFormatError):
            raise
        raise InputFormatError(
            file, None, f"a readable {suffix[1:]} file of scored passages", str(exc)
        ) from exc
    needed = [QID, DOCNO, SCORE]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputFormatError(
            file,
            1,
            f"columns {needed} (+ pid, first_stage_score, query, text)",
            f"columns {list(frame.columns)}",
        )
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    for column in (SCORE, FIRST_STAGE_SCORE):
        if column in frame.columns:
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = np.flatnonzero(values.isna().to_numpy())
            if len(bad):
                line = int(bad[0]) + 2 if suffix == ".tsv" else int(bad[0]) + 1
                raise InputFormatError(
                    file,
                    line if suffix != ".parquet" else None,
                    f"a number in column {column!r}",
                    repr(frame[column].iloc[bad[0]]),
                )
            frame[column] = values.astype(np.float64)
    if PID in frame.columns:
        frame[PID] = frame[PID].astype(np.int64)
    return frame


def passages_from_store(
    store_path: str | os.PathLike[str],
    run: pd.DataFrame,
    *,
    fingerprint: str | None = None,
    depth: int | None = None,
) -> tuple[pd.DataFrame, str]:
    """The scored segments of ``run``'s documents from a score store, with first-stage scores.

    Args:
        store_path: the SQLite score store ``evirank rerank --scores`` wrote.
        run: the first-stage run that was re-ranked.
        fingerprint: the scorer's fingerprint (a unique prefix is enough); optional when the
            store holds segments of one scorer only for these queries.
        depth: keep the run's top ``depth`` documents per query.

    Returns:
        (passages [qid, query, docno, pid, text, score, first_stage_score, first_stage_rank],
        the full fingerprint).

    Raises:
        TuneError: segments that were never scored, or several scorers and no fingerprint.
    """
    from evirank.score.store import FINGERPRINT
    from evirank.score.stores import open_store

    qids = sorted(set(run[QID].astype(str)))
    with open_store(store_path, readonly=True) as store:
        frame = store.passages_scores(fingerprint, qids=qids)
    if frame.empty:
        raise TuneError(
            f"{store_path}: no scored segments for the run's {len(qids)} queries"
            + (f" under fingerprint {fingerprint}" if fingerprint else "")
            + "; run `evirank rerank --scores` on this run first"
        )
    found = list(dict.fromkeys(frame[FINGERPRINT]))
    if len(found) > 1:
        raise TuneError(
            f"{store_path}: segments of {len(found)} scorers for these queries "
            f"({', '.join(f[:12] for f in found)}); choose one with --fingerprint"
        )
    passages = attach_first_stage(frame.drop(columns=[FINGERPRINT]), run, depth)
    unscored = int(passages[SCORE].isna().sum())
    if unscored:
        raise TuneError(
            f"{store_path}: {unscored} of {len(passages)} segments of this run have no score yet "
            "(an interrupted rerank?); rerun `evirank rerank --scores` to finish them"
        )
    logger.info(
        "read %d scored passages of %d documents from %s (fingerprint %s)",
        len(passages),
        len(passages[[QID, DOCNO]].drop_duplicates()),
        store_path,
        found[0][:12],
    )
    return passages, str(found[0])


@dataclass(frozen=True)
class EvidenceSource:
    """Where one scorer's passage scores are read from: ``LABEL=STORE[#FINGERPRINT]`` or ``LABEL=FILE``.

    Attributes:
        label: the scorer's label (its weight's name in the grid).
        path: a score store (SQLite file, folder or URL of Parquet shards) or a scored-passages file.
        fingerprint: the scorer's fingerprint (a unique prefix) in a store.

    Example:
        >>> EvidenceSource.parse("bi=runs/scores.sqlite#7c551be5")
        EvidenceSource(label='bi', path='runs/scores.sqlite', fingerprint='7c551be5')
    """

    label: str
    path: str
    fingerprint: str | None = None

    @classmethod
    def parse(cls, text: str) -> EvidenceSource:
        """Parse ``LABEL=PATH[#FINGERPRINT]``.

        Raises:
            TuneError: no ``LABEL=``, an empty path, or a bad label.
        """
        from evirank.aggregate.evidence import EvidenceSpecError, check_labels

        label, sep, rest = str(text).partition("=")
        if not sep or not rest:
            raise TuneError(
                f"--evidence {text!r}: expected LABEL=STORE[#FINGERPRINT] or LABEL=FILE "
                "(e.g. cross=runs/scores.sqlite#3fa2, bi=runs/bi.passages.parquet)"
            )
        path, hash_sep, fingerprint = rest.rpartition("#") if "#" in rest else (rest, "", "")
        if hash_sep and not fingerprint:
            raise TuneError(f"--evidence {text!r}: an empty fingerprint after '#'")
        if not path:
            raise TuneError(f"--evidence {text!r}: expected a path before '#'")
        try:
            check_labels([label.strip()])
        except EvidenceSpecError as exc:
            raise TuneError(f"--evidence {text!r}: {exc}") from None
        return cls(label.strip(), path, fingerprint or None)

    @property
    def is_passages_file(self) -> bool:
        """Whether :attr:`path` is a scored-passages file (else a score store)."""
        file = Path(self.path)
        suffixes = [s.lower() for s in file.suffixes]
        if suffixes and suffixes[-1] == ".gz":
            suffixes = suffixes[:-1]
        return (
            "://" not in self.path and file.is_file() and bool(suffixes) and suffixes[-1] in PASSAGE_FORMATS
        )

    def read(self, run: pd.DataFrame | None, depth: int | None) -> tuple[pd.DataFrame, str | None]:
        """This scorer's passages with first-stage scores, and its fingerprint (None for a file).

        A passages file with a ``score_<label>`` column (``evirank rerank --save-passages`` with
        several scorers) gives that column; otherwise its ``score``.
        """
        from evirank.aggregate.evidence import evidence_column

        if self.is_passages_file:
            if self.fingerprint:
                raise TuneError(f"--evidence {self.label}={self.path}: a passages file takes no #FINGERPRINT")
            frame = read_passages(self.path)
            column = evidence_column(self.label)
            if column in frame.columns:
                values = pd.to_numeric(frame[column], errors="coerce")
                bad = np.flatnonzero(values.isna().to_numpy())
                if len(bad):
                    raise InputFormatError(
                        self.path, None, f"a number in column {column!r}", repr(frame[column].iloc[bad[0]])
                    )
                frame[SCORE] = values.astype(np.float64)
            frame = frame.drop(columns=[c for c in frame.columns if c.startswith(f"{SCORE}_")])
            if run is not None:
                frame = attach_first_stage(frame, run, depth)
            return frame, None
        if run is None:
            raise TuneError(f"--evidence {self.label}: a score store needs the first-stage run (--run)")
        try:
            return passages_from_store(self.path, run, fingerprint=self.fingerprint, depth=depth)
        except TuneError as exc:
            raise TuneError(
                f"--evidence {self.label}: {exc} (write {self.label}=STORE#FINGERPRINT)"
            ) from None


def load_evidence(
    sources: Sequence[EvidenceSource], run: pd.DataFrame | None, depth: int | None = None
) -> tuple[dict[str, pd.DataFrame], dict[str, str | None]]:
    """Each scorer's passages by label, in the order given, and each one's fingerprint.

    Raises:
        TuneError: a repeated label, or a source that cannot be read.
    """
    labels = [s.label for s in sources]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise TuneError(
            f"--evidence: the label {', '.join(repeated)} is given twice; give each scorer its own"
        )
    frames: dict[str, pd.DataFrame] = {}
    fingerprints: dict[str, str | None] = {}
    for source in sources:
        frames[source.label], fingerprints[source.label] = source.read(run, depth)
        logger.info("evidence %s: %d passages from %s", source.label, len(frames[source.label]), source.path)
    return frames, fingerprints
