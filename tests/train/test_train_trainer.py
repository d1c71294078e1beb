"""Fine-tuning with a tiny random BERT: loss falls, exact resume, loadable output, safe folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from train_helpers import toy_examples

from evirank.config import Runtime
from evirank.errors import OutputExistsError
from evirank.train import TrainConfig, split_by_query, train_cross_encoder
from evirank.train.trainer import CHECKPOINT_DIR, TRAIN_JSON, TRAIN_LOG, ResumeMismatchError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")


def config(model: Path, **overrides: object) -> TrainConfig:
    base = {
        "model": str(model),
        "epochs": 3,
        "batch_size": 8,
        "learning_rate": 5e-3,
        "max_length": 16,
        "save_every_steps": 4,
    }
    base.update(overrides)
    return TrainConfig(**base)  # type: ignore[arg-type]


def log_records(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (folder / TRAIN_LOG).read_text().splitlines()]


def test_loss_falls_on_a_separable_toy_set(tiny_encoder: Path, tmp_path: Path) -> None:
    result = train_cross_encoder(toy_examples(), config(tiny_encoder, epochs=6), tmp_path / "m")
    losses = [r["loss"] for r in log_records(tmp_path / "m") if r["event"] == "step"]
    assert result.steps == len(losses) == 36
    first, last = np.mean(losses[:6]), np.mean(losses[-6:])
    assert last < 0.5 < first and last < first - 0.2


def test_resume_after_an_interruption_gives_the_same_weights(tiny_encoder: Path, tmp_path: Path) -> None:
    examples = toy_examples()
    train, val = split_by_query(examples, 0.34, seed=1)
    cfg = config(tiny_encoder, validate_every_steps=3, dropout=0.1)
    reference = train_cross_encoder(train, cfg, tmp_path / "straight", validation=val)

    def interrupt(step: int) -> None:
        # The last checkpoint was at step 8 (save_every_steps): steps 9-11 and the validation
        # at step 9 are redone after the resume.
        if step == 11:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_cross_encoder(train, cfg, tmp_path / "resumed", validation=val, step_callback=interrupt)
    assert not (tmp_path / "resumed" / TRAIN_JSON).exists()
    with pytest.raises(OutputExistsError):  # an interrupted folder is not silently reused
        train_cross_encoder(train, cfg, tmp_path / "resumed", validation=val)
    resumed = train_cross_encoder(train, cfg, tmp_path / "resumed", validation=val, resume=True)

    a = safetensors_torch.load_file(tmp_path / "straight" / "model.safetensors")
    b = safetensors_torch.load_file(tmp_path / "resumed" / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert resumed.steps == reference.steps and resumed.best_step == reference.best_step
    assert resumed.history == reference.history  # the same validations, to the bit
    steps = [r["step"] for r in log_records(tmp_path / "resumed") if r["event"] == "step"]
    assert steps == list(range(1, reference.steps + 1))  # the redone steps are logged once
    assert not (tmp_path / "resumed" / CHECKPOINT_DIR).exists()


def test_saved_folder_loads_with_transformers_and_scores_like_training(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    from evirank.train._model import predict_relevance

    examples = toy_examples()
    train_cross_encoder(examples, config(tiny_encoder, epochs=1), tmp_path / "m")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    assert model.config.num_labels == 1
    pairs = examples.head(5)
    inputs = tokenizer(
        pairs["query"].tolist(),
        pairs["text"].tolist(),
        padding=True,
        truncation=True,
        max_length=16,
        return_tensors="pt",
    )
    with torch.no_grad():
        logits = model(**inputs).logits[:, 0].numpy()
    ours = predict_relevance(model, tokenizer, pairs["query"].tolist(), pairs["text"].tolist(), max_length=16)
    np.testing.assert_allclose(logits, ours, rtol=1e-5, atol=1e-5)
    meta = json.loads((tmp_path / "m" / TRAIN_JSON).read_text())
    assert meta["status"] == "complete" and meta["score"] == "logit" and meta["objective"] == "bce"
    assert meta["config"]["learning_rate"] == 5e-3 and meta["init"]["fresh_head"] is True
    assert meta["data"]["train"]["sources"]["toy"]["rows"] == len(examples)
    assert {"torch", "transformers", "python"} <= set(meta["versions"])
    assert meta["timings"]["wall_time_s"] > 0


def test_sentence_transformers_cross_encoder_loads_the_folder(tiny_encoder: Path, tmp_path: Path) -> None:
    st = pytest.importorskip("sentence_transformers")
    examples = toy_examples()
    train_cross_encoder(examples, config(tiny_encoder, epochs=1), tmp_path / "m")
    model = st.CrossEncoder(str(tmp_path / "m"), max_length=16, device="cpu")
    scores = model.predict([("apple", "apple good fruit"), ("apple", "apple bad fruit")])
    assert np.asarray(scores).shape == (2,)


def test_two_class_head_scores_as_log_odds(tiny_encoder: Path, tmp_path: Path) -> None:
    from evirank.train._model import predict_relevance

    train_cross_encoder(toy_examples(), config(tiny_encoder, epochs=4, num_labels=2), tmp_path / "m")
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "m").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    assert model.config.num_labels == 2
    queries, texts = ["apple", "apple"], ["mango good fruit", "mango bad fruit"]
    inputs = tokenizer(queries, texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits.numpy()
    ours = predict_relevance(model, tokenizer, queries, texts, max_length=16)
    np.testing.assert_allclose(ours, logits[:, 1] - logits[:, 0], atol=1e-5)
    assert ours[0] > ours[1]  # learnt the toy rule
    assert json.loads((tmp_path / "m" / TRAIN_JSON).read_text())["score"] == "logit[1] - logit[0]"


def test_existing_output_needs_overwrite_and_a_completed_resume_returns(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    cfg = config(tiny_encoder, epochs=1)
    first = train_cross_encoder(toy_examples(), cfg, tmp_path / "m")
    with pytest.raises(OutputExistsError):
        train_cross_encoder(toy_examples(), cfg, tmp_path / "m")
    again = train_cross_encoder(toy_examples(), cfg, tmp_path / "m", resume=True)
    assert again.steps == first.steps
    replaced = train_cross_encoder(
        toy_examples(), config(tiny_encoder, epochs=2), tmp_path / "m", overwrite=True
    )
    assert replaced.steps == 2 * first.steps


def test_resuming_a_finished_model_refuses_other_settings_or_examples(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    cfg = config(tiny_encoder, epochs=1)
    first = train_cross_encoder(toy_examples(), cfg, tmp_path / "m")
    weights = (tmp_path / "m" / "model.safetensors").read_bytes()
    with pytest.raises(
        ResumeMismatchError, match=r"finished model trained with other settings \(seed differ"
    ):
        train_cross_encoder(
            toy_examples(), config(tiny_encoder, epochs=1, seed=7), tmp_path / "m", resume=True
        )
    with pytest.raises(ResumeMismatchError, match="finished model trained on other examples"):
        train_cross_encoder(toy_examples(seed=3), cfg, tmp_path / "m", resume=True)
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == weights  # nothing touched
    assert train_cross_encoder(toy_examples(), cfg, tmp_path / "m", resume=True).steps == first.steps


def test_resume_refuses_a_changed_config(tiny_encoder: Path, tmp_path: Path) -> None:
    def interrupt(step: int) -> None:
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_cross_encoder(toy_examples(), config(tiny_encoder), tmp_path / "m", step_callback=interrupt)
    with pytest.raises(ValueError, match="learning_rate"):
        train_cross_encoder(
            toy_examples(), config(tiny_encoder, learning_rate=1e-4), tmp_path / "m", resume=True
        )
    with pytest.raises(ValueError, match="examples differ"):
        train_cross_encoder(toy_examples(seed=3), config(tiny_encoder), tmp_path / "m", resume=True)


def test_early_stopping_and_best_checkpoint(tiny_encoder: Path, tmp_path: Path) -> None:
    train = toy_examples()
    # One relevant row per validation query: AP is 1.0 at once and can never improve.
    validation = toy_examples(n_queries=2).query("label == 1").groupby("qid").head(1)
    result = train_cross_encoder(
        train,
        config(tiny_encoder, epochs=5, validate_every_steps=2, patience=2),
        tmp_path / "m",
        validation=validation,
    )
    assert result.stopped_early and result.steps == 6  # validations at 2 (best), 4, 6 -> stop
    assert result.best_step == 2 and result.best is not None and result.best["AP"] == 1.0


def test_gradient_accumulation_counts_optimizer_steps(tiny_encoder: Path, tmp_path: Path) -> None:
    result = train_cross_encoder(
        toy_examples(), config(tiny_encoder, epochs=1, batch_size=4, gradient_accumulation=3), tmp_path / "m"
    )
    assert result.steps == 4  # 48 examples / 4 per pass = 12 passes, 3 per step


def test_init_continues_from_a_relevance_model_and_rejects_a_plain_encoder(
    tiny_encoder: Path, tmp_path: Path
) -> None:
    train_cross_encoder(toy_examples(), config(tiny_encoder, epochs=4), tmp_path / "first")
    second = config(tiny_encoder, epochs=1, learning_rate=1e-9, init=str(tmp_path / "first"))
    train_cross_encoder(toy_examples(), second, tmp_path / "second")
    meta = json.loads((tmp_path / "second" / TRAIN_JSON).read_text())
    assert meta["init"]["continued_from_checkpoint"] is True and meta["init"]["fresh_head"] is False
    a = safetensors_torch.load_file(tmp_path / "first" / "model.safetensors")
    b = safetensors_torch.load_file(tmp_path / "second" / "model.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)  # the head came along
    with pytest.raises(ValueError, match="no sequence-classification head"):
        train_cross_encoder(toy_examples(), config(tiny_encoder, init=str(tiny_encoder)), tmp_path / "bad")


def test_bad_examples_are_rejected(tiny_encoder: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no examples"):
        train_cross_encoder(toy_examples().head(0), config(tiny_encoder), tmp_path / "m")
    graded = toy_examples().assign(label=2)
    with pytest.raises(ValueError, match="0 or 1"):
        train_cross_encoder(graded, config(tiny_encoder), tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_validation_measures_skip_queries_without_relevant_rows() -> None:
    from evirank.train.trainer import _validation_measures

    rows = pd.DataFrame({"qid": ["1", "1", "2", "2"], "label": [1, 0, 0, 0]})
    values = _validation_measures(np.array([0.1, 0.9, 0.5, 0.2]), rows, ("AP", "nDCG@10"))
    assert values["AP"] == pytest.approx(0.5)  # query 2 has no relevant row: left out


@pytest.mark.parametrize("num_labels", [1, 2])
def test_evirank_cross_encoder_reads_the_trained_head(
    tiny_encoder: Path, tmp_path: Path, num_labels: int
) -> None:
    from evirank.frames import make_passages
    from evirank.score import CrossEncoder
    from evirank.train._model import predict_relevance

    train_cross_encoder(toy_examples(), config(tiny_encoder, epochs=2, num_labels=num_labels), tmp_path / "m")
    passages = make_passages([("1", "d1", 0, "mango good fruit"), ("1", "d2", 0, "mango bad fruit")])
    passages = passages.assign(query="apple")
    scored = CrossEncoder(tmp_path / "m", Runtime(device="cpu", max_length=16), query_max_tokens=4)(passages)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "m")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "m")
    ours = predict_relevance(model, tokenizer, ["apple"] * 2, passages["text"].tolist(), max_length=16)
    np.testing.assert_allclose(scored["score"].to_numpy(), ours, atol=1e-5)


def test_fine_tuned_cross_encoder_is_a_pipeline_stage(tiny_encoder: Path, tmp_path: Path) -> None:
    from evirank.frames import make_passages
    from evirank.train import FineTunedCrossEncoder

    stage = FineTunedCrossEncoder(
        tmp_path / "m",
        config(tiny_encoder, epochs=4),
        runtime=Runtime(device="cpu", max_length=16),
        query_max_tokens=4,
    )
    with pytest.raises(RuntimeError, match="fit"):
        stage.transform(make_passages([("1", "d1", 0, "x")]))
    passages = make_passages([("1", "d1", 0, "mango good fruit"), ("1", "d2", 0, "mango bad fruit")])
    scored = stage.fit(toy_examples()).transform(passages.assign(query="apple"))
    assert stage.result_.steps == 24 and stage.model_path_ == tmp_path / "m"
    assert scored["score"].iloc[0] > scored["score"].iloc[1]


def test_a_full_disk_while_training_names_the_output_keeps_the_checkpoint_and_resume_goes_on(
    tiny_encoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from evirank.errors import OutputWriteError
    from evirank.train import trainer

    cfg = config(tiny_encoder, validate_every_steps=3)
    reference = train_cross_encoder(toy_examples(), cfg, tmp_path / "straight")
    saves = {"n": 0}
    original = trainer.Fit._save_checkpoint

    def full_on_the_second(self: object, *args: object) -> None:
        saves["n"] += 1
        if saves["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(trainer.Fit, "_save_checkpoint", full_on_the_second)
    out = tmp_path / "m"
    with pytest.raises(OutputWriteError) as failed:
        train_cross_encoder(toy_examples(), cfg, out)
    message = str(failed.value)
    assert message.startswith(f"{out}: could not be written (No space left on device)")
    assert "the last complete checkpoint is kept" in message and "--resume" in message
    assert "nothing was left" not in message
    monkeypatch.setattr(trainer.Fit, "_save_checkpoint", original)
    resumed = train_cross_encoder(toy_examples(), cfg, out, resume=True)
    assert resumed.steps == reference.steps


def test_a_finished_run_reads_back_into_a_report(tiny_encoder: Path, tmp_path: Path) -> None:
    from evirank.report import ReportConfig, build_report

    train, val = split_by_query(toy_examples(), 0.34, seed=1)
    result = train_cross_encoder(
        train, config(tiny_encoder, validate_every_steps=3), tmp_path / "m", validation=val
    )
    report = build_report(ReportConfig(training=(("toy", tmp_path / "m"),)), plots=False)
    summary = report.record["training"]["toy"]
    assert summary["complete"] and summary["steps"] == result.steps
    assert summary["best_step"] == result.best_step
    assert (
        summary["best"]
        == result.history[[r["step"] for r in result.history].index(result.best_step)][summary["measure"]]
    )
