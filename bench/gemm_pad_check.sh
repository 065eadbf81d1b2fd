#!/usr/bin/env bash
# On the GPU machine (after `tools/gpu.sh pack` here; carry .gpu): checks and times the padded
# output rows of odd-N 16-bit GEMMs (FUSEOPT_GEMM_PAD_N, docs/runtime.md, NOTES-perf.md v11).
#   bash bench/gemm_pad_check.sh        (from the repository root; about 3-4 minutes)
# Every step logs to $OUT/pad/*.log as it goes (nothing is buffered behind a pipe), and
# $OUT/pad/summary.txt grows one line per step, so a call cut short still says how far it got.
#  1. the CUDA GEMM tests, the padded-row case first (it forces FUSEOPT_GEMM_PAD_N=1)
#  2. BERT-base MLM (30522 words) and GPT-2 LM (50257) exported by bench/e2e_bench.py, fused,
#     timed at 32x128 fp16 with FUSEOPT_GEMM_PAD_N=0 and =2, alternating, twice each
#  3. torch.compile(mode="reduce-overhead") on the same models and shapes, same call
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}/pad
mkdir -p "$OUT"
S=$OUT/summary.txt
: >"$S"
export LD_LIBRARY_PATH=$PWD/.gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export FUSEOPT_SOURCE_DIR=$PWD
bash tools/gpu.sh run -t none -- true >/dev/null 2>&1  # unpacks .gpu
t0=$(date +%s)
note() { echo "t+$(( $(date +%s) - t0 ))s $*" | tee -a "$S"; }

timeout 120 .gpu/bin/test_kernels "cuda FusedMatMul with a transB weight and an odd N: padded output rows" \
  --reporter compact >"$OUT/tests_pad.log" 2>&1
note "padded-row test rc=$? $(tail -n 1 "$OUT/tests_pad.log")"
timeout 180 .gpu/bin/test_kernels "[gemm]" --reporter compact >"$OUT/tests_gemm.log" 2>&1
note "[gemm] tests rc=$? $(tail -n 1 "$OUT/tests_gemm.log")"

timeout 240 python3 bench/e2e_bench.py --bin .gpu/bin --models bert_mlm,gpt2_lm --shapes bert_mlm=32x128 gpt2_lm=32x128 \
  --torch reduce-overhead --iters 50 --work "$OUT/e2e" --json "$OUT/e2e.json" --markdown "$OUT/e2e.md" >"$OUT/e2e.log" 2>&1
note "e2e (PAD_N unset) rc=$? $(grep -E '^\| (bert_mlm|gpt2_lm)' "$OUT/e2e.md" 2>/dev/null | tr '\n' ' ')"

for m in bert_mlm gpt2_lm; do
  f=$OUT/e2e/${m}_fused.onnx
  [ -f "$f" ] || { note "$m: no $f"; continue; }
  for pad in 0 2 0 2; do
    FUSEOPT_GEMM_PAD_N=$pad timeout 60 .gpu/bin/fuserun "$f" --backend cuda --precision fp16 --shape batch=32 \
      --shape seq=128 --warmup 20 --iters 100 --json "$OUT/$m.pad$pad.json" -q >"$OUT/$m.pad$pad.log" 2>&1
    note "$m 32x128 PAD_N=$pad rc=$? $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['device_latency_ms']['median'],3), 'ms')" "$OUT/$m.pad$pad.json" 2>/dev/null)"
  done
done
cat "$S"
