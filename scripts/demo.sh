#!/usr/bin/env bash
# The main job end to end on SciFact: index, BM25 and BM25+RM3, re-rank by sentence evidence with
# the offline bi-encoder, evaluate with paired t-tests, and explain one relevant document.
#
# Idempotent: outputs already there are reused (rm -rf "$OUT" to start over); an interrupted
# re-ranking resumes from its score store. Sized to finish in a few minutes on 2 CPU cores:
# the re-ranking covers the first $QUERIES test queries' BM25 top $DEPTH (QUERIES=300 DEPTH=100
# is the full check of docs/rerank.md). SciFact is read from $DATA/scifact when it is there;
# otherwise it is downloaded once into the data home ($EVIRANK_HOME, default ~/.cache/evirank).
set -euo pipefail
DATA=${EVIRANK_DATASETS:-${DATA:-../shared/datasets}}  # the datasets folder, as evirank finds it
OUT=${OUT:-demo}
EVIRANK=${EVIRANK:-.venv/bin/evirank}
PYTHON=${PYTHON:-.venv/bin/python}
QUERIES=${QUERIES:-50}
DEPTH=${DEPTH:-20}
export HF_HUB_OFFLINE=1

mkdir -p "$OUT"
echo "evirank demo: writing into $OUT/ (rm -rf $OUT to start over)"
step() { printf '\n== %s\n' "$*"; }
started=$SECONDS

# SciFact from the datasets folder when it is there, else from the data home, downloaded once
# (BEIR's scifact.zip, 2.8 MB, 8 MB unpacked; checked against its published md5).
if [ -f "$DATA/scifact/corpus.jsonl" ]; then
    SCIFACT="$DATA/scifact"
else
    echo "SciFact is not in $DATA: getting it into the data home (${EVIRANK_HOME:-~/.cache/evirank}," \
        "BEIR's scifact.zip, 2.8 MB, once)"
    SCIFACT=$(DATA="$DATA" $EVIRANK data get scifact) || {
        echo "the demo needs SciFact: see the message above (or set DATA to a folder holding scifact/)" >&2
        exit 1
    }
    echo "using $SCIFACT"
fi
QRELS="$SCIFACT/qrels/test.tsv"

step "1. Index SciFact ($SCIFACT: 5,183 abstracts)"
if [ -f "$OUT/index/evirank-index.json" ]; then
    echo "reusing $OUT/index"
else
    $EVIRANK -q index --corpus "$SCIFACT" --index "$OUT/index"
fi

step "2. BM25 and BM25+RM3 for the 300 test queries (top 1000)"
[ -f "$OUT/bm25.txt" ] || $EVIRANK -q search --index "$OUT/index" --topics "$SCIFACT" --split test \
    --threads 2 --output "$OUT/bm25.txt"
[ -f "$OUT/bm25+rm3.txt" ] || $EVIRANK -q search --index "$OUT/index" --topics "$SCIFACT" --split test \
    --threads 2 --rm3 --output "$OUT/bm25+rm3.txt"
$EVIRANK -q evaluate --qrels "$QRELS" --run "bm25=$OUT/bm25.txt" --run "bm25+rm3=$OUT/bm25+rm3.txt" \
    --baseline bm25 --measures nDCG@10 AP R@100 R@1000

step "3. Re-rank the first $QUERIES test queries' BM25 top $DEPTH by sentence evidence"
echo "(sentences with the title prepended, scored by the offline all-MiniLM-L6-v2 bi-encoder)"
SUBSET="$OUT/bm25.first$QUERIES.txt"
if [ ! -f "$SUBSET" ]; then
    # The run is ordered by qid: keep the lines of its first $QUERIES queries (all their documents).
    awk -v n="$QUERIES" '!($1 in seen) { if (count == n) exit; seen[$1] = 1; count++ } { print }' \
        "$OUT/bm25.txt" > "$SUBSET.tmp"
    mv "$SUBSET.tmp" "$SUBSET"
fi
# The defaults (MaxP weighed with BM25 at 0.2), the best passage alone, and Birch 3S untuned: the
# sentences are scored once, into the score store; the other two runs only aggregate again.
for RUN in "defaults:" "maxp:--aggregate maxp --alpha 0" "birch3:--aggregate birch:3 --alpha 0.5"; do
    NAME="bi.${RUN%%:*}"
    read -r -a FLAGS <<< "${RUN#*:}"
    if [ -f "$OUT/$NAME.txt" ]; then
        echo "reusing $OUT/$NAME.txt"
        continue
    fi
    $EVIRANK rerank --run "$SUBSET" --index "$OUT/index" --topics "$SCIFACT" --split test \
        --scorer bi --segment sentences:prepend "${FLAGS[@]}" --depth "$DEPTH" \
        --scores "$OUT/scores.sqlite" --output "$OUT/$NAME.txt" 2>&1 \
        | grep -v -e '%|' -e 'Loading weights' || true
    [ -f "$OUT/$NAME.txt" ] || { echo "re-ranking failed; rerun to resume" >&2; exit 1; }
done
$EVIRANK -q evaluate --qrels "$QRELS" --run "bm25=$SUBSET" --run "defaults=$OUT/bi.defaults.txt" \
    --run "maxp=$OUT/bi.maxp.txt" --run "birch3=$OUT/bi.birch3.txt" --baseline bm25 \
    --measures nDCG@10 AP RR@10 P@5

step "4. Why did a relevant document rank where it did? Its sentences, best first"
read -r QID DOCNO < <("$PYTHON" - "$QRELS" "$OUT/bi.birch3.txt" "$DEPTH" <<'EOF'
import sys
qrels, run, depth = sys.argv[1], sys.argv[2], int(sys.argv[3])
relevant = set()
with open(qrels) as f:
    next(f)  # header: query-id corpus-id score
    for line in f:
        qid, docno, label = line.split()
        if int(label) > 0:
            relevant.add((qid, docno))
with open(run) as f:
    for line in f:
        qid, _, docno, rank, _, _ = line.split()
        if int(rank) <= depth and (qid, docno) in relevant:
            print(qid, docno)
            break
EOF
)
echo "query $QID, relevant document $DOCNO:"
$EVIRANK explain --scores "$OUT/scores.sqlite" --qid "$QID" --docno "$DOCNO" --show-passages 5

echo
echo "demo finished in $((SECONDS - started)) s; outputs in $OUT/ (runs, *.json records with the time per stage)"
echo "search it in a browser: make serve, then open http://127.0.0.1:8080/ (the same score store is reused)"
