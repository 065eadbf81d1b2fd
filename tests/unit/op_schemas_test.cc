// The signatures the load-time validation uses (src/onnx_io/op_schemas.h):
// the compact spelling's arity rule, the table of ONNX versions after
// libonnx's, and fuseopt's catalogue against the fused ops that exist.
// (tests/py/test_schema_validation.py compares the ONNX domains op by op with
// the onnx package's schemas.)
#include <catch2/catch.hpp>

#include <limits>

#include "onnx_io/function_bodies.h"
#include "onnx_io/op_schemas.h"
#include "util/error.h"

using namespace fuseopt;

TEST_CASE("op signatures: the spelling and ONNX's arity rule") {
  OpSignature s = make_signature("", "GroupNormalization", 21, "X scale bias", "Y", "epsilon:f num_groups:i! stash_type:i");
  CHECK(s.min_inputs == 3);
  CHECK(s.max_inputs == 3);
  CHECK(s.attributes.at("num_groups").required);
  CHECK(s.attributes.at("num_groups").type == AttrType::Int);
  CHECK(s.attributes.at("epsilon").type == AttrType::Float);
  CHECK_FALSE(s.attributes.at("epsilon").required);
  // An optional formal before a single one counts towards the minimum (it is written, empty).
  OpSignature lnl = make_signature("fuseopt", "LayerNormLinear", 1, "X gamma beta? W bias? skip?", "Y Sum?", "");
  CHECK(lnl.min_inputs == 4);
  CHECK(lnl.max_inputs == 6);
  CHECK(lnl.min_outputs == 1);
  CHECK(lnl.max_outputs == 2);
  OpSignature split = make_signature("", "Split", 18, "input split?", "outputs*", "axis:i");
  CHECK(split.min_outputs == 1);
  CHECK(split.max_outputs == std::numeric_limits<int>::max());
  CHECK(split.output_formal(7)->name == "outputs");
  CHECK(split.input_formal(2) == nullptr);
  OpSignature loop = make_signature("", "L", 1, "M? cond? v*0", "v_final*0", "body:g!");
  CHECK(loop.min_inputs == 2);  // as ONNX's Loop: M and cond are written (maybe empty) before the variadic tail
  CHECK(loop.min_outputs == 0);
  CHECK_THROWS_AS(make_signature("", "Bad", 1, "X* Y", "Z", ""), Error);  // variadic not last
  CHECK_THROWS_AS(make_signature("", "Bad", 1, "X", "Y", "axis:q"), Error);
  CHECK_THROWS_AS(make_signature("", "Bad", 1, "X", "Y", "axis:i axis:f"), Error);
}

TEST_CASE("op signatures: ONNX versions by opset") {
  // libonnx's own versions ...
  REQUIRE(onnx_op_signature("", "Softmax", 13));
  CHECK(onnx_op_signature("", "Softmax", 13)->since_version == 13);
  CHECK(onnx_op_signature("", "Softmax", 12)->since_version == 11);
  CHECK(onnx_op_signature("ai.onnx", "Softmax", 17)->since_version == 13);
  // ... and our rows after them.
  CHECK(onnx_op_signature("", "ReduceMean", 17)->since_version == 13);
  CHECK(onnx_op_signature("", "ReduceMean", 18)->since_version == 18);
  CHECK(onnx_op_signature("", "ReduceMean", 23)->max_inputs == 2);
  CHECK(onnx_op_signature("", "Gelu", 19) == nullptr);
  CHECK(onnx_op_first_version("", "Gelu") == 20);
  CHECK(onnx_op_first_version("", "NoSuchOp") == 0);
  CHECK(onnx_op_signature("ai.onnx.ml", "LabelEncoder", 4)->attributes.count("keys_tensor") == 1);
  CHECK(onnx_op_signature("", "LayerNormalization", 17)->any_attributes);
  CHECK(onnx_op_signature("", "Upsample", 10)->deprecated);
  CHECK_FALSE(onnx_op_signature("", "GroupNormalization", 18)->deprecated);
  CHECK_FALSE(onnx_op_signature("", "GroupNormalization", 18)->deprecation_warning.empty());
  CHECK(newest_known_opset("") == 28);
  CHECK(onnx_op_signature("", "Attention", 25)->attributes.count("left_window_size") == 1);
  CHECK(onnx_op_signature("", "Attention", 24)->attributes.count("left_window_size") == 0);
  CHECK(onnx_op_first_version("", "SwiGLU") == 28);
  CHECK(onnx_op_first_version("", "CumProd") == 26);
  CHECK(onnx_op_signature("", "SpaceToDepth", 28)->attributes.count("mode") == 1);
  CHECK(onnx_op_signature("", "SpaceToDepth", 27)->attributes.count("mode") == 0);
  CHECK(onnx_op_signature("", "Range", 27)->attributes.count("stash_type") == 1);
  CHECK(onnx_op_signature("", "Attention", 24)->max_inputs == 7);  // nonpad_kv_seqlen
  CHECK(onnx_op_signature("", "Attention", 23)->max_inputs == 6);
  CHECK(onnx_op_signature("", "Swish", 23) == nullptr);
  CHECK(onnx_op_first_version("", "Swish") == 24);
  CHECK(newest_known_opset("ai.onnx.ml") == 5);
  for (const OpSignature& s : newer_onnx_signatures()) {
    INFO(s.op << "-" << s.since_version);
    CHECK(is_onnx_domain(s.domain));
    CHECK(s.since_version <= newest_known_opset(s.domain));
    CHECK(s.since_version > (s.domain.empty() ? 17 : 3));  // what Debian's libonnx 1.12 knows itself
  }
}

TEST_CASE("op signatures: every fused op with a function body has a row in schema_fuseopt.cc, and back") {
  int bodies = 0;
  for (const auto& [domain, op] : registered_function_bodies()) {
    if (domain != "fuseopt") continue;
    ++bodies;
    INFO("fuseopt." << op << " has a function body but no signature (add its row to src/onnx_io/schema_fuseopt.cc)");
    CHECK(fuseopt_op_signature(op) != nullptr);
  }
  CHECK(bodies >= 9);
  for (const std::string& op : fuseopt_op_names()) {
    INFO("fuseopt." << op << " has a signature but no function body");
    CHECK(find_function_body("fuseopt", op) != nullptr);
  }
}
