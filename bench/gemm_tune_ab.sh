#!/usr/bin/env bash
# One device call: A/B of the cuBLASLt autotuning and the warp-per-row norm
# (NOTES-perf.md, "v4"). Needs .gpu from `tools/gpu.sh pack` (carried).
#   1. micro-benchmark, same process, interleaved A B A B (bench/kernels/gemm_tune_bench.cc)
#   2. the CUDA tests (tools/gpu.sh run -t "[cuda]")
#   3. BERT-base fp16 32x128 end to end: fuserun device latency with both changes
#      off (FUSEOPT_GEMM_AUTOTUNE=0 FUSEOPT_NORM_WARP_ROWS=0) and on, alternated.
# Logs under $OUT; prints a short table last.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/fuseopt-tune-ab}"
mkdir -p "$OUT"
G="$ROOT/.gpu"
[ -d "$G/bin" ] || tar -C "$G" -xf "$G/pack.tar.xz"
export LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cd "$ROOT"

FUSEOPT_BENCH_ONLY=tune timeout "${BENCH_S:-45}" "$G/bin/bench_kernels" "[.bench]" >"$OUT/tune_bench.log" 2>&1
echo "bench rc=$?"
timeout "${TESTS_S:-80}" tools/gpu.sh run -t "[cuda]" >"$OUT/tests.log" 2>&1
echo "tests rc=$?"

W=/tmp/fuseopt-tune-ab-models
mkdir -p "$W"
if timeout "${EXPORT_S:-50}" python3 bench/export_bench_models.py --out "$W" >"$OUT/export.log" 2>&1 &&
  "$G/bin/fuseopt" "$W/bert_base_op17_ts.onnx" "$W/bert_base_fused.onnx" -q >"$OUT/fuseopt.log" 2>&1; then
  for cfg in 0 1 0 1; do
    FUSEOPT_GEMM_AUTOTUNE=$cfg FUSEOPT_NORM_WARP_ROWS=$cfg timeout 20 "$G/bin/fuserun" "$W/bert_base_fused.onnx" \
      --backend cuda --precision fp16 --shape batch=32 --shape seq=128 --warmup 20 --iters 200 -q 2>&1 |
      grep -E "latency|rror" | sed "s/^/e2e 32x128 new=$cfg: /" | tee -a "$OUT/e2e.log"
  done
  # Per-op-type GPU time (profile mode times every node, no graphs): the table of BENCHMARKS.md.
  for cfg in 0 1; do
    FUSEOPT_GEMM_AUTOTUNE=$cfg FUSEOPT_NORM_WARP_ROWS=$cfg timeout 20 "$G/bin/fuserun" "$W/bert_base_fused.onnx" \
      --backend cuda --precision fp16 --shape batch=32 --shape seq=128 --warmup 5 --iters 20 --profile \
      --no-cuda-graphs -q >"$OUT/profile_new$cfg.txt" 2>&1
    sed -n '/profile by op type/,/^$/p' "$OUT/profile_new$cfg.txt" | head -14 |
      sed "s/^/profile new=$cfg: /"
  done
else
  echo "e2e: export or fuseopt failed: $(tail -n 2 "$OUT/export.log" "$OUT/fuseopt.log" 2>/dev/null)"
fi

echo "== tests"
grep -E "^== |passed|failed|FAILED" "$OUT/tests.log" | tail -30
echo "== A/B"
sed -n '/A\/B summary/,$p' "$OUT/tune_bench.log"
