#!/usr/bin/env bash
# The CPU-only configuration: configures (once) ./build-nocuda with -DFUSEOPT_CUDA=OFF,
# builds it and runs its ctest. No CUDA compiler takes part and no CUDA test file is
# compiled (tests/CMakeLists.txt leaves out every test that includes a CUDA header); the
# Python module is built and tested as in the main build. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build-nocuda/build.ninja ]; then
  cmake -S . -B build-nocuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEOPT_CUDA=OFF >/dev/null
fi
if grep -Eq '\.cu(\.o)?\b|nvcc' build-nocuda/build.ninja; then
  echo "test_nocuda: build-nocuda/build.ninja compiles CUDA sources; FUSEOPT_CUDA=OFF must not" >&2
  exit 1
fi
cmake --build build-nocuda -j"$(nproc)"
cd build-nocuda && ctest --output-on-failure -j"$(nproc)" "$@"
