// The Session run loop. See session.h for the model; this file is organised
// as: setup (slots, constant folding, placement, kernel check), per-shape
// plans (pools, uploads, captured graphs), and the step loop with its
// KernelContext.
#include "runtime/session.h"
#include "runtime/parameter_inputs.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "onnx_io/subgraph_load.h"
#include "runtime/eval_node.h"
#include "runtime/memory_plan.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {

namespace {

constexpr size_t kMaxPlans = 8;
// Marks a Softmax/LogSoftmax of opset < 13 (see kernels/cpu/softmax_reduce.cc).
constexpr const char* kLegacySoftmaxAttr = "__fuseopt_softmax_2d";

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

// The dtype of output i when the model does not declare it, from the input
// dtypes (placement and the kernel check need it before anything runs).
DType infer_output_dtype(const Node& n, size_t i, const std::vector<DType>& in) {
  const DType first = in.empty() ? DType::Undefined : in[0];
  if (!n.domain.empty() && n.domain != "ai.onnx") return first;
  const std::string& op = n.op_type;
  static const std::set<std::string> to_bool = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And",
                                                "Or", "Xor", "Not", "IsNaN", "IsInf"};
  static const std::set<std::string> to_int64 = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin"};
  if (to_bool.count(op)) return DType::Bool;
  if (to_int64.count(op)) return DType::Int64;
  if (op == "Cast") return static_cast<DType>(n.attr_int("to", 0));
  if (op == "CastLike") return in.size() > 1 ? in[1] : DType::Undefined;
  if (op == "Where") return in.size() > 1 ? in[1] : DType::Undefined;
  if (op == "ConstantOfShape") {
    const Attribute* a = n.attr("value");
    return a && a->t ? a->t->dtype : DType::Float;
  }
  if (op == "Constant") {
    for (const Attribute& a : n.attrs) {
      if (a.name == "value" && a.t) return a.t->dtype;
      if (a.name == "value_float" || a.name == "value_floats") return DType::Float;
      if (a.name == "value_int" || a.name == "value_ints") return DType::Int64;
    }
    return DType::Undefined;
  }
  if (op == "If" || op == "Loop" || op == "Scan") return DType::Undefined;  // the body decides
  if ((op == "MaxPool" || op == "TopK") && i == 1) return DType::Int64;
  if (op == "Dropout" && i == 1) return DType::Bool;
  if (op == "LayerNormalization" && i > 0) return DType::Float;
  return first;
}

std::string op_label(const Node& n) { return n.domain.empty() ? n.op_type : n.domain + "." + n.op_type; }

DType compute_float_dtype(Precision p) {
  switch (p) {
    case Precision::FP16: return DType::Float16;
    case Precision::BF16: return DType::BFloat16;
    default: return DType::Float;
  }
}

// Float <-> Float16/BFloat16 on the host: one loop per (from, to) pair, no
// per-element dispatch (fp16 models on the CPU convert every input/output).
Tensor convert_float(const Tensor& t, DType to) {
  if (t.dtype == to) return t;
  Tensor r(to, t.dims);
  const int64_t n = t.numel();
  auto narrow = [&](auto read) {
    uint16_t* y = r.data<uint16_t>();
    // Finite values stay finite (see float_to_half_finite).
    if (to == DType::Float16)
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_half_finite(read(i));
    else
      for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16_finite(read(i));
  };
  switch (to) {
    case DType::Float: {
      float* y = r.data<float>();
      if (t.dtype == DType::Float16)
        for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(t.data<uint16_t>()[i]);
      else if (t.dtype == DType::BFloat16)
        for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(t.data<uint16_t>()[i]);
      else
        for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(t.as_double(i));
      break;
    }
    case DType::Float16:
    case DType::BFloat16:
      if (t.dtype == DType::Float) narrow([&](int64_t i) { return t.data<float>()[i]; });
      else if (t.dtype == DType::Float16) narrow([&](int64_t i) { return half_to_float(t.data<uint16_t>()[i]); });
      else if (t.dtype == DType::BFloat16) narrow([&](int64_t i) { return bf16_to_float(t.data<uint16_t>()[i]); });
      else narrow([&](int64_t i) { return static_cast<float>(t.as_double(i)); });
      break;
    default: throw Error(std::string("internal: cannot convert to ") + dtype_name(to));
  }
  return r;
}

// The dtype a computed float output goes back to: the one the model declares
// or implies (fp16/bf16 models computed in fp32 on the CPU, Float computed in
// fp16 on a device); Undefined when it stays as computed.
DType declared_target(DType have, DType declared) {
  if (!dtype_is_float(have) || have == DType::Double || have == declared) return DType::Undefined;
  if (declared == DType::Float || declared == DType::Undefined) return have == DType::Float ? DType::Undefined : DType::Float;
  if (declared == DType::Float16 || declared == DType::BFloat16) return declared;
  return DType::Undefined;
}

std::string shapes_of(const std::vector<const RtTensor*>& ins) {
  std::string s;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i) s += ", ";
    s += ins[i] ? shape_str(ins[i]->shape) + " " + dtype_name(ins[i]->dtype) : "(none)";
  }
  return s;
}

// Looks a kernel up by the dtype of its dispatch input.
template <class DTypeOf>
const KernelInfo* lookup_kernel(const Node& n, Backend b, DTypeOf dtype_of) {
  const KernelInfo* k = find_kernel(n.domain, n.op_type, b, dtype_of(0));
  if (k && k->dispatch_input != 0) {
    const KernelInfo* k2 = find_kernel(n.domain, n.op_type, b, dtype_of(k->dispatch_input));
    if (k2) k = k2;
  }
  return k;
}

