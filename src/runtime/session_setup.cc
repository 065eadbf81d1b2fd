// Session setup: slots, constant folding, placement, precision rewrites,
// the kernel check and the static capture decision (session_impl.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "ir/shape_inference.h"
#include "onnx_io/subgraph_load.h"
#include "runtime/eval_node.h"
#include "runtime/parallel.h"
#include "runtime/parameter_inputs.h"
#include "runtime/session_impl.h"
#include "util/error.h"

namespace fuseopt {

using namespace session_detail;

namespace {

bool is_metadata_only(const Node& n) { return n.is("Shape") || n.is("Size"); }

// Integer/bool values computed from shapes alone stay on the host only while
// they are shape-sized: rank <= 1 (shapes, indices, axes), or a known element
// count of at most 4096. A [1, 1, S, S] causal mask or [B, S] position ids
// built from Range is data, and a host loop over it cost 5 ms per op at S =
// 2048 (Llama prefill); on the device it is one elementwise launch. An
// unknown rank keeps the old rule (host), which is always correct.
bool shape_sized(const Value& v) {
  if (!v.shape) return true;
  if (v.shape->size() <= 1) return true;
  int64_t numel = 1;
  for (const Dim& d : *v.shape) {
    if (!d.known()) return false;
    numel *= d.value;
    if (numel > 4096) return false;
  }
  return true;
}

bool is_nondeterministic(const Node& n) {
  static const std::set<std::string> ops = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "Multinomial", "Bernoulli"};
  return (n.domain.empty() || n.domain == "ai.onnx") && ops.count(n.op_type);
}

// A 2-D [K, N] tensor of 2- or 4-byte elements as [N, K] (store_weights_nk), in cache-sized
// tiles so both sides are read and written in runs, over the CPU threads.
template <class E>
void transpose_into(const RtTensor& w, Tensor& t) {
  const int64_t K = w.shape[0], N = w.shape[1];
  const auto* src = reinterpret_cast<const E*>(w.data);
  auto* dst = reinterpret_cast<E*>(t.bytes.data());
  constexpr int64_t kTile = 64;
  parallel_for((N + kTile - 1) / kTile, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t nb = b0 * kTile; nb < std::min(N, b1 * kTile); nb += kTile)
      for (int64_t kb = 0; kb < K; kb += kTile)
        for (int64_t k = kb; k < std::min(K, kb + kTile); ++k)
          for (int64_t n = nb; n < std::min(N, nb + kTile); ++n) dst[n * K + k] = src[k * N + n];
  });
}

Tensor transposed(const RtTensor& w) {
  Tensor t(w.dtype, {w.shape[1], w.shape[0]});
  if (dtype_size(w.dtype) == 2) transpose_into<uint16_t>(w, t);
  else transpose_into<uint32_t>(w, t);
  return t;
}

// w [K, N] with row k multiplied by scale[k] in fp32 and rounded once to w's dtype (fold_rms_norms:
// an RMSNorm's gamma folded into the GatedMatMul weight after it); the conversions of precision.h.
Tensor rows_scaled(const RtTensor& w, const RtTensor& scale) {
  Tensor f = convert_float(w, DType::Float);
  const Tensor g = convert_float(scale, DType::Float);
  const int64_t K = w.shape[0], N = w.shape[1];
  float* p = f.data<float>();
  const float* gk = g.data<float>();
  parallel_for(K, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t n = k * N; n < (k + 1) * N; ++n) p[n] *= gk[k];
  });
  return convert_float(f, w.dtype);
}

bool any_kernel(const Node& n, Backend b) {
  for (const KernelInfo* k : all_kernels()) {
    std::string kd = k->domain == "ai.onnx" ? "" : k->domain, nd = n.domain == "ai.onnx" ? "" : n.domain;
    if (k->backend == b && k->op == n.op_type && kd == nd) return true;
  }
  return false;
}

}  // namespace

// --- setup -------------------------------------------------------------------

