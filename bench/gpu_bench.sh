#!/usr/bin/env bash
# End-to-end benchmark on the GPU machine: BERT-base (fp16) through fuseopt +
# fuserun, next to PyTorch eager and torch.compile measured in the same run.
# Needs the packed binaries (.gpu from `tools/gpu.sh pack`, carried).
#
#   bench/gpu_bench.sh [SHAPES]      # SHAPES like "1x128 32x128 8x512" (default)
#
# Writes $OUT/bench_*.json and prints one line per figure.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-/tmp/fuseopt-bench}/bench"
mkdir -p "$OUT"
SHAPES="${1:-1x128 32x128 8x512}"
G="$ROOT/.gpu"
[ -d "$G/bin" ] || tar -C "$G" -xf "$G/pack.tar.xz"
export LD_LIBRARY_PATH="$G/lib:${LD_LIBRARY_PATH:-}"
W=/tmp/fuseopt-bench-models
mkdir -p "$W"
python3 "$ROOT/bench/export_bench_models.py" --out "$W" 2>&1 | grep -v Warning | tail -2
"$G/bin/fuseopt" "$W/bert_base_op17_ts.onnx" "$W/bert_base_fused.onnx" -q --report "$OUT/bench_fusion_report.json"
for s in $SHAPES; do
  b=${s%x*}; q=${s#*x}
  for m in bert_base_op17_ts bert_base_fused; do
    "$G/bin/fuserun" "$W/$m.onnx" --backend cuda --precision fp16 --shape batch=$b --shape seq=$q \
      --warmup 20 --iters 200 --json "$OUT/bench_${m}_${s}.json" -q 2>&1 | grep -E "latency|error" | sed "s/^/fuserun $m $s: /"
  done
done
"$G/bin/fuserun" "$W/bert_base_fused.onnx" --backend cuda --precision fp16 --shape batch=32 --shape seq=128 \
  --warmup 5 --iters 20 --profile --no-cuda-graphs -q > "$OUT/bench_profile_32x128.txt" 2>&1
python3 "$ROOT/bench/torch_baseline.py" --shapes "$(echo $SHAPES | tr ' ' ',')" --json "$OUT/bench_torch.json" 2>&1 \
  | grep -E "^torch|Error"
