#!/usr/bin/env bash
# Device workflow: build here for sm_90, carry the binaries to the GPU
# machine, run the CUDA tests and a command there. See docs/gpu.md.
#
#   tools/gpu.sh pack [--targets]     # here: build (--targets: only fuseopt, fuserun, test_kernels),
#                                     # gather .gpu/{bin,lib} (+ non-system shared libs)
#                                     # and .gpu/python (the module for the GPU's python3)
#   tools/gpu.sh run [-t FILTER] [-- CMD ...]
#                                     # on the GPU machine: CUDA tests (Catch2 filter, default "[cuda]"),
#                                     # then CMD with .gpu/bin on PATH; "-t none" skips the tests
#   tools/gpu.sh models [--all | --set DIR] [--precisions fp32,fp16,bf16] [-j N] [-- ARGS ...]
#                                     # on the GPU machine: fuserun --backend cuda --check (first run
#                                     # and a CUDA-graph replay) on every models/real model (--all:
#                                     # also models/exported and models/synthetic; --set: models/DIR), original and
#                                     # fuseopt-optimized, N runs at a time (default 6); ARGS go to fuserun
#   tools/gpu.sh slim DIR... | unslim # here: leave models/DIR out of what a device call carries (the
#                                     # working tree travels with a 64 MiB cap), and put it back after
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
  # --targets: build only what a device call runs (fuseopt, fuserun, test_kernels, bench_kernels
  # when built) instead of the whole tree (test_unit, test_passes: CPU-only, they stay here).
  local targets=""
  [ "${1:-}" = --targets ] && targets="fuseopt fuserun test_kernels"
  echo "== build (sm_90) in $BUILD${targets:+ ($targets)}"
  # shellcheck disable=SC2086
  flock /tmp/fuseopt-build.lock cmake --build "$BUILD" -j2 ${targets:+--target $targets} 2>&1 | tail -5
  rm -rf "$GPU_DIR"
  mkdir -p "$GPU_DIR/bin" "$GPU_DIR/lib"
  local f
  for f in "$BUILD"/bin/*; do
    # test_unit and test_passes hold no [cuda] cases: they stay here (the tree that
    # travels is capped at 64 MiB with the pack).
    case "$(basename "$f")" in test_unit | test_passes) continue ;; esac
    [ -x "$f" ] && [ -f "$f" ] && cp "$f" "$GPU_DIR/bin/"
  done
  cp "$BUILD/lib/libfuseopt.so" "$GPU_DIR/lib/"
  pack_python
  # Non-system libraries every binary resolves here.
  local lib
  for f in "$GPU_DIR"/bin/* "$GPU_DIR"/lib/libfuseopt.so "$GPU_DIR"/python/fuseopt/_fuseopt*.so; do
    [ -e "$f" ] || continue
    ldd "$f" | awk '/=> \// {print $3}' | while read -r lib; do
      is_system_lib "$lib" && continue
      [ "$(basename "$lib")" = libfuseopt.so ] && continue
      [ -e "$GPU_DIR/lib/$(basename "$lib")" ] || cp -L "$lib" "$GPU_DIR/lib/"
    done
  done
  # Debug sections are not needed there; the device code (.nv_fatbin) stays.
  strip --strip-debug "$GPU_DIR"/bin/* "$GPU_DIR"/lib/*.so* "$GPU_DIR"/python/fuseopt/*.so 2>/dev/null || true
  # The carried tree is capped (64 MiB with the repo): ship one xz tar (a quarter smaller than gzip).
  XZ_OPT=-6T2 tar -C "$GPU_DIR" -cJf "$ROOT/.gpu-pack.tar.xz" bin lib $([ -d "$GPU_DIR/python" ] && echo python)
  rm -rf "$GPU_DIR"
  mkdir -p "$GPU_DIR"
  mv "$ROOT/.gpu-pack.tar.xz" "$GPU_DIR/pack.tar.xz"
  echo "== packed $(du -sh "$GPU_DIR/pack.tar.xz" | cut -f1) into $GPU_DIR/pack.tar.xz (carry \".gpu\")"
  carry_size
}

# What a device call carries: tracked files (less those slim left out) + untracked files that
# are not ignored + the pack, counted as disk usage (KiB blocks: a 63.6 MiB tree by bytes was
# refused in session 11, 69 MiB by blocks). The device tool refuses more than 64 MiB.
carry_size() {
  local tracked untracked pack total
  # One du over the whole list (xargs would split it and `tail -1` keep only the last part's total).
  tracked="$(cd "$ROOT" && git ls-files -z | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)"
  untracked="$(cd "$ROOT" && git ls-files -z --others --exclude-standard | du -ck --files0-from=- 2>/dev/null | tail -1 | cut -f1)"
  pack="$(du -k "$GPU_DIR/pack.tar.xz" | cut -f1)"
  total=$(( ${tracked:-0} + ${untracked:-0} + pack ))
  echo "== a device call carries about $((total >> 10)) MiB (tracked $((${tracked:-0} >> 10)), untracked $((${untracked:-0} >> 10)), pack $((pack >> 10)))"
  if [ "$total" -gt $((64 << 10)) ]; then
    echo "gpu.sh: over the device tool's 64 MiB: 'tools/gpu.sh slim real' (or another models/ folder the call does not need) before the call, 'tools/gpu.sh unslim' after" >&2
  fi
}

# slim DIR...: models/DIR taken out of the index (the files stay) and ignored locally, so a
# device call does not carry it; unslim restores the index and the ignore list. Nothing is
# deleted; do not commit while slim (the folders would be committed as removed).
SLIM_LIST="$ROOT/.git/fuseopt-slim"
slim() {
  [ $# -gt 0 ] || { echo "usage: tools/gpu.sh slim DIR... (folders of models/)" >&2; exit 2; }
  local d
  for d in "$@"; do
    [ -d "$ROOT/models/$d" ] || { echo "gpu.sh: no models/$d" >&2; exit 2; }
    (cd "$ROOT" && git rm -r -q --cached "models/$d")
    echo "/models/$d/" >>"$ROOT/.git/info/exclude"
    echo "$d" >>"$SLIM_LIST"
  done
  carry_size
}
unslim() {
  [ -f "$SLIM_LIST" ] || { echo "== nothing left out"; return 0; }
  local d
  while read -r d; do
    (cd "$ROOT" && git reset -q -- "models/$d")
    sed -i "\|^/models/$d/\$|d" "$ROOT/.git/info/exclude"
  done <"$SLIM_LIST"
  rm -f "$SLIM_LIST"
  echo "== models/ folders back in the index: $(cd "$ROOT" && git status --short models | wc -l) paths differ from HEAD"
}

# The Python module for the GPU machine's python3 (3.12 there: docs/gpu.md), built here
# against that version's headers (python/CMakeLists.txt, target _fuseopt_extra) into
# .gpu/python/fuseopt; `run` puts .gpu/python on PYTHONPATH. Without those headers here the
# pack carries no module (one line says so).
GPU_PYTHON="${GPU_PYTHON:-3.12}"
pack_python() {
  local inc="${FUSEOPT_GPU_PYTHON_INCLUDE:-}"
  [ -n "$inc" ] || inc="$(ls -d /usr/include/python"$GPU_PYTHON" /root/.pyenv/versions/"$GPU_PYTHON".*/include/python"$GPU_PYTHON" \
    2>/dev/null | head -n 1 || true)"
  if [ -z "$inc" ] || [ ! -f "$inc/Python.h" ]; then
    echo "== no Python $GPU_PYTHON headers here (set FUSEOPT_GPU_PYTHON_INCLUDE): the pack carries no Python module"
    return 0
  fi
  echo "== Python module for python$GPU_PYTHON ($inc)"
  flock /tmp/fuseopt-build.lock cmake -DFUSEOPT_PYTHON_EXTRA_INCLUDE="$inc" "$BUILD" >/dev/null
  flock /tmp/fuseopt-build.lock cmake --build "$BUILD" --target _fuseopt_extra -j2 2>&1 | tail -3
  mkdir -p "$GPU_DIR/python/fuseopt"
  cp "$BUILD/python-cp${GPU_PYTHON/./}/fuseopt/"_fuseopt*.so "$ROOT"/python/fuseopt/*.py "$GPU_DIR/python/fuseopt/"
}

setup_env() {
  if [ ! -d "$GPU_DIR/bin" ] && [ -f "$GPU_DIR/pack.tar.xz" ]; then
    tar -C "$GPU_DIR" -xf "$GPU_DIR/pack.tar.xz"
  fi
  [ -d "$GPU_DIR/bin" ] || { echo "gpu.sh: $GPU_DIR is missing: run 'tools/gpu.sh pack' here and carry .gpu" >&2; exit 2; }
  export LD_LIBRARY_PATH="$GPU_DIR/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$GPU_DIR/bin:$PATH"
  [ -d "$GPU_DIR/python" ] && export PYTHONPATH="$GPU_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
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

# One check: fuserun --backend cuda --check, first run and a replayed one (--iters 2:
# the CUDA graph captured after the first run is checked too). Prints one line.
check_one() {
  local name="$1" variant="$2" prec="$3" model="$4" data="$5" log="$6"
  shift 6
  local rc=0
  fuserun "$model" --backend "${GPU_SH_BACKEND:-cuda}" --check "$data" --precision "$prec" --iters 2 "$@" >"$log" 2>&1 || rc=$?
  local worst
  worst="$(grep -oE 'rel err [0-9.e+-]+|rel err (nan|inf)' "$log" | awk '{print $3}' | sort -g | tail -n 1)"
  printf '%s %-34s %-9s %-5s worst rel %s\n' "$([ $rc = 0 ] && echo PASS || echo "FAIL(rc=$rc)")" \
    "$name" "$variant" "$prec" "${worst:-?}"
  return $rc
}
export -f check_one
# (GPU_SH_BACKEND=cpu runs the same checks on the CPU backend: a dry run of this script.)

models() {
  local sets="real" precisions="fp32" jobs=6
  while [ $# -gt 0 ]; do
    case "$1" in
      --all) sets="real exported synthetic"; shift ;;
      --set) sets="$2"; shift 2 ;;
      --precisions) precisions="${2//,/ }"; shift 2 ;;
      -j) jobs="$2"; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  setup_env
  local status=0 m name set logs work p
  work="$(mktemp -d)"
  logs="${OUT:-$work}/models-logs"
  mkdir -p "$logs"
  # 1. fuseopt every model (CPU work, in parallel), 2. every (model, variant, precision) on the GPU.
  : >"$work/jobs"
  for set in $sets; do
    for m in "$ROOT"/models/$set/*/; do
      [ -f "$m/model.onnx" ] && [ -d "$m/test_data_set_0" ] || continue
      name="$set/$(basename "$m")"
      echo "$name $m" >>"$work/models"
    done
  done
  echo "== fuseopt on $(wc -l <"$work/models") models"
  # shellcheck disable=SC2016
  xargs -P "$jobs" -L 1 bash -c 'n="${0//\//_}"; fuseopt "$1/model.onnx" "'"$work"'/$n.onnx" -q >"'"$logs"'/$n.fuseopt.log" 2>&1 ||
    echo "FAIL fuseopt $0: $(tail -n 1 "'"$logs"'/$n.fuseopt.log")"' <"$work/models" || status=1
  while read -r name m; do
    local n="${name//\//_}"
    # Every reference set of the folder (test_data_set_0, the KV decoders' second step,
    # the encoders' fully-masked-row set test_data_set_masked, ...).
    local d tag
    for d in "$m"/test_data_set_*/; do
      d="${d%/}"
      tag="${d##*/test_data_set_}"
      for p in $precisions; do
        echo "$name:$tag original $p $m/model.onnx $d $logs/$n.$tag.original.$p.log" >>"$work/jobs"
        [ -f "$work/$n.onnx" ] && echo "$name:$tag optimized $p $work/$n.onnx $d $logs/$n.$tag.optimized.$p.log" >>"$work/jobs"
      done
    done
  done <"$work/models"
  echo "== fuserun --backend cuda --check: $(wc -l <"$work/jobs") runs, $jobs at a time, precisions: $precisions, extra: $*"
  xargs -P "$jobs" -L 1 bash -c 'check_one "$@" '"$*" _ <"$work/jobs" | tee "$work/results" | grep -v '^PASS' || true
  local pass fail
  pass="$(grep -c '^PASS' "$work/results" || true)"
  fail="$(grep -vc '^PASS' "$work/results" || true)"
  [ "$fail" = 0 ] || status=1
  [ -n "${OUT:-}" ] && cp "$work/results" "$OUT/models-results.txt"
  echo "== gpu.sh models: $pass passed, $fail failed (logs: $logs)"
  rm -rf "$work/"*.onnx
  return $status
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  models) shift; models "$@" ;;
  slim) shift; slim "$@" ;;
  unslim) shift; unslim ;;
  size) carry_size ;;
  *) sed -n '2,14p' "${BASH_SOURCE[0]}"; exit 2 ;;
esac
