// The pass order relations stated where each pass is defined (the comment at
// its FUSEOPT_REGISTER_PASS): an order key changed so that one no longer holds
// fails here, naming the pair.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "pass/pass.h"

using namespace fuseopt;

namespace {

int position(const std::string& name) {
  const std::vector<const PassInfo*> passes = registered_passes();
  for (size_t i = 0; i < passes.size(); ++i)
    if (passes[i]->name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

TEST_CASE("pass order: every relation a pass states at its registration holds", "[pass][order]") {
  const std::vector<std::pair<const char*, const char*>> first_then = {
      // cleanup
      {"const_fold", "if_fold"},
      {"if_fold", "identity_elim"},
      {"identity_elim", "cse"},
      {"identity_elim", "einsum_to_matmul"},
      {"einsum_to_matmul", "cse"},  // the new Transposes of a shared operand merge there
      {"cse", "dce"},
      {"dce", "ConvBnFold"},  // every cleanup before every fusion
      // the norms, then what extends them
      {"LayerNorm", "SkipLayerNorm"},
      {"RMSNorm", "SkipLayerNorm"},
      {"SkipLayerNorm", "LayerNormLinear"},
      {"SkipLayerNorm", "EmbedLayerNorm"},  // takes the embeddings' SkipLayerNorm whole
      {"EmbedLayerNorm", "TiedEmbedding"},  // which finds the table in EmbedLayerNorm
      // GEMMs
      {"GatedMatMul", "FusedMatMul"},
      {"GatedMatMul", "QkvPack"},
      {"FusedMatMul", "AddRelu"},
      {"FusedMatMul", "QkvPack"},
      {"QkvPack", "LayerNormLinear"},
      {"LayerNorm", "FusedMatMulLayerNorm"},
      {"SkipLayerNorm", "FusedMatMulLayerNorm"},  // a GEMM into a residual norm
      {"FusedMatMul", "FusedMatMulLayerNorm"},
      {"FusedMatMulLayerNorm", "LayerNormLinear"},
      // attention
      {"QkvPack", "RotaryEmbedding"},
      {"RotaryEmbedding", "Attention"},
      {"Attention", "PackedRotary"},
      {"QkvPack", "OnnxAttention"},       // reads the packed projection's Split as packed QKV
      {"OnnxAttention", "PackedRotary"},  // PackedRotary reads fuseopt.Attention nodes
      {"LayerNormLinear", "TiedEmbedding"},
      // the residual Add into the GEMM: after the norms' final form
      {"LayerNormLinear", "ResidualMatMul"},
      {"FusedMatMulLayerNorm", "ResidualMatMul"},  // which takes the post-LN form whole
      {"ResidualMatMul", "TiedEmbedding"},
      // its plain-Add form takes only the Adds that every Add-reading fusion has left
      {"SkipLayerNorm", "ResidualMatMul"},
      {"EmbedLayerNorm", "ResidualMatMul"},
      {"FusedMatMul", "ResidualMatMul"},  // the bias Adds
      {"AddRelu", "ResidualMatMul"},
      {"Attention", "ResidualMatMul"},  // the mask Adds
      {"OnnxAttention", "ResidualMatMul"},
  };
  for (const auto& [a, b] : first_then) {
    INFO(a << " must run before " << b);
    const int pa = position(a), pb = position(b);
    REQUIRE(pa >= 0);
    REQUIRE(pb >= 0);
    CHECK(pa < pb);
  }
}