void Session::Impl::fold_constants(std::vector<const Node*>& order) {
  std::vector<const Node*> kept;
  for (const Node* n : order) {
    bool foldable = n->implicit_inputs.empty() && !n->has_subgraph() && !is_nondeterministic(*n);
    // Constant inputs: initializers, or values folded earlier in this loop
    // (their data sits behind the slot's host view).
    std::deque<Tensor> holder;
    std::vector<const Tensor*> ins;
    for (Value* v : n->inputs) {
      if (!foldable) break;
      if (!v) { ins.push_back(nullptr); continue; }
      const Slot& sl = slots[slot_of.at(v)];
      if (!sl.is_const) { foldable = false; break; }
      if (sl.v->const_data) {
        ins.push_back(sl.v->const_data.get());
      } else {
        Tensor t(sl.host.dtype, sl.host.shape);
        if (sl.host.nbytes()) std::memcpy(t.bytes.data(), sl.host.data, sl.host.nbytes());
        holder.push_back(std::move(t));
        ins.push_back(&holder.back());
      }
    }
    if (foldable && has_cpu_kernel(*n, ins)) {
      try {
        std::vector<Tensor> outs = eval_node_cpu(*n, ins);
        for (size_t i = 0; i < n->outputs.size(); ++i) {
          Value* o = n->outputs[i];
          if (!o) continue;
          owned_consts.push_back(std::move(outs[i]));
          Slot& sl = slots[slot_of.at(o)];
          sl.is_const = true;
          sl.host_produced = true;
          const Tensor& t = owned_consts.back();
          sl.host = RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU};
          sl.has_host = true;
        }
        continue;
      } catch (const std::exception&) {
        // Leave the node to the run, which reports the error in context.
      }
    }
    kept.push_back(n);
  }
  order = std::move(kept);
}

// Weight layout: a 16-bit constant 2-D B read only as the weight (input 1) of MatMul,
// FusedMatMul (transA, transB 0) or GatedMatMul, or as LayerNormLinear's W (input 3, transB 0),
// on the device is stored transposed, [N, K], and those steps run with transB = 1 (MatMul and
// GatedMatMul, which have no such attribute: with kWeightNkAttr). The GEMM is the same; what changes is that a decode step's rows (M <= 2) can
// take the weight-streaming kernel, which reads [N, K] rows at ~4 TB/s where cuBLASLt's small-M
// kernels reach 1.3-3.6 (kernels/cuda/gemm_small_m.cu; NOTES-perf.md v13). cuBLASLt runs the
// larger-M GEMMs with B transposed instead (BERT-base 32x128: 1.667 vs 1.662 ms, session 8).
// LayerNormLinear's decode rows then run one kernel, its norm inside the GEMV (gemv_nk_fused.h).
// FUSEOPT_WEIGHT_NK=0 keeps the model's layout everywhere; =1 also applies it on the CPU backend
// and to fp32 weights, for FusedMatMul and LayerNormLinear only there (their CPU kernels read
// transB; MatMul's and GatedMatMul's do not read the marker): a check of this function on
// machines without a GPU.
void Session::Impl::store_weights_nk() {
  const char* env = std::getenv("FUSEOPT_WEIGHT_NK");
  const std::string mode = env ? env : "";
  if (mode == "0") return;
  const bool cuda16 = device && be.kind() == Backend::CUDA &&
                      (compute_float == DType::Float16 || compute_float == DType::BFloat16);
  const bool forced = mode == "1";
  if (!cuda16 && !forced) return;
  const bool cuda = device && be.kind() == Backend::CUDA;
  // The input index of the step's B, or -1 where its layout is not ours to change.
  auto weight_input = [cuda](const Node& n) -> int {
    if (n.domain.empty() || n.domain == "ai.onnx") return cuda && n.op_type == "MatMul" ? 1 : -1;
    if (n.domain != "fuseopt") return -1;
    if (n.op_type == "GatedMatMul") return cuda ? 1 : -1;
    if (n.op_type == "LayerNormLinear") return n.attr_int("transB", 0) == 0 ? 3 : -1;
    return n.op_type == "FusedMatMul" && n.attr_int("transB", 0) == 0 && n.attr_int("transA", 0) == 0 ? 1 : -1;
  };
  std::vector<std::vector<size_t>> readers(slots.size());  // steps reading the slot as their B
  std::vector<bool> other_use(slots.size(), false);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    for (size_t j = 0; j < st.ins.size(); ++j) {
      const int id = st.ins[j];
      if (id < 0) continue;
      if (!st.on_host && !st.is_if && static_cast<int>(j) == weight_input(st.n())) readers[id].push_back(i);
      else other_use[id] = true;
    }
    for (int id : st.implicit) other_use[id] = true;
  }
  for (size_t id = 0; id < slots.size(); ++id) {
    Slot& sl = slots[id];
    if (!sl.is_const || sl.is_output || readers[id].empty() || other_use[id]) continue;
    const bool half = sl.host.dtype == DType::Float16 || sl.host.dtype == DType::BFloat16;
    if (!(half || (forced && sl.host.dtype == DType::Float)) || sl.host.shape.size() != 2) continue;
    const int64_t K = sl.host.shape[0], N = sl.host.shape[1];
    if (K < 1 || N < 1) continue;
    // Transposed while it is uploaded, one tensor at a time (a mapped weight is never copied
    // whole on the host); the host view keeps the model's layout, which only these device steps read.
    // GatedMatMul's [K, 2N] is transposed whole: its gate and up halves become rows [0, N), [N, 2N).
    sl.upload_nk = true;
    ++weights_nk;
    for (size_t i : readers[id]) {
      Step& st = steps[i];
      auto n = std::make_unique<Node>(st.n());
      if (n->op_type == "FusedMatMul" || n->op_type == "LayerNormLinear")
        n->set_attr(Attribute::make_int("transB", 1));
      else
        n->set_attr(Attribute::make_int(kWeightNkAttr, 1));
      st.override_node = std::move(n);
    }
  }
}

