// Shape function of fuseopt.FusedMatMulLayerNorm (src/ir/shape_ops/fused_matmul_layer_norm.cc):
// Y [..., N] from A [..., K] and W [K, N] / [N, K] with symbols kept; bad operands are
// one Error naming the node. With skip: skip must be Y's shape (no broadcast) and A's
// dtype, and the activation none; none without skip is an Error.
#include <catch2/catch.hpp>

#include "support/shape_check.h"

using namespace fuseopt;
using namespace fuseopt::test::shape;

TEST_CASE("shape inference: fuseopt.FusedMatMulLayerNorm", "[unit][shape][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* x = in(b, "x", "batch,seq,128");
  Value* y = b.op("FusedMatMulLayerNorm", {x, in(b, "w", "128,768"), in(b, "bias", "768"), in(b, "g", "768"),
                                           in(b, "bt", "768")},
                  {Attribute::make_string("activation", "gelu")}, "f", "fuseopt");
  Value* yt = b.op("FusedMatMulLayerNorm", {x, in(b, "wt", "64,128"), nullptr, in(b, "g2", "64")},
                   {I("transB", 1), Attribute::make_string("activation", "gelu_tanh")}, "ft", "fuseopt");
  Value* y1 = b.op("FusedMatMulLayerNorm", {in(b, "v", "128"), in(b, "w1", "128,80"), nullptr, in(b, "g3", "80")},
                   {}, "f1", "fuseopt");
  infer_shapes(b.graph());
  CHECK(sh(y) == "[batch,seq,768]");
  CHECK(sh(yt) == "[batch,seq,64]");
  CHECK(sh(y1) == "[80]");
  CHECK(y->dtype == DType::Float);
  CHECK(find_shape_fn("fuseopt", "FusedMatMulLayerNorm") != nullptr);

  struct Bad {
    const char* w;
    const char* bias;
    const char* gamma;
    int64_t trans_b;
  };
  const Bad bad[] = {
      {"100,768", "768", "768", 0},  // K differs
      {"128,768", "767", "768", 0},  // bias
      {"128,768", "768", "512", 0},  // gamma
      {"128,768", "768", "768", 1},  // transB reads W as [768, 128]: K differs
      {"2,128,768", "768", "768", 0},  // batched W
  };
  for (const Bad& c : bad) {
    GraphBuilder g(17);
    g.op("FusedMatMulLayerNorm",
         {in(g, "x", "batch,seq,128"), in(g, "w", c.w), in(g, "bias", c.bias), in(g, "g", c.gamma)},
         {I("transB", c.trans_b)}, "fmln", "fuseopt");
    INFO("W " << c.w << " bias " << c.bias << " gamma " << c.gamma << " transB " << c.trans_b);
    REQUIRE_THROWS_WITH(infer_shapes(g.graph()), Catch::Contains("fmln"));
  }
}

TEST_CASE("shape inference: fuseopt.FusedMatMulLayerNorm with skip", "[unit][shape][FusedMatMulLayerNorm]") {
  auto act = [](const char* a) { return Attribute::make_string("activation", a); };
  GraphBuilder b(17);
  Value* x = in(b, "x", "batch,seq,128");
  // Omitted bias and beta keep their slots before skip.
  Value* y = b.op("FusedMatMulLayerNorm",
                  {x, in(b, "w", "128,768"), nullptr, in(b, "g", "768"), nullptr, in(b, "res", "batch,seq,768")},
                  {act("none")}, "f", "fuseopt");
  infer_shapes(b.graph());
  CHECK(sh(y) == "[batch,seq,768]");
  CHECK(y->dtype == DType::Float);

  struct Bad {
    const char* skip;  // nullptr: no skip
    const char* act;
    const char* why;
  };
  const Bad bad[] = {
      {"1,seq,768", "none", "no broadcast"},     // broadcast over the batch of 2
      {"seq,768", "none", "no broadcast"},       // lower rank
      {"2,seq,512", "none", "no broadcast"},     // N differs
      {"2,seq,768", "gelu", "with skip the activation must be none"},
      {nullptr, "none", "none only with skip"},
  };
  for (const Bad& c : bad) {
    GraphBuilder g(17);
    std::vector<Value*> ins = {in(g, "x", "2,seq,128"), in(g, "w", "128,768"), nullptr, in(g, "g", "768"), nullptr};
    if (c.skip) ins.push_back(in(g, "res", c.skip));
    else ins.resize(4);
    g.op("FusedMatMulLayerNorm", ins, {act(c.act)}, "fmln", "fuseopt");
    INFO("skip " << (c.skip ? c.skip : "none") << " activation " << c.act);
    REQUIRE_THROWS_WITH(infer_shapes(g.graph()), Catch::Contains("fmln") && Catch::Contains(c.why));
  }
  {
    GraphBuilder g(17);
    Value* res16 = g.input("res16", DType::Float16, {2, 3, 768});
    g.op("FusedMatMulLayerNorm",
         {g.input("x", DType::Float, {2, 3, 128}), in(g, "w", "128,768"), nullptr, in(g, "g", "768"), nullptr, res16},
         {act("none")}, "fmln", "fuseopt");
    REQUIRE_THROWS_WITH(infer_shapes(g.graph()), Catch::Contains("fmln") && Catch::Contains("float16"));
  }
}
