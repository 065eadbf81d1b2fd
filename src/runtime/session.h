// Session: runs a Graph on a backend.
//
//   Session s(graph, {.backend = Backend::CPU});
//   std::vector<Tensor> outs = s.run({{"input_ids", ids}, {"attention_mask", mask}});
//
// - Input shapes are bound at run time; symbolic dims resolve from the actual
//   inputs and may change between runs. Each kernel computes its output shape
//   from its actual inputs.
// - The constructor checks that every node has a kernel and throws ONE Error
//   naming every missing (op, domain) with its nodes. Nodes whose inputs are
//   all constant are evaluated once, here, on the CPU.
// - Memory: a value's buffer is released after its last consumer and reused
//   (runtime/memory_plan.h); peak_bytes() reports the high-water mark.
// - Placement (device backends): Shape/Size and nodes that read only host
//   values and produce integer/bool tensors run on the CPU, so shape math
//   never round-trips the device; device kernels get a device copy of such a
//   value, uploaded once per shape plan. A CPU node that must read device
//   data copies it to the host and the profile records it.
// - Precision: FP16/BF16 store float tensors in that type on the device
//   (initializers converted once here, float inputs on entry, outputs back
//   to the declared dtype; Cast to FLOAT becomes the compute type). The CPU
//   backend computes FP32 and TF32 in fp32 and refuses FP16/BF16; it has no
//   half kernels, so a float16/bfloat16 *model* computes in fp32 there by the
//   same mechanism (its constants converted once, inputs on entry, outputs
//   back to the declared dtype, Cast to FLOAT16/BFLOAT16 becomes FLOAT).
// - CUDA graphs: per input-shape signature ("shape plan") memory comes from
//   the plan's own pool, so a repeated run reproduces the same addresses. The
//   second run of a signature is captured (BackendImpl::capture) and later
//   runs only copy inputs in, replay, and copy outputs out. Capture is off
//   when profiling, when the backend cannot capture, or when a CPU node reads
//   device data (the profile says why).
// The Graph must outlive the Session. run() may be called from several
// threads; calls take turns.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/backend.h"
#include "runtime/kernel.h"

