"""PARADE and duoBERT on real data (SciFact, all-MiniLM-L6-v2): a few training steps through the
command line, then re-ranking test claims with the trained folders. Checks the plumbing on real
documents and the real initialisation (sentences, titles, the passage bound, both orders of a
pair), not the quality, which docs/results.md measures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evirank.cli import main
from evirank.io import read_run

pytestmark = pytest.mark.slow
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def scifact_run(datasets: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A stand-in first stage: for 12 train and 3 test claims, their relevant abstracts and the
    next claims' (so every claim has non-relevant candidates)."""
    from evirank.io import read_qrels

    sf = datasets / "scifact"
    folder = tmp_path_factory.mktemp("sf")
    out = {}
    for split, n in (("train", 12), ("test", 3)):
        qrels = read_qrels(sf / "qrels" / f"{split}.tsv")
        docs = qrels.groupby("qid")["docno"].apply(list)
        qids = list(docs.index)[:n]
        lines = []
        for i, qid in enumerate(qids):
            ranked = list(dict.fromkeys(docs[qid] + docs[qids[(i + 1) % n]] + docs[qids[(i + 2) % n]]))
            lines += [f"{qid} Q0 {d} {r} {100 - r} stand-in" for r, d in enumerate(ranked, 1)]
        out[split] = folder / f"{split}.txt"
        out[split].write_text("\n".join(lines) + "\n")
    return out


def test_parade_and_duo_train_a_few_steps_and_rerank_scifact(
    datasets: Path, scifact_run: dict[str, Path], tmp_path: Path
) -> None:
    sf = datasets / "scifact"
    docs = [
        "--documents",
        str(sf / "queries.jsonl"),
        str(sf / "qrels" / "train.tsv"),
        str(scifact_run["train"]),
        str(sf),
        "--segment",
        "sentences:prepend",
        "--max-passages",
        "6",
        "--negatives-per-query",
        "1",
        "--validation-fraction",
        "0.25",
        "--max-length",
        "96",
        "--max-steps",
        "2",
        "--threads",
        "1",
    ]
    parade = tmp_path / "parade"
    args = [
        "-q",
        "train",
        "--scorer",
        "parade",
        "--aggregation",
        "transformer",
        "--passages-per-document",
        "6",
        "--batch-size",
        "2",
        "--grad-accum",
        "2",
        "--head-lr",
        "1e-4",
        "--output",
        str(parade),
        *docs,
    ]
    assert main(args) == 0
    assert json.loads((parade / "parade.json").read_text())["max_passages"] == 6
    duo = tmp_path / "duo"
    args = [
        "-q",
        "train",
        "--scorer",
        "duo",
        "--group-size",
        "3",
        "--batch-size",
        "8",
        "--output",
        str(duo),
        *docs,
    ]
    assert main(args) == 0
    out = tmp_path / "run.txt"
    rerank = [
        "-q",
        "rerank",
        "--run",
        str(scifact_run["test"]),
        "--corpus",
        str(sf),
        "--topics",
        str(sf),
        "--split",
        "test",
        "--model",
        str(parade),
        "--segment",
        "sentences:prepend",
        "--max-passages",
        "6",
        "--aggregate",
        "document",
        "--alpha",
        "0",
        "--device",
        "cpu",
        "--duo",
        "3",
        "--duo-model",
        f"duo:{duo}",
        "--duo-aggregate",
        "binary",
        "--output",
        str(out),
    ]
    assert main(rerank) == 0
    record = json.loads(Path(f"{out}.json").read_text())
    assert record["scorer"]["aggregation"] == "transformer" and record["duo"]["aggregate"] == "binary"
    assert record["counts"]["duo_computed"] == 3 * 6
    run = read_run(out)
    assert run["qid"].nunique() == 3 and run.groupby("qid")["rank"].min().eq(1).all()
