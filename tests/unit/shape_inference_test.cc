// Shape/dtype inference: per-op cases built in code (symbolic broadcasting,
// negative axes, both opset spellings), the symbolic contents of shape
// subgraphs (first half; shape_inference_ops_test.cc has the rest, shape_inference_models_test.cc
// runs every exported model in models/).
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

// --- symbolic expressions ----------------------------------------------------------------------
TEST_CASE("shape inference: symbolic expressions are canonical") {
  SymExpr batch = SymExpr::symbol("batch"), seq = SymExpr::symbol("seq");
  CHECK((seq * SymExpr::constant(4)).str() == "seq*4");
  CHECK((batch * seq).str() == (seq * batch).str());
  CHECK((batch * seq).str() == "batch*seq");
  CHECK((seq - SymExpr::constant(1)).str() == "seq-1");
  CHECK(SymExpr::parse("seq*4") == seq * SymExpr::constant(4));
  CHECK(SymExpr::parse("4*seq") == seq * SymExpr::constant(4));
  CHECK(SymExpr::parse("batch*seq*128").exact_div(SymExpr::constant(128))->str() == "batch*seq");
  CHECK(SymExpr::parse("batch*seq*128").exact_div(seq * SymExpr::constant(32))->str() == "batch*4");
  CHECK_FALSE(seq.exact_div(SymExpr::constant(2)).has_value());
  CHECK((seq + SymExpr::constant(2) - seq).constant_value() == 2);
  // A dim_param that is not an expression stays one atom, intact.
  CHECK(SymExpr::parse("sequence length").str() == "sequence length");
  CHECK(SymExpr::parse("s0 + 1") == SymExpr::symbol("s0") + SymExpr::constant(1));
  CHECK(SymExpr::parse("2 * s1") == SymExpr::symbol("s1") * SymExpr::constant(2));
  CHECK(SymExpr::parse("-1").constant_value() == -1);
  CHECK(SymExpr::parse("a--b").str() == "a--b");  // not an expression: one atom
  CHECK((SymExpr::parse("sequence length") * SymExpr::constant(2)) == SymExpr::parse("(sequence length)*2"));
  CHECK(SymExpr::constant(-1).to_dim().known() == false);
  CHECK(dims_equal(Dim::sym("seq*batch"), Dim::sym("batch*seq")));
}

// torch.export writes dims as unsimplified sympy text (bloom's alibi view:
// "((seq**2)//seq)"); they must compare equal to what inference computes.
TEST_CASE("shape inference: sympy-style dims from torch.export parse") {
  SymExpr seq = SymExpr::symbol("seq"), batch = SymExpr::symbol("batch");
  CHECK(SymExpr::parse("((seq**2)//seq)") == seq);
  CHECK(dims_equal(Dim::sym("((seq**2)//seq)"), Dim::sym("seq")));
  CHECK(dims_equal(Dim::sym("2*batch"), Dim::sym("batch*2")));
  CHECK(SymExpr::parse("seq**2") == seq * seq);
  CHECK(SymExpr::parse("(batch + 1)*2") == batch * SymExpr::constant(2) + SymExpr::constant(2));
  CHECK(SymExpr::parse("batch*seq // seq") == batch);
  CHECK(SymExpr::parse("-seq + 3") == SymExpr::constant(3) - seq);
  // Not exact, or not an expression we model: one opaque atom, never a guess.
  CHECK(SymExpr::parse("seq//2").str() == "seq//2");
  CHECK(SymExpr::parse("seq/2").str() == "seq/2");
  CHECK(SymExpr::parse("seq**100").str() == "seq**100");
  CHECK(SymExpr::parse("Max(1, seq)").str() == "Max(1, seq)");
  CHECK_FALSE(dims_equal(Dim::sym("seq//2"), Dim::sym("seq")));
  CHECK(SymExpr::parse("(seq").str() == "(seq");
  CHECK(SymExpr::parse("seq)").str() == "seq)");
  const std::string deep = std::string(200, '(') + "seq" + std::string(200, ')');
  CHECK(SymExpr::parse(deep).str() == deep);
}

TEST_CASE("shape inference: every op of the supported set has a shape function") {
  const char* ops[] = {
      "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Erf", "Tanh", "Exp", "Log", "Neg", "Abs", "Floor",
      "Mod", "Sin", "Cos", "Relu", "Sigmoid", "Softmax", "LogSoftmax", "MatMul", "Gemm", "Conv",
      "BatchNormalization", "GlobalAveragePool", "MaxPool", "AveragePool", "LayerNormalization", "ReduceMean",
      "ReduceSum", "ReduceMax", "Gather", "GatherElements", "GatherND", "ScatterND", "Reshape", "Transpose", "Tile",
      "Pad", "Unsqueeze", "Squeeze", "Flatten", "Concat", "Split", "Slice", "Expand", "Where", "Cast", "Equal",
      "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Not", "IsNaN", "Range", "Shape", "Size",
      "ConstantOfShape", "Constant", "Identity", "Dropout", "Trilu", "CumSum", "Einsum", "Clip", "Max", "Min"};
  for (const char* op : ops) {
    INFO(op);
    CHECK(find_shape_fn("", op) != nullptr);
  }
  for (const char* op : {"AddRelu", "FusedMatMul", "LayerNorm", "RMSNorm", "SkipLayerNorm", "LayerNormLinear", "Attention"}) {
    INFO(op);
    CHECK(find_shape_fn("fuseopt", op) != nullptr);
  }
}

