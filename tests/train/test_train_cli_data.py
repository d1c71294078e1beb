"""``evirank train``'s data options on the real SciFact files (fast: no model is loaded)."""

from __future__ import annotations

import argparse
from pathlib import Path

from evirank.cli._training import add_training_flags, build_data
from evirank.io import read_qrels
from evirank.train.config import TrainConfig


def test_train_cli_evidence_gold_only_keeps_relevant_documents_free_of_negatives(
    datasets: Path, tmp_path: Path
) -> None:
    sf = datasets / "scifact"
    qrels = read_qrels(sf / "qrels" / "train.tsv")
    first = qrels.drop_duplicates("qid").head(40)
    run = tmp_path / "run.txt"
    run.write_text(
        "".join(f"{q} Q0 {d} 1 1.0 x\n" for q, d in zip(first["qid"], first["docno"], strict=True))
    )
    parser = argparse.ArgumentParser()
    add_training_flags(parser, TrainConfig())
    files = [str(sf / "queries.jsonl"), str(sf / "evidence" / "train.jsonl"), str(sf / "qrels" / "train.tsv")]
    common = ["--evidence", *files, str(run), str(sf), "--validation-fraction", "0"]
    with_same_doc, _, _ = build_data(parser.parse_args(common))
    gold_only, _, _ = build_data(parser.parse_args([*common, "--evidence-gold-only"]))
    assert with_same_doc["source"].str.endswith("same-doc").any()
    assert not gold_only["source"].str.endswith("same-doc").any()
    assert (gold_only["label"] == 1).sum() == (with_same_doc["label"] == 1).sum() > 0
