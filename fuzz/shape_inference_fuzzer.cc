// libFuzzer target: shape and dtype inference (ir/shape_inference.h) on any model
// the loader accepts, both modes: non-strict (contradictions are recorded, not
// thrown), then strict from scratch (reset).
//
// Properties (fuzz_support.h says what else counts as a finding):
// - a refusal is a one-line fuseopt::Error;
// - after inference the model still serializes and loads again: the shapes
//   and dtypes it wrote into value_info are ones fuseopt can read back;
// - the result's counts agree with the graph (outputs_with_shape <= outputs_total).
#include "fuzz/fuzz_support.h"
#include "ir/shape_inference.h"

using namespace fuseopt;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_library();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<Graph> g = fuzz::load_input(data, size);
  if (!g) return 0;
  ShapeInferenceResult lenient;
  ShapeInferenceOptions lo;
  lo.strict = false;
  if (!fuzz::run_guarded("infer_shapes (non-strict)", [&] { lenient = infer_shapes(*g, lo); })) return 0;
  if (lenient.outputs_with_shape > lenient.outputs_total)
    fuzz::finding("infer_shapes counts more shaped outputs than outputs");

  ShapeInferenceOptions so;
  so.reset = true;
  if (!fuzz::run_guarded("infer_shapes (strict, reset)", [&] { infer_shapes(*g, so); })) return 0;

  std::string bytes;
  if (!fuzz::run_guarded("serialize", [&] { bytes = serialize_model(*g); }))
    fuzz::finding("a model with inferred shapes does not serialize");
  if (!fuzz::run_guarded("reload", [&] { load_model_from_bytes(bytes, fuzz::kNoSuchDir, "inferred.onnx"); }))
    fuzz::finding("a model with inferred shapes serializes to bytes that do not load");
  return 0;
}
