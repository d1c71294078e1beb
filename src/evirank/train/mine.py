"""Hard negatives: the negatives of each training query mined from the top of a model's ranking.

A cross-encoder trained on BM25's negatives learns to tell relevant texts from what BM25
confuses with them; re-ranking a dense or hybrid first stage, or a first-round model's
ranking, it meets other near misses. Dense-retrieval and re-ranker training mine negatives
from the retriever the model will work behind:

* Karpukhin et al. (2020, DPR) take the top BM25 passages that do not contain the answer;
* Gao, Dai & Callan (2021, "Rethink Training of BERT Rerankers in Multi-Stage Retrieval
  Pipeline") sample the negatives of their localized contrastive estimation from the top of
  the retriever's ranking (:mod:`evirank.train.listwise` is that loss);
* Qu et al. (2021, RocketQA) show that the very top of a strong retriever's ranking holds
  many unlabelled positives (false negatives), hence the option to skip the top ranks.

A ranking comes from a :class:`NegativeSource`:

* ``run:FILE`` - any TREC run of the training queries: BM25 with RM3, a hybrid run, or a
  first-round cross-encoder's ranking written by ``evirank rerank`` (its score store makes a
  second ranking cheap);
* ``vectors:PATH`` - the bi-encoder's ranking by lookup in stored passage vectors (an index made
  with ``evirank index --embed``, or a vector folder made by ``evirank embed``): each query is
  embedded by the model that made the vectors, every stored passage scored by its cosine, and a
  document ranked by its best passage (MaxP). Exact search, so no approximation error.

:func:`mine_negatives` then keeps, per query, the documents ranked in ``(skip, depth]`` that are
not judged relevant (nor gold evidence), and picks ``per_query`` of them: the best-ranked
("top") or a seeded random sample ("random", as Gao et al. sample). The result is a run of
exactly the chosen negatives, which the example builders take in place of their own run.

Example:
    >>> from evirank.frames import make_run
    >>> ranking = make_run([("1", "d1", 3.0), ("1", "d2", 2.0), ("1", "d3", 1.0)])
    >>> mined = mine_negatives(ranking, {("1", "d1")}, depth=3, per_query=1)
    >>> mined[["qid", "docno", "rank"]].values.tolist()
    [['1', 'd2', 1]]
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from evirank.errors import InputPathError, UsageError
from evirank.frames import DOCNO, QID, RANK, SCORE, make_run, natural_order, require_columns, sort_run
from evirank.grammar import SpecError, parse_spec

logger = logging.getLogger(__name__)

Pick = Literal["top", "random"]
KINDS = ("run", "vectors")


@dataclass(frozen=True)
class NegativeSource:
    """Where a ranking of the training queries comes from: ``run:FILE`` or ``vectors:PATH``.

    Example:
        >>> NegativeSource.parse("run:runs/train.bm25.txt")
        NegativeSource(origin='run', path='runs/train.bm25.txt')
        >>> NegativeSource.parse("bm25")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        evirank.errors.UsageError: a negatives source is run:FILE (a TREC run) or vectors:PATH ...
    """

    origin: Literal["run", "vectors"]
    path: str

    @classmethod
    def parse(cls, spec: str) -> NegativeSource:
        """Parse ``KIND:PATH``.

        Raises:
            UsageError: an unknown kind or an empty path.
        """
        try:
            parsed = parse_spec(spec, what="negatives source", tail=True, error=SpecError)
        except SpecError:
            parsed = None
        kind, path = (parsed.name, parsed.arg(0)) if parsed is not None else ("", None)
        if kind not in KINDS or not path:
            raise UsageError(
                "a negatives source is run:FILE (a TREC run) or vectors:PATH (an index with passage "
                f"vectors, or a vector folder), found {spec!r}"
            )
        return cls(kind, path)  # type: ignore[arg-type]

    @property
    def spec(self) -> str:
        """The source as given (``kind:path``)."""
        return f"{self.origin}:{self.path}"

    def check(self) -> None:
        """Raise :class:`~evirank.errors.InputPathError` unless the path exists as its kind needs.

        Example:
            >>> NegativeSource.parse("run:no/such/run.txt").check()
            Traceback (most recent call last):
            ...
            evirank.errors.InputPathError: no/such/run.txt: expected a TREC run file, found nothing
        """
        path = Path(self.path)
        if self.origin == "run" and not path.is_file():
            raise InputPathError(path, "a TREC run file", "a folder" if path.is_dir() else "nothing")
        if self.origin == "vectors" and not path.is_dir():
            expected = "an index with passage vectors or a vector folder"
            raise InputPathError(path, expected, "a file" if path.exists() else "nothing")


def open_vectors(path: str | os.PathLike[str]) -> Any:
    """The passage vectors of an index (``evirank index --embed``) or of a vector folder.

    Raises:
        FileNotFoundError: neither an index recording vectors nor a vector folder.
    """
    from evirank.vectors import PassageVectors
    from evirank.vectors.index import INDEX_MARKER, vectors_of_index

    folder = Path(path)
    if (folder / INDEX_MARKER).is_file():
        vectors = vectors_of_index(folder)
        if vectors is None:
            raise FileNotFoundError(
                f"{folder}: this index has no passage vectors (make them with `evirank embed --index`)"
            )
        return vectors
    return PassageVectors.open(folder)


def _bi_encoder_of(vectors: Any, device: str | None) -> Any:
    """The bi-encoder that made ``vectors`` (from its manifest), checked by fingerprint."""
    from evirank.config import Runtime
    from evirank.score import BiEncoder

    model = dict(vectors.identity.model)
    name = model.get("model")
    if not name:
        raise UsageError(f"{vectors.path}: the manifest does not name the model that made the vectors")
    scorer = BiEncoder(
        str(name),
        Runtime(device=device or "auto", max_length=model.get("max_length")),
        query_prefix=str(model.get("query_prefix") or ""),
        passage_prefix=str(model.get("passage_prefix") or ""),
    )
    vectors.check_scorer(scorer)
    return scorer


def dense_ranking(
    vectors: Any,
    queries: Mapping[str, str],
    depth: int,
    *,
    embed: Any = None,
    device: str | None = None,
    batch_queries: int = 64,
) -> pd.DataFrame:
    """Each query's top ``depth`` documents by their best stored passage (exact search, MaxP).

    Args:
        vectors: :class:`~evirank.vectors.PassageVectors` (unit-length passage vectors).
        queries: qid -> query text.
        depth: documents kept per query.
        embed: texts -> unit-length vectors (default: the bi-encoder that made ``vectors``,
            checked against their fingerprint).
        device: where that bi-encoder runs (default: scoring's rule).
        batch_queries: queries scored against all passages at once.

    Returns:
        A Run frame [qid, docno, score, rank] (ties in trec_eval's order).

    Example:
        >>> run = dense_ranking(vectors, {"1": "a claim"}, 10)  # doctest: +SKIP
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, found {depth}")
    qids = natural_order(list(queries))
    if not qids or len(vectors) == 0:
        return make_run([])
    if embed is None:
        scorer = _bi_encoder_of(vectors, device)
        prefix = scorer.query_prefix

        def embed(texts: list[str]) -> np.ndarray:
            return np.asarray(scorer.embed([prefix + t for t in texts]), dtype=np.float32)

    docnos = np.asarray(vectors.frame()[DOCNO].to_numpy(), dtype=object)
    starts = np.flatnonzero(np.r_[True, docnos[1:] != docnos[:-1]])
    doc_ids = docnos[starts]
    matrix = vectors.vectors(np.arange(len(vectors)))
    keep = min(depth, len(doc_ids))
    rows: list[tuple[str, str, float]] = []
    for begin in range(0, len(qids), batch_queries):
        chunk = qids[begin : begin + batch_queries]
        q = np.asarray(embed([queries[qid] for qid in chunk]), dtype=np.float32)
        best = np.maximum.reduceat(q @ matrix.T, starts, axis=1)  # [queries, documents]
        for qid, scores in zip(chunk, best, strict=True):
            # the documents tied with the depth-th score are all kept: the run's sort orders them
            cut = np.partition(scores, len(scores) - keep)[len(scores) - keep]
            top = np.flatnonzero(scores >= cut)
            rows.extend((qid, str(doc_ids[i]), float(scores[i])) for i in top)
    run = make_run(rows)
    return run[run[RANK] <= depth].reset_index(drop=True)


def mine_negatives(
    ranking: pd.DataFrame,
    exclude: Iterable[tuple[str, str]],
    *,
    depth: int,
    skip: int = 0,
    per_query: int | None = None,
    pick: Pick = "top",
    seed: int = 42,
    qids: Iterable[str] | None = None,
) -> pd.DataFrame:
    """The negatives of each query: documents ranked in ``(skip, depth]`` and not excluded.

    Args:
        ranking: a Run [qid, docno, (score | rank)].
        exclude: (qid, docno) pairs never used as negatives: the judged-relevant documents,
            and for evidence the documents with gold sentences.
        depth: the deepest rank considered (ranks count every document, excluded ones too).
        skip: the top ranks left out (possible unlabelled positives, RocketQA).
        per_query: negatives kept per query (None: all in the window).
        pick: "top", the best-ranked ones, or "random", a sample seeded by (seed, qid), so the
            choice of a query does not depend on the other queries.
        seed: the sample's seed.
        qids: keep only these queries (None: all of the ranking).

    Returns:
        A Run [qid, docno, score, rank] of the chosen negatives, ranks renumbered 1.. in the
        ranking's order (the original rank is in ``mined_rank``).

    Raises:
        ValueError: bad depth, skip, per_query or pick.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, found {depth}")
    if not 0 <= skip < depth:
        raise ValueError(f"skip must be in [0, depth), found skip {skip} with depth {depth}")
    if per_query is not None and per_query < 1:
        raise ValueError(f"per_query must be a positive integer or None, found {per_query}")
    if pick not in ("top", "random"):
        raise ValueError(f"pick must be 'top' or 'random', found {pick!r}")
    require_columns(ranking, (QID, DOCNO), "ranking")
    run = ranking if RANK in ranking.columns else sort_run(ranking)
    run = run.assign(**{QID: run[QID].astype(str), DOCNO: run[DOCNO].astype(str)})
    if SCORE not in run.columns:
        run = run.assign(**{SCORE: -run[RANK].astype(float)})
    if qids is not None:
        run = run[run[QID].isin({str(q) for q in qids})]
    run = run[(run[RANK] > skip) & (run[RANK] <= depth)]
    excluded = {(str(q), str(d)) for q, d in exclude}
    if excluded:
        keep = [(q, d) not in excluded for q, d in zip(run[QID], run[DOCNO], strict=True)]
        run = run[keep]
    run = run.sort_values([QID, RANK], kind="mergesort")
    if per_query is not None:
        if pick == "top":
            run = run.groupby(QID, sort=False).head(per_query)
        else:
            chosen: list[int] = []
            for qid, group in run.groupby(QID, sort=False):
                index = group.index.tolist()
                if len(index) > per_query:
                    index = sorted(random.Random(f"{seed}:{qid}").sample(index, per_query))
                chosen.extend(index)
            run = run.loc[chosen]
    out = run[[QID, DOCNO, SCORE, RANK]].rename(columns={RANK: "mined_rank"})
    out = out.sort_values([QID, "mined_rank"], kind="mergesort").reset_index(drop=True)
    out.insert(3, RANK, out.groupby(QID).cumcount().astype(np.int64) + 1)
    return out


@dataclass
class HardNegatives:
    """Mining options plus a cache of rankings, shared by the data sources of one command.

    Attributes:
        source: where the ranking comes from.
        depth: the deepest rank considered.
        skip: the top ranks left out.
        per_query: negatives per query (None: all in the window).
        pick: "top" or "random".
        seed: the sample's seed.
        device: where a bi-encoder embeds the queries.

    Example:
        >>> miner = HardNegatives(NegativeSource.parse("run:train.bm25.txt"), depth=50, skip=3)
        >>> miner.options()["skip"]
        3
    """

    source: NegativeSource
    depth: int = 100
    skip: int = 0
    per_query: int | None = 10
    pick: Pick = "top"
    seed: int = 42
    device: str | None = None
    _rankings: list[pd.DataFrame] = field(default_factory=list, repr=False)
    _ranked_qids: set[str] = field(default_factory=set, repr=False)
    _described: dict[str, Any] = field(default_factory=dict, repr=False)

    def options(self) -> dict[str, Any]:
        """The mining options, as recorded."""
        return {
            "source": self.source.spec,
            "depth": self.depth,
            "skip": self.skip,
            "per_query": self.per_query,
            "pick": self.pick,
            "seed": self.seed,
        }

    def ranking(self, queries: Mapping[str, str]) -> pd.DataFrame:
        """The source's ranking of ``queries`` (qid -> text); queries ranked before are not ranked again."""
        wanted = {str(q) for q in queries}
        todo = {q: t for q, t in queries.items() if str(q) not in self._ranked_qids}
        if todo:
            self._rankings.append(self._rank(todo))
            self._ranked_qids |= {str(q) for q in todo}
        run = pd.concat(self._rankings, ignore_index=True) if self._rankings else make_run([])
        return run[run[QID].isin(wanted)].reset_index(drop=True)

    def _rank(self, queries: Mapping[str, str]) -> pd.DataFrame:
        if self.source.origin == "run":
            from evirank.io import read_run

            run = read_run(self.source.path)
            run = run[run[QID].isin(set(queries))]
            missing = len(set(queries) - set(run[QID]))
            if missing:
                logger.warning(
                    "%s ranks none of %d of the %d training queries: they get no mined negatives",
                    self.source.path,
                    missing,
                    len(queries),
                )
            self._described = {"kind": "run", "file": self.source.path, "tag": run.attrs.get("tag")}
            return run[[QID, DOCNO, SCORE, RANK]]
        vectors = open_vectors(self.source.path)
        logger.info("ranking %d queries by %s", len(queries), vectors)
        run = dense_ranking(vectors, queries, self.depth, device=self.device)
        self._described = {
            "kind": "vectors",
            "folder": str(vectors.path),
            "fingerprint": vectors.identity.fingerprint,
            "model": vectors.identity.model,
            "segment": vectors.identity.segment,
            "aggregation": "maxp",
        }
        return run

    def mine(
        self, queries: Mapping[str, str], exclude: Iterable[tuple[str, str]]
    ) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The chosen negatives of ``queries`` and the record written into ``evirank-train.json``.

        The record holds the source, the options, counts (how many excluded relevant documents
        the window held: false negatives avoided) and every query's negatives in order.
        """
        excluded = {(str(q), str(d)) for q, d in exclude}
        ranking = self.ranking(queries)
        window = ranking[(ranking[RANK] > self.skip) & (ranking[RANK] <= self.depth)]
        relevant_in_window = sum(
            (q, d) in excluded
            for q, d in zip(window[QID].astype(str), window[DOCNO].astype(str), strict=True)
        )
        mined = mine_negatives(
            ranking,
            excluded,
            depth=self.depth,
            skip=self.skip,
            per_query=self.per_query,
            pick=self.pick,
            seed=self.seed,
            qids=queries,
        )
        per_query = {str(q): group[DOCNO].tolist() for q, group in mined.groupby(QID, sort=False)}
        record = {
            **self.options(),
            "ranking": dict(self._described),
            "queries": len(queries),
            "queries_with_negatives": len(per_query),
            "negatives": len(mined),
            "relevant_in_window_excluded": int(relevant_in_window),
            "mean_mined_rank": round(float(mined["mined_rank"].mean()), 2) if len(mined) else None,
            "negatives_by_query": {q: per_query[q] for q in natural_order(list(per_query))},
        }
        logger.info(
            "%s: %d negatives for %d of %d queries (ranks %d-%d; %d relevant documents excluded there)",
            self.source.spec,
            len(mined),
            len(per_query),
            len(queries),
            self.skip + 1,
            self.depth,
            relevant_in_window,
        )
        return mined, record
