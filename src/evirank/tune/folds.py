"""Cross-validation folds: which queries tune the parameters, which are predicted with them.

Three sources:

- the Robust04 JSON format (Yang et al. 2019, as Capreolus ships it), ``{fold: {"train_qids":
  [...], "predict": {"dev": [...], "test": [...]}}}``. Birch learned its weights on four folds
  and predicted the fifth, so by default a fold tunes on ``train_qids`` + ``dev`` and predicts
  ``test`` (``tune_on=("train",)`` tunes on the training queries alone);
- a TSV of ``qid<TAB>fold`` lines (an optional ``qid fold`` header, ``#`` comments): each fold
  predicts its own queries and tunes on all the others;
- :func:`k_folds`: ``k`` folds drawn with a seed. Queries are sorted (naturally) and shuffled by
  ``numpy.random.default_rng(seed)``, then dealt round-robin, so the same qids and seed always
  give the same folds, of sizes that differ by at most one.

In every case a fold's tuning and predicted queries are disjoint, and each query is predicted
by at most one fold (checked on reading).

Example:
    >>> folds = k_folds([str(q) for q in range(1, 11)], k=5, seed=1)
    >>> [len(f.test) for f in folds], sorted(q for f in folds for q in f.test) == sorted(folds.qids)
    ([2, 2, 2, 2, 2], True)
    >>> set(folds[0].tune) & set(folds[0].test)
    set()
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evirank.errors import InputFormatError
from evirank.frames import natural_order
from evirank.outputs import atomic_output
from evirank.tune.errors import FoldsError

logger = logging.getLogger(__name__)

#: What a fold of the Robust04 JSON tunes on by default: Birch's four folds.
DEFAULT_TUNE_ON: tuple[str, ...] = ("train", "dev")


@dataclass(frozen=True)
class Fold:
    """One fold: parameters are chosen on ``tune`` and applied to ``test``.

    Attributes:
        name: the fold's name (``s1``, ``1``, ...).
        tune: the queries whose mean metric chooses the parameters.
        test: the queries ranked with those parameters (disjoint from ``tune``).
    """

    name: str
    tune: tuple[str, ...]
    test: tuple[str, ...]


class Folds(Sequence[Fold]):
    """An ordered set of folds whose predicted (test) queries do not overlap.

    Args:
        folds: the folds, in order.
        source: where they came from (a path, or ``k_folds(k=5, seed=1)``), for records.

    Raises:
        FoldsError: a fold whose tuning and test queries overlap, a query predicted by two
            folds, or no folds.
    """

    def __init__(self, folds: Iterable[Fold], source: str = "") -> None:
        self._folds = tuple(folds)
        self.source = source
        if not self._folds:
            raise FoldsError("expected at least one fold, found none")
        seen: dict[str, str] = {}
        names = [f.name for f in self._folds]
        if len(set(names)) != len(names):
            raise FoldsError(f"fold names must be unique, found {names}")
        for fold in self._folds:
            leak = sorted(set(fold.tune) & set(fold.test))
            if leak:
                raise FoldsError(
                    f"fold {fold.name}: queries {leak[:5]} are both tuned on and predicted; "
                    "a fold's test queries must not choose its own parameters"
                )
            for qid in fold.test:
                if qid in seen:
                    raise FoldsError(f"query {qid} is predicted by folds {seen[qid]} and {fold.name}")
                seen[qid] = fold.name

    def __len__(self) -> int:
        return len(self._folds)

    def __getitem__(self, index: int) -> Fold:  # type: ignore[override]
        return self._folds[index]

    def __iter__(self) -> Iterator[Fold]:
        return iter(self._folds)

    def __repr__(self) -> str:
        return f"Folds({len(self)} folds, {len(self.qids)} test queries, source={self.source!r})"

    @property
    def qids(self) -> list[str]:
        """Every predicted query, fold by fold."""
        return [q for fold in self._folds for q in fold.test]

    def fold_of(self) -> dict[str, str]:
        """qid -> the name of the fold that predicts it."""
        return {q: fold.name for fold in self._folds for q in fold.test}

    def restrict(self, qids: Iterable[str]) -> Folds:
        """The same folds over only ``qids`` (queries without data or qrels drop out).

        Folds left with no test queries are dropped; a fold left with test queries but no
        tuning queries raises :class:`FoldsError`.
        """
        keep = set(map(str, qids))
        folds = []
        for fold in self._folds:
            test = tuple(q for q in fold.test if q in keep)
            tune = tuple(q for q in fold.tune if q in keep)
            if not test:
                logger.warning("fold %s has none of its test queries in the data; it is left out", fold.name)
                continue
            if not tune:
                raise FoldsError(f"fold {fold.name} has no tuning queries in the data")
            folds.append(Fold(fold.name, tune, test))
        return Folds(folds, self.source)

    def to_record(self) -> dict[str, Any]:
        """The folds in the Robust04 JSON shape (``dev`` empty), loadable by :func:`read_folds`."""
        return {
            f.name: {"train_qids": list(f.tune), "predict": {"dev": [], "test": list(f.test)}} for f in self
        }


def k_folds(qids: Iterable[str], k: int = 5, seed: int = 0) -> Folds:
    """``k`` folds over ``qids``, assigned deterministically from ``seed`` (see module docstring).

    Example:
        >>> k_folds(["1", "2", "3"], k=3, seed=0).fold_of() == k_folds(["3", "2", "1"], k=3, seed=0).fold_of()
        True
    """
    unique = natural_order(str(q) for q in qids)
    if not isinstance(k, int) or k < 2:
        raise FoldsError(f"k must be an integer >= 2, found {k!r}")
    if len(unique) < k:
        raise FoldsError(f"{k} folds need at least {k} queries, found {len(unique)}")
    order = np.random.default_rng(seed).permutation(len(unique))
    assigned: list[list[str]] = [[] for _ in range(k)]
    for position, index in enumerate(order):
        assigned[position % k].append(unique[int(index)])
    folds = []
    for i, test in enumerate(assigned):
        test_set = set(test)
        tune = tuple(q for q in unique if q not in test_set)
        folds.append(Fold(str(i + 1), tune, tuple(natural_order(test))))
    return Folds(folds, f"k_folds(k={k}, seed={seed})")


def read_folds(path: str | os.PathLike[str], tune_on: Sequence[str] = DEFAULT_TUNE_ON) -> Folds:
    """Read folds from the Robust04 JSON format or a ``qid<TAB>fold`` TSV (chosen by content).

    Args:
        path: the file.
        tune_on: for the JSON format, which lists tune a fold: ``train`` (``train_qids``)
            and/or ``dev`` (``predict.dev``).

    Raises:
        InputFormatError: the file has neither format; the message names the line.
        FileNotFoundError: no such file.
    """
    file = Path(path)
    text = file.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _read_json(file, text, tune_on)
    return _read_tsv(file, text)


def write_folds(folds: Folds, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``folds`` in the Robust04 JSON shape (see :meth:`Folds.to_record`)."""
    with atomic_output(path, overwrite=overwrite) as tmp:
        tmp.write_text(json.dumps(folds.to_record(), indent=2) + "\n", encoding="utf-8")
    return Path(path)


