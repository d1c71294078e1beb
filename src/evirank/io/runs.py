"""Reading and writing TREC runs (``qid Q0 docno rank score tag``).

Ranking order is the project's deterministic rule (:func:`evirank.frames.sort_run`): qid in
natural order, score descending, then docno descending (trec_eval's tie rule); ranks are
reassigned 1..n from that order. The rank column of a file that is read is therefore not
trusted (trec_eval ignores it too); the scores decide, unless ``read_run(path, ranks="file")``
asks for the file's own ranks (``evaluate --ties rank``).

Scores are written with Python's shortest round-trip representation (``repr``), so reading a
written run gives back exactly the same floats and no ties are created by rounding.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
    >>> _ = write_run(make_run([("1", "d1", 0.5), ("1", "d2", 1.25)]), path, tag="demo")
    >>> print(path.read_text(), end="")
    1 Q0 d2 1 1.25 demo
    1 Q0 d1 2 0.5 demo
    >>> read_run(path)[["docno", "rank"]].values.tolist()
    [['d2', 1], ['d1', 2]]
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from evirank.errors import InputFormatError
from evirank.frames import DOCNO, QID, RANK, SCORE, make_run, require_columns, sort_run
from evirank.io._table import fast_read, float_converter, has_whitespace, open_text_for_write, slow_read
from evirank.io.files import PathLike, input_file, shorten
from evirank.outputs import atomic_output

logger = logging.getLogger(__name__)

DEFAULT_TAG = "evirank"
_EXPECTED = "6 columns: qid Q0 docno rank score tag"


def read_run(path: PathLike, *, ranks: str = "scores", finite: bool = True) -> pd.DataFrame:
    """Read a TREC run into a Run frame [qid, docno, score, rank], deterministically sorted.

    The run's tag (from its first line) is kept in ``run.attrs["tag"]``; :func:`write_run`
    uses it when no tag is given. The Q0 column is read but not used.

    Args:
        path: the run file (``.gz`` too).
        ranks: ``"scores"``: ranks are renumbered from the scores (trec_eval's rule, see the
            module docstring); ``"file"``: the rank column of the file is kept as it is (a
            number on every line), for evaluating by the run's own order.
        finite: refuse an infinite score (naming its line); ``False`` accepts ``inf`` and
            ``-inf`` as trec_eval does.

    Raises:
        InputFormatError: naming the file and line, for a line with the wrong number of
            columns, a score that is not a number (or is infinite), a document listed twice
            for one query, non-UTF-8 bytes, or an empty file.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
        >>> _ = path.write_text("1 Q0 d1 1 2.0 bm25\\n1 Q0 d2 2 3.0 bm25\\n")
        >>> run = read_run(path)
        >>> run["docno"].tolist(), run.attrs["tag"]
        (['d2', 'd1'], 'bm25')
        >>> read_run(path, ranks="file")[["docno", "rank"]].values.tolist()
        [['d2', 2], ['d1', 1]]
    """
    if ranks not in ("scores", "file"):
        raise ValueError(f"ranks must be 'scores' or 'file', not {ranks!r}")
    file = input_file(path, "a TREC run file")
    keep_ranks = ranks == "file"
    dtypes = {1: "category", 3: np.float64 if keep_ranks else "category", 4: np.float64, 5: "category"}
    frame = fast_read(file, 6, dtypes=dtypes)
    run: pd.DataFrame | None = None
    if frame is not None:
        candidate = pd.DataFrame({QID: frame[0], DOCNO: frame[2], SCORE: frame[4]})
        if keep_ranks:
            candidate[_FILE_RANK] = frame[3]
        numbers = candidate[[SCORE, _FILE_RANK]] if keep_ranks else candidate[[SCORE]]
        clean = np.isfinite(numbers.to_numpy()).all() if (finite or keep_ranks) else True
        if clean and not candidate.duplicated([QID, DOCNO]).any():
            run = candidate
            tag = str(frame.iloc[0, 5])
    if run is None:
        run, tag = _slow_run(file, keep_ranks=keep_ranks, finite=finite)
    result = make_run(run)
    if keep_ranks:
        file_ranks = result.pop(_FILE_RANK).to_numpy()
        integral = np.all(file_ranks == np.round(file_ranks)) and np.all(np.abs(file_ranks) < 2**53)
        result[RANK] = file_ranks.astype(np.int64) if integral else file_ranks
    result.attrs["tag"] = tag
    return result


_FILE_RANK = "_file_rank"


def _slow_run(file: Path, *, keep_ranks: bool = False, finite: bool = True) -> tuple[pd.DataFrame, str]:
    converters = {4: float_converter(file, "score in column 5", finite=finite)}
    if keep_ranks:
        converters[3] = float_converter(file, "rank in column 4", finite=True)
    rows = slow_read(file, ["qid", "q0", "docno", "rank", "score", "tag"], _EXPECTED, converters)
    seen: dict[tuple[str, str], int] = {}
    for line_no, values in rows:
        key = (str(values[0]), str(values[2]))
        before = seen.setdefault(key, line_no)
        if before != line_no:
            raise InputFormatError(
                file,
                line_no,
                "each document at most once per query",
                f"query {key[0]} document {key[1]} again (first on line {before})",
            )
    frame = pd.DataFrame(
        {
            QID: [str(v[0]) for _, v in rows],
            DOCNO: [str(v[2]) for _, v in rows],
            SCORE: np.array([v[4] for _, v in rows], dtype=np.float64),
        }
    )
    if keep_ranks:
        frame[_FILE_RANK] = np.array([v[3] for _, v in rows], dtype=np.float64)
    return frame, str(rows[0][1][5])


def format_score(value: float) -> str:
    """The shortest text that reads back as exactly ``value`` (Python's float ``repr``).

    Example:
        >>> format_score(0.1), format_score(15.7806), format_score(1e-7)
        ('0.1', '15.7806', '1e-07')
    """
    return repr(float(value))


def write_run(
    run: pd.DataFrame,
    path: PathLike,
    tag: str | None = None,
    *,
    overwrite: bool = False,
) -> Path:
    """Write a Run frame as a TREC run, deterministically ordered, atomically.

    Args:
        run: a frame with at least [qid, docno, score]; ranks are recomputed by
            :func:`evirank.frames.sort_run`, so the file order is qid (natural), score
            descending, docno descending.
        path: the output file (``.gz`` is gzipped).
        tag: the run tag; defaults to ``run.attrs["tag"]`` if set, else ``"evirank"``.
        overwrite: replace an existing file (otherwise :class:`~evirank.errors.OutputExistsError`).

    Raises:
        ValueError: a qid, docno or tag that is empty or holds whitespace, or a NaN score.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "run.txt"
        >>> _ = write_run(make_run([("1", "b", 1.0), ("1", "a", 1.0)]), path)
        >>> print(path.read_text(), end="")
        1 Q0 b 1 1.0 evirank
        1 Q0 a 2 1.0 evirank
    """
    require_columns(run, (QID, DOCNO, SCORE), "write_run")
    tag = str(run.attrs.get("tag", DEFAULT_TAG)) if tag is None else tag
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"write_run: the tag must be non-empty and without whitespace, not {tag!r}")
    frame = run[[QID, DOCNO, SCORE]].copy()
    frame[QID] = frame[QID].astype(str)
    frame[DOCNO] = frame[DOCNO].astype(str)
    frame[SCORE] = frame[SCORE].astype(np.float64)
    for column in (QID, DOCNO):
        bad = has_whitespace(frame[column])
        if bad.any():
            raise ValueError(
                f"write_run: {column} values must be non-empty and without whitespace; "
                f"found {shorten(frame.loc[bad, column].iloc[0])}"
            )
    nan = frame[SCORE].isna()
    if nan.any():
        first = frame.loc[nan].iloc[0]
        raise ValueError(f"write_run: score is NaN for query {first[QID]} document {first[DOCNO]}")
    dup = frame.duplicated([QID, DOCNO])
    if dup.any():
        first = frame.loc[dup].iloc[0]
        raise ValueError(f"write_run: query {first[QID]} lists document {first[DOCNO]} more than once")
    frame = sort_run(frame)
    scores = [format_score(s) for s in frame[SCORE].tolist()]
    lines = (
        frame[QID]
        + " Q0 "
        + frame[DOCNO]
        + " "
        + frame[RANK].astype(str)
        + " "
        + pd.Series(scores, index=frame.index, dtype=object).astype(str)
        + f" {tag}\n"
    )
    out = Path(path)
    compress = out.name.endswith(".gz")
    with atomic_output(out, overwrite=overwrite) as tmp, open_text_for_write(tmp, compress) as handle:
        for start in range(0, len(lines), 100_000):
            handle.write("".join(lines.iloc[start : start + 100_000].tolist()))
    logger.info("wrote %d lines (%d queries) to %s", len(frame), frame[QID].nunique(), out)
    return out
