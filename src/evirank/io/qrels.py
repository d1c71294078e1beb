"""Reading and writing relevance judgements: TREC qrels and BEIR qrels TSV.

Accepted files (detected from the first non-blank line):

- TREC: ``qid iter docno label`` (4 whitespace-separated columns; ``iter`` is ignored)
- BEIR: a header ``query-id corpus-id score``, then ``qid docno label`` rows (tab-separated)
- three columns without a header: ``qid docno label``, only when the label column holds
  relevance grades: integers from -1000 to 1000 (a TREC file cut to ``qid iter docno``, with
  ``0`` in the second column of every line, or with document ids where the labels should be,
  is rejected, naming the line)

Labels are integer grades from -1000000 to 1000000 (negative grades allowed; see LABEL_BOUNDS).
A pair judged twice with the same label is kept once (with a warning); judged twice with
different labels is an error.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "qrels.txt"
    >>> _ = path.write_text("1 0 d1 2\\n1 0 d2 0\\n")
    >>> read_qrels(path).values.tolist()
    [['1', 'd1', 2], ['1', 'd2', 0]]
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from evirank.errors import InputFormatError
from evirank.frames import DOCNO, LABEL, QID, QRELS_COLUMNS, make_qrels, natural_key, require_columns
from evirank.io._table import (
    fast_read,
    first_content_line,
    has_whitespace,
    int_converter,
    open_text_for_write,
    slow_read,
    split_fields,
)
from evirank.io.files import PathLike, input_file, iter_lines, shorten
from evirank.io.irds import irds_id, load_irds
from evirank.outputs import atomic_output

logger = logging.getLogger(__name__)

BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")
LABEL_BOUNDS = (-1_000_000, 1_000_000)
"""Labels are relevance grades. trec_eval (and the evaluators built on it) hold them as C ints and
keep a count for every grade up to the largest: a label beyond a C int wraps around (4294967296
reads as 0, 4611686018427387904 crashes the process) and a label of 2147483647 asks for 17 GB.
Real collections use a handful of grades, so a label outside this range is refused with its line."""
MAX_HEADERLESS_LABEL = 1000
"""A headerless 3-column file whose labels go beyond +-this is read as a mistake (ids as labels)."""
_TREC = "4 columns: qid iter docno label"
_THREE = "3 columns: qid docno label"


def read_qrels(path: PathLike) -> pd.DataFrame:
    """Read a qrels file (TREC 4 columns, or BEIR TSV with its header) into a Qrels frame.

    ``irds:<dataset-id>`` reads the judgements of an ir_datasets dataset instead.

    Returns:
        a frame [qid, docno, label] in file order (string ids, integer labels).

    Raises:
        InputFormatError: naming the file and line, for a line with the wrong number of
            columns, a non-integer label, a pair judged twice with different labels,
            non-UTF-8 bytes, or an empty file.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "test.tsv"
        >>> _ = path.write_text("query-id\\tcorpus-id\\tscore\\n3\\td7\\t1\\n")
        >>> read_qrels(path).values.tolist()
        [['3', 'd7', 1]]
    """
    dataset_id = irds_id(path)
    if dataset_id is not None:
        return load_irds(dataset_id).qrels()
    file = input_file(path, "a qrels file (TREC or BEIR)")
    first = first_content_line(file)
    if first is None:
        raise InputFormatError(file, None, f"TREC qrels ({_TREC}) or BEIR qrels TSV", "an empty file")
    first_no, first_line = first
    tokens = split_fields(first_line)
    skip = 0
    if [t.lower() for t in tokens] == list(BEIR_QRELS_HEADER):
        skip, expected, cols = first_no, f"{_THREE} (BEIR qrels, after its header)", (0, 1, 2)
    elif len(tokens) == 4:
        expected, cols = _TREC, (0, 2, 3)
    elif len(tokens) == 3:
        expected, cols = _THREE, (0, 1, 2)
    else:
        raise InputFormatError(
            file,
            first_no,
            f"TREC qrels ({_TREC}) or BEIR qrels (header {' '.join(BEIR_QRELS_HEADER)})",
            f"{len(tokens)} column(s): {shorten(first_line.strip())}",
        )
    ncols = 4 if expected == _TREC else 3
    label_col = cols[2]

    headerless = ncols == 3 and not skip
    # a headerless file's big "labels" are most likely ids in the wrong column: _check_headerless
    # says so (every label beyond +-MAX_HEADERLESS_LABEL is refused there), so it is read wider first
    bounds = (-(2**63), 2**63 - 1) if headerless else LABEL_BOUNDS
    frame = fast_read(file, ncols, skip_first=skip, dtypes={label_col: np.int64})
    if frame is not None and not frame[label_col].between(*bounds).all():
        frame = None  # the slow path names the line of the label out of range
    if frame is not None:
        qrels = pd.DataFrame({QID: frame[cols[0]], DOCNO: frame[cols[1]], LABEL: frame[label_col]})
        if not qrels.duplicated([QID, DOCNO]).any():
            result = make_qrels(qrels)
        else:
            result = _slow_qrels(file, ncols, expected, cols, skip, bounds)
    else:
        result = _slow_qrels(file, ncols, expected, cols, skip, bounds)
    if ncols == 3 and not skip:
        _check_headerless(file, result)
    return result


def _check_headerless(file: Path, qrels: pd.DataFrame) -> None:
    """Reject a headerless ``qid docno label`` file that is really something else."""
    expected = f"{_THREE}, the label a relevance grade from -{MAX_HEADERLESS_LABEL} to {MAX_HEADERLESS_LABEL}"
    docnos = qrels[DOCNO].astype(str)
    if len(qrels) > 1 and docnos.isin(["0", "Q0"]).all():
        first = first_content_line(file)
        raise InputFormatError(
            file,
            first[0] if first else None,
            expected,
            f"{docnos.iloc[0]!r} as the document id of every line: this looks like TREC qrels "
            "(qid iter docno label) without their label column",
            hint="give the four TREC columns, or a BEIR qrels TSV with its header",
        )
    too_big = qrels[LABEL].abs() > MAX_HEADERLESS_LABEL
    if too_big.any():
        bad = str(int(qrels.loc[too_big, LABEL].iloc[0]))
        line_no = None
        for number, line in iter_lines(file):
            fields = split_fields(line)
            if len(fields) == 3 and fields[2].lstrip("+-").lstrip("0") == bad.lstrip("-"):
                line_no = number
                break
        raise InputFormatError(
            file,
            line_no,
            expected,
            f"the label {bad}, which looks like a document id (is a column missing?)",
            hint="give the four TREC columns (qid iter docno label), or a BEIR qrels TSV with its header",
        )


def _slow_qrels(
    file: Path, ncols: int, expected: str, cols: tuple[int, int, int], skip: int, bounds: tuple[int, int]
) -> pd.DataFrame:
    names = [str(i) for i in range(ncols)]
    rows = slow_read(
        file,
        names,
        expected,
        {cols[2]: int_converter(file, f"relevance label in column {cols[2] + 1}", bounds)},
        skip,
    )
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    out: list[tuple[str, str, int]] = []
    repeats = 0
    for line_no, values in rows:
        qid, docno, label = str(values[cols[0]]), str(values[cols[1]]), int(values[cols[2]])  # type: ignore[call-overload]
        before = seen.get((qid, docno))
        if before is not None:
            if before[1] != label:
                raise InputFormatError(
                    file,
                    line_no,
                    "each (qid, docno) pair judged once",
                    f"query {qid} document {docno} labelled {label} here and {before[1]} on line {before[0]}",
                )
            repeats += 1
            continue
        seen[(qid, docno)] = (line_no, label)
        out.append((qid, docno, label))
    if repeats:
        logger.warning("%s: %d repeated judgement(s) with the same label kept once", file, repeats)
    return make_qrels(out)


def write_qrels(
    qrels: pd.DataFrame, path: PathLike, *, format: str = "trec", overwrite: bool = False
) -> Path:
    """Write a Qrels frame as TREC qrels (``qid 0 docno label``) or BEIR TSV (with header).

    Rows are ordered by qid (natural order) then docno, so the file is deterministic. The
    write is atomic and refuses to replace an existing file unless ``overwrite``.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "qrels.txt"
        >>> _ = write_qrels(make_qrels([("2", "d1", 1), ("10", "d0", 0)]), path)
        >>> path.read_text()
        '2 0 d1 1\\n10 0 d0 0\\n'
    """
    if format not in ("trec", "beir"):
        raise ValueError(f"format must be 'trec' or 'beir', not {format!r}")
    require_columns(qrels, QRELS_COLUMNS, "write_qrels")
    frame = make_qrels(qrels[list(QRELS_COLUMNS)])
    for column in (QID, DOCNO):
        bad = has_whitespace(frame[column])
        if bad.any():
            raise ValueError(
                f"write_qrels: {column} values must be non-empty and without whitespace; "
                f"found {shorten(frame.loc[bad, column].iloc[0])}"
            )
    frame = frame.assign(_key=natural_key(frame[QID]))
    frame = frame.sort_values(["_key", DOCNO], kind="mergesort").drop(columns="_key")
    if format == "trec":
        lines = frame[QID] + " 0 " + frame[DOCNO] + " " + frame[LABEL].astype(str) + "\n"
        header = ""
    else:
        lines = frame[QID] + "\t" + frame[DOCNO] + "\t" + frame[LABEL].astype(str) + "\n"
        header = "\t".join(BEIR_QRELS_HEADER) + "\n"
    out = Path(path)
    compress = out.name.endswith(".gz")
    with atomic_output(out, overwrite=overwrite) as tmp, open_text_for_write(tmp, compress) as handle:
        handle.write(header)
        handle.write("".join(lines.tolist()))
    logger.info("wrote %d judgements to %s", len(frame), out)
    return out