bool any_kernel(const Node& n, Backend b) {
  for (const KernelInfo* k : all_kernels()) {
    std::string kd = k->domain == "ai.onnx" ? "" : k->domain, nd = n.domain == "ai.onnx" ? "" : n.domain;
    if (k->backend == b && k->op == n.op_type && kd == nd) return true;
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------

struct Buffer {
  void* p = nullptr;
  BufferPool* pool = nullptr;
  int refs = 0;
};

struct Slot {
  const Value* v = nullptr;
  DType declared = DType::Undefined;  // as the model declares it (outputs convert back to it)
  DType static_dtype = DType::Undefined;  // declared, else inferred from the producer's inputs
  DType model_dtype() const { return declared != DType::Undefined ? declared : static_dtype; }
  bool is_const = false, is_input = false, is_output = false;
  bool host_produced = false;  // constant or output of a CPU-placed step
  int last_use = -1;           // step index of the last consumer
  bool used_on_device = false;
  // run state
  bool has_dev = false, has_host = false;
  RtTensor dev, host;
  Buffer* dev_buf = nullptr;
  Buffer* host_buf = nullptr;
};

struct Step {
  const Node* node = nullptr;
  std::unique_ptr<Node> override_node;  // precision rewrites (Cast to FLOAT...)
  bool on_host = false;                 // CPU-placed in a device session
  std::vector<int> ins, outs;           // slot ids; -1 = omitted
  std::vector<int> release;             // slots whose last use is this step
  int profile_index = 0;
  DType cached_dtype = DType::Undefined;
  const KernelInfo* cached_kernel = nullptr;
  // If: both branches as nested Sessions over their own Graphs; `implicit`
  // are the outer values the branches read (kept alive until this step).
  bool is_if = false;
  std::vector<int> implicit;
  std::unique_ptr<Graph> branch_graph[2];
  std::unique_ptr<Session> branch[2];
  const Node& n() const { return override_node ? *override_node : *node; }
};

struct Plan {
  std::string signature;
  BackendImpl* backend = nullptr;
  std::unique_ptr<BufferPool> own_dev, own_host;
  BufferPool* dev_pool = nullptr;
  BufferPool* host_pool = nullptr;
  std::map<int, std::pair<void*, size_t>> uploads;     // slot -> device copy of a host value
  std::map<int, std::pair<void*, size_t>> input_bufs;  // graph input slot -> device buffer
  // Device staging for dtype conversions done on the device: a float input as
  // the caller gave it (slot -> buffer), an output in its declared dtype (index).
  std::map<int, std::pair<void*, size_t>> input_stage;
  std::map<size_t, std::pair<void*, size_t>> output_stage;
  int runs = 0;
  bool reads_device_data = false;  // a kernel read device/input data on the host
  std::string no_capture_reason;
  std::shared_ptr<void> graph;
  std::vector<RtTensor> out_views;
  uint64_t last_used = 0;
  ~Plan() {
    graph.reset();
    for (auto& [s, b] : uploads) backend->free(b.first);
    for (auto& [s, b] : input_bufs) backend->free(b.first);
    for (auto& [s, b] : input_stage) backend->free(b.first);
    for (auto& [s, b] : output_stage) backend->free(b.first);
  }
  // A device buffer of at least `bytes` in `slot` (grown, never shrunk).
  void* ensure(std::pair<void*, size_t>& slot, size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    if (slot.first == nullptr || slot.second < bytes) {
      if (slot.first) backend->free(slot.first);
      slot = {backend->alloc(bytes), bytes};
    }
    return slot.first;
  }
};

struct Session::Impl {
  Session& s;
  BackendImpl& be;
  bool device = false;  // backend is not the CPU
  DType compute_float = DType::Float;
  // The dtype a float value of dtype `d` is computed and stored in. Float
  // follows --precision; the CPU backend has no half kernels, so fp16/bf16
  // models compute in fp32 there (converted once at setup, on entry, and
  // back to the declared dtype on exit).
  DType compute_dtype(DType d) const {
    if (d == DType::Float) return compute_float;
    if (!device && (d == DType::Float16 || d == DType::BFloat16)) return DType::Float;
    return d;
  }
  std::vector<Slot> slots;
  std::unordered_map<const Value*, int> slot_of;
  std::vector<Step> steps;
  std::deque<Tensor> owned_consts;           // folded / converted constants
  std::vector<void*> const_device_allocs;    // uploaded constants
  size_t const_bytes = 0;
  std::vector<int> input_slots, output_slots;
  std::unique_ptr<BackendImpl> host_backend;  // CPU memory for host steps of a device session
  std::unique_ptr<BufferPool> shared_dev, shared_host;
  std::map<std::string, std::unique_ptr<Plan>> plans;
  uint64_t clock = 0;
  Plan* last_plan = nullptr;
  std::mutex run_mutex;  // run() calls from several threads take turns
  // per-run
  std::deque<Buffer> run_buffers;
  std::deque<Tensor> run_tensors;

  Impl(Session& session, BackendImpl& backend) : s(session), be(backend) {}
  SessionProfile& prof() { return s.profile_; }

  Buffer* new_buffer(void* p, BufferPool* pool) {
    run_buffers.push_back(Buffer{p, pool, 1});
    return &run_buffers.back();
  }
  static void unref(Buffer*& b) {
    if (!b) return;
    if (--b->refs == 0 && b->pool) b->pool->release(b->p);
    b = nullptr;
  }
  void release_slot(Slot& sl) {
    unref(sl.dev_buf);
    unref(sl.host_buf);
    if (!sl.is_const) sl.has_dev = sl.has_host = false;
  }

  void setup();
  void fold_constants(std::vector<const Node*>& order);
  void check_kernels();
  Plan& plan_for(const std::string& sig);
  void bind_inputs(Plan& p, const std::map<std::string, Tensor>& inputs);
  void execute_steps(Plan& p);
  void run_step(Plan& p, Step& st);
  void run_if(Plan& p, Step& st);
  Tensor host_copy(Plan& p, int slot, const Node& reader);
  std::vector<Tensor> collect_outputs(Plan& p, bool record);
  Tensor fetch_output(Plan& p, size_t index, const RtTensor& v, DType declared);
  std::vector<Tensor> replay(Plan& p, const std::map<std::string, Tensor>& inputs);
  void finish_run();
  std::string signature(const std::map<std::string, Tensor>& inputs);
  const RtTensor& device_view(Plan& p, int slot);
};

// --- setup -------------------------------------------------------------------

static std::vector<const Node*> topo_order(const Graph& g) {
  std::vector<const Node*> order;
  std::unordered_map<const Node*, int> pending;
  std::vector<const Node*> ready;
  for (const auto& n : g.nodes()) {
    int deps = 0;
    for (Value* v : n->inputs)
      if (v && v->producer) ++deps;
    for (Value* v : n->implicit_inputs)
      if (v && v->producer) ++deps;
    pending[n.get()] = deps;
    if (deps == 0) ready.push_back(n.get());
  }
  std::reverse(ready.begin(), ready.end());
  while (!ready.empty()) {
    const Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    std::vector<const Node*> next;
    for (Value* o : n->outputs) {
      if (!o) continue;
      for (const Use& u : o->uses)
        if (--pending[u.node] == 0) next.push_back(u.node);
    }
    for (auto it = next.rbegin(); it != next.rend(); ++it) ready.push_back(*it);
  }
  FUSE_CHECK(order.size() == g.num_nodes(), "the graph has a cycle; cannot run it");
  return order;
}

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

  std::vector<const Node*> order = topo_order(g);
  fold_constants(order);

  for (Slot& sl : slots)
    if (sl.is_const) sl.static_dtype = sl.host.dtype;
  for (const Node* n : order) {
    std::vector<DType> in_dtypes;
    for (Value* v : n->inputs) in_dtypes.push_back(v ? slots[slot_of.at(v)].static_dtype : DType::Undefined);
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      if (!n->outputs[i]) continue;
      Slot& sl = slots[slot_of.at(n->outputs[i])];
      if (sl.static_dtype == DType::Undefined) sl.static_dtype = infer_output_dtype(*n, i, in_dtypes);
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
    if (n->is("Cast")) {
      const DType to = static_cast<DType>(n->attr_int("to", 0));
      if (compute_dtype(to) != to) {
        st.override_node = std::make_unique<Node>(*n);
        st.override_node->set_attr(Attribute::make_int("to", static_cast<int64_t>(compute_dtype(to))));
      }
    } else if (n->is("ConstantOfShape") || n->is("Constant")) {
      const Attribute* a = n->attr("value");
      if (a && a->t && compute_dtype(a->t->dtype) != a->t->dtype) {
        st.override_node = std::make_unique<Node>(*n);
        st.override_node->set_attr(Attribute::make_tensor("value", convert_float(*a->t, compute_dtype(a->t->dtype))));
      }
    }
    steps.push_back(std::move(st));
  }

  // Liveness: the last step that reads each slot.
  for (size_t i = 0; i < steps.size(); ++i) {
    for (int id : steps[i].ins)
      if (id >= 0) slots[id].last_use = static_cast<int>(i);
    for (int id : steps[i].implicit) slots[id].last_use = static_cast<int>(i);
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
    Tensor t(sl.host.dtype, sl.host.shape);
    if (t.bytes.size()) std::memcpy(t.bytes.data(), sl.host.data, t.bytes.size());
    owned_consts.push_back(convert_float(t, compute_dtype(sl.host.dtype)));
    const Tensor& c = owned_consts.back();
    sl.host = RtTensor{c.dtype, c.dims, const_cast<uint8_t*>(c.bytes.data()), Backend::CPU};
  }
  // Constants: on the CPU backend they are used in place; on a device they
  // are uploaded once if a device step reads them.
  for (Slot& sl : slots) {
    if (!sl.is_const) continue;
    if (!device) {
      sl.dev = sl.host;
      sl.has_dev = true;
      const_bytes += sl.host.nbytes();
    } else if (sl.used_on_device) {
      void* p = be.alloc(std::max<size_t>(sl.host.nbytes(), 1));
      const_device_allocs.push_back(p);
      be.copy_from_host(p, sl.host.data, sl.host.nbytes());
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

// --- plans ---------------------------------------------------------------------

std::string Session::Impl::signature(const std::map<std::string, Tensor>& inputs) {
  std::string sig;
  for (int id : input_slots) {
    const Tensor& t = inputs.at(slots[id].v->name);
    sig += std::to_string(static_cast<int>(t.dtype)) + shape_str(t.dims) + ";";
  }
  return sig;
}

Plan& Session::Impl::plan_for(const std::string& sig) {
  auto it = plans.find(sig);
  if (it == plans.end()) {
    if (plans.size() >= kMaxPlans) {
      auto oldest = plans.begin();
      for (auto i = plans.begin(); i != plans.end(); ++i)
        if (i->second->last_used < oldest->second->last_used) oldest = i;
      if (oldest->second.get() == last_plan) last_plan = nullptr;
      plans.erase(oldest);
    }
    auto p = std::make_unique<Plan>();
    p->signature = sig;
    p->backend = &be;
    if (s.profile_.capture_possible) {
      // Own pools: a captured graph keeps pointing at this plan's buffers.
      p->own_dev = std::make_unique<BufferPool>(be);
      if (device) p->own_host = std::make_unique<BufferPool>(*host_backend);
      p->dev_pool = p->own_dev.get();
      p->host_pool = device ? p->own_host.get() : p->dev_pool;
    } else {
      p->dev_pool = shared_dev.get();
      p->host_pool = device ? shared_host.get() : shared_dev.get();
    }
    it = plans.emplace(sig, std::move(p)).first;
  }
  it->second->last_used = ++clock;
  return *it->second;
}

// --- running -------------------------------------------------------------------

void Session::Impl::bind_inputs(Plan& p, const std::map<std::string, Tensor>& inputs) {
  for (int id : input_slots) {
    Slot& sl = slots[id];
    const Tensor* t = &inputs.at(sl.v->name);
    if (compute_dtype(t->dtype) != t->dtype) {
      run_tensors.push_back(convert_float(*t, compute_dtype(t->dtype)));
      t = &run_tensors.back();
    }
    sl.host = RtTensor{t->dtype, t->dims, const_cast<uint8_t*>(t->bytes.data()), Backend::CPU};
    sl.has_host = true;
    if (!device) {
      sl.dev = sl.host;
      sl.has_dev = true;
      continue;
    }
    auto& buf = p.input_bufs[id];
    size_t bytes = std::max<size_t>(t->bytes.size(), 1);
    if (buf.first == nullptr || buf.second < bytes) {
      if (buf.first) be.free(buf.first);
      buf = {be.alloc(bytes), bytes};
    }
    be.copy_from_host(buf.first, t->bytes.data(), t->bytes.size());
    sl.dev = RtTensor{t->dtype, t->dims, buf.first, be.kind()};
    sl.has_dev = true;
  }
}

const RtTensor& Session::Impl::device_view(Plan& p, int id) {
  Slot& sl = slots[id];
  if (sl.has_dev) return sl.dev;
  FUSE_CHECK(sl.has_host, "internal: value '" << sl.v->name << "' read before it was computed");
  // A host value a device kernel reads: it depends only on shapes and
  // constants, so one upload per shape plan is enough.
  auto& up = p.uploads[id];
  size_t bytes = std::max<size_t>(sl.host.nbytes(), 1);
  if (up.first == nullptr || up.second < bytes) {
    if (up.first) be.free(up.first);
    up = {be.alloc(bytes), bytes};
    be.copy_from_host(up.first, sl.host.data, sl.host.nbytes());
  } else if (p.runs == 0) {
    be.copy_from_host(up.first, sl.host.data, sl.host.nbytes());
  }
  sl.dev = RtTensor{sl.host.dtype, sl.host.shape, up.first, be.kind()};
  sl.has_dev = true;
  return sl.dev;
}

namespace {

class StepContext final : public KernelContext {
 public:
  StepContext(Session::Impl& im, Plan& p, Step& st, std::vector<const RtTensor*> views, std::vector<Buffer*> bufs,
              Precision prec)
      : im_(im), plan_(p), st_(st), views_(std::move(views)), bufs_(std::move(bufs)), prec_(prec) {
    produced_.assign(st.outs.size(), false);
  }
  ~StepContext() override {
    for (auto& [pool, ptr] : temps_) pool->release(ptr);
  }
  const Node& node() const override { return st_.n(); }
  Backend backend() const override { return st_.on_host ? Backend::CPU : im_.be.kind(); }
  Precision precision() const override { return prec_; }
  size_t num_inputs() const override { return views_.size(); }
  const RtTensor* input(size_t i) const override { return i < views_.size() ? views_[i] : nullptr; }
  const RtTensor* host_input(size_t i) override;
  size_t num_outputs() const override { return st_.outs.size(); }
  RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) override;
  RtTensor* alias_output(size_t i, size_t input_j, const std::vector<int64_t>& shape) override;
  void* scratch(size_t bytes) override {
    BufferPool* pool = pool_for_step();
    void* p = pool->acquire(bytes);
    temps_.push_back({pool, p});
    return p;
  }
  void* stream() const override { return st_.on_host ? nullptr : im_.be.stream(); }

  void check_all_outputs() const {
    for (size_t i = 0; i < st_.outs.size(); ++i)
      FUSE_CHECK(st_.outs[i] < 0 || produced_[i],
                 st_.n().label() << ": the kernel did not produce output " << i);
  }

 private:
  BufferPool* pool_for_step() const { return st_.on_host ? plan_.host_pool : plan_.dev_pool; }
  Slot* out_slot(size_t i) {
    FUSE_CHECK(i < st_.outs.size(), st_.n().label() << ": kernel wrote output " << i << " but the node declares "
                                                   << st_.outs.size());
    FUSE_CHECK(!produced_[i], st_.n().label() << ": output " << i << " written twice");
    produced_[i] = true;
    return st_.outs[i] >= 0 ? &im_.slots[st_.outs[i]] : nullptr;
  }

  Session::Impl& im_;
  Plan& plan_;
  Step& st_;
  std::vector<const RtTensor*> views_;
  std::vector<Buffer*> bufs_;
  Precision prec_;
  std::vector<bool> produced_;
  std::vector<std::pair<BufferPool*, void*>> temps_;
  std::vector<std::unique_ptr<RtTensor>> omitted_;
};

const RtTensor* StepContext::host_input(size_t i) {
  if (i >= views_.size() || !views_[i]) return nullptr;
  if (st_.on_host || !im_.device) return views_[i];
  Slot& sl = im_.slots[st_.ins[i]];
  if (sl.has_host) {
    // The data of a graph input read on the host: fine for this run, but a
    // captured graph would freeze it.
    if (!sl.host_produced) {
      plan_.reads_device_data = true;
      if (plan_.no_capture_reason.empty())
        plan_.no_capture_reason = st_.n().label() + " reads input '" + sl.v->name + "' on the host";
    }
    return &sl.host;
  }
  // Device data needed on the host: copy and record it.
  im_.be.synchronize();
  im_.be.raise_device_errors();  // e.g. an out-of-range index upstream: report it, not its zeros
  void* p = plan_.host_pool->acquire(sl.dev.nbytes());
  im_.be.copy_to_host(p, sl.dev.data, sl.dev.nbytes());
  sl.host = RtTensor{sl.dev.dtype, sl.dev.shape, p, Backend::CPU};
  sl.has_host = true;
  sl.host_buf = im_.new_buffer(p, plan_.host_pool);
  SessionProfile& prof = im_.prof();
  prof.device_to_host_copies++;
  prof.device_to_host_bytes += static_cast<int64_t>(sl.dev.nbytes());
  std::string label = st_.n().label();
  if (std::find(prof.device_to_host_nodes.begin(), prof.device_to_host_nodes.end(), label) ==
      prof.device_to_host_nodes.end())
    prof.device_to_host_nodes.push_back(label);
  plan_.reads_device_data = true;
  if (plan_.no_capture_reason.empty())
    plan_.no_capture_reason = label + " reads device value '" + sl.v->name + "' on the host";
  return &sl.host;
}

RtTensor* StepContext::output(size_t i, DType dtype, const std::vector<int64_t>& shape) {
  for (int64_t d : shape)
    FUSE_CHECK(d >= 0, st_.n().label() << ": kernel asked for output shape " << shape_str(shape));
  Slot* sl = out_slot(i);
  BufferPool* pool = pool_for_step();
  size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* p = pool->acquire(bytes);
  Backend where = st_.on_host ? Backend::CPU : im_.be.kind();
  if (!sl) {  // omitted optional output: a throwaway buffer
    temps_.push_back({pool, p});
    omitted_.push_back(std::make_unique<RtTensor>(RtTensor{dtype, shape, p, where}));
    return omitted_.back().get();
  }
  Buffer* b = im_.new_buffer(p, pool);
  RtTensor t{dtype, shape, p, where};
  if (st_.on_host || !im_.device) {
    sl->host = t;
    sl->has_host = true;
    sl->host_buf = b;
    if (!im_.device) {
      sl->dev = t;
      sl->has_dev = true;
      sl->host_buf = nullptr;
      sl->dev_buf = b;
    }
    return im_.device ? &sl->host : &sl->dev;
  }
  sl->dev = t;
  sl->has_dev = true;
  sl->dev_buf = b;
  return &sl->dev;
}

RtTensor* StepContext::alias_output(size_t i, size_t j, const std::vector<int64_t>& shape) {
  FUSE_CHECK(j < views_.size() && views_[j], st_.n().label() << ": alias of omitted input " << j);
  const RtTensor& in = *views_[j];
  FUSE_CHECK(shape_numel(shape) == in.numel(), st_.n().label() << ": cannot view " << shape_str(in.shape) << " as "
                                                               << shape_str(shape) << " (sizes differ)");
  Slot* sl = out_slot(i);
  RtTensor t{in.dtype, shape, in.data, in.where};
  Buffer* b = bufs_[j];
  if (b) b->refs++;
  if (!sl) {
    omitted_.push_back(std::make_unique<RtTensor>(t));
    Session::Impl::unref(b);
    return omitted_.back().get();
  }
  if (!im_.device) {
    sl->dev = sl->host = t;
    sl->has_dev = sl->has_host = true;
    sl->dev_buf = b;
    return &sl->dev;
  }
  if (in.where == Backend::CPU) {
    sl->host = t;
    sl->has_host = true;
    sl->host_buf = b;
    return &sl->host;
  }
  sl->dev = t;
  sl->has_dev = true;
  sl->dev_buf = b;
  return &sl->dev;
}

}  // namespace

Tensor Session::Impl::host_copy(Plan& p, int id, const Node& reader) {
  Slot& sl = slots[id];
  FUSE_CHECK(sl.has_dev || sl.has_host, "internal: value '" << sl.v->name << "' read before it was computed");
  const RtTensor& v = sl.has_host ? sl.host : sl.dev;
  Tensor t(v.dtype, v.shape);
  if (v.where == Backend::CPU) {
    if (v.nbytes()) std::memcpy(t.bytes.data(), v.data, v.nbytes());
  } else {
    be.synchronize();
    be.raise_device_errors();
    be.copy_to_host(t.bytes.data(), v.data, v.nbytes());
    SessionProfile& pr = prof();
    pr.device_to_host_copies++;
    pr.device_to_host_bytes += static_cast<int64_t>(v.nbytes());
    if (std::find(pr.device_to_host_nodes.begin(), pr.device_to_host_nodes.end(), reader.label()) ==
        pr.device_to_host_nodes.end())
      pr.device_to_host_nodes.push_back(reader.label());
  }
  return t;
}

void Session::Impl::run_if(Plan& p, Step& st) {
  const Node& n = st.n();
  // The branch is chosen at run time: a captured graph could not follow it.
  p.reads_device_data = true;
  if (p.no_capture_reason.empty()) p.no_capture_reason = n.label() + " picks a branch at run time";
  FUSE_CHECK(!st.ins.empty() && st.ins[0] >= 0, n.label() << ": missing condition");
  Tensor cond = host_copy(p, st.ins[0], n);
  FUSE_CHECK(cond.numel() == 1, n.label() << ": the condition must have one element, got " << shape_str(cond.dims));
  const int b = cond.as_double(0) != 0 ? 0 : 1;
  Session& branch = *st.branch[b];
  std::map<std::string, Tensor> feeds;
  for (const std::string& name : branch.input_names()) {
    const Value* v = s.graph_.find(name);
    FUSE_CHECK(v && slot_of.count(v), n.label() << ": branch reads '" << name << "', which the graph does not define");
    feeds[name] = host_copy(p, slot_of.at(v), n);
  }
  std::vector<Tensor> outs;
  try {
    outs = branch.run(feeds);
  } catch (const Error& e) {
    throw Error(n.label() + (b == 0 ? " then_branch: " : " else_branch: ") + e.what());
  }
  for (size_t i = 0; i < st.outs.size() && i < outs.size(); ++i) {
    if (st.outs[i] < 0) continue;
    Tensor t = std::move(outs[i]);
    if (compute_dtype(t.dtype) != t.dtype) t = convert_float(t, compute_dtype(t.dtype));
    Slot& sl = slots[st.outs[i]];
    void* mem = p.dev_pool->acquire(t.bytes.size());
    if (device) be.copy_from_host(mem, t.bytes.data(), t.bytes.size());
    else if (!t.bytes.empty()) std::memcpy(mem, t.bytes.data(), t.bytes.size());
    sl.dev = RtTensor{t.dtype, t.dims, mem, be.kind()};
    sl.has_dev = true;
    sl.dev_buf = new_buffer(mem, p.dev_pool);
    if (!device) {
      sl.host = sl.dev;
      sl.has_host = true;
    }
  }
  if (device) be.synchronize();  // the host copies above must outlive the uploads
}

void Session::Impl::run_step(Plan& p, Step& st) {
  if (st.is_if) {
    auto call = [&] { run_if(p, st); };
    if (s.opts_.profile) {
      NodeProfile& np = s.profile_.nodes[st.profile_index];
      np.total_ms += be.elapsed_ms(call);
      np.calls++;
    } else {
      call();
    }
    for (int id : st.release) release_slot(slots[id]);
    return;
  }
  const Node& n = st.n();
  std::vector<const RtTensor*> views(st.ins.size(), nullptr);
  std::vector<Buffer*> bufs(st.ins.size(), nullptr);
  for (size_t i = 0; i < st.ins.size(); ++i) {
    int id = st.ins[i];
    if (id < 0) continue;
    Slot& sl = slots[id];
    if (!device) {
      FUSE_CHECK(sl.has_dev, "internal: value '" << sl.v->name << "' read before it was computed");
      views[i] = &sl.dev;
      bufs[i] = sl.dev_buf;
    } else if (st.on_host) {
      if (sl.has_host) {
        views[i] = &sl.host;
        bufs[i] = sl.host_buf;
      } else {
        // Only Shape/Size are placed on the host with a device input; they
        // read the shape, never the data.
        views[i] = &sl.dev;
        bufs[i] = sl.dev_buf;
      }
    } else {
      views[i] = &device_view(p, id);
      bufs[i] = sl.dev_buf;
    }
  }
  Backend b = st.on_host ? Backend::CPU : be.kind();
  auto dtype_of = [&](int i) -> DType {
    if (i < 0 || static_cast<size_t>(i) >= views.size() || !views[i]) {
      for (auto* v : views)
        if (v) return v->dtype;
      return DType::Undefined;
    }
    return views[i]->dtype;
  };
  DType dt = dtype_of(0);
  const KernelInfo* k = st.cached_kernel;
  if (!k || st.cached_dtype != dt) {
    k = lookup_kernel(n, b, dtype_of);
    FUSE_CHECK(k, "no " << backend_name(b) << " kernel for " << n.label() << " with inputs " << shapes_of(views));
    st.cached_kernel = k;
    st.cached_dtype = dt;
  }
  StepContext ctx(*this, p, st, views, bufs, s.opts_.precision);
  auto call = [&] {
    try {
      k->fn(ctx);
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.find("'" + n.name + "'") == std::string::npos) msg = n.label() + ": " + msg;
      throw Error(msg + " (inputs: " + shapes_of(views) + ")");
    } catch (const std::exception& e) {
      throw Error(n.label() + ": " + e.what() + " (inputs: " + shapes_of(views) + ")");
    }
    ctx.check_all_outputs();
  };
  if (s.opts_.profile) {
    BackendImpl& timer = st.on_host && host_backend ? *host_backend : be;
    double ms = timer.elapsed_ms(call);
    NodeProfile& np = s.profile_.nodes[st.profile_index];
    np.total_ms += ms;
    np.calls++;
  } else {
    call();
  }
  // Values whose last reader (or, if unread, producer) is this step.
  for (int id : st.release) release_slot(slots[id]);
}

void Session::Impl::execute_steps(Plan& p) {
  for (Step& st : steps) run_step(p, st);
}

std::vector<Tensor> Session::Impl::collect_outputs(Plan& p, bool record) {
  if (device) be.synchronize();
  if (device) be.raise_device_errors();  // an out-of-range index a kernel met: Error naming the node
  std::vector<Tensor> outs;
  if (record) p.out_views.clear();
  for (int id : output_slots) {
    Slot& sl = slots[id];
    FUSE_CHECK(sl.has_dev || sl.has_host, "graph output '" << sl.v->name << "' was not computed");
    const RtTensor& v = sl.has_host ? sl.host : sl.dev;
    if (record) p.out_views.push_back(v);
    outs.push_back(fetch_output(p, outs.size(), v, sl.model_dtype()));
  }
  return outs;
}

// One output to the host in its declared dtype. A device value in another
// float dtype is converted on the device first: the host then copies the
// declared bytes once instead of converting element by element.
Tensor Session::Impl::fetch_output(Plan& p, size_t index, const RtTensor& v, DType declared) {
  const DType to = declared_target(v.dtype, declared);
  if (v.where != Backend::CPU && to != DType::Undefined) {
    Tensor t(to, v.shape);
    void* staged = p.ensure(p.output_stage[index], t.bytes.size());
    if (be.convert_float(staged, to, v.data, v.dtype, v.numel())) {
      be.copy_to_host(t.bytes.data(), staged, t.bytes.size());
      return t;
    }
  }
  Tensor t(v.dtype, v.shape);
  if (v.where == Backend::CPU) {
    if (v.nbytes()) std::memcpy(t.bytes.data(), v.data, v.nbytes());
  } else {
    be.copy_to_host(t.bytes.data(), v.data, v.nbytes());
  }
  return to == DType::Undefined ? t : convert_float(t, to);
}

void Session::Impl::finish_run() {
  for (Slot& sl : slots) {
    if (sl.is_const) continue;
    unref(sl.dev_buf);
    unref(sl.host_buf);
    sl.has_dev = sl.has_host = false;
  }
  run_buffers.clear();
  run_tensors.clear();
}

std::vector<Tensor> Session::Impl::replay(Plan& p, const std::map<std::string, Tensor>& inputs) {
  for (int id : input_slots) {
    const Tensor* t = &inputs.at(slots[id].v->name);
    void* dst = p.input_bufs.at(id).first;
    const DType want = compute_dtype(t->dtype);
    if (want != t->dtype) {
      // Upload as given, convert on the device (no host pass over the data).
      void* staged = p.ensure(p.input_stage[id], t->bytes.size());
      be.copy_from_host(staged, t->bytes.data(), t->bytes.size());
      if (be.convert_float(dst, want, staged, t->dtype, t->numel())) continue;
      Tensor conv = convert_float(*t, want);
      be.copy_from_host(dst, conv.bytes.data(), conv.bytes.size());
      be.synchronize();  // `conv` dies here; the copy must have read it
      continue;
    }
    be.copy_from_host(dst, t->bytes.data(), t->bytes.size());
  }
  be.replay(p.graph);
  std::vector<Tensor> outs;
  for (size_t i = 0; i < output_slots.size(); ++i)
    outs.push_back(fetch_output(p, i, p.out_views[i], slots[output_slots[i]].model_dtype()));
  be.synchronize();
  be.raise_device_errors();  // an out-of-range index met by the replayed kernels
  return outs;
}

// --- Session -------------------------------------------------------------------

Session::Session(const Graph& g, SessionOptions o) : graph_(g), opts_(o) {
  set_num_threads(o.threads);
  backend_ = make_backend(o.backend);
  impl_ = std::make_unique<Impl>(*this, *backend_);
  impl_->setup();
}

Session::~Session() {
  if (impl_) {
    impl_->plans.clear();
    for (void* p : impl_->const_device_allocs) backend_->free(p);
    impl_.reset();
  }
}

static void check_inputs(const Graph& g, const std::vector<int>& input_slots, const std::vector<Slot>& slots,
                         const std::map<std::string, Tensor>& inputs) {
  std::set<std::string> known;
  for (int id : input_slots) known.insert(slots[id].v->name);
  for (const auto& [name, t] : inputs)
    FUSE_CHECK(known.count(name), "unknown input '" << name << "' (the model's inputs are: " << [&] {
      std::string s;
      for (const auto& k : known) s += (s.empty() ? "" : ", ") + k;
      return s;
    }() << ")");
  std::map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> (size, input)
  for (int id : input_slots) {
    const Value* v = slots[id].v;
    auto it = inputs.find(v->name);
    FUSE_CHECK(it != inputs.end(), "missing input '" << v->name << "'");
    const Tensor& t = it->second;
    FUSE_CHECK(t.dtype != DType::String, "input '" << v->name << "': string tensors are not supported");
    FUSE_CHECK(v->dtype == DType::Undefined || t.dtype == v->dtype,
               "input '" << v->name << "' is " << dtype_name(t.dtype) << " but the model declares "
                         << dtype_name(v->dtype));
    for (int64_t d : t.dims) FUSE_CHECK(d >= 0, "input '" << v->name << "' has a negative dim " << shape_str(t.dims));
    FUSE_CHECK(t.bytes.size() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype),
               "input '" << v->name << "' has " << t.bytes.size() << " bytes for shape " << shape_str(t.dims));
    if (!v->shape) continue;
    const Shape& s = *v->shape;
    FUSE_CHECK(s.size() == t.dims.size(), "input '" << v->name << "' has shape " << shape_str(t.dims)
                                                    << " but the model declares " << shape_str(s));
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i].known()) {
        FUSE_CHECK(s[i].value == t.dims[i], "input '" << v->name << "' has shape " << shape_str(t.dims)
                                                      << " but the model declares " << shape_str(s));
      } else if (!s[i].symbol.empty()) {
        auto b = bound.find(s[i].symbol);
        if (b == bound.end()) {
          bound[s[i].symbol] = {t.dims[i], v->name};
        } else {
          FUSE_CHECK(b->second.first == t.dims[i],
                     "input '" << v->name << "' has " << s[i].symbol << " = " << t.dims[i] << " but input '"
                               << b->second.second << "' has " << s[i].symbol << " = " << b->second.first);
        }
      }
    }
  }
  (void)g;
}

