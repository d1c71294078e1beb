#!/usr/bin/env bash
# Passage vectors for the examples of docs/vectors.md, docs/first-stage.md and docs/serve.md: the
# sentences (title prepended) of the abstracts `make demo` re-ranked (793: its first $QUERIES claims'
# BM25 top $DEPTH), taken from the demo's score store, so no model runs. Writes $OUT/top20.jsonl and
# $OUT/vectors; does nothing when $OUT/vectors is there. Run `make demo` first.
set -euo pipefail
OUT=${OUT:-demo}
EVIRANK=${EVIRANK:-evirank}
PYTHON=${PYTHON:-python}
QUERIES=${QUERIES:-50}
DEPTH=${DEPTH:-20}
export HF_HUB_OFFLINE=1

[ -f "$OUT/vectors/manifest.json" ] && exit 0
[ -f "$OUT/bm25.first$QUERIES.txt" ] && [ -f "$OUT/scores.sqlite" ] || {
    echo "no $OUT/bm25.first$QUERIES.txt or $OUT/scores.sqlite: run make demo first" >&2
    exit 1
}
SCIFACT=$($EVIRANK -q data get scifact)
"$PYTHON" - "$SCIFACT" "$OUT/bm25.first$QUERIES.txt" "$DEPTH" "$OUT/top20.jsonl" <<'PY'
import sys
from evirank.io import read_corpus, read_run, write_corpus
corpus, run, depth, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
top = set(read_run(run).query(f"rank <= {depth}").docno)
write_corpus((d for d in read_corpus(corpus) if d.docno in top), out, overwrite=True)
PY
$EVIRANK -q embed --corpus "$OUT/top20.jsonl" --segment sentences:prepend --scores "$OUT/scores.sqlite" \
    --output "$OUT/vectors" 2>&1 | grep -v -e '%|' -e 'Loading weights' || true
[ -f "$OUT/vectors/manifest.json" ] || { echo "embedding failed" >&2; exit 1; }
