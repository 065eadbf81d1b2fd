#!/usr/bin/env bash
# One device call: the odd-vocabulary LM heads at batch (NOTES-perf.md v32, BENCHMARKS.md
# "Session 27"). Needs .gpu from `tools/gpu.sh pack` (carried) and PyTorch on the GPU machine.
#   1. the CUDA tests of the odd-N paths (the row pack alone, FusedMatMul with an odd N and a
#      transB weight, the packed float logits of a session);
#   2. BERT-base masked-LM and GPT-2 small LM (random weights, real vocabularies 30522 / 50257)
#      exported and fused by bench/e2e_bench.py at SHAPE (default 32x128);
#   3. device latency of the default odd-N path (padded rows + the vector pack) against the row
#      phases (FUSEOPT_GEMM_ROW_PHASES=1), alternated ROUNDS times;
#   4. torch.compile(mode="reduce-overhead") on the same models in the same call.
# Prints one table last; logs under $OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/fuseopt-lm-head-ab}"
SHAPE="${SHAPE:-32x128}"
ROUNDS="${ROUNDS:-2}"
mkdir -p "$OUT"
G="$ROOT/.gpu"
[ -d "$G/bin" ] || tar -C "$G" -xf "$G/pack.tar.xz"
export PATH="$G/bin:$PATH" LD_LIBRARY_PATH="$G/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cd "$ROOT"

timeout "${TESTS_S:-90}" tools/gpu.sh run -t "cuda GEMM row pack*,cuda FusedMatMul with a transB weight and an odd N*,cuda Session: packed odd-N*" \
  >"$OUT/tests.log" 2>&1
echo "tests rc=$? ($(grep -E "Passed|failed" "$OUT/test_kernels.log" 2>/dev/null | tail -n 1))"

W=/tmp/fuseopt-lm-head-ab-models
B="${SHAPE%x*}" S="${SHAPE#*x}"
timeout "${EXPORT_S:-150}" python3 bench/e2e_bench.py --bin "$G/bin" --models bert_mlm,gpt2_lm \
  --shapes "bert_mlm=$SHAPE" "gpt2_lm=$SHAPE" --torch "" --iters 10 --work "$W" >"$OUT/export.log" 2>&1
echo "export rc=$?"

declare -A MS
for round in $(seq "$ROUNDS"); do
  for m in bert_mlm gpt2_lm; do
    for path in pack phases; do
      ph=0
      [ "$path" = phases ] && ph=1
      FUSEOPT_GEMM_ROW_PHASES=$ph timeout 120 fuserun "$W/${m}_fused.onnx" --backend cuda --precision fp16 \
        --shape "batch=$B" --shape "seq=$S" --warmup 5 --iters 2 --device-iters 50 --json "$OUT/ab.json" -q \
        >>"$OUT/ab.log" 2>&1 || continue
      ms=$(python3 -c "import json; print('%.3f' % json.load(open('$OUT/ab.json'))['device_latency_ms']['median'])")
      MS[$m/$path]="${MS[$m/$path]:-}${MS[$m/$path]:+ / }$ms"
    done
  done
done

timeout "${TORCH_S:-240}" python3 bench/e2e_bench.py --bin "$G/bin" --models bert_mlm,gpt2_lm \
  --shapes "bert_mlm=$SHAPE" "gpt2_lm=$SHAPE" --torch reduce-overhead --iters 50 --work "$W" \
  --json "$OUT/e2e.json" >"$OUT/torch.log" 2>&1
echo "torch rc=$?"

echo
echo "| model, $SHAPE | padded rows + pack (default) | row phases | torch.compile |"
echo "|---|---|---|---|"
for m in bert_mlm gpt2_lm; do
  tc=$(python3 -c "
import json
try:
    rows = json.load(open('$OUT/e2e.json'))
    rows = rows['rows'] if isinstance(rows, dict) else rows
    print(next(('%.3f' % r['torch']['reduce-overhead']) for r in rows if r['model'] == '$m'))
except Exception:
    print('-')")
  echo "| $m | ${MS[$m/pack]:--} | ${MS[$m/phases]:--} | $tc |"
done