std::vector<Tensor> Session::run(const std::map<std::string, Tensor>& inputs) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  check_inputs(graph_, im.input_slots, im.slots, inputs);
  Plan& p = im.plan_for(im.signature(inputs));
  im.last_plan = &p;
  backend_->reset_device_errors();  // enqueued before this run's kernels or replayed graph
  profile_.runs++;
  if (p.graph) {
    profile_.graph_replays++;
    return im.replay(p, inputs);
  }
  p.dev_pool->reset_peak();
  if (p.host_pool != p.dev_pool) p.host_pool->reset_peak();
  bool capture = profile_.capture_possible && p.runs >= 1 && !p.reads_device_data;
  std::vector<Tensor> outs;
  try {
    im.bind_inputs(p, inputs);
    if (capture) {
      p.graph = backend_->capture([&] { im.execute_steps(p); });
      if (p.graph) {
        backend_->replay(p.graph);
        profile_.graph_replays++;
      } else {
        p.no_capture_reason = "the backend refused the capture";
        p.reads_device_data = true;
        im.finish_run();
        im.bind_inputs(p, inputs);
        im.execute_steps(p);
      }
    } else {
      im.execute_steps(p);
    }
    outs = im.collect_outputs(p, capture && p.graph);
  } catch (...) {
    im.finish_run();
    p.runs++;
    throw;
  }
  im.finish_run();
  p.runs++;
  if (profile_.capture_possible && p.reads_device_data && profile_.capture_disabled_reason.empty())
    profile_.capture_disabled_reason = p.no_capture_reason;
  return outs;
}