// --- broadcasting ---------------------------------------------------------------------------------
TEST_CASE("shape inference: numpy broadcasting with symbols") {
  GraphBuilder b;
  Value* x = in(b, "x", "batch,1,seq");
  Value* y = in(b, "y", "4,1");
  Value* z = in(b, "z", "batch,seq,128");
  Value* w = in(b, "w", "128");
  Value* s1 = in(b, "s1", "seq");
  Value* k = in(b, "k", "7");
  Value* t = in(b, "t", "tokens");
  Value* a = b.op("Add", {x, y});
  Value* m = b.op("Mul", {z, w});
  Value* same = b.op("Sub", {s1, s1});
  Value* known = b.op("Div", {s1, k});
  Value* differ = b.op("Add", {s1, t});
  Value* cmp = b.op("Less", {z, w});
  Value* wh = b.op("Where", {cmp, z, b.scalar("zero", 0.f)});
  Value* mx = b.op("Max", {x, y, b.scalar("one", 1.f)});
  infer_shapes(b.graph());
  CHECK(sh(a) == "[batch,4,seq]");
  CHECK(sh(m) == "[batch,seq,128]");
  CHECK(sh(same) == "[seq]");
  CHECK(sh(known) == "[7]");   // a known dim (not 1) wins over a symbol
  CHECK(sh(differ) == "[?]");  // seq vs tokens: not provable
  CHECK(cmp->dtype == DType::Bool);
  CHECK(sh(wh) == "[batch,seq,128]");
  CHECK(wh->dtype == DType::Float);
  CHECK(sh(mx) == "[batch,4,seq]");
}

TEST_CASE("shape inference: broadcasting mismatch names the node") {
  GraphBuilder b;
  Value* x = in(b, "x", "batch,3");
  Value* y = in(b, "y", "5");
  b.op("Add", {x, y}, {}, "bad_add");
  try {
    infer_shapes(b.graph());
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("bad_add"));
  }
  // Non-strict mode records the problem instead.
  ShapeInferenceOptions o;
  o.strict = false;
  auto r = infer_shapes(b.graph(), o);
  REQUIRE(r.conflicts.size() == 1);
  CHECK_THAT(r.conflicts[0], Catch::Contains("bad_add"));
}

// --- matmul family -------------------------------------------------------------------------------
TEST_CASE("shape inference: MatMul, Gemm, Einsum") {
  GraphBuilder b;
  Value* x = in(b, "x", "batch,seq,128");
  Value* w = in(b, "w", "128,512");
  Value* q = in(b, "q", "batch,4,seq,32");
  Value* kt = in(b, "kt", "batch,4,32,seq");
  Value* v1 = in(b, "v1", "128");
  Value* bb = in(b, "bb", "2,1,3,4");
  Value* cc = in(b, "cc", "5,4,6");
  Value* g_a = in(b, "ga", "n,64");
  Value* g_b = in(b, "gb", "10,64");
  Value* g_c = in(b, "gc", "10");
  Value* y = b.op("MatMul", {x, w});
  Value* scores = b.op("MatMul", {q, kt});
  Value* vec = b.op("MatMul", {x, v1});
  Value* vec2 = b.op("MatMul", {v1, w});
  Value* batched = b.op("MatMul", {bb, cc});
  Value* gemm = b.op("Gemm", {g_a, g_b, g_c}, {I("transB", 1)});
  Value* ein = b.op("Einsum", {q, q}, {Attribute::make_string("equation", "bhid,bhjd->bhij")});
  Value* ein_implicit = b.op("Einsum", {w, in(b, "e2", "512,64")}, {Attribute::make_string("equation", "ij,jk")});
  infer_shapes(b.graph());
  CHECK(sh(y) == "[batch,seq,512]");
  CHECK(sh(scores) == "[batch,4,seq,seq]");
  CHECK(sh(vec) == "[batch,seq]");
  CHECK(sh(vec2) == "[512]");
  CHECK(sh(batched) == "[2,5,3,6]");
  CHECK(sh(gemm) == "[n,10]");
  CHECK(sh(ein) == "[batch,4,seq,seq]");
  CHECK(sh(ein_implicit) == "[128,64]");
}

