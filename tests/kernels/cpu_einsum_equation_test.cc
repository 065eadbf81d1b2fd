// The Einsum equation helper shared by the CPU and CUDA kernels
// (kernels/common/einsum_equation.h) and the CPU Einsum on equations with
// upper-case letters next to "..." and implicit outputs with upper-case
// letters. References: numpy.einsum on integer-valued inputs (exact).
#include <catch2/catch.hpp>

#include "kernels/common/einsum_equation.h"
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

// ((i * 7 + off) % 11) - 5: small integers, so every sum is exact.
Tensor ipat(std::vector<int64_t> dims, int off) {
  Tensor t(DType::Float, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 7 + off) % 11 - 5);
  return t;
}

std::vector<Tensor> run_einsum(const std::string& eq, const std::vector<std::vector<int64_t>>& shapes) {
  OpTest t("Einsum");
  for (size_t i = 0; i < shapes.size(); ++i) t.input("x" + std::to_string(i), ipat(shapes[i], static_cast<int>(i) * 3 + 1));
  t.attr(Attribute::make_string("equation", eq));
  return t.run();
}

const std::string E0 = std::string(1, static_cast<char>(0x80));  // label of ellipsis dim 0
const std::string E1 = std::string(1, static_cast<char>(0x81));

}  // namespace

TEST_CASE("einsum equation: ellipsis labels never collide with upper-case letters", "[cpu][einsum]") {
  einsum::Equation e = einsum::parse_equation("t", "...Ab,...bC->...AC", {3, 3});
  CHECK(e.ellipsis_rank == 1);
  CHECK(e.inputs[0] == E0 + "Ab");
  CHECK(e.inputs[1] == E0 + "bC");
  CHECK(e.output == E0 + "AC");
  // Right-aligned ellipsis of different ranks.
  e = einsum::parse_equation("t", "A...j,...j->A...", {4, 2});
  CHECK(e.ellipsis_rank == 2);
  CHECK(e.inputs[0] == "A" + E0 + E1 + "j");
  CHECK(e.inputs[1] == E1 + "j");
  CHECK(e.output == "A" + E0 + E1);
}

TEST_CASE("einsum equation: implicit output keeps upper-case letters, ASCII order, ellipsis first", "[cpu][einsum]") {
  CHECK(einsum::parse_equation("t", "zA", {2}).output == "Az");
  CHECK(einsum::parse_equation("t", "bA,bc", {2, 2}).output == "Ac");
  CHECK(einsum::parse_equation("t", "iJ,Jk", {2, 2}).output == "ik");
  CHECK(einsum::parse_equation("t", "...Ab,bZ", {3, 2}).output == E0 + "AZ");
  CHECK(einsum::parse_equation("t", "ij,jk", {2, 2}).output == "ik");
  CHECK(einsum::parse_equation("t", "ii", {2}).output == "");
}

TEST_CASE("einsum equation: malformed equations throw naming the node", "[cpu][einsum]") {
  auto bad = [](const std::string& eq, std::vector<size_t> ranks) {
    INFO(eq);
    CHECK_THROWS_WITH(einsum::parse_equation("Einsum 'n'", eq, ranks), Catch::Contains("Einsum 'n'"));
  };
  bad("ij->ii", {2});          // repeated output letter
  bad("...ij->ij", {3});       // ellipsis dims with nowhere to go
  bad("i.j->ij", {2});         // stray '.'
  bad("...i...->i", {2});      // two ellipses
  bad("i1->i", {2});           // not a letter
  bad("ij,jk", {2});           // operand count
  bad("ijk->i", {2});          // rank mismatch
  bad("ij->i$", {2});          // bad output
  // A rank-0 ellipsis needs no "..." in the output.
  CHECK(einsum::parse_equation("t", "...ij,jk->ik", {2, 2}).output == "ik");
  // Output letter not in any operand, and inconsistent sizes: at planning time.
  CHECK_THROWS_WITH(einsum::plan("Einsum 'n'", "ij->iq", {{2, 3}}), Catch::Contains("'q'"));
  CHECK_THROWS_WITH(einsum::plan("Einsum 'n'", "ij,jk->ik", {{2, 3}, {4, 5}}), Catch::Contains("Einsum 'n'"));
}

