// ONNX function body of fuseopt.Attention (see kernels/cpu/fused_attention.cc
// for the semantics). The body follows the node's variant, chosen as an IR-10
// overload: packed QKV or separate Q/K/V, grouped K/V heads, attn_bias float
// (added) or bool (keep where true), key-padding mask, causal, KV cache (past ->
// present), logit soft-capping (softcap > 0), a sliding window (window > 0), per-head sinks
// (GPT-OSS: Concat the sink column, Softmax, Slice it off again). Head counts,
// scale and mask_filter_value are read through attribute references, so one
// body serves every layer of a variant. Needs a default-domain opset >= 13
// (the Attention fusion does not fire below that).
#include <limits>
#include <string>
#include <vector>

#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

using fnbody::FnBuilder;

bool has_in(const Node& n, size_t i) { return n.input(i) != nullptr; }

std::string attention_overload(const Graph& g, const Node& n) {
  std::string ov = has_in(n, 1) ? "qkv_sep" : "qkv_packed";
  if (n.attr_int("kv_num_heads", n.attr_int("num_heads", 0)) != n.attr_int("num_heads", 0)) ov += "_gqa";
  if (Value* b = n.input(4)) ov += b->dtype == DType::Bool ? "_boolbias" : "_bias";
  if (has_in(n, 3)) ov += "_mask";
  if (n.attr_int("causal", 0)) ov += "_causal";
  if (n.attr_int("window", 0) > 0) ov += "_window";
  if (n.attr_float("softcap", 0.0f) > 0.0f) ov += "_softcap";
  if (has_in(n, 5)) ov += "_past";
  if (has_in(n, 7)) ov += "_sinks";
  if (n.attr_int("masked_rows_zero", 0)) ov += "_rows0";
  return ov + fnbody::dtype_suffix(g, n);  // before opset 15 the scalar constants are Cast to the element type
}

// A rank-0 int64 constant read from an int attribute of the node.
std::string int_attr_scalar(FnBuilder& f, const std::string& attr) {
  return f.node("Constant", {}, "", {FnBuilder::attr_ref("value_int", attr, onnx::AttributeProto::INT)});
}

std::string int_scalar(FnBuilder& f, int64_t v) {
  return f.node("Constant", {}, "", {FnBuilder::attr_int("value_int", v)});
}

std::string unsqueeze(FnBuilder& f, const std::string& x, const std::vector<int64_t>& axes) {
  return f.node("Unsqueeze", {x, f.ints(axes)});
}

onnx::AttributeProto perm(const std::vector<int64_t>& p) {
  onnx::AttributeProto a;
  a.set_name("perm");
  a.set_type(onnx::AttributeProto::INTS);
  for (auto v : p) a.add_ints(v);
  return a;
}

// Shape(x)[from:to], a 1-D int64.
std::string dims(FnBuilder& f, const std::string& x, int64_t from, int64_t to) {
  return f.node("Slice", {f.node("Shape", {x}), f.ints({from}), f.ints({to})});
}

std::string concat0(FnBuilder& f, const std::vector<std::string>& parts) {
  return f.node("Concat", parts, "", {FnBuilder::attr_int("axis", 0)});
}

// The Reshapes below spell every target dim out instead of writing -1: with a
// batch (or sequence) of 0 the product of the other dims is 0 and ONNX refuses
// a -1 there ("Product cannot be 0 in combination with -1"; mutate_models.py
// seed 5 m287, batch 0, came out invalid).

// [B, S, heads*D] -> [B, S, heads, D] with `heads` from an attribute.
std::string split_heads(FnBuilder& f, const std::string& x, const std::string& heads_attr) {
  std::string heads = unsqueeze(f, int_attr_scalar(f, heads_attr), {0});
  std::string d = f.node("Div", {dims(f, x, 2, 3), heads});
  return f.node("Reshape", {x, concat0(f, {dims(f, x, 0, 2), heads, d})});
}