TEST_CASE("shape inference: MatMul with known, different inner dims throws") {
  GraphBuilder b;
  b.op("MatMul", {in(b, "x", "batch,seq,128"), in(b, "w", "64,32")}, {}, "proj");
  REQUIRE_THROWS_WITH(infer_shapes(b.graph()), Catch::Contains("proj") && Catch::Contains("inner"));
  GraphBuilder g2;
  g2.op("Gemm", {in(g2, "a", "4,8"), in(g2, "b", "4,8")}, {}, "gemm");  // needs transB
  REQUIRE_THROWS_WITH(infer_shapes(g2.graph()), Catch::Contains("gemm"));
}

// --- the TorchScript shape chain -------------------------------------------------------------------------
TEST_CASE("shape inference: Reshape(x, Concat(Shape(x)[0], Shape(x)[1], 4, 32)) keeps batch and seq") {
  for (int64_t opset : {11, 13, 17}) {
    GraphBuilder b(opset);
    Value* x = in(b, "x", "batch,seq,128");
    Value* shape = b.op("Shape", {x});
    auto unsq = [&](Value* v) {
      if (opset < 13) return b.op("Unsqueeze", {v}, {Is("axes", {0})});
      return b.op("Unsqueeze", {v, ints(b, {0})});
    };
    Value* d0 = unsq(b.op("Gather", {shape, ints(b, {0}, true)}, {I("axis", 0)}));
    Value* d1 = unsq(b.op("Gather", {shape, const_node(b, {1}, true)}, {I("axis", 0)}));
    Value* cat = b.op("Concat", {d0, d1, const_node(b, {4}), ints(b, {32})}, {I("axis", 0)});
    Value* r = b.op("Reshape", {x, cat});
    Value* t = b.op("Transpose", {r}, {Is("perm", {0, 2, 1, 3})});
    // Merge heads back: Reshape(t', Concat(Shape[0], Shape[1], 128)).
    Value* back = b.op("Transpose", {t}, {Is("perm", {0, 2, 1, 3})});
    Value* cat2 = b.op("Concat", {d0, d1, ints(b, {128})}, {I("axis", 0)});
    Value* merged = b.op("Reshape", {back, cat2});
    auto si = infer_shapes(b.graph());
    INFO("opset " << opset);
    CHECK(dims_text(si.symbolic_value(cat)) == "[batch,seq,4,32]");
    CHECK(sh(cat) == "[4]");
    CHECK(sh(r) == "[batch,seq,4,32]");
    CHECK(sh(t) == "[batch,4,seq,32]");
    CHECK(sh(merged) == "[batch,seq,128]");
    CHECK(r->dtype == DType::Float);
    // The stand-alone query walks the producers and agrees.
    CHECK(dims_text(symbolic_value(cat)) == "[batch,seq,4,32]");
  }
}

TEST_CASE("shape inference: Reshape with -1 and 0 gives symbolic products") {
  GraphBuilder b;
  Value* x = in(b, "x", "batch,seq,128");
  Value* flat = b.op("Reshape", {x, ints(b, {-1, 128})});
  Value* heads = b.op("Reshape", {x, ints(b, {0, 0, 4, -1})});
  Value* back = b.op("Reshape", {heads, ints(b, {0, 0, -1})});
  Value* all = b.op("Reshape", {x, ints(b, {-1})});
  Value* seq_first = b.op("Reshape", {flat, ints(b, {-1, 4, 32})});
  Value* shape_of_flat = b.op("Shape", {flat});
  Value* prod = b.op("Mul", {b.op("Gather", {shape_of_flat, ints(b, {0}, true)}), ints(b, {2}, true)});
  auto si = infer_shapes(b.graph());
  CHECK(sh(flat) == "[batch*seq,128]");
  CHECK(sh(heads) == "[batch,seq,4,32]");
  CHECK(sh(back) == "[batch,seq,128]");
  CHECK(sh(all) == "[batch*seq*128]");
  CHECK(sh(seq_first) == "[batch*seq,4,32]");
  CHECK(dims_text(si.symbolic_value(prod)) == "[batch*seq*2]");
  CHECK(dims_text(si.symbolic_value(b.graph().find("c"))) == "[-1,128]");
  CHECK(si.symbolic_ints(b.graph().find("c")) == std::vector<int64_t>{-1, 128});

  GraphBuilder bad;
  bad.op("Reshape", {in(bad, "x", "2,3"), ints(bad, {4, 2})}, {}, "bad_reshape");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("bad_reshape"));
  GraphBuilder bad2;
  bad2.op("Reshape", {in(bad2, "x", "2,3"), ints(bad2, {4, -1})}, {}, "indivisible");
  REQUIRE_THROWS_WITH(infer_shapes(bad2.graph()), Catch::Contains("indivisible"));
}

