"""Hard-negative mining: the window, the exclusions, determinism, the dense ranking, the CLI data."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_collection

from evirank.cli._training import add_training_flags, build_data
from evirank.config import Runtime
from evirank.errors import InputPathError, UsageError
from evirank.frames import Document, make_run
from evirank.train.config import TrainConfig
from evirank.train.mine import NegativeSource, dense_ranking, mine_negatives


def ranking(n_queries: int = 3, depth: int = 10) -> pd.DataFrame:
    return make_run(
        [
            (str(q), f"q{q}-d{r}", float(depth - r))
            for q in range(1, n_queries + 1)
            for r in range(1, depth + 1)
        ]
    )


def test_mining_keeps_the_window_below_skip_and_within_depth_without_excluded_documents() -> None:
    exclude = {("1", "q1-d2"), ("1", "q1-d5"), ("2", "q2-d9")}
    mined = mine_negatives(ranking(), exclude, depth=6, skip=1)
    got = mined.groupby("qid")["docno"].apply(list).to_dict()
    assert got["1"] == ["q1-d3", "q1-d4", "q1-d6"]  # d1 skipped, d2 and d5 relevant, d7+ too deep
    assert got["2"] == [f"q2-d{r}" for r in range(2, 7)]  # d9 is beyond the depth anyway
    assert mined.groupby("qid")["rank"].apply(list).to_dict()["1"] == [1, 2, 3]
    assert mined.groupby("qid")["mined_rank"].apply(list).to_dict()["1"] == [3, 4, 6]


def test_mining_picks_the_best_ranked_or_a_seeded_sample_that_does_not_depend_on_other_queries() -> None:
    top = mine_negatives(ranking(), set(), depth=10, per_query=3)
    assert top[top.qid == "3"]["docno"].tolist() == ["q3-d1", "q3-d2", "q3-d3"]
    sample = mine_negatives(ranking(), set(), depth=10, skip=2, per_query=3, pick="random", seed=7)
    again = mine_negatives(ranking(), set(), depth=10, skip=2, per_query=3, pick="random", seed=7)
    pd.testing.assert_frame_equal(sample, again)
    assert sample.groupby("qid").size().tolist() == [3, 3, 3]
    assert sample["mined_rank"].between(3, 10).all()
    alone = mine_negatives(ranking(), set(), depth=10, skip=2, per_query=3, pick="random", seed=7, qids=["2"])
    assert alone["docno"].tolist() == sample[sample.qid == "2"]["docno"].tolist()
    other_seed = mine_negatives(ranking(), set(), depth=10, skip=2, per_query=3, pick="random", seed=8)
    assert other_seed["docno"].tolist() != sample["docno"].tolist()


def test_mining_refuses_a_window_that_holds_nothing() -> None:
    with pytest.raises(ValueError, match="skip must be in"):
        mine_negatives(ranking(), set(), depth=3, skip=3)
    with pytest.raises(ValueError, match="pick must be"):
        mine_negatives(ranking(), set(), depth=3, pick="best")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="run:FILE"):
        NegativeSource.parse("model:nothing")


def test_dense_ranking_ranks_documents_by_their_best_stored_passage(
    tmp_path: Path, tiny_bi_encoder_path: Path
) -> None:
    from evirank.score import BiEncoder
    from evirank.vectors import VectorBuilder

    docs = [
        Document("d1", "Cats", "Cats purr. They sleep a lot."),
        Document("d2", "", "Dogs bark loudly. Dogs run."),
        Document("d3", "Birds", "Birds sing. Birds fly. Some swim."),
        Document("d4", "", "Snakes hiss quietly."),
    ]
    scorer = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"))
    vectors = VectorBuilder(tmp_path / "v", scorer, "sentences:prepend", block_size=2).build(docs)
    queries = {"1": "cats sleep", "2": "birds that swim"}
    run = dense_ranking(vectors, queries, 3, device="cpu")  # the model is the manifest's
    table = vectors.frame()
    passages = vectors.vectors(table["row"].to_numpy())
    for qid, query in queries.items():
        q = scorer.embed([query])[0]
        best = pd.Series(passages @ q).groupby(table["docno"]).max().rename("score").reset_index()
        best = best.sort_values(["score", "docno"], ascending=False)  # ties: docno descending (trec_eval)
        got = run[run.qid == qid]
        assert got["docno"].tolist() == best["docno"].tolist()[:3]
        np.testing.assert_allclose(got["score"], best["score"].to_numpy()[:3], atol=1e-5)


# --- the data flags ----------------------------------------------------------------------
def data_args(files: dict[str, Path], *more: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_training_flags(parser, TrainConfig())
    documents = [str(files[k]) for k in ("topics", "qrels", "given", "corpus")]
    return parser.parse_args(["--documents", *documents, "--negatives-per-query", "2", *more])


def test_hard_negatives_replace_the_training_negatives_and_leave_validation_alone(tmp_path: Path) -> None:
    files = toy_collection(tmp_path)
    base_train, base_val, _ = build_data(data_args(files, "--validation-fraction", "0.25"))
    train, val, provenance = build_data(
        data_args(
            files,
            "--validation-fraction",
            "0.25",
            "--hard-negatives",
            f"run:{files['mined']}",
            "--negative-skip",
            "1",
        )
    )
    pd.testing.assert_frame_equal(val, base_val)  # the same held-out queries, the given run's negatives
    assert set(train.qid) == set(base_train.qid) and not set(train.qid) & set(val.qid)
    negatives = train[train.label == 0].groupby("qid")["docno"].apply(sorted).to_dict()
    # mined order is d9, d8, d7...: skip d9, take d8 and d7; the relevant d0 never
    assert all(docs == [f"q{q}-d7", f"q{q}-d8"] for q, docs in negatives.items())
    assert (train[train.label == 1]["docno"].str.endswith("-d0")).all()
    assert base_train[base_train.label == 0]["docno"].str.endswith(("-d1", "-d2")).all()
    record = provenance["train_sources"][0]["hard_negatives"]
    assert record["source"] == f"run:{files['mined']}" and record["skip"] == 1
    assert record["negatives_by_query"]["1"] == ["q1-d8", "q1-d7"]
    assert provenance["hard_negatives"]["validation"].startswith("the data flags' own runs")


def test_relevant_documents_at_the_top_of_the_mined_ranking_are_never_negatives(tmp_path: Path) -> None:
    files = toy_collection(tmp_path)
    order = [0, 9, 8, 7, 6, 5, 4, 3, 2, 1]  # the relevant d0 first for every query
    files["mined"].write_text(
        "".join(f"{q} Q0 q{q}-d{d} {r} {10 - r} mined\n" for q in range(1, 9) for r, d in enumerate(order, 1))
    )
    args = data_args(files, "--validation-fraction", "0", "--hard-negatives", f"run:{files['mined']}")
    train, _, provenance = build_data(args)
    assert not ((train.label == 0) & train.docno.str.endswith("-d0")).any()
    record = provenance["train_sources"][0]["hard_negatives"]
    assert record["relevant_in_window_excluded"] == 8
    assert record["negatives_by_query"]["1"] == ["q1-d9", "q1-d8"]
    assert record["mean_mined_rank"] == 2.5


def test_mining_flags_without_a_source_or_for_other_data_are_refused(tmp_path: Path) -> None:
    files = toy_collection(tmp_path)
    with pytest.raises(UsageError, match="apply to --hard-negatives"):
        build_data(data_args(files, "--negative-skip", "2"))
    parser = argparse.ArgumentParser()
    add_training_flags(parser, TrainConfig())
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("apple\tgood fruit\t1\napple\tbad fruit\t0\n")
    args = parser.parse_args(
        ["--pairs", str(pairs), "--validation-fraction", "0", "--hard-negatives", f"run:{files['given']}"]
    )
    with pytest.raises(UsageError, match="--documents and --evidence"):
        build_data(args)
    with pytest.raises(InputPathError, match="expected a TREC run file, found nothing"):
        build_data(data_args(files, "--hard-negatives", f"run:{tmp_path / 'nothing.txt'}"))