onnx::FunctionProto build_attention(const Graph& g, const Node& n, const std::string& ov) {
  const bool past = ov.find("_past") != std::string::npos;
  const bool sinks = ov.find("_sinks") != std::string::npos;
  std::vector<std::string> ins = {"query", "key", "value", "mask", "attn_bias"}, outs = {"Y"};
  if (past || sinks) ins.insert(ins.end(), {"past_key", "past_value"});  // positional: sinks is input 7
  if (past) outs.insert(outs.end(), {"present_key", "present_value"});
  if (sinks) ins.push_back("sinks");
  FnBuilder f("Attention", ov, ins, outs, fnbody::attr_names(n), g.opset(""), fnbody::elem_type(n));
  const bool packed = !has_in(n, 1);
  const bool gqa = ov.find("_gqa") != std::string::npos;
  std::string q = "query", k = "key", v = "value";
  if (packed) {
    // Widths from the packed tensor: dh = W / (H + 2 Hkv); Q | K | V along the last axis.
    std::string h = int_attr_scalar(f, "num_heads");
    std::string hkv = gqa ? int_attr_scalar(f, "kv_num_heads") : h;
    std::string width = f.node("Gather", {f.node("Shape", {"query"}), int_scalar(f, -1)});
    std::string parts = f.node("Add", {h, f.node("Mul", {hkv, int_scalar(f, 2)})});
    std::string dh = f.node("Div", {width, parts});
    std::string qw = f.node("Mul", {dh, h});
    std::string kw = f.node("Add", {qw, f.node("Mul", {dh, hkv})});
    std::string axes = f.ints({-1});
    auto u = [&](const std::string& s) { return unsqueeze(f, s, {0}); };
    q = f.node("Slice", {"query", f.ints({0}), u(qw), axes});
    k = f.node("Slice", {"query", u(qw), u(kw), axes});
    v = f.node("Slice", {"query", u(kw), u(width), axes});
  }
  const std::string kv_attr = gqa ? "kv_num_heads" : "num_heads";
  std::string q4 = f.node("Transpose", {split_heads(f, q, "num_heads")}, "", {perm({0, 2, 1, 3})});
  std::string k4 = split_heads(f, k, kv_attr);  // [B, Skv, Hkv, Dh]
  std::string v4 = split_heads(f, v, kv_attr);
  if (past) {
    // present = past ++ new along the sequence ([B, Hkv, S, D]); attention reads the present.
    auto append = [&](const std::string& x, const std::string& p, const std::string& out) {
      std::string now = f.node("Transpose", {x}, "", {perm({0, 2, 1, 3})});
      f.node("Concat", {p, now}, out, {FnBuilder::attr_int("axis", 2)});
      return f.node("Transpose", {out}, "", {perm({0, 2, 1, 3})});
    };
    k4 = append(k4, "past_key", "present_key");
    v4 = append(v4, "past_value", "present_value");
  }
  if (gqa) {
    // Query head h reads kv head h / rep: repeat each kv head rep times in place.
    std::string rep = f.node("Div", {int_attr_scalar(f, "num_heads"), int_attr_scalar(f, "kv_num_heads")});
    std::string target = f.node("Concat", {f.ints({1, 1, 1}), unsqueeze(f, rep, {0}), f.ints({1})}, "",
                                {FnBuilder::attr_int("axis", 0)});
    std::string heads = unsqueeze(f, int_attr_scalar(f, "num_heads"), {0});
    auto repeat = [&](const std::string& x) {
      std::string e = f.node("Expand", {unsqueeze(f, x, {3}), target});  // [B, Skv, Hkv, rep, Dh]
      return f.node("Reshape", {e, concat0(f, {dims(f, e, 0, 2), heads, dims(f, e, 4, 5)})});  // [B, Skv, H, Dh]
    };
    k4 = repeat(k4);
    v4 = repeat(v4);
  }
  std::string kt = f.node("Transpose", {k4}, "", {perm({0, 2, 3, 1})});  // [B, H, Dh, Skv]
  std::string vt = f.node("Transpose", {v4}, "", {perm({0, 2, 1, 3})});  // [B, H, Skv, Dv]
  std::string s = f.node("Mul", {f.node("MatMul", {q4, kt}), f.scalar_attr("scale", "query")});
  if (ov.find("_softcap") != std::string::npos) {
    // Soft-capping after the scale, before bias and masks (ONNX Attention-23's order).
    std::string cap = f.scalar_attr("softcap", "query");
    s = f.node("Mul", {f.node("Tanh", {f.node("Div", {s, cap})}), cap});
  }
  if (ov.find("_boolbias") != std::string::npos) {
    s = f.node("Where", {"attn_bias", s, f.scalar_attr("mask_filter_value", "query")});
  } else if (ov.find("_bias") != std::string::npos) {
    s = f.node("Add", {s, "attn_bias"});
  }
  if (ov.find("_mask") != std::string::npos) {
    onnx::AttributeProto to = FnBuilder::attr_int("to", onnx::TensorProto::BOOL);
    std::string keep = unsqueeze(f, f.node("Cast", {"mask"}, "", {to}), {1, 2});  // [B, 1, 1, Skv]
    s = f.node("Where", {keep, s, f.scalar_attr("mask_filter_value", "query")});
  }
  const bool causal = ov.find("_causal") != std::string::npos;
  const bool window = ov.find("_window") != std::string::npos;
  if (causal || window) {
    // Each query's position among the keys (bottom-right: i + S_kv - S_q) against each key's.
    std::string shp = f.node("Shape", {s});
    std::string sq = f.node("Gather", {shp, int_scalar(f, 2)});
    std::string skv = f.node("Gather", {shp, int_scalar(f, 3)});
    std::string zero = int_scalar(f, 0), one = int_scalar(f, 1);
    std::string rows = f.node("Add", {f.node("Range", {zero, sq, one}), f.node("Sub", {skv, sq})});
    std::string cols = f.node("Range", {zero, skv, one});
    std::string q_pos = unsqueeze(f, rows, {1});  // [S, 1]
    std::string neg_inf = f.scalar(-std::numeric_limits<float>::infinity(), "query");
    if (causal) s = f.node("Where", {f.node("LessOrEqual", {cols, q_pos}), s, neg_inf});  // [S, Skv]
    if (window)  // key j stays visible while q_pos - j < window, i.e. j > q_pos - window
      s = f.node("Where", {f.node("Greater", {cols, f.node("Sub", {q_pos, int_attr_scalar(f, "window")})}), s, neg_inf});
  }
  std::string p;
  if (sinks) {
    // GPT-OSS's form: the sink logit of each head as one more column [B, H, S, 1], the softmax
    // over S_kv + 1 columns, the sink's column sliced off again. sinks may be float32 in a
    // half model: brought to the scores' type first (CastLike; before opset 15 a Cast to the
    // element type, which the overload's dtype suffix tells apart).
    std::string sk = f.opset() >= 15
                         ? f.node("CastLike", {"sinks", "query"})
                         : f.node("Cast", {"sinks"}, "", {FnBuilder::attr_int("to", static_cast<int64_t>(fnbody::elem_type(n)))});
    sk = f.node("Reshape", {sk, f.ints({1, -1, 1, 1})});
    std::string col = f.node("Expand", {sk, concat0(f, {dims(f, s, 0, 3), f.ints({1})})});
    std::string all = f.node("Concat", {s, col}, "", {FnBuilder::attr_int("axis", -1)});
    p = f.node("Softmax", {all}, "", {FnBuilder::attr_int("axis", -1)});
    p = f.node("Slice", {p, f.ints({0}), dims(f, s, 3, 4), f.ints({-1})});
  } else {
    p = f.node("Softmax", {s}, "", {FnBuilder::attr_int("axis", -1)});
  }
  // masked_rows_zero: the exporter's own guard Where(IsNaN(P), 0, P) (a row of -inf scores is
  // NaN after Softmax), kept as is so ONNX Runtime running the body gives what the export gave.
  if (ov.find("_rows0") != std::string::npos)
    p = f.node("Where", {f.node("IsNaN", {p}), f.scalar(0.0f, "query"), p});
  std::string o = f.node("Transpose", {f.node("MatMul", {p, vt})}, "", {perm({0, 2, 1, 3})});
  std::string width = f.node("Mul", {dims(f, o, 2, 3), dims(f, o, 3, 4)});  // H * Dv
  f.node("Reshape", {o, concat0(f, {dims(f, o, 0, 2), width})}, "Y");
  return f.take();
}

const FunctionOverloadRegistrar kOverload("fuseopt", "Attention", attention_overload);
const FunctionBodyRegistrar kBody("fuseopt", "Attention",
                                  [](const Graph& g, const std::vector<const Node*>& nodes,
                                     std::vector<onnx::FunctionProto>& out) {
                                    fnbody::per_overload(g, nodes, out, attention_overload, build_attention);
                                  });

}  // namespace
}  // namespace fuseopt
