#!/usr/bin/env bash
# Configures (once) and builds fuseopt into ./build. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_flag=""
command -v nvcc >/dev/null || cuda_flag="-DFUSEOPT_CUDA=OFF"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release $cuda_flag "$@" >/dev/null
fi
cmake --build build -j"$(nproc)"
