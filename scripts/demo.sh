#!/usr/bin/env bash
# The main job end to end on SciFact: index, BM25 and BM25+RM3, evaluate.
set -euo pipefail
DATA=${DATA:-../shared/datasets}
OUT=${OUT:-demo}
EVIRANK=.venv/bin/evirank
mkdir -p "$OUT"
echo "evirank demo: writing into $OUT/ (rm -rf $OUT to start over)"