double Session::device_replay_ms() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.run_mutex);
  if (im.last_plan == nullptr || !im.last_plan->graph) return -1;
  Plan& p = *im.last_plan;
  return backend_->elapsed_ms([&] { backend_->replay(p.graph); });
}

std::vector<std::string> Session::input_names() const {
  std::vector<std::string> r;
  for (int id : impl_->input_slots) r.push_back(impl_->slots[id].v->name);
  return r;
}
std::vector<std::string> Session::output_names() const {
  std::vector<std::string> r;
  for (int id : impl_->output_slots) r.push_back(impl_->slots[id].v->name);
  return r;
}

size_t Session::peak_bytes() const {
  const Plan* p = impl_->last_plan;
  if (!p) return 0;
  size_t b = p->dev_pool->peak_bytes();
  if (p->host_pool != p->dev_pool) b += p->host_pool->peak_bytes();
  return b;
}
size_t Session::reserved_bytes() const {
  size_t b = 0;
  std::set<const BufferPool*> seen;
  auto add = [&](const BufferPool* pool) {
    if (pool && seen.insert(pool).second) b += pool->reserved_bytes();
  };
  add(impl_->shared_dev.get());
  add(impl_->shared_host.get());
  for (auto& [sig, p] : impl_->plans) {
    add(p->own_dev.get());
    add(p->own_host.get());
  }
  return b;
}
size_t Session::constant_bytes() const { return impl_->const_bytes; }