def _read_json(file: Path, text: str, tune_on: Sequence[str]) -> Folds:
    bad = sorted(set(tune_on) - {"train", "dev"})
    if bad or not tune_on:
        raise FoldsError(f"tune_on must name 'train' and/or 'dev', found {list(tune_on)}")
    expected = '{fold: {"train_qids": [...], "predict": {"dev": [...], "test": [...]}}}'
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFormatError(
            file, exc.lineno, f"JSON folds {expected}", f"invalid JSON ({exc.msg})"
        ) from None
    if not isinstance(data, dict) or not data:
        raise InputFormatError(file, 1, f"JSON folds {expected}", f"a {type(data).__name__}")
    folds = []
    for name, body in data.items():
        line = _line_of_key(text, name)
        if not isinstance(body, dict) or not isinstance(body.get("predict"), dict):
            raise InputFormatError(file, line, f'fold {name!r} with "train_qids" and "predict"', _keys(body))
        lists = {
            "train": body.get("train_qids", []),
            "dev": body["predict"].get("dev", []),
            "test": body["predict"].get("test"),
        }
        for key, value in lists.items():
            if not isinstance(value, list) or not all(isinstance(q, (str, int)) for q in value):
                raise InputFormatError(
                    file, line, f"fold {name!r}: {key} as a list of query ids", _shorten(value)
                )
        if not lists["test"]:
            raise InputFormatError(
                file, line, f'fold {name!r}: a non-empty "predict": {{"test": [...]}}', "none"
            )
        tune = tuple(dict.fromkeys(str(q) for key in tune_on for q in lists[key]))
        test = tuple(dict.fromkeys(str(q) for q in lists["test"]))
        folds.append(Fold(str(name), tune, test))
    try:
        return Folds(folds, str(file))
    except FoldsError as exc:
        raise InputFormatError(
            file,
            None,
            "folds whose test queries are disjoint from their own tuning queries and from each other",
            str(exc),
        ) from None


_TSV_LINE = re.compile(r"^(\S+)\s+(\S+)$")


def _read_tsv(file: Path, text: str) -> Folds:
    fold_of: dict[str, str] = {}
    order: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _TSV_LINE.match(line)
        if match is None:
            raise InputFormatError(
                file, number, "two columns 'qid<TAB>fold' (or the Robust04 JSON folds)", repr(_shorten(line))
            )
        qid, fold = match.groups()
        if (
            not order
            and not fold_of
            and qid.lower() in ("qid", "query-id", "query_id")
            and fold.lower() == "fold"
        ):
            continue  # header
        if qid in fold_of:
            if fold_of[qid] != fold:
                raise InputFormatError(
                    file,
                    number,
                    f"each query in one fold; query {qid} is already in fold {fold_of[qid]}",
                    f"fold {fold}",
                )
            continue
        fold_of[qid] = fold
        if fold not in order:
            order.append(fold)
    if len(order) < 2:
        raise InputFormatError(
            file, None, "qid<TAB>fold lines naming at least 2 folds", f"{len(order)} fold(s)"
        )
    qids = natural_order(fold_of)
    folds = [
        Fold(name, tuple(q for q in qids if fold_of[q] != name), tuple(q for q in qids if fold_of[q] == name))
        for name in natural_order(order)
    ]
    return Folds(folds, str(file))


def _line_of_key(text: str, key: str) -> int | None:
    match = re.search(r'"' + re.escape(str(key)) + r'"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _keys(body: object) -> str:
    return f"keys {sorted(body)}" if isinstance(body, dict) else f"a {type(body).__name__}"


def _shorten(value: object, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
