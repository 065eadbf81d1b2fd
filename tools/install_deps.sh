#!/usr/bin/env bash
# Installs what fuseopt needs on Debian 12 (bookworm): build tools and the
# Debian C++ libraries, plus the Python packages the tests use as an oracle.
# Idempotent: skips what is already there. The CUDA toolkit (nvcc, cuBLASLt)
# is expected on PATH already; without it, build with -DFUSEOPT_CUDA=OFF.
#   --sanitize  also clang-15 and libfuzzer-15-dev: the sanitizer and fuzzing build
#               (tools/test_sanitize.sh, docs/testing.md; CI passes it)
set -euo pipefail
APT_PKGS="cmake ninja-build g++ pkg-config libonnx-dev libprotobuf-dev protobuf-compiler \
  libcli11-dev libspdlog-dev libfmt-dev catch2 python3 python3-pip graphviz pybind11-dev python3-dev \
  nlohmann-json3-dev"  # nlohmann-json3-dev: the JSON writers (report, fuserun --json)
for arg in "$@"; do
  case "$arg" in
    --sanitize) APT_PKGS="$APT_PKGS clang-15 libfuzzer-15-dev" ;;
    *) echo "install_deps: unknown option $arg (known: --sanitize)" >&2; exit 2 ;;
  esac
done
PIP_PKGS="onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 pytest==9.2.0"

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
missing=""
for p in $APT_PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install_deps: apt-get install$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q $missing >/dev/null 2>&1 || {
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q $missing >/dev/null; }
fi
if ! python3 -c "import onnx, onnxruntime, numpy, pytest" >/dev/null 2>&1; then
  echo "install_deps: pip install $PIP_PKGS"
  python3 -m pip install -q $PIP_PKGS 2>/dev/null || python3 -m pip install -q --break-system-packages $PIP_PKGS
fi
command -v nvcc >/dev/null || echo "install_deps: note: nvcc not on PATH; configure with -DFUSEOPT_CUDA=OFF for a CPU-only build"
echo "install_deps: ok"
