#!/usr/bin/env bash
# One device call: BERT-base end to end with the default GEMM tuning (only few-tile GEMMs timed)
# against FUSEOPT_GEMM_AUTOTUNE=1 (every GEMM timed), alternated ROUNDS times, fresh tuning caches
# (NOTES-perf.md v33, BENCHMARKS.md "Session 28"). Needs .gpu from `tools/gpu.sh pack` (carried)
# and PyTorch on the GPU machine (bench/e2e_bench.py exports the model, random weights).
#   SHAPES="32x128 8x512" ROUNDS=2 OUT=/tmp/autotune-ab bash bench/autotune_ab.sh
# Prints one table last; logs under $OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/fuseopt-autotune-ab}"
SHAPES="${SHAPES:-32x128 8x512}"
ROUNDS="${ROUNDS:-2}"
mkdir -p "$OUT"
# shellcheck source=bench/device_env.sh
. "$ROOT/bench/device_env.sh"
cd "$ROOT"

W=/tmp/fuseopt-autotune-ab-models
timeout "${EXPORT_S:-120}" python3 bench/e2e_bench.py --bin "$G/bin" --models bert \
  --shapes "bert=$(echo "$SHAPES" | tr ' ' ',')" --torch "" --iters 10 --work "$W" >"$OUT/export.log" 2>&1
echo "export rc=$?"
rm -f "$OUT"/gemm-cache-*.txt
declare -A MS
for round in $(seq "$ROUNDS"); do
  for at in 0 1; do
    for shp in $SHAPES; do
      FUSEOPT_GEMM_AUTOTUNE=$at FUSEOPT_GEMM_CACHE="$OUT/gemm-cache-$at.txt" timeout 60 fuserun "$W/bert_fused.onnx" \
        --backend cuda --precision fp16 --shape "batch=${shp%x*}" --shape "seq=${shp#*x}" --warmup 10 --iters 3 \
        --device-iters 50 --json "$OUT/ab.json" -q >>"$OUT/ab.log" 2>&1 || continue
      ms=$(python3 -c "import json; print('%.3f' % json.load(open('$OUT/ab.json'))['device_latency_ms']['median'])")
      MS[$shp/$at]="${MS[$shp/$at]:-}${MS[$shp/$at]:+ / }$ms"
    done
  done
done
echo
echo "| BERT-base fp16 | default (few-tile GEMMs tuned) | FUSEOPT_GEMM_AUTOTUNE=1 (every GEMM tuned) |"
echo "|---|---|---|"
for shp in $SHAPES; do echo "| $shp | ${MS[$shp/0]:--} | ${MS[$shp/1]:--} |"; done