TEST_CASE("shape inference: shape arithmetic, Equal/Where, ConstantOfShape, Range, Expand") {
  GraphBuilder b(17);
  Value* ids = in(b, "ids", "batch,seq", DType::Int64);
  Value* shape = b.op("Shape", {ids});
  Value* seq = b.op("Gather", {shape, ints(b, {1}, true)});
  Value* seq_m1 = b.op("Sub", {seq, ints(b, {1}, true)});
  Value* half = b.op("Div", {b.op("Mul", {seq, ints(b, {4}, true)}), ints(b, {2}, true)});
  Value* eq = b.op("Equal", {shape, ints(b, {-1, -1})});
  Value* fixed = b.op("Where", {eq, ints(b, {1, 1}), shape});
  Value* ones = b.op("ConstantOfShape", {shape},
                     {Attribute::make_tensor("value", Tensor::from_ints({1}, {1}))});
  Value* positions = b.op("Range", {ints(b, {0}, true), seq, ints(b, {1}, true)});
  Value* evens = b.op("Range", {ints(b, {0}, true), b.op("Mul", {seq, ints(b, {2}, true)}), ints(b, {2}, true)});
  Value* expanded = b.op("Expand", {b.op("Unsqueeze", {positions, ints(b, {0})}), fixed});
  Value* casted = b.op("Cast", {seq}, {I("to", (int64_t)DType::Float)});
  Value* size = b.op("Size", {ids});
  Value* tail = b.op("Shape", {ids}, {I("start", -1)});
  Value* sliced = b.op("Slice", {shape, ints(b, {-1}), ints(b, {INT64_MAX})});
  auto si = infer_shapes(b.graph());
  CHECK(dims_text(si.symbolic_value(seq)) == "[seq]");
  CHECK(sh(seq) == "[]");
  CHECK(dims_text(si.symbolic_value(seq_m1)) == "[seq-1]");
  CHECK(dims_text(si.symbolic_value(half)) == "[seq*2]");
  CHECK(eq->dtype == DType::Bool);
  CHECK(dims_text(si.symbolic_value(fixed)) == "[batch,seq]");
  CHECK(sh(ones) == "[batch,seq]");
  CHECK(ones->dtype == DType::Int64);
  CHECK(sh(positions) == "[seq]");
  CHECK(positions->dtype == DType::Int64);
  CHECK(sh(evens) == "[seq]");
  CHECK(sh(expanded) == "[batch,seq]");
  CHECK(casted->dtype == DType::Float);
  CHECK(dims_text(si.symbolic_value(casted)) == "[seq]");
  CHECK(dims_text(si.symbolic_value(size)) == "[batch*seq]");
  CHECK(sh(tail) == "[1]");
  CHECK(dims_text(si.symbolic_value(tail)) == "[seq]");
  CHECK(dims_text(si.symbolic_value(sliced)) == "[seq]");
}

TEST_CASE("shape inference: constant Range, ConstantOfShape and Concat contents") {
  GraphBuilder b;
  Value* r = b.op("Range", {ints(b, {2}, true), ints(b, {11}, true), ints(b, {3}, true)});
  Value* down = b.op("Range", {ints(b, {5}, true), ints(b, {0}, true), ints(b, {-2}, true)});
  Value* fr = b.op("Range", {b.scalar("s", 0.f), b.scalar("l", 1.f), b.scalar("d", 0.25f)});
  Value* zeros = b.op("ConstantOfShape", {ints(b, {3})});
  Value* narrowed = b.op("Cast", {ints(b, {INT64_MAX, 7})}, {I("to", (int64_t)DType::Int32)});
  auto si = infer_shapes(b.graph());
  CHECK(dims_text(si.symbolic_value(narrowed)) == "[?,7]");  // INT64_MAX does not survive int32
  CHECK(si.symbolic_ints(r) == std::vector<int64_t>{2, 5, 8});
  CHECK(sh(down) == "[3]");
  CHECK(sh(fr) == "[4]");
  CHECK(fr->dtype == DType::Float);
  CHECK(zeros->dtype == DType::Float);
  CHECK(sh(zeros) == "[3]");
}

