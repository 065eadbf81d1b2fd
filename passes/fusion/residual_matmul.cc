// The residual Add of a pre-LN layer moved into the GEMM that produces one of its summands
// (GPT-2, Llama, ViT, CLIP, ...: the attention out-projection and the second FFN GEMM of every
// layer, whose output is added to the residual stream that the next norm reads and that goes on):
//
//   h    = FusedMatMul(A, W, bias?){activation = none}           (no residual yet)
//        | MatMul(A, W)                                           (W a constant [K, N]: a GEMM without
//                                                                  bias, Llama's o_proj / down_proj, which
//                                                                  the FusedMatMul fusion leaves alone)
//   x    = h | Reshape(h, shape)                                  (last dim kept: GPT-2's Conv1D /
//                                                                  dynamo's 2-D Gemm view)
//   root = fuseopt.LayerNormLinear(x, gamma, beta?, W2, b2?, skip = r) -> Y, Sum   (Sum read)
//        | fuseopt.SkipLayerNorm(x, r, gamma, beta?){rms} -> Y, Sum                  (Sum read)
//          (either summand order: x may be the skip input and r the X input)
// => s    = FusedMatMul(A, W, bias?, residual = r) | Reshape(FusedMatMul(...), shape)   (s = the old Sum)
//    root = fuseopt.LayerNormLinear(s, gamma, beta?, W2, b2?) -> Y
//         | LayerNormalization(s, gamma, beta?) (fuseopt.LayerNorm before opset 17) | fuseopt.RMSNorm(s, gamma)
//
// The second root form: a residual Add that no norm holds, a standard Add of the GEMM side and a
// tensor of exactly its shape (OPT, whose Add is Reshaped before the next norm; the parallel-residual
// blocks of GPT-J, GPT-NeoX, Falcon, Phi, CodeGen, whose `attn_out + mlp_out` Add has two GEMM
// summands; a last layer's Add before a final norm that does not take it):
//
//   root = Add(x, r) | Add(r, x)                                  (x = h | Reshape(h) as above)
// => FusedMatMul(A, W, bias?, residual = r) | Reshape(FusedMatMul(...), shape)   (the Add's output:
//                                                                  its readers, a graph output's name)
//
// An Add of two GEMM outputs gives the first that passes the checks the other as its residual;
// that one stays a plain GEMM (reassociating `(attn + mlp) + x` into two residual GEMMs would
// change the order of the additions). Bias-like operands (a [D] vector, a [1, S, D] table) are
// broadcast: rule 3 refuses them, and FusedMatMul (300) took the constant biases long before.
//
// On the GPU the residual becomes the GEMM's C matrix (cuBLASLt: D = alpha·A·B + bias + C): the
// GEMM writes the Sum directly and the norm reads one tensor instead of two and writes no Sum.
// Numerics: the fp32 accumulator + bias + residual rounded once to the storage type, where the
// unfused graph rounds h and then the sum (one rounding fewer; in fp32 on the CPU the same
// additions in the same order, so the same bits).
//
// Order 620: after LayerNormLinear (600) has made the norms that read the Sum's rows GEMM
// prologues (it decides which norm is a LayerNormLinear and which SkipLayerNorm stays), and after
// FusedMatMulLayerNorm (350), which takes the post-LN form (Sum unused) whole; before
// TiedEmbedding (650), which only swaps weights. An Add still standing at 620 is one no other
// fusion wanted: SkipLayerNorm (200) and EmbedLayerNorm (210) have taken the Adds under a norm,
// FusedMatMul (300) the bias Adds, AddRelu (310) the Adds under a Relu, Attention (500) the mask
// Adds, and no later pass reads an Add.
//
// Legality: rule 1 (h, and the Reshape's output, read only by the norm or the Add, not graph outputs; the
// norm's Sum is read — else there is nothing to move: a post-LN norm is left alone, and
// FusedMatMulLayerNorm has taken it where it could; the two summands are different values),
// rule 3 (the residual has exactly the GEMM side's shape — same rank,
// each dim the same static value or the same named symbol — no broadcasting: SkipLayerNorm's
// [1, S, D] position tables are refused; SkipLayerNorm's own bias input has no place; an RMS
// SkipLayerNorm with beta has no plain-norm form), rule 4 (a Reshape that keeps the GEMM's last
// dim N), rule 5 (GEMM output and residual one known float dtype). The GEMM must have activation
// none: the op adds the residual after any activation, but the cuBLASLt epilogues add their C
// before it, so an activated GEMM would gain nothing on the GPU.
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

