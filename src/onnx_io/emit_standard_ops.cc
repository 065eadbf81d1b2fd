// --emit standard mappings of the norm and rotary ops (emit_standard.h). Each checks
// the exact correspondence with the ONNX operator (onnx/onnx Operators.md, the
// reference implementations in onnx/reference/ops) and builds it.
//
//   fuseopt.RMSNorm(X, gamma; epsilon)          -> RMSNormalization-23(X, gamma; axis=-1, epsilon)
//   fuseopt.LayerNorm(X, gamma, beta?; epsilon) -> LayerNormalization-17(X, gamma, beta?; axis=-1, epsilon)
//   fuseopt.SkipLayerNorm(rms=1)                -> Add(X, bias)? + Add(., skip) [= Sum] +
//                                                  RMSNormalization-23 (+ Add beta)
//   fuseopt.SkipLayerNorm(rms=0)                -> stays fuseopt (see skip_check)
//   fuseopt.EmbedLayerNorm                      -> stays fuseopt (its body is the standard sequence)
//   fuseopt.RotaryEmbedding(X, cos, sin; ...)   -> RotaryEmbedding-23(X, cos', sin'; ...), a batch-1
//                                                  cache Expanded to [B, S, R/2] once per model
//   fuseopt.LayerNormLinear(rms=1, or a GELU)   -> [Add skip] + RMSNormalization-23 / LayerNormalization +
//                                                  MatMul (+ Transpose) + Add bias + Relu / Relu + Mul
//                                                  (relu2) / Gelu-20
//   fuseopt.FusedMatMul / GatedMatMul (GELU)    -> MatMul (+ Transpose, Mul alpha, Add bias) [+ Split] + Gelu-20
//                                                  [+ Add Reshape(residual, Shape(Y)): FusedMatMul input 3]
//   (the other variants stay fuseopt: their bodies are standard sequences already)
//
// Epsilon is always written: fuseopt's defaults (RMSNorm 1e-6, LayerNorm 1e-5) are not
// all ONNX's (1e-5). stash_type stays 1 (fp32 statistics), as fuseopt computes them.
#include <string>

#include "onnx_io/emit_standard.h"