// An RMSNorm step whose output only a GatedMatMul step reads (Llama's, Mistral's, Qwen's
// post-attention norm before gate/up) becomes part of that step: the GatedMatMul reads the
// norm's X as its A, with kPreRmsNormAttr = epsilon, its weight is uploaded with gamma folded
// into its K rows (upload_scale_rows_by: one rounding of w · gamma), and the norm step is gone.
// On Hopper from 128 rows the gated GEMM then applies each row's 1/rms itself (one launch fewer a
// layer, the [M, K] normalised tensor never written: gemm_hopper_prenorm.cuh); elsewhere the step
// runs the norm kernel, without gamma, first. Only where the weight is a constant no other step
// reads (a weight shared across layers, as ALBERT's, keeps its norms). 16-bit CUDA sessions
// only (where that GEMM exists). Opt-in, FUSEOPT_FOLD_NORM=1: its first form (gamma applied to A
// in the kernel) measured 1.12-1.15x slower end to end, this form is not yet measured on a GPU
// (NOTES-perf.md v50).
void Session::Impl::fold_rms_norms() {
  const char* env = std::getenv("FUSEOPT_FOLD_NORM");
  if (!env || std::string(env) != "1") return;
  if (!device || be.kind() != Backend::CUDA || (compute_float != DType::Float16 && compute_float != DType::BFloat16))
    return;
  std::vector<std::vector<size_t>> readers(slots.size());  // steps reading the slot (any input)
  std::vector<bool> other_use(slots.size(), false);        // read otherwise (an If's implicit input)
  for (size_t i = 0; i < steps.size(); ++i) {
    for (int id : steps[i].ins)
      if (id >= 0) readers[id].push_back(i);
    for (int id : steps[i].implicit) other_use[id] = true;
  }
  auto only_reader = [&](int id, size_t step) {
    return !slots[id].is_output && !other_use[id] && readers[id].size() == 1 && readers[id][0] == step;
  };
  std::vector<bool> drop(steps.size(), false);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& norm = steps[i];
    const Node& nn = norm.n();
    if (norm.on_host || norm.is_if || nn.domain != "fuseopt" || nn.op_type != "RMSNorm") continue;
    if (norm.ins.size() != 2 || norm.ins[0] < 0 || norm.ins[1] < 0 || norm.outs.size() != 1 || norm.outs[0] < 0)
      continue;
    const int x = norm.ins[0], gamma = norm.ins[1], z = norm.outs[0];
    if (!slots[gamma].is_const || readers[z].size() != 1 || !only_reader(z, readers[z][0])) continue;
    if (slots[x].static_dtype != slots[z].static_dtype) continue;
    const size_t j = readers[z][0];
    Step& gemm = steps[j];
    const Node& gn = gemm.n();
    if (gemm.on_host || gemm.is_if || gn.domain != "fuseopt" || gn.op_type != "GatedMatMul") continue;
    if (gemm.ins.size() < 2 || gemm.ins[0] != z || gemm.ins[1] < 0) continue;
    const int w = gemm.ins[1];
    const Slot& ws = slots[w];
    const Slot& gs = slots[gamma];
    if (!ws.is_const || !only_reader(w, j) || ws.host.shape.size() != 2 ||
        gs.host.shape.size() != 1 || gs.host.shape[0] != ws.host.shape[0])
      continue;
    auto folded = std::make_unique<Node>(gn);
    folded->set_attr(Attribute::make_float(kPreRmsNormAttr, nn.attr_float("epsilon", 1e-6f)));
    gemm.override_node = std::move(folded);
    gemm.ins[0] = x;
    slots[w].upload_scale_rows_by = gamma;
    drop[i] = true;
    ++norms_folded;
  }
  if (norms_folded == 0) return;
  std::vector<Step> kept;
  kept.reserve(steps.size() - norms_folded);
  for (size_t i = 0; i < steps.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(steps[i]));
  steps = std::move(kept);
}

