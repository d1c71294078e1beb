"""The peer side of ``benchmarks/peers.py``: sentence-transformers' and FlashRank's rerankers.

It runs inside the peer environment that ``peers.py`` builds (sentence-transformers 5 with
optimum, which needs transformers < 5), so it imports nothing from evirank. It is a long-lived
worker: ``peers.py`` writes one JSON command per line to its stdin and reads one JSON answer per
line from its stdout, so the two processes take turns and rounds alternate fairly; everything the
libraries print goes to stderr.

Commands:
    ``{"op": "load", "name": NAME}``: export (once, into the work folder) and load one peer, warm it up.
    ``{"op": "score", "name": NAME, "pairs": FILE, "out": FILE}``: score the pairs of a JSONL file
    (``{"query": ..., "text": ...}`` per line), write the raw logits (``.npy``), answer the wall and
    CPU seconds of the call.
    ``{"op": "memory", "name": NAME, "pairs": FILE}``: the resident-set growth of loading, and the peak
    above it while scoring (run in a fresh worker, one peer per process).
    ``{"op": "quit"}``.

Peers (``NAME``): ``st-torch`` (on a GPU ``st-torch-cuda``, ``-fp16``, ``-bf16``: weights in that
dtype), ``st-onnx``, ``st-onnx-O1`` ... ``st-onnx-O4`` (Optimum's graph optimisation levels),
``st-onnx-int8`` (Optimum's dynamic int8 quantisation, the avx512_vnni configuration),
``st-openvino`` (OpenVINO as sentence-transformers configures it: on CPUs with native bf16,
OpenVINO computes in bf16), ``st-openvino-f32`` (OpenVINO with its precision hint at f32),
``st-openvino-int8`` (static int8 by NNCF, calibrated on the benchmark's own calibration pairs),
``flashrank`` and ``flashrank-int8`` (FlashRank's ``Ranker`` over the fp32 and int8 ONNX exports,
one ``rerank`` call per query).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger("peer-worker")

PEERS = (
    "st-torch",
    "st-onnx",
    "st-onnx-O1",
    "st-onnx-O2",
    "st-onnx-O3",
    "st-onnx-O4",
    "st-onnx-int8",
    "st-openvino",
    "st-openvino-f32",
    "st-openvino-int8",
    "flashrank",
    "flashrank-int8",
    "st-torch-cuda",
    "st-torch-cuda-fp16",
    "st-torch-cuda-bf16",
)
#: sentence-transformers' default batch size for CrossEncoder.predict.
ST_BATCH = 32


def read_pairs(path: str) -> list[tuple[str, str]]:
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [(row["query"], row["text"]) for row in rows]


def rss_kb() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


class Peers:
    """Builds and holds the peers, exporting their model files once into ``work``."""

    def __init__(
        self,
        model: Path,
        work: Path,
        threads: int,
        calibration: Path | None,
        device: str = "cpu",
        batch: int = ST_BATCH,
    ) -> None:
        self.device = device
        self.batch = batch
        self.source = model
        self.work = work
        self.threads = threads
        self.calibration = calibration
        self.loaded: dict[str, tuple[Callable[[list[tuple[str, str]]], np.ndarray], dict[str, Any]]] = {}
        import torch

        torch.set_num_threads(threads)

    # -- model files ------------------------------------------------------------------
    @property
    def folder(self) -> Path:
        """A copy of the model folder that the peers' exports are written into."""
        folder = self.work / "model"
        if not (folder / "config.json").is_file():
            tmp = self.work / ".model-copy"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(self.source, tmp, ignore=shutil.ignore_patterns("onnx", "openvino", "*.sqlite"))
            os.replace(tmp, folder)
        return folder

    def _onnx_file(self, suffix: str) -> str:
        """The ONNX file of one variant (exported with sentence-transformers' own functions)."""
        from sentence_transformers import CrossEncoder
        from sentence_transformers.backend import (
            export_dynamic_quantized_onnx_model,
            export_optimized_onnx_model,
        )

        folder = self.folder
        plain = folder / "onnx" / "model.onnx"
        if not plain.is_file():
            CrossEncoder(str(folder), backend="onnx", device="cpu").save_pretrained(str(folder))
        name = {"": "model.onnx", "int8": "model_qint8_avx512_vnni.onnx"}.get(suffix, f"model_{suffix}.onnx")
        if not (folder / "onnx" / name).is_file():
            exported = CrossEncoder(
                str(folder), backend="onnx", device="cpu", model_kwargs={"file_name": "onnx/model.onnx"}
            )
            if suffix == "int8":
                export_dynamic_quantized_onnx_model(exported, "avx512_vnni", str(folder))
            else:
                export_optimized_onnx_model(exported, suffix, str(folder))
        return f"onnx/{name}"

    def _openvino_file(self, int8: bool) -> str:
        from sentence_transformers import CrossEncoder

        folder = self.folder
        plain = folder / "openvino" / "openvino_model.xml"
        if not plain.is_file():
            CrossEncoder(str(folder), backend="openvino", device="cpu").save_pretrained(str(folder))
        if not int8:
            return "openvino/openvino_model.xml"
        quantized = folder / "openvino" / "openvino_model_qint8_quantized.xml"
        if not quantized.is_file():
            self._quantize_openvino(folder)
        return "openvino/" + quantized.name

    def _quantize_openvino(self, folder: Path) -> None:
        """Static int8 (NNCF through optimum-intel, its default transformer recipe), calibrated on
        the calibration pairs, saved where sentence-transformers' own export puts it."""
        import nncf
        from optimum.intel.openvino import OVConfig, OVQuantizationConfig, OVQuantizer
        from sentence_transformers import CrossEncoder

        if self.calibration is None:
            raise ValueError("st-openvino-int8 needs calibration pairs")
        model = CrossEncoder(
            str(folder),
            backend="openvino",
            device="cpu",
            model_kwargs={"file_name": "openvino/openvino_model.xml"},
        )
        pairs = read_pairs(str(self.calibration))
        items = []
        for query, text in pairs:
            encoded = model.tokenizer(query, text, truncation=True, max_length=512, return_tensors="np")
            items.append({key: np.asarray(value) for key, value in encoded.items()})
        out = self.work / ".openvino-int8"
        shutil.rmtree(out, ignore_errors=True)
        OVQuantizer.from_pretrained(model.model).quantize(
            calibration_dataset=nncf.Dataset(items),
            save_directory=str(out),
            ov_config=OVConfig(quantization_config=OVQuantizationConfig(num_samples=len(items))),
        )
        found = next(out.rglob("*.xml"))
        for ext in (".xml", ".bin"):
            os.replace(found.with_suffix(ext), folder / "openvino" / f"openvino_model_qint8_quantized{ext}")
        shutil.rmtree(out, ignore_errors=True)

    # -- peers ----------------------------------------------------------------------------
    def load(self, name: str) -> dict[str, Any]:
        if name in self.loaded:
            return self.loaded[name][1]
        if name not in PEERS:
            raise ValueError(f"unknown peer {name!r}; expected one of {', '.join(PEERS)}")
        started = time.perf_counter()
        if name.startswith("flashrank"):
            score, info = self._flashrank(name)
        else:
            score, info = self._sentence_transformers(name)
        score([("warm-up claim", "a warm-up sentence"), ("another claim", "and a second sentence")])
        info["load_s"] = time.perf_counter() - started
        self.loaded[name] = (score, info)
        return info

    def _sentence_transformers(self, name: str) -> tuple[Callable[..., np.ndarray], dict[str, Any]]:
        import sentence_transformers
        import torch
        from sentence_transformers import CrossEncoder

        kwargs: dict[str, Any] = {}
        backend = "torch"
        precision = "fp32"
        device = "cpu"
        engine = f"PyTorch {torch.__version__.split('+')[0]}"
        if name.startswith("st-torch-cuda"):
            device = self.device
            dtype = name.removeprefix("st-torch-cuda").lstrip("-") or "fp32"
            kwargs = {"dtype": {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]}
            precision = dtype
        elif name.startswith("st-onnx"):
            import onnxruntime as ort

            backend = "onnx"
            variant = name.removeprefix("st-onnx").lstrip("-")
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            kwargs = {
                "file_name": self._onnx_file(variant),
                "provider": "CPUExecutionProvider",
                "session_options": options,
            }
            precision = {
                "int8": "int8 (dynamic, per tensor)",
                "O3": "fp32, approximate GELU",
                "O4": "fp16 weights (mixed)",
            }.get(variant, "fp32")
            engine = f"ONNX Runtime {ort.__version__}"
        elif name.startswith("st-openvino"):
            import openvino

            backend = "openvino"
            config: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads}
            if name == "st-openvino-f32":
                config["INFERENCE_PRECISION_HINT"] = "f32"
            kwargs = {"file_name": self._openvino_file(name == "st-openvino-int8"), "ov_config": config}
            engine = f"OpenVINO {openvino.__version__.split('-')[0]}"
        model = CrossEncoder(str(self.folder), backend=backend, device=device, model_kwargs=kwargs)
        if backend == "openvino":
            compiled = model.model.request
            hint = str(compiled.get_property("INFERENCE_PRECISION_HINT")).lower()
            float_precision = "bf16" if "bf" in hint else "fp16" if "f16" in hint else "fp32"
            precision = (
                f"int8 (static, {self._calibration_count()} calibration pairs)"
                if name == "st-openvino-int8"
                else float_precision
            )
        identity = torch.nn.Identity()

        def score(pairs: list[tuple[str, str]]) -> np.ndarray:
            out = model.predict(
                pairs,
                batch_size=self.batch,
                activation_fn=identity,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            return np.asarray(out, dtype=np.float64).reshape(len(pairs), -1)[:, 0]

        label = f"sentence-transformers {sentence_transformers.__version__} {backend}"
        if name.startswith("st-torch-cuda"):
            label += f" ({precision} weights)"
        if name.startswith("st-onnx-"):
            label += " " + name.removeprefix("st-onnx-")
        if name == "st-openvino-f32":
            label += " (precision hint f32)"
        if name == "st-openvino-int8":
            label += " int8"
        return score, {
            "label": label,
            "precision": precision,
            "engine": engine,
            "batch": f"{self.batch} pairs",
        }

    def _calibration_count(self) -> int:
        return len(read_pairs(str(self.calibration))) if self.calibration else 0

    def _flashrank(self, name: str) -> tuple[Callable[..., np.ndarray], dict[str, Any]]:
        """FlashRank's Ranker on a local folder holding sentence-transformers' ONNX export."""
        import flashrank
        import onnxruntime as ort
        from flashrank import Ranker, RerankRequest

        onnx_file = self.folder / self._onnx_file("int8" if name == "flashrank-int8" else "")
        model_name = "evirank-bench-int8" if name == "flashrank-int8" else "evirank-bench"
        cache = self.work / "flashrank"
        folder = cache / model_name
        if not folder.is_dir():
            tmp = cache / f".{model_name}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for item in self.folder.iterdir():
                if item.is_file() and item.suffix in (".json", ".txt"):
                    shutil.copy2(item, tmp / item.name)
            shutil.copy2(onnx_file, tmp / "model.onnx")
            os.replace(tmp, folder)
        # Ranker looks a model's file name up in this table; a local model adds its own entry.
        flashrank.Ranker.__init__.__globals__["model_file_map"][model_name] = "model.onnx"
        ranker = Ranker(model_name=model_name, cache_dir=str(cache), max_length=512, log_level="WARNING")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        ranker.session = ort.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )

        def score(pairs: list[tuple[str, str]]) -> np.ndarray:
            # one rerank call per query (its passages in one padded batch), as FlashRank is used
            out = np.empty(len(pairs), dtype=np.float64)
            groups: dict[str, list[int]] = {}
            for i, (query, _) in enumerate(pairs):
                groups.setdefault(query, []).append(i)
            for query, rows in groups.items():
                passages = [{"id": i, "text": pairs[i][1]} for i in rows]
                for result in ranker.rerank(RerankRequest(query=query, passages=passages)):
                    p = float(np.clip(result["score"], 1e-12, 1 - 1e-7))
                    out[result["id"]] = np.log(p / (1 - p))  # FlashRank returns sigmoid(logit)
            return out

        version = getattr(flashrank, "__version__", None) or _version("flashrank")
        precision = "int8 (dynamic, per tensor)" if name == "flashrank-int8" else "fp32"
        return score, {
            "label": f"FlashRank {version} Ranker ({'int8' if name == 'flashrank-int8' else 'fp32'} ONNX)",
            "precision": precision,
            "engine": f"ONNX Runtime {ort.__version__}",
            "batch": "one per query",
        }

    def score(self, name: str, pairs_file: str, out: str | None) -> dict[str, Any]:
        score = self.loaded[name][0]
        pairs = read_pairs(pairs_file)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        scores = score(pairs)
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if out:
            np.save(out, scores)
        return {"seconds": wall, "cpu_seconds": cpu, "pairs": len(pairs)}

    def memory(self, name: str, pairs_file: str) -> dict[str, Any]:
        before = rss_kb()["VmRSS"]
        self.load(name)
        loaded = rss_kb()["VmRSS"]
        Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current resident set
        self.score(name, pairs_file, None)
        peak = rss_kb()["VmHWM"]
        return {"load_mb": (loaded - before) / 1024, "peak_mb": (peak - loaded) / 1024}


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--calibration", type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=ST_BATCH, help="sentence-transformers' batch size")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    answers = sys.stdout
    sys.stdout = sys.stderr  # libraries' prints must not mix with the answers
    args.work.mkdir(parents=True, exist_ok=True)
    peers = Peers(args.model, args.work, args.threads, args.calibration, args.device, args.batch)
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        op = command.get("op")
        try:
            if op == "quit":
                break
            if op == "versions":
                answer: dict[str, Any] = {
                    p: _version(p)
                    for p in (
                        "sentence-transformers",
                        "transformers",
                        "optimum",
                        "optimum-onnx",
                        "optimum-intel",
                        "openvino",
                        "onnxruntime",
                        "nncf",
                        "flashrank",
                        "torch",
                    )
                    if _installed(p)
                }
            elif op == "load":
                answer = peers.load(command["name"])
            elif op == "score":
                answer = peers.score(command["name"], command["pairs"], command.get("out"))
            elif op == "memory":
                answer = peers.memory(command["name"], command["pairs"])
            else:
                raise ValueError(f"unknown op {op!r}")
            answer = {"ok": True, **answer}
        except Exception as exc:  # reported to peers.py, which decides what to do
            traceback.print_exc(file=sys.stderr)
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def _installed(package: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(package)
        return True
    except PackageNotFoundError:
        return False


if __name__ == "__main__":
    main()
