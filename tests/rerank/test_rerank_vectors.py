"""Evidence by lookup (stored passage vectors) and the cascade (--prune), through the CLI and the stages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rerank_cases import DOCS

from evirank.cli import main
from evirank.config import Runtime
from evirank.frames import DOCNO, PID, QID, QUERY, SCORE, TEXT
from evirank.io import read_run
from evirank.rerank.prune import Prune, bm25_scores, check_prune


def rerank_args(collection: dict[str, Path], output: Path, *extra: str) -> list[str]:
    return [
        "-q",
        "rerank",
        "--run", str(collection["run"]),
        "--corpus", str(collection["corpus"]),
        "--topics", str(collection["topics"]),
        "--depth", "5",
        "--output", str(output),
        *extra,
    ]  # fmt: skip


@pytest.fixture
def embedded(collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path) -> Path:
    out = tmp_path / "vectors"
    args = ["-q", "embed", "--corpus", str(collection["corpus"]), "--model", str(tiny_bi_encoder_path)]
    assert main([*args, "--segment", "sentences:prepend", "--output", str(out), "--block-size", "3"]) == 0
    return out


def test_embed_writes_a_vector_folder_naming_its_model_and_segmenter(
    embedded: Path, tiny_bi_encoder_path: Path
) -> None:
    manifest = json.loads((embedded / "manifest.json").read_text())
    assert manifest["segment"] == "sentences:prepend"
    assert manifest["model"]["model"] == str(tiny_bi_encoder_path)
    assert manifest["documents"] == len(DOCS)
    assert manifest["blocks"] == 3


def test_a_rerank_from_stored_vectors_matches_the_on_the_fly_bi_encoder(
    collection: dict[str, Path], embedded: Path, tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    common = ["--scorer", "bi", "--model", str(tiny_bi_encoder_path), "--segment", "sentences:prepend"]
    common += ["--aggregate", "maxp"]
    fly, stored = tmp_path / "fly.txt", tmp_path / "stored.txt"
    assert main(rerank_args(collection, fly, *common, "--save-passages", str(tmp_path / "a.parquet"))) == 0
    args = [*common, "--vectors", str(embedded), "--save-passages", str(tmp_path / "b.parquet")]
    assert main(rerank_args(collection, stored, *args)) == 0
    a, b = pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "b.parquet")
    assert a[[QID, DOCNO, PID, TEXT]].equals(b[[QID, DOCNO, PID, TEXT]])
    np.testing.assert_allclose(a[SCORE], b[SCORE], atol=2e-3)  # float16 vectors
    assert not np.array_equal(a[SCORE], b[SCORE])  # really read from the vectors
    run_a, run_b = read_run(fly), read_run(stored)
    assert run_a[[QID, DOCNO]].equals(run_b[[QID, DOCNO]])
    record = json.loads(Path(str(stored) + ".json").read_text())
    assert record["vectors"]["segment"] == "sentences:prepend"
    assert record["counts"]["scorer_cached"] == record["counts"]["passages"]  # every passage by lookup


def test_vectors_of_another_segmenter_or_model_are_refused_naming_both(
    collection: dict[str, Path], embedded: Path, tiny_bi_encoder_path: Path, tmp_path: Path, caplog
) -> None:
    common = ["--scorer", "bi", "--model", str(tiny_bi_encoder_path), "--vectors", str(embedded)]
    assert main(rerank_args(collection, tmp_path / "a.txt", *common, "--segment", "sentences")) == 2
    assert "segmenter sentences:prepend" in caplog.text
    assert "segmenter sentences:segment" in caplog.text
    caplog.clear()
    other = ["--scorer", "bi", "--vectors", str(embedded), "--segment", "sentences:prepend"]
    assert main(rerank_args(collection, tmp_path / "b.txt", *other)) == 2
    assert "(the model differs" in caplog.text and "all_minilm" in caplog.text.lower()


def test_prune_keeps_each_documents_best_passages_by_bm25() -> None:
    passages = pd.DataFrame(
        {
            QID: ["1"] * 5 + ["2"] * 2,
            QUERY: ["cat mat"] * 5 + ["dog"] * 2,
            DOCNO: ["a", "a", "a", "b", "b", "a", "a"],
            PID: [0, 1, 2, 0, 1, 0, 1],
            TEXT: ["The cat.", "Dogs bark.", "A cat on a mat.", "Nothing.", "Nothing here.", "x", "y"],
        }
    )
    kept = Prune(1)(passages)
    assert kept[[QID, DOCNO, PID]].values.tolist() == [["1", "a", 2], ["1", "b", 0], ["2", "a", 0]]
    assert Prune(2)(passages)[PID].tolist() == [0, 2, 0, 1, 0, 1]
    assert bm25_scores("cat", ["cat", "the dog"])[1] == 0.0


def test_birch_top_n_beyond_the_pruned_passages_is_refused() -> None:
    from evirank.aggregate import Birch

    check_prune(Birch(top_n=2), 2)
    with pytest.raises(ValueError, match=r"birch:3 .* --prune 2 keeps only 2"):
        check_prune(Birch(top_n=3), 2)


def test_rerank_prune_scores_only_the_kept_passages(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path, caplog: Any
) -> None:
    cross = ["--model", str(tiny_cross_encoder_path), "--no-scores"]
    assert (
        main(rerank_args(collection, tmp_path / "bad.txt", *cross, "--aggregate", "birch:3", "--prune", "2"))
        == 2
    )
    assert "--prune 2 keeps only 2" in caplog.text
    out = tmp_path / "pruned.txt"
    args = [*cross, "--prune", "1", "--aggregate", "maxp", "--save-passages", str(tmp_path / "p.parquet")]
    assert main(rerank_args(collection, out, *args)) == 0
    scored = pd.read_parquet(tmp_path / "p.parquet")
    assert scored.groupby([QID, DOCNO]).size().max() == 1
    record = json.loads(Path(str(out) + ".json").read_text())
    assert record["counts"]["passages_scored"] == len(scored) < record["counts"]["passages"]
    assert record["prune"][0].startswith("Prune(n=1, by='bm25'")


def test_prune_by_bi_reads_the_stored_vectors(
    collection: dict[str, Path],
    embedded: Path,
    tiny_bi_encoder_path: Path,
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
) -> None:
    from evirank.score import BiEncoder
    from evirank.vectors import PassageVectors

    vectors = PassageVectors.open(embedded)
    bi = BiEncoder(tiny_bi_encoder_path, Runtime(device="cpu"), vectors=vectors)
    passages = pd.DataFrame(
        {QID: ["1", "1", "1"], QUERY: ["cat"] * 3, DOCNO: ["d1"] * 3, PID: [0, 1, 2]}
    ).assign(text=vectors.texts(vectors.lookup(["d1"] * 3, [0, 1, 2])))
    best = bi(passages)[SCORE].to_numpy().argmax()
    assert Prune(1, "bi", bi)(passages)[PID].tolist() == [best]
    assert bi.stats_.cached == 3
    args = ["--model", str(tiny_cross_encoder_path), "--no-scores", "--prune", "3", "--prune-by", "bi"]
    args += ["--vectors", str(embedded), "--segment", "sentences:prepend"]
    # the cheap bi-encoder is the default one: the tiny vectors are refused by name
    assert main(rerank_args(collection, tmp_path / "x.txt", *args)) == 2


def test_duo_re_ranks_the_top_of_a_bi_encoder_reading_stored_vectors(
    collection: dict[str, Path],
    embedded: Path,
    tiny_bi_encoder_path: Path,
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
) -> None:
    common = ["--scorer", "bi", "--model", str(tiny_bi_encoder_path), "--segment", "sentences:prepend"]
    common += ["--aggregate", "maxp", "--vectors", str(embedded)]
    mono, duo = tmp_path / "mono.txt", tmp_path / "duo.txt"
    assert main(rerank_args(collection, mono, *common)) == 0
    pairwise = ["--duo", "3", "--duo-model", f"duo:{tiny_cross_encoder_path}", "--duo-aggregate", "sum"]
    assert main(rerank_args(collection, duo, *common, *pairwise)) == 0
    before, after = read_run(mono), read_run(duo)
    for qid, ranked in before.groupby(QID):
        top = ranked.sort_values("rank")
        again = after[after[QID] == qid].sort_values("rank")
        assert set(again[DOCNO].head(3)) == set(top[DOCNO].head(3))  # the top 3 re-ordered among themselves
        assert again[DOCNO].iloc[3:].tolist() == top[DOCNO].iloc[3:].tolist()  # the rest as mono left it
    record = json.loads(Path(str(duo) + ".json").read_text())
    assert record["counts"]["scorer_cached"] == record["counts"]["passages"]  # mono still by lookup
    queries = before[QID].nunique()
    assert record["duo"]["k"] == 3 and record["counts"]["duo_distinct"] == queries * 3 * 2  # k(k-1) each
    # the duo stage's pair scores go to a store even though the mono scores are lookups
    store = ["--scores", str(tmp_path / "scores.sqlite")]
    for name in ("first.txt", "again.txt"):
        assert main(rerank_args(collection, tmp_path / name, *common, *pairwise, *store)) == 0
    again = json.loads((tmp_path / "again.txt.json").read_text())["counts"]
    assert again["duo_computed"] == 0 and again["duo_cached"] == again["duo_distinct"] > 0
    assert read_run(tmp_path / "again.txt").equals(read_run(duo))