TEST_CASE("einsum plan: strides, broadcasting and diagonals", "[cpu][einsum]") {
  const einsum::Plan p = einsum::plan("t", "Ba,aB->B", {{3, 2}, {2, 3}});
  CHECK(p.out_shape == std::vector<int64_t>{3});
  CHECK(p.summed == "a");
  CHECK(p.out_strides[0] == std::vector<int64_t>{2});
  CHECK(p.out_strides[1] == std::vector<int64_t>{1});
  CHECK(p.sum_strides[0] == std::vector<int64_t>{1});
  CHECK(p.sum_strides[1] == std::vector<int64_t>{3});
  const einsum::Plan b = einsum::plan("t", "...a,...a", {{2, 1, 3}, {4, 3}});  // size-1 broadcasts: stride 0
  CHECK(b.out_shape == std::vector<int64_t>{2, 4});
  CHECK(b.out_strides[0] == std::vector<int64_t>{3, 0});
  CHECK(b.out_strides[1] == std::vector<int64_t>{0, 3});
  const einsum::Plan d = einsum::plan("t", "ii->i", {{4, 4}});
  CHECK(d.out_strides[0] == std::vector<int64_t>{5});
}

TEST_CASE("Einsum with upper-case letters and ellipsis (numpy references)", "[cpu][einsum]") {
  expect_near(run_einsum("...Ab,...bC->...AC", {{2, 3, 4}, {2, 4, 5}})[0],
              {-21, 7, 24, -14, -30, 16, -8, -32, 10, 8, -13, -1, 22, -10, -31,
               -6, 20, -9, -5, 21, -8, 21, -5, -9, 20, -10, 22, -1, -13, 19},
              {2, 3, 5});
  expect_near(run_einsum("A...j,...j->A...", {{2, 3, 4}, {3, 4}})[0], {-3, -3, -12, -12, -20, -15}, {2, 3});
  expect_near(run_einsum("Ba,aB->B", {{3, 2}, {2, 3}})[0], {-2, -20, 2}, {3});
  expect_near(run_einsum("...a,...a", {{2, 1, 3}, {4, 3}})[0], {-13, 22, 24, 26, -9, 18, 23, 28}, {2, 4});
  expect_near(run_einsum("BA...,A...C->...BC", {{3, 4, 2}, {4, 2, 5}})[0],
              {-7, 7, 10, -9, -39, -9, 44, -24, -4, 16, -11, 37, -25, -10, 16,
               -16, -26, 30, -13, -23, -10, -25, 37, -11, -26, -4, -24, 44, -9, -29},
              {2, 3, 5});
  // Two ellipsis dims (one broadcast from size 1) next to A and B.
  expect_near(run_einsum("...AB,...BC->...AC", {{2, 1, 2, 3}, {2, 3, 2}})[0],
              {5, 13, -1, 19, 9, -27, 9, -26, -18, -30, -24, -24, -24, 19, -24, 20}, {2, 2, 2, 2});
}

TEST_CASE("Einsum implicit output with upper-case letters (numpy references)", "[cpu][einsum]") {
  expect_near(run_einsum("...Ab,bZ", {{2, 3, 4}, {4, 2}})[0], {20, -7, 16, 3, 23, -9, -36, -10, 26, -11, -33, -12},
              {2, 3, 2});
  expect_near(run_einsum("zA", {{2, 3}})[0], {-4, -5, 3, 2, -1, -2}, {3, 2});
  expect_near(run_einsum("bA,bc", {{2, 3}, {2, 4}})[0], {-21, 15, 7, -12, 7, -13, 0, 2, -9, 3, 4, -6}, {3, 4});
}
