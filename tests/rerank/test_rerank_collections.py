"""``evirank rerank --corpus`` over the papers' collection formats: the same passages, texts and
scores as over the same documents given as JSONL."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from rerank_cases import DOCS

from collection_writers import WRITERS
from evirank.cli import main
from evirank.frames import DOCNO, PID, QID, SCORE, TEXT
from evirank.io import read_run

pytest.importorskip("torch")


def rerank_passages(
    collection: dict[str, Path], model: Path, corpus: Path, out: Path, *extra: str
) -> pd.DataFrame:
    passages = out.with_suffix(".parquet")
    argv = ["-q", "rerank", "--run", str(collection["run"]), "--corpus", str(corpus), *extra]
    argv += ["--topics", str(collection["topics"]), "--model", str(model), "--device", "cpu"]
    argv += ["--segment", "sentences", "--aggregate", "birch:2", "--depth", "5", "--no-scores"]
    assert main([*argv, "--output", str(out), "--save-passages", str(passages)]) == 0
    frame = pd.read_parquet(passages)[[QID, DOCNO, PID, TEXT, SCORE]]
    return frame.sort_values([QID, DOCNO, PID]).reset_index(drop=True)


@pytest.mark.parametrize("fmt", ["trec", "nyt", "wapo", "msmarco-docs"])
def test_rerank_over_each_format_scores_the_passages_of_the_jsonl_corpus(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path, fmt: str
) -> None:
    expected = rerank_passages(
        collection, tiny_cross_encoder_path, collection["corpus"], tmp_path / "jsonl.txt"
    )
    folder = WRITERS[fmt](DOCS, tmp_path / fmt)
    flags = ["--corpus-format", fmt] if fmt == "trec" else []  # the others told from the files
    found = rerank_passages(collection, tiny_cross_encoder_path, folder, tmp_path / f"{fmt}.txt", *flags)
    assert len(found) > 20
    pd.testing.assert_frame_equal(found, expected)
    pd.testing.assert_frame_equal(read_run(tmp_path / f"{fmt}.txt"), read_run(tmp_path / "jsonl.txt"))