void Session::Impl::setup() {
  const Graph& g = s.graph_;
  device = be.kind() != Backend::CPU;
  compute_float = compute_float_dtype(s.opts_.precision);
  if (!device) {
    FUSE_CHECK(compute_float == DType::Float, "precision " << precision_name(s.opts_.precision)
                                                           << " is not supported on the cpu backend (use fp32 or tf32)");
  }
  auto add_slot = [&](const Value* v) {
    if (!v || slot_of.count(v)) return;
    Slot sl;
    sl.v = v;
    sl.declared = v->dtype;
    sl.static_dtype = v->dtype;
    slot_of[v] = static_cast<int>(slots.size());
    slots.push_back(std::move(sl));
  };
  for (const Value* v : g.initializers) add_slot(v);
  for (const Value* v : g.inputs) add_slot(v);
  for (const auto& n : g.nodes()) {
    for (Value* v : n->inputs) add_slot(v);
    for (Value* v : n->outputs) add_slot(v);
  }
  for (const Value* v : g.outputs) add_slot(v);
  for (Slot& sl : slots) {
    if (sl.v->const_data) {
      sl.is_const = true;
      sl.host_produced = true;
      const Tensor& t = *sl.v->const_data;
      sl.host = RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU};
      sl.has_host = true;
    }
  }
  for (const Value* v : g.inputs) {
    int id = slot_of.at(v);
    if (slots[id].is_const) continue;  // an input with an initializer default: treat as constant
    slots[id].is_input = true;
    input_slots.push_back(id);
  }
  for (const Value* v : g.outputs) {
    int id = slot_of.at(v);
    slots[id].is_output = true;
    output_slots.push_back(id);
  }

  std::vector<const Node*> order;
  for (const Node* n : g.topo_order()) order.push_back(n);
  fold_constants(order);

  // Dtypes the model does not declare, from the ops' shape functions (placement
  // and the kernel check need them before anything runs; an output converts
  // back to it).
  for (Slot& sl : slots)
    if (sl.is_const) sl.static_dtype = sl.host.dtype;
  auto static_dtype_of = [&](const Value* v) {
    auto it = slot_of.find(v);
    return it == slot_of.end() ? v->dtype : slots[it->second].static_dtype;
  };
  for (const Node* n : order) {
    bool all_known = true;
    for (Value* o : n->outputs)
      if (o && slots[slot_of.at(o)].static_dtype == DType::Undefined) all_known = false;
    if (all_known) continue;
    const std::vector<DType> inferred = infer_output_dtypes(*n, &g, static_dtype_of);
    for (size_t i = 0; i < n->outputs.size() && i < inferred.size(); ++i) {
      if (!n->outputs[i]) continue;
      Slot& sl = slots[slot_of.at(n->outputs[i])];
      if (sl.static_dtype == DType::Undefined) sl.static_dtype = inferred[i];
    }
  }
  for (const Node* n : order) {
    Step st;
    st.node = n;
    for (Value* v : n->inputs) st.ins.push_back(v ? slot_of.at(v) : -1);
    for (Value* v : n->outputs) st.outs.push_back(v ? slot_of.at(v) : -1);
    for (Value* v : n->implicit_inputs)
      if (v) st.implicit.push_back(slot_of.at(v));
    if (n->is("If")) {
      // Branches run as nested Sessions on the same backend; the If step
      // itself reads the condition on the host and picks one.
      st.is_if = true;
      const char* names[2] = {"then_branch", "else_branch"};
      for (int b = 0; b < 2; ++b) {
        const Attribute* a = n->attr(names[b]);
        FUSE_CHECK(a, n->label() << ": missing attribute " << names[b]);
        LoadedSubgraph sub = load_subgraph(*a, g, n->label() + " " + names[b]);
        st.branch_graph[b] = std::move(sub.graph);
        SessionOptions bo = s.opts_;
        bo.profile = false;
        try {
          st.branch[b] = std::make_unique<Session>(*st.branch_graph[b], bo);
        } catch (const Error& e) {
          throw Error(n->label() + " " + names[b] + ": " + e.what());
        }
        FUSE_CHECK(st.branch_graph[b]->outputs.size() == n->outputs.size(),
                   n->label() << ": " << names[b] << " has " << st.branch_graph[b]->outputs.size()
                              << " outputs, the node " << n->outputs.size());
      }
    }
    // Placement: in a device session, shape math stays on the host.
    if (device) {
      bool all_host = true;
      for (int id : st.ins)
        if (id >= 0 && !slots[id].host_produced) all_host = false;
      bool small_int_outputs = true;
      for (Value* o : n->outputs) {
        if (!o) continue;
        DType d = slots[slot_of.at(o)].static_dtype;
        bool intish = dtype_is_integer(d) || d == DType::Bool;
        if (!intish || !shape_sized(*o)) small_int_outputs = false;
      }
      bool host_kernel = any_kernel(*n, Backend::CPU);
      st.on_host = !st.is_if && host_kernel &&
                   (is_metadata_only(*n) || (all_host && small_int_outputs && !st.ins.empty()));
      for (int id : st.outs)
        if (id >= 0 && st.on_host) slots[id].host_produced = true;
      if (!st.on_host)
        for (int id : st.ins)
          if (id >= 0) slots[id].used_on_device = true;
    }
    // Softmax before opset 13 flattens to 2-D at `axis` (default 1); the
    // kernel reads the marker attribute this override adds.
    if ((n->is("Softmax") || n->is("LogSoftmax")) && s.graph_.opset("") > 0 && s.graph_.opset("") < 13) {
      st.override_node = std::make_unique<Node>(*n);
      st.override_node->set_attr(Attribute::make_int("axis", n->attr_int("axis", 1)));
      st.override_node->set_attr(Attribute::make_int(kLegacySoftmaxAttr, 1));
    }
    // Precision: casts to a float type and float constants produced by
    // nodes become that type's compute dtype (Cast to FLOAT is fp16 under
    // --precision fp16; Cast to FLOAT16 is fp32 on the CPU backend).
    if (std::unique_ptr<Node> c = node_in_compute_dtypes(*n, [this](DType d) { return compute_dtype(d); }))
      st.override_node = std::move(c);
    steps.push_back(std::move(st));
  }
  fold_rms_norms();

  // Liveness: the last step that reads each slot.
  for (size_t i = 0; i < steps.size(); ++i) {
    for (int id : steps[i].ins)
      if (id >= 0) slots[id].last_use = static_cast<int>(i), slots[id].read_by_step = true;
    for (int id : steps[i].implicit) slots[id].last_use = static_cast<int>(i), slots[id].read_by_step = true;
    for (int id : steps[i].outs)
      if (id >= 0 && slots[id].last_use < static_cast<int>(i)) slots[id].last_use = static_cast<int>(i);
  }
  for (Slot& sl : slots)
    if (!sl.is_const && !sl.is_output && !sl.is_input && sl.last_use >= 0)
      steps[sl.last_use].release.push_back(static_cast<int>(&sl - slots.data()));

  check_kernels();

  // Precision: float constants (initializers, folded Constant nodes) are
  // stored in their compute dtype, converted once here -- except those read
  // only as shape-setting parameters (runtime/parameter_inputs.h).
  auto parameter_only = [](const Value* v) {
    if (!v || v->uses.empty()) return false;
    for (const Use& u : v->uses) {
      const std::vector<int>& params = u.node->domain.empty() || u.node->domain == "ai.onnx"
                                           ? fp32_parameter_inputs(u.node->op_type)
                                           : std::vector<int>{};
      if (std::find(params.begin(), params.end(), u.index) == params.end()) return false;
    }
    return true;
  };
  for (Slot& sl : slots) {
    if (!sl.is_const || compute_dtype(sl.host.dtype) == sl.host.dtype) continue;
    if (sl.host.dtype == DType::Float && parameter_only(sl.v)) continue;
    owned_consts.push_back(convert_float(sl.host, compute_dtype(sl.host.dtype)));  // read in place
    // The converted copy is what runs; a mapped original's pages need not stay.
    if (sl.v->const_data) sl.v->const_data->bytes.release_resident();
    const Tensor& c = owned_consts.back();
    sl.host = RtTensor{c.dtype, c.dims, const_cast<uint8_t*>(c.bytes.data()), Backend::CPU};
  }
  store_weights_nk();

  // Constants: on the CPU backend they are used in place (a mapped weight is
  // read from its mapping); on a device they are uploaded once if a device
  // step reads them.
  for (Slot& sl : slots) {
    if (!sl.is_const) continue;
    if (!device) {
      sl.dev = sl.host;
      if (sl.upload_nk) {  // FUSEOPT_WEIGHT_NK=1 on the CPU backend (store_weights_nk)
        owned_consts.push_back(transposed(sl.host));
        const Tensor& c = owned_consts.back();
        sl.dev = RtTensor{c.dtype, c.dims, const_cast<uint8_t*>(c.bytes.data()), Backend::CPU};
      }
      sl.has_dev = true;
      const_bytes += sl.host.nbytes();
    } else if (sl.used_on_device) {
      void* p = be.alloc(std::max<size_t>(sl.host.nbytes(), 1));
      const_device_allocs.push_back(p);
      // A re-laid-out copy (gamma folded in: fold_rms_norms; transposed: store_weights_nk),
      // uploaded and dropped; the host view keeps the model's values.
      if (sl.upload_scale_rows_by >= 0 || sl.upload_nk) {
        Tensor t = sl.upload_scale_rows_by >= 0 ? rows_scaled(sl.host, slots[sl.upload_scale_rows_by].host)
                                                : transposed(sl.host);
        if (sl.upload_scale_rows_by >= 0 && sl.upload_nk)
          t = transposed(RtTensor{t.dtype, t.dims, t.bytes.data(), Backend::CPU});
        be.copy_from_host(p, t.bytes.data(), t.bytes.size());
        if (sl.v->const_data) sl.v->const_data->bytes.release_resident();
        sl.dev = RtTensor{t.dtype, t.dims, p, be.kind()};
        sl.has_dev = true;
        const_bytes += t.bytes.size();
        continue;
      }
      be.copy_from_host(p, sl.host.data, sl.host.nbytes());
      // One tensor at a time, straight from a memory-mapped weight: once it
      // is staged, its pages need not stay in this process (a host step that
      // reads it later faults them in again from the file).
      if (sl.v->const_data) sl.v->const_data->bytes.release_resident();
      sl.dev = RtTensor{sl.host.dtype, sl.host.shape, p, be.kind()};
      sl.has_dev = true;
      const_bytes += sl.host.nbytes();
    }
  }

  if (device) host_backend = make_backend(Backend::CPU);
  shared_dev = std::make_unique<BufferPool>(be);
  shared_host = device ? std::make_unique<BufferPool>(*host_backend) : nullptr;

  // Static capture decision.
  SessionProfile& prof = s.profile_;
  prof.nodes.clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].profile_index = static_cast<int>(i);
    prof.nodes.push_back(NodeProfile{steps[i].node->name, op_label(*steps[i].node), steps[i].on_host, 0, 0});
  }
  if (!be.supports_capture()) prof.capture_disabled_reason = std::string("the ") + backend_name(be.kind()) + " backend has no graph capture";
  else if (!s.opts_.cuda_graphs) prof.capture_disabled_reason = "disabled by the options";
  else if (s.opts_.profile) prof.capture_disabled_reason = "profiling times every node";
  prof.capture_possible = prof.capture_disabled_reason.empty();
}

