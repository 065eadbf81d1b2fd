#!/usr/bin/env bash
# One device call: the odd-vocabulary LM heads at batch (NOTES-perf.md v32-v33, BENCHMARKS.md
# "Session 27" / "Session 28"). Needs .gpu from `tools/gpu.sh pack` (carried) and PyTorch on the
# GPU machine.
#   1. the CUDA tests of the odd-N paths (our Hopper GEMM storing rows of any pitch, the row pack
#      alone, FusedMatMul with an odd N and a transB weight, the float logits of a session);
#   2. BERT-base, BERT-base masked-LM and GPT-2 small LM (random weights, real vocabularies 30522 /
#      50257) exported and fused by bench/e2e_bench.py at SHAPE (default 32x128);
#   3. device latency of each odd-N path, alternated ROUNDS times: the padded rows + the vector
#      pack (the default), our Hopper GEMM writing Y's rows itself (FUSEOPT_HOPPER_ODD_N=1), and
#      the row phases through cuBLASLt (FUSEOPT_GEMM_ROW_PHASES=1; PATHS=... to choose);
#   4. torch.compile(mode="reduce-overhead") on the same models in the same call.
# Prints one table last (the head's share: masked-LM over the bare encoder); logs under $OUT.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/fuseopt-lm-head-ab}"
SHAPE="${SHAPE:-32x128}"
ROUNDS="${ROUNDS:-2}"
mkdir -p "$OUT"
# shellcheck source=bench/device_env.sh
. "$ROOT/bench/device_env.sh"
cd "$ROOT"

PATHS="${PATHS:-pack hopper}"
if [ "${TESTS:-1}" = 1 ]; then
  timeout "${TESTS_S:-120}" tools/gpu.sh run -t "cuda Hopper GEMM writes rows*,cuda GEMM row pack*,cuda FusedMatMul with a transB weight and an odd N*,cuda Session: packed odd-N*" \
    >"$OUT/tests.log" 2>&1
  echo "tests rc=$? ($(grep -E "passed|failed" "$OUT/tests.log" 2>/dev/null | tail -n 1))"
fi

W=/tmp/fuseopt-lm-head-ab-models
B="${SHAPE%x*}" S="${SHAPE#*x}"
timeout "${EXPORT_S:-200}" python3 bench/e2e_bench.py --bin "$G/bin" --models bert,bert_mlm,gpt2_lm \
  --shapes "bert=$SHAPE" "bert_mlm=$SHAPE" "gpt2_lm=$SHAPE" --torch "" --iters 10 --work "$W" >"$OUT/export.log" 2>&1
echo "export rc=$?"

declare -A MS
run_one() {  # model, path -> appends the device latency to MS[model/path]
  local m=$1 path=$2 ph=0 hop=0
  [ "$path" = phases ] && ph=1
  [ "$path" = hopper ] && hop=1
  FUSEOPT_GEMM_ROW_PHASES=$ph FUSEOPT_HOPPER_ODD_N=$hop timeout 120 fuserun "$W/${m}_fused.onnx" --backend cuda \
    --precision fp16 --shape "batch=$B" --shape "seq=$S" --warmup 5 --iters 2 --device-iters 50 \
    --json "$OUT/ab.json" -q >>"$OUT/ab.log" 2>&1 || return
  local ms
  ms=$(python3 -c "import json; print('%.3f' % json.load(open('$OUT/ab.json'))['device_latency_ms']['median'])")
  MS[$m/$path]="${MS[$m/$path]:-}${MS[$m/$path]:+ / }$ms"
}
for round in $(seq "$ROUNDS"); do
  run_one bert pack
  for m in bert_mlm gpt2_lm; do
    for path in $PATHS; do run_one "$m" "$path"; done
  done
done

timeout "${TORCH_S:-240}" python3 bench/e2e_bench.py --bin "$G/bin" --models bert,bert_mlm,gpt2_lm \
  --shapes "bert=$SHAPE" "bert_mlm=$SHAPE" "gpt2_lm=$SHAPE" --torch reduce-overhead --iters 50 --work "$W" \
  --json "$OUT/e2e.json" >"$OUT/torch.log" 2>&1
echo "torch rc=$?"

echo
echo "| model, $SHAPE | padded rows + pack (default) | Hopper GEMM rows (FUSEOPT_HOPPER_ODD_N=1) | row phases (cuBLASLt) | default, beside torch | torch.compile |"
echo "|---|---|---|---|---|---|"
for m in bert bert_mlm gpt2_lm; do
  both=$(python3 -c "
import json
try:
    rows = json.load(open('$OUT/e2e.json'))['rows']
    r = next(r for r in rows if r['model'] == '$m')
    f = lambda v: '%.3f' % v if v else '-'
    print(f(r['fused']), '|', f(r['torch'].get('reduce-overhead')))
except Exception:
    print('- | -')")
  echo "| $m | ${MS[$m/pack]:--} | ${MS[$m/hopper]:--} | ${MS[$m/phases]:--} | $both |"
done
