// einsum_to_matmul: two-operand Einsums that are batched matrix products become
// Transpose + MatMul (+ Transpose), each checked against the original Einsum on the CPU
// Session with random inputs whose dims all differ (a wrong permutation cannot line up);
// the equations it must leave alone stay one Einsum.
#include <map>

#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

// Distinct sizes per letter, so that a transposed operand fails shape inference or the compare.
const std::map<char, int64_t> kSize = {{'b', 2}, {'h', 3}, {'i', 5}, {'j', 4}, {'d', 6}, {'n', 3}, {'s', 7},
                                       {'t', 5}, {'k', 4}, {'x', 2}};

std::vector<int64_t> dims_of(const std::string& term) {
  std::vector<int64_t> d;
  for (char c : term) d.push_back(kSize.at(c));
  return d;
}

struct Built {
  std::unique_ptr<Graph> before;
  std::map<std::string, Tensor> feeds;
};

Built build(GraphBuilder& b, const std::string& a, const std::string& c, const std::string& out, DType dt = DType::Float) {
  Value* x = b.input("a", dt, dims_of(a));
  Value* y = b.input("b", dt, dims_of(c));
  b.output(b.op("Einsum", {x, y}, {Attribute::make_string("equation", a + "," + c + "->" + out)}, "einsum"));
  return {clone_graph(b.graph()), {{"a", rand_tensor(dims_of(a), 3)}, {"b", rand_tensor(dims_of(c), 4)}}};
}

}  // namespace

TEST_CASE("einsum_to_matmul: batched matrix products become MatMul", "[passes][einsum]") {
  const std::vector<std::array<std::string, 3>> cases = {
      {"bhid", "bhjd", "bhij"},  // Q·Kᵀ in hand-written attention
      {"bhij", "bhjd", "bhid"},  // P·V
      {"bind", "bjnd", "bnij"},  // Funnel's [B, S, H, D] operands
      {"bnij", "bjnd", "bind"},  // back to [B, S, H, D]
      {"binh", "tnh", "bnit"},   // A keeps two free letters (b leads as a broadcast dim)
      {"td", "dnh", "tnh"},      // B keeps two free letters
      {"ij", "jk", "ik"},        // plain matrix product
      {"ij", "kj", "ki"},        // transposed operand and output
  };
  for (const auto& [a, c, out] : cases) {
    INFO(a + "," + c + "->" + out);
    GraphBuilder b;
    Built t = build(b, a, c, out);
    run_passes(b.graph(), {"einsum_to_matmul"});
    CHECK(count_op(b.graph(), "Einsum") == 0);
    CHECK(count_op(b.graph(), "MatMul") == 1);
    require_same_outputs(*t.before, b.graph(), t.feeds, 1e-5f);
  }
}

TEST_CASE("einsum_to_matmul: equations that are not one batched MatMul stay Einsum", "[passes][einsum]") {
  const std::vector<std::array<std::string, 3>> cases = {
      {"bij", "bjk", "bi"},    // k summed out of B alone
      {"bijd", "bjd", "bi"},   // two contracted letters (j, d) after a sum-out
      {"ijd", "jdk", "ik"},    // two contracted letters
      {"ij", "j", "i"},        // no free letter on B's side (matrix-vector)
      {"bi", "bj", "bij"},     // outer product: nothing contracted
      {"xbid", "hbjd", "xhbij"},  // free letters on both sides beyond one each
  };
  for (const auto& [a, c, out] : cases) {
    INFO(a + "," + c + "->" + out);
    GraphBuilder b;
    build(b, a, c, out);
    run_passes(b.graph(), {"einsum_to_matmul"});
    CHECK(count_op(b.graph(), "Einsum") == 1);
    CHECK(count_op(b.graph(), "MatMul") == 0);
  }
  SECTION("a diagonal, an ellipsis, no explicit output, integer operands") {
    for (const std::string eq : {"ii,ij->ij", "...ij,...jk->...ik", "ij,jk"}) {
      INFO(eq);
      GraphBuilder b;
      Value* x = b.input("a", DType::Float, {4, 4});
      Value* y = b.input("b", DType::Float, {4, 4});
      b.output(b.op("Einsum", {x, y}, {Attribute::make_string("equation", eq)}, "einsum"));
      run_passes(b.graph(), {"einsum_to_matmul"});
      CHECK(count_op(b.graph(), "Einsum") == 1);
    }
    GraphBuilder b;
    build(b, "ij", "jk", "ik", DType::Int64);
    run_passes(b.graph(), {"einsum_to_matmul"});
    CHECK(count_op(b.graph(), "Einsum") == 1);
  }
}
