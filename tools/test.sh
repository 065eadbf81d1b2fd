#!/usr/bin/env bash
# Builds and runs the whole test suite. The last line is ctest's summary.
# GPU tests print a notice and pass when no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
cd build && ctest --output-on-failure -j"$(nproc)" "$@"
