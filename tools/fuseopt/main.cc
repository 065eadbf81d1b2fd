// Placeholder main: replaced by the full CLI.
#include <cstdio>
#include "onnx_io/onnx_io.h"
#include "util/error.h"
int main(int argc, char** argv) {
  if (argc != 3) { std::fprintf(stderr, "usage: fuseopt IN.onnx OUT.onnx\n"); return 2; }
  try {
    auto g = fuseopt::load_model(argv[1]);
    fuseopt::SaveOptions so; so.input_path = argv[1];
    fuseopt::save_model(*g, argv[2], so);
  } catch (const std::exception& e) { std::fprintf(stderr, "fuseopt: error: %s\n", e.what()); return 1; }
}