void Session::reset_profile() {
  for (NodeProfile& n : profile_.nodes) n.total_ms = 0, n.calls = 0;
  profile_.runs = profile_.graph_replays = 0;
  profile_.device_to_host_copies = profile_.device_to_host_bytes = 0;
  profile_.device_to_host_nodes.clear();
}

std::vector<std::string> Session::missing_kernels(const Graph& g, Backend b) {
  try {
    SessionOptions o;
    o.backend = b;
    Session s(g, o);
  } catch (const Error& e) {
    std::string m = e.what();
    if (m.rfind("no ", 0) == 0 && m.find(" kernel for ") != std::string::npos) return {m};
    throw;
  }
  return {};
}

std::vector<NodeProfile> SessionProfile::nodes_by_time() const {
  std::vector<NodeProfile> r = nodes;
  std::stable_sort(r.begin(), r.end(), [](const NodeProfile& a, const NodeProfile& b) { return a.total_ms > b.total_ms; });
  return r;
}

std::vector<OpProfile> SessionProfile::by_op_type() const {
  std::map<std::string, OpProfile> m;
  for (const NodeProfile& n : nodes) {
    OpProfile& o = m[n.op];
    o.op = n.op;
    o.total_ms += n.total_ms;
    o.calls += n.calls;
    o.nodes++;
  }
  std::vector<OpProfile> r;
  for (auto& [k, v] : m) r.push_back(v);
  std::stable_sort(r.begin(), r.end(), [](const OpProfile& a, const OpProfile& b) { return a.total_ms > b.total_ms; });
  return r;
}

}  // namespace fuseopt