namespace fuseopt {

struct SessionOptions {
  Backend backend = Backend::CPU;
  Precision precision = Precision::FP32;
  bool cuda_graphs = true;
  bool profile = false;  // time every node (disables graph capture)
  int threads = 0;       // CPU threads for kernels; 0 = all cores
};

struct NodeProfile {
  std::string name, op;  // op is "domain.op" for non-default domains
  bool on_host = false;  // ran on the CPU in a device session
  double total_ms = 0;
  int64_t calls = 0;
};

struct OpProfile {
  std::string op;
  double total_ms = 0;
  int64_t calls = 0;  // node executions
  int64_t nodes = 0;  // distinct nodes
};

struct SessionProfile {
  std::vector<NodeProfile> nodes;  // execution order, summed over profiled runs
  int64_t runs = 0;
  int64_t graph_replays = 0;
  int64_t device_to_host_copies = 0;  // CPU nodes/kernels that read device data
  int64_t device_to_host_bytes = 0;
  // Graph inputs copied from the host to the device and graph outputs copied
  // back (device sessions). run_device with device inputs does neither.
  int64_t input_upload_bytes = 0, output_download_bytes = 0;
  std::vector<std::string> device_to_host_nodes;  // node labels, each once
  bool capture_possible = false;
  std::string capture_disabled_reason;  // empty when capture is possible
  // Sorted by total time, largest first.
  std::vector<NodeProfile> nodes_by_time() const;
  std::vector<OpProfile> by_op_type() const;
};

// A graph output in device memory that the caller owns (Session::run_device):
// `owner` holds the block, freed when its last copy goes; it may outlive the
// Session (BackendImpl::alloc_exported).
struct DeviceTensor {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  void* data = nullptr;
  std::shared_ptr<void> owner;
  int device = -1;  // CUDA ordinal
  // > 0: a present of the KV cache the session holds (Session::hold_kv_cache), not a copy: the
  // [B, H, S, D] tensor is the first S rows of each (b, h) of a [B, H, seq_capacity, D] block in
  // the cache's storage dtype, valid until the session's next run. Session::download makes a
  // dense host copy of it.
  int64_t seq_capacity = 0;
};

class Session {
 public:
  Session(const Graph& g, SessionOptions o = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Inputs by graph-input name; every graph input must be given. Returns one
  // host Tensor per graph output, in graph order, with the declared dtypes.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);

  // Inputs as views: each RtTensor is dense row-major memory either on the
  // host (where == CPU) or on this session's device (where == the backend,
  // device backend().device_ordinal()); it must stay valid until the call
  // returns. Device inputs are read on backend().stream() -- the caller
  // orders its writes before that (e.g. makes the stream wait on an event of
  // the producer's stream) -- and copied once on the device into the shape
  // plan's input buffer (a captured graph replays on fixed addresses).
  // run_views returns host Tensors as run() does. run_device (device backends
  // only) returns the outputs in memory the caller owns on the device, in the
  // declared dtypes, with no copy through the host; the stream is
  // synchronized before it returns, so the outputs are complete for any
  // stream of the device.
  std::vector<Tensor> run_views(const std::map<std::string, RtTensor>& inputs);
  std::vector<DeviceTensor> run_device(const std::map<std::string, RtTensor>& inputs);

  // Device time (ms) of one more execution of the last run's captured graph,
  // with inputs and outputs left where they are on the device: what a
  // framework keeping its tensors on the GPU measures. -1 when the last run
  // has no captured graph (CPU backend, capture off or impossible).
  double device_replay_ms();

  // --- The KV cache held by the session (generation loops) ---
  // Keeps the caches of the model's fused attention on the device between runs: every
  // fuseopt.Attention past_key / past_value that is a graph input read by nothing else (Shape
  // aside), paired with its present output, which must be a graph output no node reads. Each
  // pair lives in a block of `capacity` positions that the session owns; a run takes the pasts
  // from it (the caller leaves those inputs out) and the attention writes only the step's new
  // rows there, in place: no copy of the cache per step, no new present tensor, and the step's
  // shape plan (its captured graph) stays valid while the cache does not move. A run that does
  // pass the past inputs loads the cache from them first (the prompt's cache, or a restart).
  // Presents come back as views of the cache (DeviceTensor::seq_capacity; run() copies them to
  // dense host tensors). Throws an Error naming the node when the model's form does not allow it
  // (no fused attention with past inputs, a past read by another node, a present read by one),
  // and a run that would pass the capacity throws before it starts.
  void hold_kv_cache(int64_t capacity);
  bool kv_cache_held() const;
  int64_t kv_cache_capacity() const;
  int64_t kv_cache_length() const;  // positions held (0 until the first load)
  // Forgets the positions from `length` on (0 <= length <= kv_cache_length()): a rewind, e.g. to
  // time the same step again. The rows stay in the block; the next run overwrites them.
  void set_kv_cache_length(int64_t length);
  std::vector<std::string> kv_cache_inputs() const;  // the past inputs the cache stands for
  // A dense host copy of an output of run_device; a present of the held KV cache comes in the
  // dtype the model declares for it.
  Tensor download(const DeviceTensor& t);

  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  const SessionOptions& options() const { return opts_; }
  BackendImpl& backend() { return *backend_; }

  // Memory of intermediate values (device + host pools), excluding weights.
  size_t peak_bytes() const;      // high-water mark of live buffers, last run
  size_t reserved_bytes() const;  // bytes the pools hold
  size_t constant_bytes() const;  // weights/constants resident on the backend
  size_t weights_stored_nk() const;  // GEMM weights the session stores transposed (session_setup.cc)
  size_t norms_folded() const;       // RMSNorm steps run inside the GatedMatMul after them (session_setup.cc)
  const SessionProfile& profile() const { return profile_; }
  void reset_profile();

  // The (op, domain, node) triples without a kernel for `b`, without
  // throwing. The constructor throws one Error built from this list.
  static std::vector<std::string> missing_kernels(const Graph& g, Backend b);

  struct Impl;

 private:
  const Graph& graph_;
  SessionOptions opts_;
  std::unique_ptr<BackendImpl> backend_;
  SessionProfile profile_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fuseopt