// --- axes: attribute and input spellings, negative axes -------------------------------------------------
TEST_CASE("shape inference: Unsqueeze/Squeeze in both opset spellings") {
  GraphBuilder b11(11);
  Value* x = in(b11, "x", "batch,seq");
  Value* u = b11.op("Unsqueeze", {x}, {Is("axes", {1, -1})});
  Value* s = b11.op("Squeeze", {u}, {Is("axes", {-1})});
  Value* s_all = b11.op("Squeeze", {in(b11, "y", "1,seq,1")});
  Value* s_known = b11.op("Squeeze", {in(b11, "y2", "1,5,1")});
  Value* s_unknown = b11.op("Squeeze", {in(b11, "z", "1,seq")});  // seq might be 1
  infer_shapes(b11.graph());
  CHECK(sh(u) == "[batch,1,seq,1]");
  CHECK(sh(s) == "[batch,1,seq]");
  CHECK(sh(s_all) == "none");  // seq might be 1 too
  CHECK(sh(s_unknown) == "none");
  CHECK(sh(s_known) == "[5]");

  GraphBuilder b13(13);
  Value* x13 = in(b13, "x", "batch,seq");
  Value* u13 = b13.op("Unsqueeze", {x13, ints(b13, {1, 2})});
  Value* s13 = b13.op("Squeeze", {u13, ints(b13, {-3})});
  infer_shapes(b13.graph());
  CHECK(sh(u13) == "[batch,1,1,seq]");
  CHECK(sh(s13) == "[batch,1,seq]");

  GraphBuilder bad(13);
  bad.op("Squeeze", {in(bad, "x", "2,3"), ints(bad, {1})}, {}, "sq");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("sq"));
  GraphBuilder bad2(13);
  bad2.op("Unsqueeze", {in(bad2, "x", "2,3"), ints(bad2, {4})}, {}, "unsq");
  REQUIRE_THROWS_WITH(infer_shapes(bad2.graph()), Catch::Contains("unsq") && Catch::Contains("out of range"));
}

TEST_CASE("shape inference: ReduceMean/ReduceSum/ReduceMax across opsets") {
  GraphBuilder b17(17);
  Value* x = in(b17, "x", "batch,seq,128");
  Value* m = b17.op("ReduceMean", {x}, {Is("axes", {-1})});
  Value* m0 = b17.op("ReduceMean", {x}, {Is("axes", {1}), I("keepdims", 0)});
  Value* mall = b17.op("ReduceMax", {x}, {I("keepdims", 0)});
  Value* rs = b17.op("ReduceSum", {x, ints(b17, {-1})});  // ReduceSum takes axes as input since 13
  Value* rs_none = b17.op("ReduceSum", {x});
  infer_shapes(b17.graph());
  CHECK(sh(m) == "[batch,seq,1]");
  CHECK(sh(m0) == "[batch,128]");
  CHECK(sh(mall) == "[]");
  CHECK(sh(rs) == "[batch,seq,1]");
  CHECK(sh(rs_none) == "[1,1,1]");

  GraphBuilder b18(18);
  Value* y = in(b18, "y", "batch,seq,128");
  Value* m18 = b18.op("ReduceMean", {y, ints(b18, {-1})});
  Value* noop = b18.op("ReduceMax", {y}, {I("noop_with_empty_axes", 1)});
  Value* dyn = b18.op("ReduceMean", {y, in(b18, "axes", "1", DType::Int64)});
  infer_shapes(b18.graph());
  CHECK(sh(m18) == "[batch,seq,1]");
  CHECK(sh(noop) == "[batch,seq,128]");
  CHECK(sh(dyn) == "[?,?,?]");
}

TEST_CASE("shape inference: Split in opset 11, 13 and 18 forms") {
  GraphBuilder b11(11);
  Value* x = in(b11, "x", "batch,seq,384");
  Node* s11 = b11.node("Split", {x}, 3, {I("axis", -1), Is("split", {128, 128, 128})});
  Node* even = b11.node("Split", {in(b11, "y", "batch,seq*2")}, 2, {I("axis", 1)});
  infer_shapes(b11.graph());
  CHECK(sh(s11->outputs[2]) == "[batch,seq,128]");
  CHECK(sh(even->outputs[1]) == "[batch,seq]");

  GraphBuilder b13(13);
  Node* s13 = b13.node("Split", {in(b13, "x", "batch,seq,384"), ints(b13, {256, 128})}, 2, {I("axis", 2)});
  infer_shapes(b13.graph());
  CHECK(sh(s13->outputs[0]) == "[batch,seq,256]");
  CHECK(sh(s13->outputs[1]) == "[batch,seq,128]");

  GraphBuilder b18(18);
  Node* s18 = b18.node("Split", {in(b18, "x", "10,4")}, 3, {I("axis", 0), I("num_outputs", 3)});
  infer_shapes(b18.graph());
  CHECK(sh(s18->outputs[0]) == "[4,4]");
  CHECK(sh(s18->outputs[2]) == "[2,4]");

  GraphBuilder bad(13);
  bad.node("Split", {in(bad, "x", "batch,10"), ints(bad, {3, 3})}, 2, {I("axis", 1)}, "", "split");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("split"));
}

