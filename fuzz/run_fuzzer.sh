#!/usr/bin/env bash
# Runs one libFuzzer target of a -DFUSEOPT_FUZZ=ON build for SECONDS, seeded from
# models/ (every model of at most 128 KiB: small enough for libFuzzer's mutations
# to keep a cycle fast, and it covers the exporters' forms). Extra arguments go to
# libFuzzer (e.g. -jobs=2, -runs=N, or a file to replay).
#
#   bash fuzz/run_fuzzer.sh build-asan pass_pipeline_fuzzer 600
#
# The corpus it grows stays in BUILD/fuzz/corpus/TARGET (the next run starts from
# it); a finding is written to BUILD/fuzz/findings/TARGET-crash-* and the run exits
# non-zero. Replay one: BUILD/bin/TARGET FILE.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BUILD_DIR TARGET SECONDS [libFuzzer args...]" >&2; exit 2; }
build=$1 target=$2 seconds=$3
shift 3
src=$(cd "$(dirname "$0")/.." && pwd)
exe="$build/bin/$target"
[ -x "$exe" ] || { echo "$0: $exe not built (configure with -DFUSEOPT_FUZZ=ON)" >&2; exit 2; }

# One seed folder per target: ctest runs the targets side by side, and two `cp -n` into one
# folder race (the second fails with "File exists" on a file the first just created).
seeds="$build/fuzz/seeds/$target"
corpus="$build/fuzz/corpus/$target"
findings="$build/fuzz/findings"
mkdir -p "$seeds" "$corpus" "$findings"
# Seeds are copies under content names: the same set whatever the folder layout.
find "$src/models" -name '*.onnx' -size -129k -print0 | while IFS= read -r -d '' m; do
  cp -n "$m" "$seeds/$(sha1sum "$m" | cut -c1-16).onnx"
done

run_args=(-max_total_time="$seconds")
[ "$seconds" = 0 ] && run_args=(-runs=0)
# -max_len: the largest seed; -timeout: one input past 30 s is a hang; leak checks on
# (libFuzzer's default with ASan). The library logs nothing (fuzz_support.h).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
"$exe" "${run_args[@]}" -max_len=131072 -timeout=30 -rss_limit_mb=3072 -print_final_stats=1 \
  -artifact_prefix="$findings/$target-" "$@" "$corpus" "$seeds"
