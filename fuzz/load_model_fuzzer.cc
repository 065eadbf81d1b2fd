// libFuzzer target: bytes -> onnx::ModelProto -> fuseopt's IR (load_model_from_bytes,
// graph verification included), then the round trip the CLI relies on.
//
// Properties (fuzz_support.h says what else counts as a finding):
// - a refusal names the input (the label stands in for the file name);
// - a model that loads serializes, and those bytes load again: what fuseopt
//   accepted it can write and read back;
// - the second serialization is byte-identical to the first (save . load is a
//   fixpoint after one round; fuseopt's output is deterministic).
#include "fuzz/fuzz_support.h"

using namespace fuseopt;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_library();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<Graph> g = fuzz::load_input(data, size);
  if (!g) return 0;
  std::string once, twice;
  std::unique_ptr<Graph> again;
  if (!fuzz::run_guarded("serialize", [&] { once = serialize_model(*g); }))
    fuzz::finding("a model that loaded does not serialize");
  if (!fuzz::run_guarded("reload", [&] { again = load_model_from_bytes(once, fuzz::kNoSuchDir, "reloaded.onnx"); }))
    fuzz::finding("a model that loaded serializes to bytes that do not load");
  if (!fuzz::run_guarded("serialize again", [&] { twice = serialize_model(*again); }))
    fuzz::finding("a reloaded model does not serialize");
  if (once != twice) fuzz::finding("serialize(load(serialize(g))) differs from serialize(g)");
  return 0;
}