void Session::Impl::check_kernels() {
  std::map<std::string, std::vector<std::string>> missing;  // "op (domain 'd', dtype)" -> node names
  for (Step& st : steps) {
    if (st.is_if) continue;  // its branches' Sessions checked their own kernels
    const Node& n = st.n();
    Backend b = st.on_host ? Backend::CPU : be.kind();
    auto static_dtype = [&](int i) -> DType {
      if (i < 0 || static_cast<size_t>(i) >= st.ins.size() || st.ins[i] < 0) return DType::Undefined;
      const Slot& sl = slots[st.ins[i]];
      // Declared dtypes only: an inferred one could be wrong for an op this
      // file does not know, and the run reports a real mismatch anyway.
      return compute_dtype(sl.is_const ? sl.host.dtype : sl.declared);
    };
    bool found = false;
    if (static_dtype(0) == DType::Undefined && (st.ins.empty() || st.ins[0] < 0)) {
      found = any_kernel(n, b);
    } else {
      const KernelInfo* k = lookup_kernel(n, b, static_dtype);
      found = k != nullptr || (static_dtype(0) == DType::Undefined && any_kernel(n, b));
    }
    if (!found) {
      std::string key = n.op_type + " (domain '" + (n.domain.empty() ? "ai.onnx" : n.domain) + "'";
      DType d = static_dtype(0);
      if (d != DType::Undefined && any_kernel(n, b)) key += std::string(", dtype ") + dtype_name(d);
      key += ")";
      missing[key].push_back(n.name);
    }
  }
  if (missing.empty()) return;
  std::ostringstream os;
  os << "no " << backend_name(be.kind()) << " kernel for " << missing.size() << " op(s): ";
  bool first = true;
  for (auto& [key, names] : missing) {
    os << (first ? "" : "; ") << key << " at node";
    os << (names.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < names.size() && i < 5; ++i) os << (i ? ", '" : "'") << names[i] << "'";
    if (names.size() > 5) os << " and " << names.size() - 5 << " more";
    first = false;
  }
  throw Error(os.str());
}

}  // namespace fuseopt
