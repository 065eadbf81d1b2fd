// libFuzzer target: the whole of `fuseopt IN OUT`: load -> every pass (PassManager
// defaults) -> the output form (--emit fuseopt, or standard for every other input
// by its size's parity) -> serialize -> load again.
//
// Properties (fuzz_support.h says what else counts as a finding):
// - a refusal is a one-line fuseopt::Error;
// - what the pipeline writes loads again (graph verification included): fuseopt
//   never writes a model it would itself refuse.
// (Whether ONNX itself accepts the output is fuzz/mutate_models.py's check: it
// runs onnx.checker with full_check and an ONNX Runtime session on it.)
#include "fuzz/fuzz_support.h"
#include "onnx_io/emit_standard.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"

using namespace fuseopt;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_library();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<Graph> g = fuzz::load_input(data, size);
  if (!g) return 0;
  const bool ok = fuzz::run_guarded("optimize", [&] {
    PassManager pm(PassManagerOptions{});
    FusionReport report;
    pm.run(*g, report);
    EmitOptions eo;
    eo.mode = size % 2 ? EmitMode::Standard : EmitMode::Fuseopt;
    apply_emit(*g, eo, &report);
  });
  if (!ok) return 0;

  std::string out;
  if (!fuzz::run_guarded("serialize", [&] { out = serialize_model(*g); }))
    fuzz::finding("an optimized model does not serialize");
  if (!fuzz::run_guarded("reload", [&] { load_model_from_bytes(out, fuzz::kNoSuchDir, "optimized.onnx"); }))
    fuzz::finding("fuseopt wrote a model it refuses to load");
  return 0;
}
