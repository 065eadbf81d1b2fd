#!/usr/bin/env bash
# Attention micro-benchmark (issue 9, Deliver 4): fuseopt's CUDA attention
# kernels against torch's scaled_dot_product_attention in one process.
#
#   bench/attention_bench.sh build        # here (nvcc): build-attn/libfo_attention_bench.so
#   bench/attention_bench.sh run [ARGS]   # on the GPU machine (torch): checks, then the table
#   bench/attention_bench.sh profile B,H,S,D KERNEL   # there: ncu stall reasons, tensor-pipe use and
#                                         # per-SASS-line samples ($OUT/ncu_*.{log,csv}) of one Hopper launch
#
# GPU call (device tool): run(command='bash bench/attention_bench.sh run',
#                             carry=['.gpu', 'build-attn/libfo_attention_bench.so.xz'])
# `build` compiles bench/attention_bench.cu (a C entry point, see there) into a shared
# library linked to build/lib/libfuseopt.so, whose kernels it times; `run` unpacks the
# pack's libraries and loads it with ctypes (bench/attention_bench.py --help for the options).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUTDIR="$ROOT/build-attn"
OBJ="$OUTDIR/obj"  # objects stay here; only the compressed .so travels

build() {
  mkdir -p "$OBJ"
  local flags=(-std=c++20 -O3 --expt-relaxed-constexpr -Xcompiler -fPIC -I "$ROOT/src" -I "$ROOT")
  local sm90=(--generate-code=arch=compute_90,code=[compute_90,sm_90])
  [ -f "$ROOT/build/lib/libfuseopt.so" ] || { echo "attention_bench: build fuseopt first (tools/build.sh)" >&2; exit 2; }
  # The kernels are libfuseopt's own (the ones the runtime ships, with their PDL, TMA and
  # allocation helpers): the bench links to it, found on the GPU machine in the unpacked pack
  # (.gpu/lib, `tools/gpu.sh pack`). Compiling the kernel files into the bench instead left it
  # out of step with the library whenever a kernel gained a helper (session 20).
  flock /tmp/fuseopt-build.lock nvcc "${flags[@]}" "${sm90[@]}" -c "$ROOT/bench/attention_bench.cu" -o "$OBJ/attention_bench.o"
  nvcc -shared "${sm90[@]}" -Xlinker --no-undefined "$OBJ/attention_bench.o" -L "$ROOT/build/lib" -lfuseopt \
    -Xlinker -rpath -Xlinker '$ORIGIN/../.gpu/lib' -o "$OUTDIR/libfo_attention_bench.so"
  # The carried tree is capped at 64 MiB with models/: ship the library xz-compressed.
  strip --strip-debug "$OUTDIR/libfo_attention_bench.so"
  xz -9 -T2 -f -k "$OUTDIR/libfo_attention_bench.so"
  echo "built $OUTDIR/libfo_attention_bench.so (+ .xz: carry build-attn/libfo_attention_bench.so.xz and .gpu)"
}

# The pack's libraries (libfuseopt and what it needs) unpacked where the bench's RUNPATH looks.
unpack() {
  [ -f "$OUTDIR/libfo_attention_bench.so.xz" ] && xz -dkf "$OUTDIR/libfo_attention_bench.so.xz"  # the carried one, never a stale copy
  if [ ! -d "$ROOT/.gpu/lib" ] && [ -f "$ROOT/.gpu/pack.tar.xz" ]; then tar -C "$ROOT/.gpu" -xf "$ROOT/.gpu/pack.tar.xz"; fi
  export LD_LIBRARY_PATH="$ROOT/.gpu/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

case "${1:-}" in
  build) build ;;
  run)
    shift
    unpack
    PYTHONUNBUFFERED=1 python3 "$ROOT/bench/attention_bench.py" --lib "$OUTDIR/libfo_attention_bench.so" "$@" ;;
  profile)
    shift
    unpack
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
