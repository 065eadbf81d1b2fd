#!/usr/bin/env bash
# The sanitizer and fuzzing configuration: configures (once) ./build-asan with clang++-15,
# -DFUSEOPT_CUDA=OFF -DFUSEOPT_SANITIZE=address,undefined -DFUSEOPT_FUZZ=ON, builds the
# library, fuseopt, fuserun, test_unit, test_passes and the libFuzzer targets, and runs its
# ctest: the unit and pass tests under ASan+UBSan (a report fails the test), a smoke run of
# each fuzz target and 200 structural mutations of the real exports (fuzz/, docs/testing.md).
# Needs clang-15 and libfuzzer-15-dev: bash tools/install_deps.sh --sanitize. Extra
# arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${FUSEOPT_SANITIZE_CXX:-clang++-15}
command -v "$cxx" >/dev/null || {
  echo "test_sanitize: $cxx not found (bash tools/install_deps.sh --sanitize installs clang-15," \
       "libfuzzer-15-dev)" >&2
  exit 1
}
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" \
    -DFUSEOPT_CUDA=OFF -DFUSEOPT_SANITIZE=address,undefined -DFUSEOPT_FUZZ=ON >/dev/null
fi
cmake --build build-asan -j"$(nproc)"
cd build-asan && ctest --output-on-failure -j"$(nproc)" "$@"
