// Signatures of fuseopt's fused ops (domain "fuseopt", version 1): the
// catalogue of ../shared/DESIGN.md and docs/fused_ops.md in the form the
// load-time validation checks (a model fuseopt wrote and reads again, or one
// another tool fused with our ops). Inputs are positional: an optional input
// before a later one is written as an empty name (LayerNormLinear's beta).
//
// A new fused op adds its row here, with its function body
// (src/onnx_io/functions/): tests/unit/validate_model_test.cc fails for an op
// that has a body but no row, and the reload of every optimized model in
// tests/py/test_schema_validation.py fails for a row that disagrees with what
// the pass writes.
#include <map>

#include "onnx_io/op_schemas.h"

namespace fuseopt {

namespace {

struct Row {
  const char* op;
  const char* inputs;
  const char* outputs;
  const char* attrs;
};

const Row kRows[] = {
    {"AddRelu", "A B", "Y", ""},
    {"FusedMatMul", "A B bias? residual?", "Y", "transB:i alpha:f activation:s"},
    {"GatedMatMul", "A W bias?", "Y", "activation:s"},
    {"LayerNorm", "X gamma beta?", "Y", "epsilon:f"},
    {"RMSNorm", "X gamma", "Y", "epsilon:f"},
    {"SkipLayerNorm", "X skip gamma beta? bias?", "Y Sum?", "epsilon:f rms:i"},
    {"EmbedLayerNorm", "gamma beta? table0 ids0 table1 ids1 table2? ids2?", "Y", "epsilon:f"},
    {"LayerNormLinear", "X gamma beta? W bias? skip?", "Y Sum?", "epsilon:f rms:i transB:i activation:s"},
    {"FusedMatMulLayerNorm", "A W bias? gamma beta? skip?", "Y", "transB:i alpha:f activation:s epsilon:f"},
    {"Attention", "QKV K? V? mask? attn_bias? past_key? past_value? sinks?", "Y present_key? present_value?",
     "num_heads:i! kv_num_heads:i scale:f causal:i mask_filter_value:f masked_rows_zero:i softcap:f window:i"},
    {"RotaryEmbedding", "X cos_cache sin_cache position_ids?", "Y",
     "interleaved:i rotary_embedding_dim:i num_heads:i rotated_heads:i"},
};

const std::map<std::string, OpSignature>& catalogue() {
  static const std::map<std::string, OpSignature> sigs = [] {
    std::map<std::string, OpSignature> m;
    for (const Row& r : kRows) m.emplace(r.op, make_signature("fuseopt", r.op, 1, r.inputs, r.outputs, r.attrs));
    return m;
  }();
  return sigs;
}

}  // namespace

const OpSignature* fuseopt_op_signature(const std::string& op) {
  auto it = catalogue().find(op);
  return it == catalogue().end() ? nullptr : &it->second;
}

std::vector<std::string> fuseopt_op_names() {
  std::vector<std::string> out;
  for (const auto& [op, sig] : catalogue()) out.push_back(op);
  return out;
}

}  // namespace fuseopt
