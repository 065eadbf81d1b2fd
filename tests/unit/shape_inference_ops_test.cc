// Shape/dtype inference, second half of the per-op cases: Constant forms, Resize /
// DepthToSpace / TopK / NonZero / OneHot, symbolic_value without a prior run, unknown ops,
// custom shape functions, fuseopt's fused ops, malformed nodes, ONNX Runtime contrib ops.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "onnx_io/onnx_io.h"
#include "pass/pass_manager.h"
#include "support/graph_builder.h"
#include "support/shape_check.h"
#include "util/error.h"

using namespace fuseopt;
using fuseopt::test::GraphBuilder;

using namespace fuseopt::test::shape;

TEST_CASE("shape inference: Constant node forms") {
  GraphBuilder b;
  Value* f = b.op("Constant", {}, {Attribute::make_float("value_float", 2.f)});
  Value* is = b.op("Constant", {}, {Attribute::make_ints("value_ints", {1, 2, 3})});
  Value* t = b.op("Constant", {}, {Attribute::make_tensor("value", Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3}))});
  auto si = infer_shapes(b.graph());
  CHECK(sh(f) == "[]");
  CHECK(f->dtype == DType::Float);
  CHECK(sh(is) == "[3]");
  CHECK(is->dtype == DType::Int64);
  CHECK(si.symbolic_ints(is) == std::vector<int64_t>{1, 2, 3});
  CHECK(sh(t) == "[2,3]");
}

TEST_CASE("shape inference: Resize, DepthToSpace, TopK, NonZero, OneHot") {
  GraphBuilder b(18);
  Value* x = in(b, "x", "n,3,h,w");
  Value* up = b.op("Resize", {x, nullptr, b.constant("sc", Tensor::from_floats({1, 1, 2, 2}, {4}))});
  Value* sized = b.op("Resize", {in(b, "y", "n,3,8,8"), nullptr, nullptr, ints(b, {1, 3, 5, 6})});
  Value* half = b.op("Resize", {in(b, "z", "1,3,9,8"), nullptr, b.constant("sc2", Tensor::from_floats({1, 1, 0.5f, 0.5f}, {4}))});
  Value* d2s = b.op("DepthToSpace", {in(b, "d", "n,16,h,w")}, {I("blocksize", 2)});
  Value* s2d = b.op("SpaceToDepth", {in(b, "s", "n,4,8,8")}, {I("blocksize", 2)});
  Node* topk = b.node("TopK", {in(b, "t", "batch,100"), ints(b, {5})}, 2);
  Value* nz = b.op("NonZero", {in(b, "nzi", "3,4")});
  Value* oh = b.op("OneHot", {in(b, "oi", "batch,seq", DType::Int64), ints(b, {10}, true), ints(b, {0, 1})});
  Value* band = b.op("BitwiseAnd", {in(b, "ba", "batch,4", DType::Int32), in(b, "bb", "4", DType::Int32)});
  Value* eye = b.op("EyeLike", {in(b, "e", "5,5")}, {I("dtype", (int64_t)DType::Int64)});
  Value* rnd = b.op("RandomNormal", {}, {Is("shape", {2, 3})});
  infer_shapes(b.graph());
  CHECK(sh(band) == "[batch,4]");
  CHECK(band->dtype == DType::Int32);
  CHECK(sh(eye) == "[5,5]");
  CHECK(eye->dtype == DType::Int64);
  CHECK(sh(rnd) == "[2,3]");
  CHECK(rnd->dtype == DType::Float);
  CHECK(sh(up) == "[n,3,h*2,w*2]");
  CHECK(sh(sized) == "[1,3,5,6]");
  CHECK(sh(half) == "[1,3,4,4]");
  CHECK(sh(d2s) == "[n,4,h*2,w*2]");
  CHECK(sh(s2d) == "[n,16,4,4]");
  CHECK(sh(topk->outputs[0]) == "[batch,5]");
  CHECK(topk->outputs[1]->dtype == DType::Int64);
  CHECK(sh(nz) == "[2,?]");
  CHECK(sh(oh) == "[batch,seq,10]");
  CHECK(oh->dtype == DType::Int64);
}

