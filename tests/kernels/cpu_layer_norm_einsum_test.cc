// LayerNormalization (last axis, axis 1, optional Mean/InvStdDev outputs)
// and Einsum forms exported models use. References: numpy.
#include <catch2/catch.hpp>

#include "kernels/cpu_math_refs.h"
#include "kernels/cpu_math_test_util.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace cpu_math_refs;

TEST_CASE("LayerNormalization over the last axis with Mean and InvStdDev", "[cpu][layernorm]") {
  OpTest t("LayerNormalization");
  t.input("x", pat({2, 3, 4})).input("g", pat3({4})).input("b", pat2({4}));
  t.set_outputs({"y", "mean", "inv"});
  std::vector<Tensor> out = t.run();
  expect_near(out[0], k_ln, {2, 3, 4}, 1e-5f, 1e-4f);
  expect_near(out[1], k_ln_mean, {2, 3, 1});
  expect_near(out[2], k_ln_inv, {2, 3, 1}, 1e-5f, 1e-4f);
}

TEST_CASE("LayerNormalization axis 1, no bias, omitted optional outputs", "[cpu][layernorm]") {
  OpTest t("LayerNormalization");
  t.input("x", pat({2, 3, 4})).input("g", pat3({3, 4}));
  t.attr(Attribute::make_int("axis", 1)).attr(Attribute::make_float("epsilon", 1e-3f));
  t.set_outputs({"y", "", ""});
  std::vector<Tensor> out = t.run();
  expect_near(out[0], k_ln_axis1, {2, 3, 4}, 1e-5f, 1e-4f);
}

TEST_CASE("Einsum attention and batched matmul forms", "[cpu][einsum]") {
  OpTest a("Einsum");
  a.input("q", pat({2, 2, 3, 4})).input("k", pat2({2, 2, 5, 4})).attr(Attribute::make_string("equation", "bhqd,bhkd->bhqk"));
  expect_near(a.run()[0], k_ein_attn, {2, 2, 3, 5});
  OpTest b("Einsum");
  b.input("a", pat({2, 3, 4})).input("b", pat2({2, 4, 2})).attr(Attribute::make_string("equation", "bij, bjk -> bik"));
  expect_near(b.run()[0], k_ein_bmm, {2, 3, 2});
  OpTest e("Einsum");
  e.input("a", pat({2, 3, 4})).input("b", pat2({2, 4, 2})).attr(Attribute::make_string("equation", "...ij,...jk->...ik"));
  expect_near(e.run()[0], k_ein_ell, {2, 3, 2});
}

TEST_CASE("Einsum implicit output, diagonal, full sum, transpose", "[cpu][einsum]") {
  OpTest i("Einsum");
  i.input("a", pat({3, 4})).input("b", pat2({4, 2})).attr(Attribute::make_string("equation", "ij,jk"));
  expect_near(i.run()[0], k_ein_implicit, {3, 2});
  OpTest d("Einsum");
  d.input("a", pat({3, 3})).attr(Attribute::make_string("equation", "ii->i"));
  expect_near(d.run()[0], k_ein_diag, {3});
  OpTest s("Einsum");
  s.input("a", pat({3, 3})).attr(Attribute::make_string("equation", "ij->"));
  expect_near(s.run()[0], k_ein_sum, {}, 1e-5f, 1e-4f);
  OpTest t("Einsum");
  t.input("a", floats({1, 2, 3, 4, 5, 6}, {2, 3})).attr(Attribute::make_string("equation", "ij->ji"));
  expect_near(t.run()[0], {1, 4, 2, 5, 3, 6}, {3, 2});
}

TEST_CASE("Einsum operand rank mismatch is an Error", "[cpu][einsum]") {
  OpTest t("Einsum");
  t.input("a", pat({3, 4})).input("b", pat2({4, 2})).attr(Attribute::make_string("equation", "bij,jk->bik"));
  REQUIRE_THROWS_WITH(t.run(), Catch::Contains("Einsum_node"));
}

TEST_CASE("malformed Einsum equations are Errors, not crashes", "[cpu][einsum]") {
  for (const char* eq : {"a...b...,bc->ac", "ab,bc->ad", "a-b,bc->ac", "ab,bc,cd->ad", "abc,bc->ac"}) {
    OpTest t("Einsum");
    t.input("a", pat({3, 4})).input("b", pat2({4, 2})).attr(Attribute::make_string("equation", eq));
    INFO(eq);
    REQUIRE_THROWS_AS(t.run(), Error);
  }
  // Upper-case letters count in implicit mode too: "iJ,Jk" sums J, keeps i and k.
  OpTest u("Einsum");
  u.input("a", pat({3, 4})).input("b", pat2({4, 2})).attr(Attribute::make_string("equation", "iJ,Jk"));
  expect_near(u.run()[0], k_ein_implicit, {3, 2});
}