namespace cap {
const ValueCapture residual{"residual"}, summand{"summand"};
const NodeCapture fmm{"fmm"}, reshape{"reshape"};
}  // namespace cap

bool is_fused(const Node* n, const char* op) { return n && n->domain == "fuseopt" && n->op_type == op; }

// A standard two-input Add (the second root form).
bool is_plain_add(const Node* n) {
  return n && n->is("Add") && n->inputs.size() == 2 && n->input(0) && n->input(1) && n->outputs.size() == 1;
}

// The input slots of the root's two summands (X, skip / the Add's A, B), or false when `n` is not
// a candidate root.
bool summands_of(const Node* n, size_t* x, size_t* skip) {
  if (is_plain_add(n)) {
    *x = 0, *skip = 1;
    return true;
  }
  if (is_fused(n, "LayerNormLinear") && n->input(5)) {
    *x = 0, *skip = 5;
    return true;
  }
  if (is_fused(n, "SkipLayerNorm") && n->input(1)) {
    *x = 0, *skip = 1;
    return true;
  }
  return false;
}

bool is_read(const Value* v) { return v && (v->is_graph_output || v->num_uses() > 0); }

// One way to read the root: `summand` comes from the GEMM `fmm` (through `reshape`), `residual` is
// the other summand.
struct Side {
  Node* fmm = nullptr;
  Node* reshape = nullptr;
  Value* summand = nullptr;
  Value* residual = nullptr;
};

// A plain MatMul the fused op can take: B a constant 2-D [K, N] (as the FusedMatMul fusion wants).
bool is_plain_gemm(const Node* p) {
  if (!p || !p->is("MatMul") || p->inputs.size() != 2 || !p->input(0) || !p->input(1)) return false;
  const Value* w = p->input(1);
  return w->const_data && w->const_data->dims.size() == 2;
}

// Structural: `s` is produced by a FusedMatMul without a residual (or a plain MatMul), directly or
// through one Reshape. (One with a residual already produces a Sum: the residual stream itself, which a
// later norm adds to the next GEMM's output — not a candidate, and no rejection in the report.)
std::optional<Side> side_of(Value* s, Value* r) {
  Node* p = s ? s->producer : nullptr;
  Side side;
  side.summand = s;
  side.residual = r;
  if (p && p->is("Reshape")) {
    side.reshape = p;
    p = p->input(0) ? p->input(0)->producer : nullptr;
  }
  if (!(is_fused(p, "FusedMatMul") && !p->input(3)) && !is_plain_gemm(p)) return std::nullopt;
  side.fmm = p;
  return side;
}

