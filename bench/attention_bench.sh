#!/usr/bin/env bash
# Attention micro-benchmark (issue 9, Deliver 4): fuseopt's CUDA attention
# kernels against torch's scaled_dot_product_attention in one process.
#
#   bench/attention_bench.sh build        # here (nvcc): build-attn/libfo_attention_bench.so
#   bench/attention_bench.sh run [ARGS]   # on the GPU machine (torch): checks, then the table
#   bench/attention_bench.sh profile B,H,S,D KERNEL   # there: ncu stall reasons, tensor-pipe use and
#                                         # per-SASS-line samples ($OUT/ncu_*.{log,csv}) of one Hopper launch
#
# GPU call (device tool): run(command='bash bench/attention_bench.sh run', carry=['build-attn/libfo_attention_bench.so.xz'])
# `build` compiles kernels/cuda/fused_attention{,_mma,_hopper}.cu with the
# project's flags (sm_90 + sm_90a for the Hopper file) and bench/attention_bench.cu
# into one shared library with a C entry point (see attention_bench.cu); `run`
# loads it with ctypes (bench/attention_bench.py --help for the options).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTDIR="$ROOT/build-attn"
OBJ="$OUTDIR/obj"  # objects stay here; only the compressed .so travels

build() {
  mkdir -p "$OBJ"
  local flags=(-std=c++20 -O3 --expt-relaxed-constexpr -lineinfo -Xcompiler -fPIC -I "$ROOT/src" -I "$ROOT")
  local sm90=(--generate-code=arch=compute_90,code=[compute_90,sm_90])
  local f objs=()
  for f in fused_attention fused_attention_mma; do
    flock /tmp/fuseopt-build.lock nvcc "${flags[@]}" "${sm90[@]}" -c "$ROOT/kernels/cuda/$f.cu" -o "$OBJ/$f.o"
    objs+=("$OBJ/$f.o")
  done
  flock /tmp/fuseopt-build.lock nvcc "${flags[@]}" "${sm90[@]}" -gencode=arch=compute_90a,code=sm_90a -Xptxas -v \
    -c "$ROOT/kernels/cuda/fused_attention_hopper.cu" -o "$OBJ/fused_attention_hopper.o" 2>&1 |
    grep -E "registers|spill|C75" | sort | uniq -c || true
  flock /tmp/fuseopt-build.lock nvcc "${flags[@]}" "${sm90[@]}" -c "$ROOT/bench/attention_bench.cu" -o "$OBJ/attention_bench.o"
  g++ -std=c++20 -O2 -fPIC -I "$ROOT/src" -I "$ROOT" -c "$ROOT/src/ir/tensor.cc" -o "$OBJ/tensor.o"  # dtype_name
  objs+=("$OBJ/fused_attention_hopper.o" "$OBJ/attention_bench.o" "$OBJ/tensor.o")
  nvcc -shared "${sm90[@]}" -Xlinker --no-undefined "${objs[@]}" -o "$OUTDIR/libfo_attention_bench.so"
  # The carried tree is capped at 64 MiB with models/: ship the library xz-compressed (~1 MB).
  strip --strip-debug "$OUTDIR/libfo_attention_bench.so"
  xz -9 -T2 -f -k "$OUTDIR/libfo_attention_bench.so"
  echo "built $OUTDIR/libfo_attention_bench.so (+ .xz: carry build-attn/libfo_attention_bench.so.xz)"
}

case "${1:-}" in
  build) build ;;
  run)
    shift
    [ -f "$OUTDIR/libfo_attention_bench.so.xz" ] && xz -dkf "$OUTDIR/libfo_attention_bench.so.xz"  # the carried one, never a stale copy
    PYTHONUNBUFFERED=1 python3 "$ROOT/bench/attention_bench.py" --lib "$OUTDIR/libfo_attention_bench.so" "$@" ;;
  profile)
    shift
    [ -f "$OUTDIR/libfo_attention_bench.so.xz" ] && xz -dkf "$OUTDIR/libfo_attention_bench.so.xz"
    shape="$1" kern="${2:-hopper}" out="${OUT:-/tmp}/ncu_${2:-hopper}_${1//,/x}"
    py=(python3 "$ROOT/bench/attention_bench.py" --lib "$OUTDIR/libfo_attention_bench.so" --profile "$shape" --profile-kernel "$kern")
    ncu --clock-control none -k regex:hopper_attention --launch-skip 1 --launch-count 1 \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,gpu__time_duration.sum' \
      "${py[@]}" > "$out.log" 2>&1 || true
    grep -E "stalled|pipe|duration" "$out.log" | awk '$NF+0 > 0.05' | sort -k3 -g -r | head -40
    ncu --clock-control none -k regex:hopper_attention --launch-skip 1 --launch-count 1 --section SourceCounters \
      --import-source no -f -o "$out" "${py[@]}" > /dev/null 2>&1 || true
    ncu -i "$out.ncu-rep" --page source --csv --print-source sass > "$out.csv" 2>/dev/null || true
    rm -f "$out.ncu-rep"
    ls -la "$out".* ;;
  *) sed -n '2,15p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