TEST_CASE("shape inference: symbolic_value walks producers without a prior inference run") {
  GraphBuilder b(13);
  Value* x = in(b, "x", "batch,seq,128");
  Value* shape = b.op("Shape", {x});
  Value* bs = b.op("Mul", {b.op("Gather", {shape, ints(b, {0}, true)}), b.op("Gather", {shape, ints(b, {1}, true)})});
  Value* target = b.op("Concat", {b.op("Unsqueeze", {bs, ints(b, {0})}), ints(b, {-1})}, {I("axis", 0)});
  CHECK(dims_text(symbolic_value(target)) == "[batch*seq,-1]");
  CHECK(dims_text(symbolic_value(x)) == "none");  // data, not a shape tensor
  CHECK(!target->shape.has_value());              // the query does not write shapes
}

// --- driver behaviour ----------------------------------------------------------------------------
TEST_CASE("shape inference: unknown ops leave outputs alone, existing shapes are kept and refined") {
  GraphBuilder b;
  Value* x = in(b, "x", "batch,seq,128");
  Value* odd = b.op("MysteryOp", {x}, {}, "mystery", "com.example");
  Value* after = b.op("Relu", {odd});
  Value* declared = b.op("Relu", {x});
  declared->shape = Shape{Dim::unknown(), Dim::sym("seq"), Dim::unknown()};
  Value* kept = b.op("MysteryOp", {x}, {}, "mystery2", "com.example");
  kept->shape = parse_shape("batch,seq,7");
  kept->dtype = DType::Float;
  Value* after_kept = b.op("Relu", {kept});
  auto si = infer_shapes(b.graph());
  CHECK(sh(odd) == "none");
  CHECK(sh(after) == "none");
  CHECK(sh(declared) == "[batch,seq,128]");
  CHECK(sh(kept) == "[batch,seq,7]");
  CHECK(sh(after_kept) == "[batch,seq,7]");
  CHECK(si.unknown_ops == std::vector<std::string>{"com.example.MysteryOp"});

  // A declared dim that contradicts the inferred one is an error...
  declared->shape = parse_shape("batch,seq,64");
  REQUIRE_THROWS_WITH(infer_shapes(b.graph()), Catch::Contains("Relu"));
  // ...unless the caller asks to start over.
  ShapeInferenceOptions reset;
  reset.reset = true;
  infer_shapes(b.graph(), reset);
  CHECK(sh(declared) == "[batch,seq,128]");
  CHECK(sh(kept) == "none");  // reset forgets what nothing can recompute
}

TEST_CASE("shape inference: a custom shape function registers itself") {
  static bool registered = register_shape_fn("com.example", "Double", [](ShapeContext& c) {
    c.set_output_dtype(0, c.input_dtype(0));
    if (auto s = c.input_shape(0)) {
      Shape o = *s;
      o.back() = Dim::of(2);
      c.set_output_shape(0, o);
    }
  });
  REQUIRE(registered);
  GraphBuilder b;
  Value* y = b.op("Double", {in(b, "x", "batch,5")}, {}, "", "com.example");
  infer_shapes(b.graph());
  CHECK(sh(y) == "[batch,2]");
  CHECK(find_shape_fn("ai.onnx", "MatMul") == find_shape_fn("", "MatMul"));
}