class ResidualMatMulFusion : public FusionPass {
 public:
  std::string name() const override { return "ResidualMatMul"; }
  std::string description() const override {
    return "residual Add (LayerNormLinear skip / SkipLayerNorm with its Sum read, or a standard Add of two "
           "same-shape tensors) into the FusedMatMul (or constant-weight MatMul) producing one summand -> "
           "FusedMatMul(A, W, bias?, residual) (+ the plain norm)";
  }

  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r;
    size_t xi = 0, si = 0;
    if (!summands_of(root, &xi, &si)) {
      r.reason = "not a LayerNormLinear with skip, a SkipLayerNorm or a two-input Add";
      return r;
    }
    // Every pre-LN model's final norm (and every post-LN norm FusedMatMulLayerNorm left) has no
    // Sum read: not a candidate, so the report names no rejection for it.
    if (!is_plain_add(root) && !is_read(root->output(1))) {
      r.reason = root->label() + ": its Sum is not read (the residual stream ends there): nothing to move";
      return r;
    }
    Value* x = root->input(xi);
    Value* skip = root->input(si);
    std::vector<Side> sides;
    for (auto s : {side_of(x, skip), side_of(skip, x)})
      if (s) sides.push_back(*s);
    if (sides.empty()) {
      // An Add of anything else (a mask, a position table, two activations) is no candidate either.
      r.reason = root->label() + ": neither summand comes from a FusedMatMul or a constant-weight MatMul";
      return r;
    }
    // Both summands GEMMs: the first that passes the checks, else the first (its reason goes
    // to the report).
    const Side* pick = &sides[0];
    for (const Side& s : sides) {
      Match probe = make_match(root, s);
      if (check_side(probe)) {
        pick = &s;
        break;
      }
    }
    r.match = make_match(root, *pick);
    return r;
  }

  // Rule 1 for h and the Reshape's output is check_side's own (it lets Shape nodes read them).
  std::vector<const Value*> kept_outputs(const Match& m) const override {
    return {m.value(cap::fmm), m.value(cap::summand)};
  }

  // A Sum that is a graph output or read by a subgraph keeps its name: it moves to the new GEMM
  // (or Reshape) output.
  Status check(const Graph&, const Match& m) const override { return check_side(m); }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* root = m.root;
    Node* fmm = m.node(cap::fmm);
    Node* reshape = m.node(cap::reshape);
    Value* res = m.value(cap::residual);
    const bool add_root = is_plain_add(root);
    Value* sum = root->output(add_root ? 0 : 1);

    std::vector<Value*> in{fmm->input(0), fmm->input(1), fmm->input(2), res};
    std::vector<Attribute> attrs = fmm->attrs;
    if (fmm->is("MatMul"))
      attrs = {Attribute::make_int("transB", 0), Attribute::make_float("alpha", 1.0f),
               Attribute::make_string("activation", "none")};
    Node* f = rw.create_node("fuseopt", "FusedMatMul", in, attrs, 1, fmm->name);
    rw.set_type(f->output(0), fmm->output(0)->dtype, fmm->output(0)->shape);
    Value* s = f->output(0);
    if (reshape) {
      Node* rs = rw.create_node("", "Reshape", {s, reshape->input(1)}, reshape->attrs, 1, reshape->name);
      rw.set_type(rs->output(0), reshape->output(0)->dtype, reshape->output(0)->shape);
      s = rs->output(0);
    }

    // Shape readers of h or of the summand read the new values (the same shapes, proven below).
    auto reshape_readers = [&](Value* from, Value* to) {
      for (Node* c : from->consumers())
        if (c->is("Shape"))
          for (size_t i = 0; i < c->inputs.size(); ++i)
            if (c->inputs[i] == from) rw.set_input(c, i, to);
    };
    std::vector<Node*> replaced{root};
    if (reshape) replaced.push_back(reshape);
    replaced.push_back(fmm);

    if (add_root) {
      // The GEMM (or the Reshape after it) now writes the Add's output: its readers and, for a
      // graph output, its name move over.
      rw.replace_all_uses(sum, s);
      reshape_readers(fmm->output(0), f->output(0));
      if (reshape) reshape_readers(m.value(cap::summand), s);
      rw.mark_fused(f, name(), {root, fmm});
      rw.erase_dead(replaced);
      return;
    }

    Node* norm = nullptr;
    if (root->op_type == "LayerNormLinear") {
      std::vector<Value*> nin{s, root->input(1), root->input(2), root->input(3), root->input(4)};
      while (!nin.empty() && !nin.back()) nin.pop_back();
      norm = rw.create_node("fuseopt", "LayerNormLinear", nin, root->attrs, 1, root->name);
    } else {
      const bool rms = root->attr_int("rms", 0) != 0;
      const float eps = root->attr_float("epsilon", 1e-5f);  // the SkipLayerNorm kernels' default either way
      std::vector<Value*> nin{s, root->input(2)};
      if (!rms && root->input(3)) nin.push_back(root->input(3));
      if (rms)
        norm = rw.create_node("fuseopt", "RMSNorm", nin, {Attribute::make_float("epsilon", eps)}, 1, root->name);
      else if (rw.opset("") >= 17)
        norm = rw.create_node("", "LayerNormalization", nin,
                              {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", eps)}, 1, root->name);
      else
        norm = rw.create_node("fuseopt", "LayerNorm", nin, {Attribute::make_float("epsilon", eps)}, 1, root->name);
    }
    rw.set_type(norm->output(0), root->output(0)->dtype, root->output(0)->shape);

    rw.replace_all_uses(root->output(0), norm->output(0));
    rw.replace_all_uses(sum, s);
    reshape_readers(fmm->output(0), f->output(0));
    if (reshape) reshape_readers(m.value(cap::summand), s);
    rw.mark_fused(f, name(), {fmm});
    if (root->op_type == "LayerNormLinear") rw.mark_fused(norm, "LayerNormLinear", {root});
    rw.erase_dead(replaced);
  }

 private:
  // Rule 1: h and the Reshape's output are read only inside the match, or by Shape nodes (GPT-2's
  // TorchScript export reads the size of the next norm's input: LayerNormLinear points those at
  // X, the GEMM side of the residual Add), which read the new values instead.
  static Status interior_private(const Match& m) {
    const Node* fmm = m.node(cap::fmm);
    const Node* reshape = m.node(cap::reshape);
    for (const Node* n : {fmm, reshape}) {
      if (!n) continue;
      const Value* o = n->output(0);
      if (o->is_graph_output)
        return Status::reject("rule 1: interior value '", o->name, "' of ", n->label(), " is a graph output");
      for (const Use& u : o->uses)
        if (!m.covers(u.node) && !u.node->is("Shape"))
          return Status::reject("rule 1: interior value '", o->name, "' of ", n->label(), " is also read by ",
                                u.node->label(), " outside the match");
      for (size_t i = 1; i < n->outputs.size(); ++i)
        if (is_read(n->output(i)))
          return Status::reject("rule 1: output '", n->output(i)->name, "' of ", n->label(), " is read");
    }
    return Status::ok();
  }

  static Match make_match(Node* root, const Side& s) {
    Match m;
    m.root = root;
    m.matched.push_back(root);
    if (s.reshape) {
      m.matched.push_back(s.reshape);
      m.nodes[cap::reshape.name] = s.reshape;
    }
    m.matched.push_back(s.fmm);
    m.nodes[cap::fmm.name] = s.fmm;
    m.values[cap::fmm.name] = s.fmm->output(0);
    m.values[cap::summand.name] = s.summand;
    m.values[cap::residual.name] = s.residual;
    return m;
  }

  // Every check of the fusion (the driver's check_interior_private sees only the root's Y and Sum).
  static Status check_side(const Match& m) {
    if (Status st = interior_private(m); !st) return st;
    const Node* root = m.root;
    const Node* fmm = m.node(cap::fmm);
    const Node* reshape = m.node(cap::reshape);
    const Value* h = fmm->output(0);
    const Value* s = m.value(cap::summand);
    const Value* res = m.value(cap::residual);
    const bool add_root = is_plain_add(root);
    const Value* sum = root->output(add_root ? 0 : 1);
    if (!add_root && !is_read(sum))
      return Status::reject("rule 1: ", root->label(), " has no Sum read: the residual stream ends there (a final ",
                            "norm, or a post-LN layer); nothing to gain from moving the Add into ", fmm->label());
    if (res == s)
      return Status::reject("rule 1: ", root->label(), " adds '", s->name, "' of ", fmm->label(), " to itself");
    const std::string act = fmm->is("MatMul") ? "none" : fmm->attr_string("activation", "none");
    if (!(act.empty() || act == "none"))
      return Status::reject(fmm->label(), " has activation '", act,
                            "': only a GEMM without activation takes the residual (a GEMM epilogue adds its C "
                            "before the activation)");
    if (root->op_type == "SkipLayerNorm") {
      if (const Value* b = root->input(4))
        return Status::reject("rule 3: ", root->label(), " adds its own bias '", b->name,
                              "', which the plain norm has no slot for");
      if (root->attr_int("rms", 0) != 0 && root->input(3))
        return Status::reject("rule 3: ", root->label(), " is an RMS norm with beta '", root->input(3)->name,
                              "', which fuseopt.RMSNorm has no slot for");
    }
    if (reshape) {
      // Rows of the reshaped tensor are rows of h exactly when the last dim stays N.
      const auto n = fusion::last_dim(h);
      const auto ld = fusion::last_dim(s);
      if (!n || !ld || *n != *ld)
        return Status::reject("rule 4: ", reshape->label(), " between ", fmm->label(), " and ", root->label(),
                              " does not provably keep the GEMM's last dim (",
                              n ? std::to_string(*n) : std::string("?"), " -> ",
                              ld ? std::to_string(*ld) : std::string("?"), ")");
    }
    // The GEMM adds the residual element by element in Y's row-major order: it must have
    // exactly the summand's shape (no broadcasting, e.g. a [1, S, D] position table; for an Add
    // root also the other way round: a [B, S, D] residual on a [S, D] summand would broadcast the
    // GEMM's output).
    const auto ss = fusion::recorded_shape(s), rs = fusion::recorded_shape(res);
    if (!ss || !rs || *ss != *rs)
      return Status::reject("rule 3: residual '", res->name, "' ", rs ? shape_str(*rs) : std::string("(shape unknown)"),
                            " of ", root->label(), " is not provably of the shape of '", s->name, "' ",
                            ss ? shape_str(*ss) : std::string("(shape unknown)"), " from ", fmm->label());
    std::vector<const Value*> typed{h, s, res};
    if (add_root) typed.push_back(sum);
    for (const Value* v : typed)
      if (fusion::value_dtype(v) == DType::Undefined)
        return Status::reject("rule 5: '", v->name, "' of ", root->label(), " has an unknown dtype");
    return fusion::same_float_dtype(typed, root);
  }
};

}  // namespace
// After LayerNormLinear (600) and FusedMatMulLayerNorm (350); before TiedEmbedding (650): see
// "Order 620" at the top of the file.
FUSEOPT_REGISTER_PASS(ResidualMatMulFusion, PassCategory::Fusion, 620);
}  // namespace fuseopt
