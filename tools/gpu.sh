#!/usr/bin/env bash
# Device workflow: build here for sm_90, carry the binaries to the GPU
# machine, run the CUDA tests and a command there. See docs/gpu.md.
#
#   tools/gpu.sh pack                 # here: build, gather .gpu/{bin,lib} (+ non-system shared libs)
#   tools/gpu.sh run [-t FILTER] [-- CMD ...]
#                                     # on the GPU machine: CUDA tests (Catch2 filter, default "[cuda]"),
#                                     # then CMD with .gpu/bin on PATH; "-t none" skips the tests
#   tools/gpu.sh models [ARGS ...]    # on the GPU machine: fuserun --backend cuda --check on every
#                                     # models/real model, original and fuseopt-optimized
#                                     # (ARGS added, e.g. --precision fp16)
#
# The GPU machine has CUDA 13 (cudart, cuBLASLt) but no ONNX/protobuf/spdlog/fmt
# libraries: pack copies every shared library the binaries resolve here except
# the C/C++ runtime and CUDA's own, and the binaries find them through their
# $ORIGIN-relative RUNPATH (and LD_LIBRARY_PATH, which `run` sets).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPU_DIR="$ROOT/.gpu"
BUILD="$ROOT/build"

# Libraries present on every Linux (or provided by the CUDA install there).
is_system_lib() {
  case "$(basename "$1")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libgcc_s.so* | libstdc++.so* | \
      libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | linux-vdso*) return 0 ;;
  esac
  return 1
}

pack() {
  echo "== build (sm_90) in $BUILD"
  flock /tmp/fuseopt-build.lock cmake --build "$BUILD" -j2 2>&1 | tail -5
  rm -rf "$GPU_DIR"
  mkdir -p "$GPU_DIR/bin" "$GPU_DIR/lib"
  local f
  for f in "$BUILD"/bin/*; do
    [ -x "$f" ] && [ -f "$f" ] && cp "$f" "$GPU_DIR/bin/"
  done
  cp "$BUILD/lib/libfuseopt.so" "$GPU_DIR/lib/"
  # Non-system libraries every binary resolves here.
  local lib
  for f in "$GPU_DIR"/bin/* "$GPU_DIR"/lib/libfuseopt.so; do
    ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
      is_system_lib "$lib" && continue
      [ "$(basename "$lib")" = libfuseopt.so ] && continue
      [ -e "$GPU_DIR/lib/$(basename "$lib")" ] || cp -L "$lib" "$GPU_DIR/lib/"
    done
  done
  # Debug sections are not needed there; the device code (.nv_fatbin) stays.
  strip --strip-debug "$GPU_DIR"/bin/* "$GPU_DIR"/lib/*.so* 2>/dev/null || true
  # The carried tree is capped (64 MiB with the repo): ship one gzip'd tar.
  tar -C "$GPU_DIR" -czf "$ROOT/.gpu-pack.tar.gz" bin lib
  rm -rf "$GPU_DIR"
  mkdir -p "$GPU_DIR"
  mv "$ROOT/.gpu-pack.tar.gz" "$GPU_DIR/pack.tar.gz"
  echo "== packed $(du -sh "$GPU_DIR/pack.tar.gz" | cut -f1) into $GPU_DIR/pack.tar.gz (carry \".gpu\")"
}

setup_env() {
  if [ ! -d "$GPU_DIR/bin" ] && [ -f "$GPU_DIR/pack.tar.gz" ]; then
    tar -C "$GPU_DIR" -xzf "$GPU_DIR/pack.tar.gz"
  fi
  [ -d "$GPU_DIR/bin" ] || { echo "gpu.sh: $GPU_DIR is missing: run 'tools/gpu.sh pack' here and carry .gpu" >&2; exit 2; }
  export LD_LIBRARY_PATH="$GPU_DIR/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$GPU_DIR/bin:$PATH"
  export FUSEOPT_SOURCE_DIR="$ROOT"
  cd "$ROOT"
}

run_tests() {
  local filter="$1" status=0 t
  [ "$filter" = none ] && return 0
  nvidia-smi -L || true
  for t in "$GPU_DIR"/bin/test_*; do
    # Catch2: run the CUDA-tagged cases only; a binary without any prints "No test cases matched".
    echo "== $(basename "$t") $filter"
    # pipefail: a failing Catch2 run fails the pipeline despite tee/tail.
    "$t" "$filter" --reporter compact 2>&1 | tee "${OUT:-/tmp}/$(basename "$t").log" | tail -n 25 || status=1
  done
  return $status
}

run() {
  local filter="[cuda]"
  while [ $# -gt 0 ]; do
    case "$1" in
      -t) filter="$2"; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  setup_env
  local status=0
  run_tests "$filter" || status=1
  if [ $# -gt 0 ]; then
    echo "== $*"
    "$@" || status=1
  fi
  echo "== gpu.sh run: $([ $status = 0 ] && echo OK || echo FAILURES)"
  return $status
}

models() {
  setup_env
  local status=0 m name opt tmp
  tmp="$(mktemp -d)"
  for m in "$ROOT"/models/real/*/; do
    [ -f "$m/model.onnx" ] || continue
    name="$(basename "$m")"
    echo "== $name (original) $*"
    fuserun "$m/model.onnx" --backend cuda --check "$m/test_data_set_0" "$@" 2>&1 |
      grep -E "^  |check:|rror|backend:" || status=1
    opt="$tmp/$name.onnx"
    if fuseopt "$m/model.onnx" "$opt" >"$tmp/$name.fuseopt.log" 2>&1; then
      echo "== $name (optimized) $*"
      fuserun "$opt" --backend cuda --check "$m/test_data_set_0" "$@" 2>&1 | grep -E "^  |check:|rror" || status=1
    else
      echo "== $name: fuseopt failed: $(tail -n 2 "$tmp/$name.fuseopt.log")"
      status=1
    fi
  done
  rm -rf "$tmp"
  return $status
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  models) shift; models "$@" ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