namespace fuseopt {
namespace {

bool float_type(DType t) { return t == DType::Float || t == DType::Float16 || t == DType::BFloat16 || t == DType::Double; }

std::string float_input_check(const Node& n) {
  const Value* x = n.input(0);
  if (!x || !float_type(x->dtype)) return "X is not a float tensor of known type";
  return "";
}

int64_t need(int64_t v) { return v; }

bool is_gelu(const std::string& act) { return act == "gelu" || act == "gelu_tanh"; }
Value* gelu(EmitContext& c, Value* x, const std::string& act, const std::string& hint) {
  return c.node("Gelu", {x}, {Attribute::make_string("approximate", act == "gelu" ? "none" : "tanh")}, 1, hint)
      ->output(0);
}

// ---- RMSNorm ------------------------------------------------------------------------------
void rms_rewrite(EmitContext& c, Node* n) {
  Node* r = c.node("RMSNormalization", {n->input(0), n->input(1)},
                   {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", n->attr_float("epsilon", 1e-6f))},
                   1, n->name);
  c.take_over(n->output(0), r->output(0));
  c.rw.erase_node(n);
}
const EmitterRegistrar kRms({"RMSNorm", "RMSNormalization", [](const Graph&, const Node&) { return need(23); },
                             [](const Graph&, const Node& n) { return float_input_check(n); }, rms_rewrite});

// ---- LayerNorm (the fusion writes it only below opset 17) --------------------------------
void ln_rewrite(EmitContext& c, Node* n) {
  std::vector<Value*> in{n->input(0), n->input(1)};
  if (n->input(2)) in.push_back(n->input(2));
  Node* r = c.node("LayerNormalization", in,
                   {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", n->attr_float("epsilon", 1e-5f))},
                   1, n->name);
  c.take_over(n->output(0), r->output(0));
  c.rw.erase_node(n);
}
const EmitterRegistrar kLn({"LayerNorm", "LayerNormalization", [](const Graph&, const Node&) { return need(17); },
                            [](const Graph&, const Node& n) { return float_input_check(n); }, ln_rewrite});

// ---- SkipLayerNorm ---------------------------------------------------------------------
// The RMS variant is written as Add + RMSNormalization: exact (the same two sums in the
// same order as the function body, then the norm with fp32 statistics) and faster to run
// than the body, which spells the RMS statistics out in five primitives. The LayerNorm
// variant's body already is Add + LayerNormalization at opset >= 17, so a runtime runs
// the same ops either way; it stays fuseopt (fuserun keeps its one-kernel form).
std::string skip_check(const Graph&, const Node& n) {
  if (std::string w = float_input_check(n); !w.empty()) return w;
  if (n.attr_int("rms", 0) == 0)
    return "the LayerNormalization variant: its function body is Add + LayerNormalization at opset >= 17, "
           "the standard sequence itself, so runtimes run the same ops; kept fused for fuserun";
  return "";
}
void skip_rewrite(EmitContext& c, Node* n) {
  Value* x = n->input(0);
  if (Value* bias = n->input(4)) x = c.node("Add", {x, bias}, {}, 1, n->name + "_bias")->output(0);
  Node* sum = c.node("Add", {x, n->input(1)}, {}, 1, n->name + "_sum");
  Node* r = c.node("RMSNormalization", {sum->output(0), n->input(2)},
                   {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", n->attr_float("epsilon", 1e-5f))},
                   1, n->name);
  Value* y = r->output(0);
  if (Value* beta = n->input(3)) y = c.node("Add", {y, beta}, {}, 1, n->name + "_beta")->output(0);
  if (n->output(1)) c.take_over(n->output(1), sum->output(0));
  else if (n->input(0)->shape) c.rw.set_type(sum->output(0), n->input(0)->dtype, n->input(0)->shape);
  if (n->output(0) && n->output(0)->shape) c.rw.set_type(r->output(0), n->output(0)->dtype, n->output(0)->shape);
  c.take_over(n->output(0), y);
  c.rw.erase_node(n);
}
const EmitterRegistrar kSkip({"SkipLayerNorm", "Add + RMSNormalization",
                              [](const Graph&, const Node&) { return need(23); }, skip_check, skip_rewrite});

// ---- EmbedLayerNorm ----------------------------------------------------------------------
// Its function body is Gather + Add + LayerNormalization at opset >= 17: the standard
// sequence itself (ONNX Runtime's contrib EmbedLayerNormalization differs: fixed inputs,
// a mask-index output), so it stays fuseopt, like SkipLayerNorm's LayerNorm variant.
const EmitterRegistrar kEmbed({"EmbedLayerNorm", "Gather + Add + LayerNormalization",
                               [](const Graph&, const Node&) { return need(17); },
                               [](const Graph&, const Node&) {
                                 return std::string(
                                     "its function body is Gather + Add + LayerNormalization at opset >= 17, the "
                                     "standard sequence itself; kept fused for fuserun");
                               },
                               [](EmitContext&, Node*) {}});

// ---- LayerNormLinear --------------------------------------------------------------------
// Like SkipLayerNorm: the RMS variant is written as [Add(X, skip) = Sum] +
// RMSNormalization (+ Add beta) + MatMul (W, through a Transpose when transB) + Add bias +
// the activation (Relu; squared ReLU as Relu + Mul(r, r); or Gelu-20 with approximate
// none/tanh): the function body's
// sequence with the RMS statistics in the standard op instead of five primitives, so exact
// and faster to run. The LayerNormalization variant's body already is that standard
// sequence at opset >= 17; it stays fuseopt (fuserun's one-kernel form).
std::string lnl_check(const Graph&, const Node& n) {
  if (std::string w = float_input_check(n); !w.empty()) return w;
  const std::string act = n.attr_string("activation", "none");
  if (n.attr_int("rms", 0) == 0 && !is_gelu(act))
    return "the LayerNormalization variant without a GELU: its function body is Add + LayerNormalization + MatMul "
           "+ Add (+ Relu, or Relu + Mul for relu2) at opset >= 17, the standard sequence itself; kept fused for "
           "fuserun";
  if (act != "none" && !act.empty() && act != "relu" && act != "relu2" && act != "gelu" && act != "gelu_tanh")
    return "activation '" + act + "' has no standard spelling here";
  if (!n.input(3)) return "no weight input";
  return "";
}
int64_t lnl_opset(const Graph&, const Node& n) {  // RMSNormalization 23, else Gelu 20
  return n.attr_int("rms", 0) ? 23 : 20;
}
void lnl_rewrite(EmitContext& c, Node* n) {
  Value* z = n->input(0);
  Node* sum = nullptr;
  if (Value* skip = n->input(5)) {
    sum = c.node("Add", {z, skip}, {}, 1, n->name + "_sum");
    z = sum->output(0);
    if (n->input(0)->shape) c.rw.set_type(z, n->input(0)->dtype, n->input(0)->shape);
  }
  const bool rms = n->attr_int("rms", 0) != 0;
  const Attribute eps = Attribute::make_float("epsilon", n->attr_float("epsilon", 1e-5f));
  Value* y = nullptr;
  if (rms) {
    y = c.node("RMSNormalization", {z, n->input(1)}, {Attribute::make_int("axis", -1), eps}, 1, n->name + "_norm")
            ->output(0);
    if (Value* beta = n->input(2)) y = c.node("Add", {y, beta}, {}, 1, n->name + "_beta")->output(0);
  } else {
    std::vector<Value*> in{z, n->input(1)};
    if (n->input(2)) in.push_back(n->input(2));
    y = c.node("LayerNormalization", in, {Attribute::make_int("axis", -1), eps}, 1, n->name + "_norm")->output(0);
  }
  if (n->input(0)->shape) c.rw.set_type(y, n->input(0)->dtype, n->input(0)->shape);
  Value* w = n->input(3);
  if (n->attr_int("transB", 0))
    w = c.node("Transpose", {w}, {Attribute::make_ints("perm", {1, 0})}, 1, n->name + "_wT")->output(0);
  Value* a = c.node("MatMul", {y, w}, {}, 1, n->name)->output(0);
  if (Value* bias = n->input(4)) a = c.node("Add", {a, bias}, {}, 1, n->name + "_bias")->output(0);
  const std::string act = n->attr_string("activation", "none");
  if (act == "relu") a = c.node("Relu", {a}, {}, 1, n->name + "_act")->output(0);
  if (act == "relu2") {  // squared ReLU: ONNX has no op for it; Relu + Mul(r, r) as the function body
    Value* r = c.node("Relu", {a}, {}, 1, n->name + "_relu")->output(0);
    a = c.node("Mul", {r, r}, {}, 1, n->name + "_act")->output(0);
  }
  if (is_gelu(act)) a = gelu(c, a, act, n->name + "_act");
  if (sum && n->output(1)) c.take_over(n->output(1), sum->output(0));
  c.take_over(n->output(0), a);
  c.rw.erase_node(n);
}
const EmitterRegistrar kLnl({"LayerNormLinear", "norm + MatMul", lnl_opset, lnl_check, lnl_rewrite});

// ---- FusedMatMul / GatedMatMul with a GELU ---------------------------------------------
// The same rule as for the RMS norms: where the function body spells out what a standard op
// computes (the erf or tanh GELU, five to eight primitives), the body's sequence is written
// with Gelu-20 (approximate none / tanh: the same formulas) instead. Other activations
// (none, relu, tanh, relu2 as Relu + Mul(r, r), SiLU as x * Sigmoid(x)) have bodies that are
// standard sequences already (ONNX has no squared-ReLU op to write instead): those nodes stay
// fuseopt (fuserun keeps the cuBLASLt epilogue form).
std::string fmm_check(const Graph&, const Node& n) {
  if (std::string w = float_input_check(n); !w.empty()) return w;
  const std::string act = n.attr_string("activation", "none");
  if (!is_gelu(act))
    return "activation '" + (act.empty() ? std::string("none") : act) +
           "': its function body (MatMul + Add + Relu / Tanh / Relu + Mul) is the standard sequence itself; kept "
           "fused for fuserun";
  const Value* b = n.input(1);
  if (n.attr_int("transB", 0) && (!b || !b->shape || b->shape->size() != 2)) return "transB of a weight that is not 2-D";
  return "";
}
void fmm_rewrite(EmitContext& c, Node* n) {
  Value* b = n->input(1);
  if (n->attr_int("transB", 0)) b = c.node("Transpose", {b}, {}, 1, n->name + "_wT")->output(0);
  Value* y = c.node("MatMul", {n->input(0), b}, {}, 1, n->name)->output(0);
  const float alpha = n->attr_float("alpha", 1.0f);
  if (alpha != 1.0f) y = c.node("Mul", {y, c.scalar(n->input(0)->dtype, alpha, "alpha")}, {}, 1, n->name + "_alpha")->output(0);
  if (Value* bias = n->input(2)) y = c.node("Add", {y, bias}, {}, 1, n->name + "_bias")->output(0);
  y = gelu(c, y, n->attr_string("activation", "gelu"), n->name + "_gelu");
  if (Value* res = n->input(3)) {
    // The residual (Y's element count, read row-major as Y's shape) after the activation, as
    // the function body adds it; the Reshape only when its recorded shape is not Y's.
    Value* out = n->output(0);
    if (!res->shape || !out->shape || *res->shape != *out->shape) {
      Value* shape = c.node("Shape", {y}, {}, 1, n->name + "_yshape")->output(0);
      res = c.node("Reshape", {res, shape}, {}, 1, n->name + "_residual")->output(0);
    }
    y = c.node("Add", {y, res}, {}, 1, n->name + "_residual_add")->output(0);
  }
  c.take_over(n->output(0), y);
  c.rw.erase_node(n);
}
const EmitterRegistrar kFmm({"FusedMatMul", "MatMul + Gelu", [](const Graph&, const Node&) { return need(20); },
                             fmm_check, fmm_rewrite});

std::string gmm_check(const Graph&, const Node& n) {
  if (std::string w = float_input_check(n); !w.empty()) return w;
  const std::string act = n.attr_string("activation", "silu");
  if (!is_gelu(act))
    return "activation '" + act +
           "': its function body (MatMul + Split + act(gate) * up, SiLU as x * Sigmoid(x)) is a standard sequence "
           "already; kept fused for fuserun";
  return "";
}
void gmm_rewrite(EmitContext& c, Node* n) {
  Value* p = c.node("MatMul", {n->input(0), n->input(1)}, {}, 1, n->name)->output(0);
  if (Value* bias = n->input(2)) p = c.node("Add", {p, bias}, {}, 1, n->name + "_bias")->output(0);
  Node* split = c.node("Split", {p}, {Attribute::make_int("axis", -1), Attribute::make_int("num_outputs", 2)}, 2,
                       n->name + "_halves");
  Value* g = gelu(c, split->output(0), n->attr_string("activation", "gelu"), n->name + "_gelu");
  Value* y = c.node("Mul", {g, split->output(1)}, {}, 1, n->name + "_gate")->output(0);
  c.take_over(n->output(0), y);
  c.rw.erase_node(n);
}
const EmitterRegistrar kGmm({"GatedMatMul", "MatMul + Split + Gelu", [](const Graph&, const Node&) { return need(20); },
                             gmm_check, gmm_rewrite});

// ---- RotaryEmbedding -------------------------------------------------------------------
// fuseopt.RotaryEmbedding is ONNX's opset-23 op plus one extension: cos/sin caches of batch
// 1 broadcast over X's batch. The standard op wants [B, S, R/2] (ONNX Runtime checks the
// batch), so such a cache is Expanded to [B, 1, 1] first, once per cache and batch size.
// num_heads goes only with a 3-D X (the spec's "must be provided when input is 3D").
std::string rotary_check(const Graph&, const Node& n) {
  if (std::string w = float_input_check(n); !w.empty()) return w;
  const Value *x = n.input(0), *cs = n.input(1), *sn = n.input(2);
  if (!cs || !sn) return "cos/sin caches missing";
  if (n.input(3)) return "position_ids input: the fusion never writes it; not mapped";
  if (!x->shape || (x->shape->size() != 3 && x->shape->size() != 4)) return "X rank is not known to be 3 or 4";
  if (x->shape->size() == 3 && n.attr_int("num_heads", 0) <= 0) return "3-D X without num_heads";
  if (n.attr_int("rotated_heads", 0) > 0 && (x->shape->size() != 3 || !(*x->shape)[2].known()))
    return "rotated_heads needs a 3-D X of known width";
  if (!cs->shape || cs->shape->size() != 3 || !sn->shape || sn->shape->size() != 3)
    return "cos/sin caches are not known to be [B or 1, S, R/2]";
  if (cs->dtype != x->dtype || sn->dtype != x->dtype) return "cos/sin dtype differs from X's (the standard op has one T)";
  return "";
}

std::string dim_key(const Dim& d) {
  if (d.known()) return std::to_string(d.value);
  if (!d.symbol.empty()) return "s:" + d.symbol;
  return "";
}

Value* batch_cache(EmitContext& c, Value* cache, Value* x) {
  const Dim& b = (*x->shape)[0];
  const Dim& cb = (*cache->shape)[0];
  if (cb == b) return cache;  // already [B, S, R/2]
  std::string bk = dim_key(b);
  std::string key = "rotary_cache," + cache->name + "," + (bk.empty() ? "x:" + x->name : bk);
  if (auto it = c.shared.find(key); it != c.shared.end()) return it->second;
  Node* target = c.node("Concat", {c.dim_1d(x, 0), c.int64s({1, 1})}, {Attribute::make_int("axis", 0)}, 1,
                        cache->name + "_batch_shape");
  c.rw.set_type(target->output(0), DType::Int64, Shape{Dim::of(3)});
  Node* e = c.node("Expand", {cache, target->output(0)}, {}, 1, cache->name + "_batch");
  Shape s = *cache->shape;
  s[0] = b;
  c.rw.set_type(e->output(0), cache->dtype, s);
  return c.shared[key] = e->output(0);
}

void rotary_rewrite(EmitContext& c, Node* n) {
  Value* x = n->input(0);
  Value* cs = batch_cache(c, n->input(1), x);
  Value* sn = batch_cache(c, n->input(2), x);
  std::vector<Attribute> attrs;
  if (n->attr_int("interleaved", 0)) attrs.push_back(Attribute::make_int("interleaved", 1));
  if (int64_t r = n->attr_int("rotary_embedding_dim", 0); r > 0)
    attrs.push_back(Attribute::make_int("rotary_embedding_dim", r));
  const int64_t heads = n->attr_int("num_heads", 0);
  const int64_t rot = n->attr_int("rotated_heads", 0);
  if (x->shape->size() != 3 || rot <= 0 || rot >= heads) {
    if (x->shape->size() == 3) attrs.push_back(Attribute::make_int("num_heads", heads));
    Node* r = c.node("RotaryEmbedding", {x, cs, sn}, std::move(attrs), 1, n->name);
    c.take_over(n->output(0), r->output(0));
    c.rw.erase_node(n);
    return;
  }
  // Packed [Q | K | V] with rotated_heads: the standard op rotates the first rot·D
  // columns (num_heads = rot), the rest is concatenated back unchanged.
  const int64_t d = (*x->shape)[2].value / heads;
  const int64_t cut = rot * d;
  auto slice = [&](int64_t from, int64_t to, const std::string& hint, int64_t width) {
    Node* sl = c.node("Slice", {x, c.int64s({from}), c.int64s({to}), c.int64s({2})}, {}, 1, hint);
    Shape sh = *x->shape;
    sh[2] = Dim::of(width);
    c.rw.set_type(sl->output(0), x->dtype, sh);
    return sl->output(0);
  };
  Value* head = slice(0, cut, n->name + "_rotated", cut);
  Value* rest = slice(cut, (*x->shape)[2].value, n->name + "_passed", (*x->shape)[2].value - cut);
  attrs.push_back(Attribute::make_int("num_heads", rot));
  Node* r = c.node("RotaryEmbedding", {head, cs, sn}, std::move(attrs), 1, n->name);
  c.rw.set_type(r->output(0), x->dtype, *head->shape);
  Node* cat = c.node("Concat", {r->output(0), rest}, {Attribute::make_int("axis", 2)}, 1, n->name + "_packed");
  c.take_over(n->output(0), cat->output(0));
  c.rw.erase_node(n);
}
const EmitterRegistrar kRotary({"RotaryEmbedding", "RotaryEmbedding",
                                [](const Graph&, const Node&) { return need(23); }, rotary_check, rotary_rewrite});

}  // namespace
}  // namespace fuseopt
