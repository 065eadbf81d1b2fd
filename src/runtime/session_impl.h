// Session internals shared by its files (not a public header; see
// session.h for the model). The run state lives in Slots (one per value),
// Steps (one per node, in execution order) and Plans (one per input-shape
// signature: pools, uploads, the captured graph).
//
//   session_setup.cc  slots, constant folding, placement, precision, kernel check
//   precision.h       compute dtypes and float conversions (shared with eval_node.cc)
//   session_step.cc   the step loop and its KernelContext
//   session_io.cc     plans, binding inputs, fetching outputs, graph replay
//   session_kv_cache.cc  the KV cache a session holds (Session::hold_kv_cache)
//   session.cc        the public Session methods
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/backend.h"
#include "runtime/kernel.h"
#include "runtime/memory_plan.h"
#include "runtime/precision.h"
#include "runtime/session.h"

namespace fuseopt {

namespace session_detail {

constexpr size_t kMaxPlans = 8;
// Marks a Softmax/LogSoftmax of opset < 13 (see kernels/cpu/softmax_reduce.cc).
constexpr const char* kLegacySoftmaxAttr = "__fuseopt_softmax_2d";

inline std::string op_label(const Node& n) { return n.domain.empty() ? n.op_type : n.domain + "." + n.op_type; }

// "shape dtype, ..." of a step's inputs, for messages (session_step.cc).
std::string shapes_of(const std::vector<const RtTensor*>& ins);

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

}  // namespace session_detail

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
  // A graph input bound this run without a conversion kernel (KernelContext::input_is_run_stable).
  bool input_copied = false;
  bool host_produced = false;  // constant or output of a CPU-placed step
  int last_use = -1;           // step index of the last consumer
  bool read_by_step = false;   // some step reads it (as an input or an If's implicit input)
  bool used_on_device = false;
  // run state
  bool has_dev = false, has_host = false;
  RtTensor dev, host;
  Buffer* dev_buf = nullptr;
  Buffer* host_buf = nullptr;
  bool upload_nk = false;  // uploaded transposed, [N, K] (store_weights_nk); the host view stays [K, N]
  // A slot whose K rows are multiplied by this slot's values ([K]) as it is uploaded: a
  // GatedMatMul weight that took the RMSNorm before it, gamma and all (fold_rms_norms); -1 none.
  int upload_scale_rows_by = -1;
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

// One past/present pair of the KV cache a session holds (session_kv_cache.cc): the graph input
// the attention reads as its past and the graph output it writes as the present, both stored
// in `block` ([B, H, capacity, D] of `dtype`, allocated at the first load).
struct HeldKv {
  int past_slot = -1, present_slot = -1;
  std::string attention;  // the node's label, for messages
  std::shared_ptr<void> block;
  DType dtype = DType::Undefined;
  int64_t B = 0, H = 0, D = 0;
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
  uint64_t executions = 0;  // execute_steps calls (a run that falls back from its capture executes twice)
  // KernelContext::shared_derived: (input slot, key) -> its device memory and the execution that
  // last wrote it.
  struct Derived {
    std::pair<void*, size_t> mem{nullptr, 0};
    uint64_t written_in = 0;
  };
  std::map<std::pair<int, std::string>, Derived> derived;
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
    for (auto& [k, d] : derived)
      if (d.mem.first) backend->free(d.mem.first);
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
  // The dtype a float value of dtype `d` is computed and stored in
  // (runtime/precision.h: the CPU backend has no half kernels).
  DType compute_dtype(DType d) const { return ::fuseopt::compute_dtype(d, compute_float, device); }
  std::vector<Slot> slots;
  std::unordered_map<const Value*, int> slot_of;
  std::vector<Step> steps;
  std::deque<Tensor> owned_consts;           // folded / converted constants
  std::vector<void*> const_device_allocs;    // uploaded constants
  size_t const_bytes = 0;
  size_t weights_nk = 0;  // constants stored [N, K] (store_weights_nk)
  size_t norms_folded = 0;  // RMSNorm steps run by the GatedMatMul after them (fold_rms_norms)
  std::vector<int> input_slots, output_slots;
  std::unique_ptr<BackendImpl> host_backend;  // CPU memory for host steps of a device session
  std::unique_ptr<BufferPool> shared_dev, shared_host;
  std::map<std::string, std::unique_ptr<Plan>> plans;
  uint64_t clock = 0;
  Plan* last_plan = nullptr;
  std::mutex run_mutex;  // run() calls from several threads take turns
  // per-run
  // An uncaptured run_device (every run of a generation loop: a new shape each step) computes
  // the graph outputs that need no dtype conversion straight into exported blocks, slot ->
  // block, and hands those out without the copy (export_output).
  bool export_direct = false;
  std::map<int, std::shared_ptr<void>> direct_out;
  std::deque<Buffer> run_buffers;
  std::deque<Tensor> run_tensors;
  // The KV cache the session holds (empty: none); kv_length positions of kv_capacity are valid.
  std::vector<HeldKv> held;
  int64_t kv_capacity = 0, kv_length = 0;
  bool kv_loaded = false;

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
  void store_weights_nk();  // 16-bit CUDA sessions: constant GEMM weights stored [N, K]
  void fold_rms_norms();    // 16-bit CUDA sessions: an RMSNorm run by the GatedMatMul that reads it
  void fold_constants(std::vector<const Node*>& order);
  void check_kernels();
  Plan& plan_for(const std::string& sig);
  // Inputs are views (Session::run_views): host or device memory.
  using Views = std::map<std::string, RtTensor>;
  // Where a run's outputs go: host Tensors or caller-owned device memory.
  struct Outputs {
    std::vector<Tensor>* host = nullptr;
    std::vector<DeviceTensor>* device = nullptr;
  };
  // `tensors`: the host Tensors behind `inputs` (Session::run), whose byte
  // counts are checked too.
  void check_inputs(const Views& inputs, const std::map<std::string, Tensor>* tensors) const;
  void run(const Views& inputs, Outputs out, const std::map<std::string, Tensor>* tensors = nullptr);
  void copy_device_input(void* dst, DType want, const RtTensor& in);
  // in_place: device inputs are read where the caller has them (a run that is not captured);
  // otherwise they are copied into the plan's buffers, whose addresses a captured graph keeps.
  void bind_inputs(Plan& p, const Views& inputs, bool in_place);
  void execute_steps(Plan& p);
  void run_step(Plan& p, Step& st);
  void run_if(Plan& p, Step& st);
  Tensor host_copy(Plan& p, int slot, const Node& reader);
  // The graph outputs after the run's synchronize (recorded in the plan for
  // replays when `record`), then fetched into `out`.
  std::vector<RtTensor> output_views(Plan& p, bool record);
  void deliver_outputs(Plan& p, const std::vector<RtTensor>& views, Outputs out);
  Tensor fetch_output(Plan& p, size_t index, const RtTensor& v, DType declared);
  DeviceTensor export_output(const RtTensor& v, DType declared, int slot);
  void replay(Plan& p, const Views& inputs, Outputs out);
  void finish_run();
  std::string signature(const Views& inputs);
  const RtTensor& device_view(Plan& p, int slot);
  // session_kv_cache.cc
  void find_kv_pairs();
  const HeldKv* held_past(int slot) const;
  const HeldKv* held_present(int slot) const;
  // Before a run: loads the cache from past inputs the caller passed, then points every held
  // past of `inputs` at its cache view (the views the plan binds).
  void kv_prepare(Views& inputs);
  // After a run: the cache length from the presents the run wrote (`views`: the graph outputs).
  void kv_advance(const std::vector<RtTensor>& views);
  RtTensor kv_view(const HeldKv& h) const;
  // A dense host copy of a cache view (`v.seq_capacity` > 0).
  Tensor kv_download(const RtTensor& v);
};

}  // namespace fuseopt
