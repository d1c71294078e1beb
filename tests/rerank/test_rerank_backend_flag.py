"""``evirank rerank --backend onnx``: the same run as torch, scores kept apart in the store."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evirank.cli import main
from evirank.frames import DOCNO, QID, SCORE
from evirank.io import read_run

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def args_for(collection: dict[str, Path], model: Path, out: Path, *extra: str) -> list[str]:
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
        "--depth",
        "4",
        "--aggregate",
        "maxp",
        "--output",
        str(out),
        *extra,
    ]


def test_backend_flag_scores_with_onnx_and_records_it(
    collection: dict[str, Path],
    tiny_cross_encoder_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVIRANK_CACHE", str(tmp_path / "cache"))
    store = tmp_path / "scores.sqlite"
    torch_out, onnx_out = tmp_path / "torch.txt", tmp_path / "onnx.txt"
    common = ["--scores", str(store)]
    assert main(args_for(collection, tiny_cross_encoder_path, torch_out, "--device", "cpu", *common)) == 0
    assert main(args_for(collection, tiny_cross_encoder_path, onnx_out, "--backend", "onnx", *common)) == 0
    record = json.loads(onnx_out.with_name("onnx.txt.json").read_text())
    assert record["scorer"]["backend"] == "onnx"
    assert record["counts"]["scorer_cached"] == 0  # torch's scores were not reused for onnx
    first = read_run(torch_out).sort_values([QID, DOCNO]).reset_index(drop=True)
    second = read_run(onnx_out).sort_values([QID, DOCNO]).reset_index(drop=True)
    assert (first[DOCNO] == second[DOCNO]).all()
    np.testing.assert_allclose(second[SCORE], first[SCORE], atol=1e-4)


def test_backend_flag_rejects_an_unknown_engine(
    collection: dict[str, Path], tiny_cross_encoder_path: Path, tmp_path: Path
) -> None:
    with pytest.raises(SystemExit):
        main(args_for(collection, tiny_cross_encoder_path, tmp_path / "x.txt", "--backend", "tensorrt"))


def test_every_stage_that_runs_a_model_runs_on_the_backend_asked_for(tiny_cross_encoder_path: Path) -> None:
    """--backend reaches the passage scorer, the cascade's cheap scorer and the duo stage (the cheap
    scorer ran on torch whatever was asked); a stage whose family cannot run there is refused when the
    pipeline is built, before any model loads."""
    from evirank.pipeline import PipelineSpec, build_pipeline
    from evirank.score.family import UnknownFamilyError

    model = str(tiny_cross_encoder_path)
    options = {
        "corpus": "corpus.jsonl",
        "scorer": f"cross:{model}",
        "prune": 1,
        "prune_by": f"cross:{model}",
        "duo": 2,
        "duo_model": f"duo:{model}",
        "device": "cpu",
    }
    for backend in ("onnx", "onnx-int8"):
        pipeline = build_pipeline(PipelineSpec.from_mapping({**options, "backend": backend}))
        (prune,) = pipeline.reranker.passage_stages
        assert pipeline.duo is not None
        assert {pipeline.scorer.backend, prune.scorer.backend, pipeline.duo.scorer.backend} == {backend}
        assert prune.scorer.store is None and prune.scorer.ray is None  # local and unstored, as before
    with pytest.raises(UnknownFamilyError, match=r"the duo family runs on .*not 'openvino'"):
        build_pipeline(PipelineSpec.from_mapping({**options, "backend": "openvino"}))