// --- fused ops ----------------------------------------------------------------------------------------
TEST_CASE("shape inference: fuseopt fused ops") {
  GraphBuilder b(17);
  Value* x = in(b, "x", "batch,seq,128");
  Value* ar = b.op("AddRelu", {x, in(b, "r", "128")}, {}, "", "fuseopt");
  Value* fm = b.op("FusedMatMul", {x, in(b, "w", "128,512"), in(b, "bias", "512")}, {}, "", "fuseopt");
  Value* fmt = b.op("FusedMatMul", {x, in(b, "wt", "64,128")}, {I("transB", 1)}, "", "fuseopt");
  Value* ln = b.op("LayerNorm", {x, in(b, "g", "128"), in(b, "bt", "128")}, {}, "", "fuseopt");
  Value* rms = b.op("RMSNorm", {x, in(b, "g2", "128")}, {}, "", "fuseopt");
  Node* sln = b.node("SkipLayerNorm", {x, in(b, "skip", "batch,seq,128"), in(b, "g3", "128")}, 2, {}, "fuseopt");
  Node* lnl = b.node("LayerNormLinear",
                     {x, in(b, "g4", "128"), nullptr, in(b, "w4", "128,384"), in(b, "b4", "384"), in(b, "sk", "batch,seq,128")},
                     2, {}, "fuseopt");
  Value* att = b.op("Attention", {in(b, "qkv", "batch,seq,384")}, {I("num_heads", 4)}, "", "fuseopt");
  Value* gqa = b.op("Attention", {in(b, "qkv2", "batch,seq,256")}, {I("num_heads", 4), I("kv_num_heads", 2)}, "", "fuseopt");
  Value* sep = b.op("Attention", {x, in(b, "k", "batch,kv,128"), in(b, "v", "batch,kv,128"), in(b, "mask", "batch,kv", DType::Int64)},
                    {I("num_heads", 4)}, "", "fuseopt");
  infer_shapes(b.graph());
  CHECK(sh(ar) == "[batch,seq,128]");
  CHECK(sh(fm) == "[batch,seq,512]");
  CHECK(sh(fmt) == "[batch,seq,64]");
  CHECK(sh(ln) == "[batch,seq,128]");
  CHECK(sh(rms) == "[batch,seq,128]");
  CHECK(sh(sln->outputs[0]) == "[batch,seq,128]");
  CHECK(sh(sln->outputs[1]) == "[batch,seq,128]");
  CHECK(sh(lnl->outputs[0]) == "[batch,seq,384]");
  CHECK(sh(lnl->outputs[1]) == "[batch,seq,128]");
  CHECK(sh(att) == "[batch,seq,128]");
  CHECK(sh(gqa) == "[batch,seq,128]");  // dh = 256 / (4 + 2*2) = 32
  CHECK(sh(sep) == "[batch,seq,128]");
  CHECK(att->dtype == DType::Float);

  GraphBuilder bad(17);
  bad.op("FusedMatMul", {in(bad, "x", "batch,seq,128"), in(bad, "w", "128,64"), in(bad, "b", "32")}, {}, "fmm", "fuseopt");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("fmm"));
  GraphBuilder bad2(17);
  bad2.op("Attention", {in(bad2, "qkv", "batch,seq,100")}, {I("num_heads", 4)}, "att", "fuseopt");
  REQUIRE_THROWS_WITH(infer_shapes(bad2.graph()), Catch::Contains("att"));
}

// FusedMatMul's residual (input 3, ResidualMatMul): Y's shape unchanged; the residual is read
// row-major as Y's shape, so only its element count must match (when both are known).
TEST_CASE("shape inference: FusedMatMul residual") {
  GraphBuilder b(17);
  Value* x2 = in(b, "x2", "6,128");
  Value* y = b.op("FusedMatMul", {x2, in(b, "w", "128,64"), nullptr, in(b, "r", "2,3,64")}, {}, "", "fuseopt");
  Value* ys = b.op("FusedMatMul", {in(b, "xs", "batch,seq,128"), in(b, "w2", "128,64"), in(b, "b2", "64"),
                                   in(b, "rs", "batch,seq,64")},
                   {}, "", "fuseopt");
  infer_shapes(b.graph());
  CHECK(sh(y) == "[6,64]");
  CHECK(sh(ys) == "[batch,seq,64]");

  GraphBuilder bad(17);
  bad.op("FusedMatMul", {in(bad, "x", "6,128"), in(bad, "w", "128,64"), nullptr, in(bad, "r", "2,2,64")}, {}, "fmm_res",
         "fuseopt");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()),
                      Catch::Contains("fmm_res") && Catch::Contains("residual [2,2,64] has 256 elements"));
  GraphBuilder bad2(17);
  bad2.op("FusedMatMul", {in(bad2, "x", "6,128"), in(bad2, "w", "128,64"), nullptr, in(bad2, "r", "6,64", DType::Double)},
          {}, "fmm_dt", "fuseopt");
  REQUIRE_THROWS_WITH(infer_shapes(bad2.graph()), Catch::Contains("fmm_dt") && Catch::Contains("residual is float64"));
}