TEST_CASE("shape inference: Slice (inputs and the opset-1 attributes)") {
  GraphBuilder b(17);
  Value* pos = in(b, "pos", "1,512", DType::Int64);
  Value* x = in(b, "x", "batch,seq,128");
  Value* seq = b.op("Unsqueeze", {b.op("Gather", {b.op("Shape", {x}), ints(b, {1}, true)}), ints(b, {0})});
  Value* pos_seq = b.op("Slice", {pos, ints(b, {0}), seq, ints(b, {1})});
  Value* first = b.op("Slice", {x, ints(b, {0}), ints(b, {1}), ints(b, {1})});
  Value* drop_last = b.op("Slice", {x, ints(b, {0}), ints(b, {-1}), ints(b, {-2})});
  Value* tail = b.op("Slice", {x, ints(b, {-3}), ints(b, {INT64_MAX}), ints(b, {1})});
  Value* strided = b.op("Slice", {x, ints(b, {0}), ints(b, {INT64_MAX}), ints(b, {-1}), ints(b, {2})});
  Value* rev = b.op("Slice", {in(b, "k", "10"), ints(b, {-1}), ints(b, {INT64_MIN}), ints(b, {0}), ints(b, {-3})});
  Value* clamp = b.op("Slice", {in(b, "cc", "5,6"), ints(b, {2, -100}), ints(b, {100, 3})});
  Value* last_seq = b.op("Slice", {in(b, "past", "batch,total,64"), b.op("Neg", {seq}), ints(b, {INT64_MAX}), ints(b, {1})});
  infer_shapes(b.graph());
  CHECK(sh(pos_seq) == "[1,seq]");
  CHECK(sh(first) == "[batch,1,128]");
  CHECK(sh(drop_last) == "[batch,seq-1,128]");
  CHECK(sh(tail) == "[batch,3,128]");
  CHECK(sh(strided) == "[batch,seq,64]");
  CHECK(sh(rev) == "[4]");  // 9, 6, 3, 0
  CHECK(sh(clamp) == "[3,3]");
  CHECK(sh(last_seq) == "[batch,seq,64]");

  GraphBuilder b9(9);
  Value* old = b9.op("Slice", {in(b9, "x", "batch,seq,128")},
                     {Is("starts", {0, 1}), Is("ends", {INT64_MAX, 65}), Is("axes", {0, -1})});
  infer_shapes(b9.graph());
  CHECK(sh(old) == "[batch,seq,64]");
}

TEST_CASE("shape inference: clamped slice starts (torch.sym_max) and size-1 axes (MPT's ALiBi)") {
  SymExpr seq = SymExpr::symbol("seq");
  CHECK((SymExpr::constant(1) - seq).order_for_dims_at_least_one() == -1);
  CHECK((seq - SymExpr::constant(1)).order_for_dims_at_least_one() == 1);
  CHECK_FALSE((SymExpr::constant(64) - seq).order_for_dims_at_least_one());
  CHECK_FALSE((seq - SymExpr::symbol("past")).order_for_dims_at_least_one());
  GraphBuilder b(17);
  Value* x = in(b, "x", "batch,seq,8");
  Value* seq_v = b.op("Gather", {b.op("Shape", {x}), ints(b, {1}, true)});
  auto clamp_start = [&](int64_t len) {  // sym_max(0, len - seq), as a [1] start
    Value* d = b.op("Sub", {ints(b, {len}, true), seq_v});
    return b.op("Unsqueeze", {b.op("Max", {d, ints(b, {0}, true)}), ints(b, {0})});
  };
  Value* alibi = in(b, "alibi", "2,1,64");
  Value* rows = b.op("Slice", {alibi, clamp_start(1), ints(b, {INT64_MAX}), ints(b, {1})});   // x[:, -seq:] of size 1
  Value* cols = b.op("Slice", {alibi, clamp_start(64), ints(b, {INT64_MAX}), ints(b, {2})});  // x[..., -seq:] of 64
  Value* ones = b.op("Slice", {alibi, ints(b, {0}), b.op("Unsqueeze", {seq_v, ints(b, {0})}), ints(b, {1})});
  infer_shapes(b.graph());
  CHECK(sh(rows) == "[2,1,64]");
  CHECK(sh(cols) == "[2,1,seq]");  // seq <= 64 taken as in range
  CHECK(sh(ones) == "[2,1,64]");   // x[:, :seq] of a size-1 axis stays 1
}

