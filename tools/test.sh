#!/usr/bin/env bash
# Builds and runs the whole test suite. The last line is ctest's summary.
# GPU test cases report skipped in ctest when no GPU is usable. CI (.ci/run) runs the
# CPU-only and sanitizer configurations first (tools/test_nocuda.sh, tools/test_sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
cd build && ctest --output-on-failure -j"$(nproc)" "$@"