TEST_CASE("shape inference: malformed nodes give an Error or nothing, never a crash") {
  const std::vector<std::string> ops = {
      "Add", "MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
      "BatchNormalization", "LayerNormalization", "ReduceMean", "ReduceSum", "ArgMax", "Gather", "GatherElements",
      "GatherND", "ScatterND", "Reshape", "Transpose", "Tile", "Pad", "Unsqueeze", "Squeeze", "Flatten", "Concat",
      "Split", "Slice", "Expand", "Where", "Cast", "Equal", "Range", "Shape", "Size", "ConstantOfShape", "Constant",
      "Dropout", "Softmax", "Clip", "Max", "TopK", "OneHot", "Resize", "DepthToSpace", "NonZero", "CumSum", "Trilu"};
  const std::vector<std::string> fused = {"AddRelu", "FusedMatMul", "LayerNorm", "RMSNorm", "SkipLayerNorm",
                                          "LayerNormLinear", "Attention", "EmbedLayerNorm"};
  const std::vector<std::string> shapes = {"", "0", "2,0,3", "batch,seq,128", "1", "3,4,5,6"};
  int errors = 0, runs = 0;
  auto attempt = [&](const std::string& op, const std::string& domain, size_t n_in, const std::string& shape,
                     bool const_ints) {
    GraphBuilder b(17);
    std::vector<Value*> ins;
    for (size_t i = 0; i < n_in; ++i)
      ins.push_back(i > 0 && const_ints ? ints(b, {0, -1, 5}) : in(b, "x" + std::to_string(i), shape));
    b.node(op, ins, 2, {I("axis", 7), Is("perm", {3, 3}), Is("axes", {9}), I("to", 1), I("num_heads", 3)}, domain);
    ++runs;
    try {
      infer_shapes(b.graph());
    } catch (const Error&) {
      ++errors;
    }
  };
  for (const auto& op : ops)
    for (size_t n = 0; n <= 4; ++n)
      for (const auto& s : shapes)
        for (bool c : {false, true}) attempt(op, "", n, s, c);
  for (const auto& op : fused)
    for (size_t n = 0; n <= 6; ++n)
      for (const auto& s : shapes) attempt(op, "fuseopt", n, s, false);
  CHECK(runs > 1000);
  CHECK(errors > 0);  // the bad attributes above are caught, not ignored
}

TEST_CASE("shape inference: ONNX Runtime contrib ops of already-optimized models") {
  GraphBuilder b(17);
  const std::string ms = "com.microsoft";
  Value* x = in(b, "x", "batch,seq,128");
  Value* gelu = b.op("BiasGelu", {x, in(b, "bias", "128")}, {}, "", ms);
  Value* fmm = b.op("FusedMatMul", {x, in(b, "w", "512,128")}, {I("transB", 1)}, "", ms);
  Node* sln = b.node("SkipLayerNormalization", {x, x, in(b, "g", "128")}, 4, {}, ms);
  Node* simp = b.node("SimplifiedLayerNormalization", {x, in(b, "g2", "128")}, 2, {I("axis", -1)});
  Value* att = b.op("Attention", {x, in(b, "qkvw", "128,384"), in(b, "qkvb", "384")}, {I("num_heads", 4)}, "", ms);
  infer_shapes(b.graph());
  CHECK(sh(gelu) == "[batch,seq,128]");
  CHECK(sh(fmm) == "[batch,seq,512]");
  CHECK(sh(sln->outputs[0]) == "[batch,seq,128]");
  CHECK(sh(sln->outputs[1]) == "[batch,seq,1]");
  CHECK(sh(sln->outputs[3]) == "[batch,seq,128]");
  CHECK(sh(simp->outputs[1]) == "[batch,seq,1]");
  CHECK(sh(att) == "[batch,seq,128]");
}

// --- real exported models --------------------------------------------------------------------------------