TEST_CASE("shape inference: Transpose, Concat, Flatten, Tile, Pad, Expand") {
  GraphBuilder b(13);
  Value* x = in(b, "x", "batch,seq,4,32");
  Value* t = b.op("Transpose", {x}, {Is("perm", {0, 2, 1, 3})});
  Value* rev = b.op("Transpose", {x});
  Value* cat = b.op("Concat", {x, in(b, "y", "batch,seq,4,16")}, {I("axis", -1)});
  Value* cat_sym = b.op("Concat", {in(b, "p", "batch,past,64"), in(b, "q", "batch,seq,64")}, {I("axis", 1)});
  Value* fl = b.op("Flatten", {x}, {I("axis", -2)});
  Value* fl0 = b.op("Flatten", {x}, {I("axis", 0)});
  Value* tile = b.op("Tile", {in(b, "z", "seq,8"), ints(b, {2, 1})});
  Value* pad = b.op("Pad", {in(b, "img", "n,3,32,32"), ints(b, {0, 0, 1, 2, 0, 0, 3, 4})});
  Value* ex = b.op("Expand", {in(b, "m", "batch,1,1,seq"), ints(b, {1, 4, 1, 1})});
  infer_shapes(b.graph());
  CHECK(sh(t) == "[batch,4,seq,32]");
  CHECK(sh(rev) == "[32,4,seq,batch]");
  CHECK(sh(cat) == "[batch,seq,4,48]");
  CHECK(sh(cat_sym) == "[batch,past+seq,64]");
  CHECK(sh(fl) == "[batch*seq,128]");
  CHECK(sh(fl0) == "[1,batch*seq*128]");
  CHECK(sh(tile) == "[seq*2,8]");
  CHECK(sh(pad) == "[n,3,36,38]");
  CHECK(sh(ex) == "[batch,4,1,seq]");

  GraphBuilder p2(2);
  Value* old_pad = p2.op("Pad", {in(p2, "x", "2,3")}, {Is("pads", {1, 1, 1, 1})});
  infer_shapes(p2.graph());
  CHECK(sh(old_pad) == "[4,5]");

  GraphBuilder p18(18);
  Value* ax_pad = p18.op("Pad", {in(p18, "x", "2,seq,5"), ints(p18, {1, 2}), p18.scalar("v", 0.f), ints(p18, {-1})});
  infer_shapes(p18.graph());
  CHECK(sh(ax_pad) == "[2,seq,8]");

  GraphBuilder bad;
  bad.op("Concat", {in(bad, "a", "2,3"), in(bad, "b", "4,3")}, {I("axis", 1)}, "cat");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("cat"));
  GraphBuilder bad2;
  bad2.op("Transpose", {in(bad2, "a", "2,3")}, {Is("perm", {0, 1, 2})}, "tr");
  REQUIRE_THROWS_WITH(infer_shapes(bad2.graph()), Catch::Contains("tr"));
}

TEST_CASE("shape inference: Gather family and Scatter") {
  GraphBuilder b;
  Value* emb = in(b, "emb", "1000,128");
  Value* ids = in(b, "ids", "batch,seq", DType::Int64);
  Value* g = b.op("Gather", {emb, ids});
  Value* g1 = b.op("Gather", {in(b, "x", "batch,seq,128"), ints(b, {0}, true)}, {I("axis", -2)});
  Value* ge = b.op("GatherElements", {in(b, "d", "batch,512"), in(b, "i", "batch,seq", DType::Int64)}, {I("axis", 1)});
  Value* gnd = b.op("GatherND", {in(b, "nd", "batch,seq,128"), in(b, "ndi", "batch,2", DType::Int64)});
  Value* gnd_b = b.op("GatherND", {in(b, "nd2", "batch,seq,128"), in(b, "ndi2", "batch,1", DType::Int64)},
                      {I("batch_dims", 1)});
  Value* sc = b.op("ScatterND", {in(b, "s", "4,seq"), in(b, "si", "2,1", DType::Int64), in(b, "su", "2,seq")});
  infer_shapes(b.graph());
  CHECK(sh(g) == "[batch,seq,128]");
  CHECK(sh(g1) == "[batch,128]");
  CHECK(sh(ge) == "[batch,seq]");
  CHECK(sh(gnd) == "[batch,128]");
  CHECK(sh(gnd_b) == "[batch,128]");
  CHECK(sh(sc) == "[4,seq]");

  GraphBuilder bad;
  bad.op("Gather", {in(bad, "e", "10,4"), ints(bad, {12})}, {}, "oob");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("oob"));
}

TEST_CASE("shape inference: elementwise ops keep shape and dtype") {
  GraphBuilder b(17);
  Value* x = in(b, "x", "batch,seq,128");
  std::vector<Value*> outs;
  for (const char* op : {"Sqrt", "Reciprocal", "Erf", "Tanh", "Exp", "Log", "Neg", "Abs", "Floor", "Sin", "Cos", "Relu",
                         "Sigmoid", "Softmax", "LogSoftmax", "Identity", "Trilu"})
    outs.push_back(b.op(op, {x}));
  outs.push_back(b.op("CumSum", {x, ints(b, {1}, true)}));
  outs.push_back(b.op("Clip", {x, b.scalar("lo", 0.f), b.scalar("hi", 6.f)}));
  outs.push_back(b.op("Pow", {x, b.scalar("p", 3.f)}));
  outs.push_back(b.op("Mod", {x, b.scalar("m", 3.f)}, {I("fmod", 1)}));
  outs.push_back(b.op("Min", {x, b.scalar("mn", 3.f)}));
  Value* nan = b.op("IsNaN", {x});
  Value* notv = b.op("Not", {nan});
  Value* orv = b.op("Or", {nan, notv});
  Value* andv = b.op("And", {nan, in(b, "mask", "batch,1,seq,1", DType::Bool)});
  Node* drop = b.node("Dropout", {x}, 2);
  Value* ge = b.op("GreaterOrEqual", {x, b.scalar("z", 0.f)});
  Value* le = b.op("LessOrEqual", {x, b.scalar("z2", 0.f)});
  Value* gt = b.op("Greater", {x, b.scalar("z3", 0.f)});
  Value* half = b.op("Cast", {x}, {I("to", (int64_t)DType::Float16)});
  infer_shapes(b.graph());
  for (Value* v : outs) {
    INFO(v->name);
    CHECK(sh(v) == "[batch,seq,128]");
    CHECK(v->dtype == DType::Float);
  }
  for (Value* v : {nan, notv, orv, ge, le, gt}) {
    INFO(v->name);
    CHECK(sh(v) == "[batch,seq,128]");
    CHECK(v->dtype == DType::Bool);
  }
  CHECK(sh(andv) == "[batch,batch,seq,128]");
  CHECK(sh(drop->outputs[0]) == "[batch,seq,128]");
  CHECK(drop->outputs[1]->dtype == DType::Bool);
  CHECK(half->dtype == DType::Float16);

  GraphBuilder bad(17);
  bad.op("Softmax", {in(bad, "x", "2,3")}, {I("axis", 2)}, "sm");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("sm") && Catch::Contains("axis"));
}

