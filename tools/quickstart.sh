#!/usr/bin/env bash
# The README's first command: install, build, optimize a bundled BERT export
# and run the result (CUDA when a GPU is present, otherwise the CPU
# reference backend), checking it against ONNX Runtime's reference outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install_deps.sh
bash tools/build.sh
model=models/real/bert_eager_op17_ts
mkdir -p out
./build/bin/fuseopt "$model/model.onnx" out/bert_fused.onnx --report out/bert_fused.report.json
./build/bin/fuserun out/bert_fused.onnx --check "$model/test_data_set_0"