TEST_CASE("shape inference: Conv, pooling and normalization") {
  GraphBuilder b(17);
  Value* img = in(b, "img", "n,3,224,224");
  Value* w = in(b, "w", "64,3,7,7");
  Value* conv = b.op("Conv", {img, w}, {Is("strides", {2, 2}), Is("pads", {3, 3, 3, 3})});
  Value* bn = b.op("BatchNormalization", {conv, in(b, "s", "64"), in(b, "bi", "64"), in(b, "m", "64"), in(b, "v", "64")});
  Value* pool = b.op("MaxPool", {bn}, {Is("kernel_shape", {3, 3}), Is("strides", {2, 2}), Is("pads", {1, 1, 1, 1})});
  Value* avg = b.op("AveragePool", {pool}, {Is("kernel_shape", {3, 3}), Is("strides", {2, 2}), I("ceil_mode", 1)});
  Value* same = b.op("Conv", {pool, in(b, "w2", "64,64,3,3")}, {Attribute::make_string("auto_pad", "SAME_UPPER")});
  Value* grouped = b.op("Conv", {pool, in(b, "dw", "64,1,3,3"), in(b, "db", "64")},
                        {I("group", 64), Is("pads", {1, 1, 1, 1})});
  Value* gap = b.op("GlobalAveragePool", {pool});
  Value* patch = b.op("Conv", {in(b, "px", "2,3,32,32"), in(b, "pw", "128,3,8,8")}, {Is("strides", {8, 8})});
  Value* seq_conv = b.op("Conv", {in(b, "audio", "batch,80,frames"), in(b, "cw", "128,80,3")}, {Is("pads", {1, 1})});
  Value* seq_conv2 = b.op("Conv", {seq_conv, in(b, "cw2", "128,128,3")}, {Is("pads", {1, 1}), Is("strides", {2})});
  Node* ln = b.node("LayerNormalization", {in(b, "h", "batch,seq,128"), in(b, "g", "128"), in(b, "beta", "128")}, 3,
                    {I("axis", -1)});
  infer_shapes(b.graph());
  CHECK(sh(conv) == "[n,64,112,112]");
  CHECK(sh(bn) == "[n,64,112,112]");
  CHECK(sh(pool) == "[n,64,56,56]");
  CHECK(sh(avg) == "[n,64,28,28]");
  CHECK(sh(same) == "[n,64,56,56]");
  CHECK(sh(grouped) == "[n,64,56,56]");
  CHECK(sh(gap) == "[n,64,1,1]");
  CHECK(sh(patch) == "[2,128,4,4]");
  CHECK(sh(seq_conv) == "[batch,128,frames]");
  CHECK(sh(seq_conv2) == "[batch,128,?]");  // (frames - 1) / 2 + 1 is not exact
  CHECK(sh(ln->outputs[0]) == "[batch,seq,128]");
  CHECK(sh(ln->outputs[1]) == "[batch,seq,1]");
  CHECK(ln->outputs[2]->dtype == DType::Float);

  GraphBuilder bad(17);
  bad.op("Conv", {in(bad, "x", "1,3,8,8"), in(bad, "w", "4,5,3,3")}, {}, "conv");
  REQUIRE_THROWS_WITH(infer_shapes(bad.graph()), Catch::Contains("conv"));
  GraphBuilder bad2(17);
  bad2.op("LayerNormalization", {in(bad2, "x", "2,128"), in(bad2, "g", "64")}, {}, "ln");
  REQUIRE_THROWS_WITH(infer_shapes(bad2.graph()), Catch::Contains("ln"));
}
