// The contract between the runtime Session and kernels of every backend.
// A kernel reads its inputs, decides its output shapes from the actual input
// shapes (shapes are only known at run time), asks the context for outputs,
// and computes. Kernels register themselves from their own file:
//
//   FUSEOPT_KERNEL(Relu, "", "Relu", Backend::CPU, {DType::Float}) { ... ctx ... }
//
// Lookup is keyed by (domain, op, backend, dtype of the dispatch input); a
// kernel registered with no dtypes accepts any.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fuseopt {

enum class Backend { CPU = 0, CUDA = 1 };
const char* backend_name(Backend b);

// Numeric mode of a run. On CUDA, Float16/BFloat16 mean float tensors are
// stored in that type (weights converted once at load); statistics,
// softmax and GEMM accumulation stay in fp32. TF32 lets GEMMs use tf32.
enum class Precision { FP32, TF32, FP16, BF16 };
const char* precision_name(Precision p);

// A tensor at run time: a view of memory owned by the Session.
struct RtTensor {
  DType dtype = DType::Undefined;
  std::vector<int64_t> shape;
  void* data = nullptr;
  Backend where = Backend::CPU;  // where `data` lives
  // > 0: a view of a KV cache the Session holds (Session::hold_kv_cache): the tensor, of shape
  // [B, H, S, D], is the first S rows of each (b, h) of a [B, H, seq_capacity, D] block, so its
  // head stride is seq_capacity·D elements. Only the kernels that ask for one (KernelContext::
  // cache_output: fuseopt.Attention's past inputs and present outputs) ever see such a view.
  int64_t seq_capacity = 0;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  size_t rank() const { return shape.size(); }
  template <class T> T* ptr() const { return static_cast<T*>(data); }
};

class KernelContext {
 public:
  virtual ~KernelContext() = default;
  virtual const Node& node() const = 0;
  virtual Backend backend() const = 0;
  virtual Precision precision() const = 0;

  virtual size_t num_inputs() const = 0;
  // nullptr when the optional input is omitted. Data lives on backend().
  virtual const RtTensor* input(size_t i) const = 0;
  // The same input, readable on the host (shape tensors, axes, starts...).
  // On the CPU backend this is input(i); on CUDA the runtime keeps integer
  // shape computations on the host so this rarely copies.
  virtual const RtTensor* host_input(size_t i) = 0;

  virtual size_t num_outputs() const = 0;  // outputs the node declares
  // Allocates output i (from the session's memory plan) and returns it.
  virtual RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) = 0;
  // Makes output i a view of input j (Reshape, Squeeze, Identity...): no copy.
  virtual RtTensor* alias_output(size_t i, size_t input_j, const std::vector<int64_t>& shape) = 0;
  // Temporary memory on backend(), released when the kernel returns.
  virtual void* scratch(size_t bytes) = 0;
  // cudaStream_t on CUDA, nullptr on CPU.
  virtual void* stream() const = 0;
  // The KV cache a Session holds (Session::hold_kv_cache): when output i is the present that
  // extends input `past_j` (a cache view, seq_capacity > 0) in place, returns it as a view of the
  // same block, [B, H, shape[2] rows of seq_capacity, D], so the kernel writes only the rows past
  // the input's. nullptr when output i is not held: the kernel then calls output() as usual.
  virtual RtTensor* cache_output(size_t i, size_t past_j, DType dtype, const std::vector<int64_t>& shape) {
    (void)i, (void)past_j, (void)dtype, (void)shape;
    return nullptr;
  }
  // True when input i is a constant of the session (an initializer or a folded constant) that
  // no kernel of a run writes: a kernel may read it before its programmatic-launch wait, while
  // the previous kernel still runs (the decode GEMVs' weights, gemm_small_m.h). False when unknown.
  virtual bool input_is_constant(size_t i) const { (void)i; return false; }
  // True when no kernel of a run writes input i: a constant (above), or a graph input the run
  // copied in (not one a conversion kernel wrote: that kernel may still run when the next one
  // starts). A kernel may read it before its programmatic-launch wait (the decode attention's
  // key-padding mask). False when unknown.
  virtual bool input_is_run_stable(size_t i) const { return input_is_constant(i); }
  // Device memory derived from input i and shared by every step of one execution of the graph
  // that reads the same value (the key-padding mask's per-batch key counts: the first attention
  // of a forward computes them, the other layers read them). `bytes` under `key`; *fill is set
  // true for the first caller of the execution, which must write the memory (on stream()) before
  // its own kernels read it, and false for the others. nullptr where the context keeps none: the
  // caller then does without.
  virtual void* shared_derived(size_t i, const char* key, size_t bytes, bool* fill) {
    (void)i, (void)key, (void)bytes;
    *fill = false;
    return nullptr;
  }
  // The float dtype output i is handed to the caller in, when that differs from `computed`: output
  // i is a graph output no other step reads, computed on the device in `computed` (fp16 / bf16 under
  // --precision) and declared another float type (float). A kernel that can write that dtype
  // directly does (the last norm of an encoder: no conversion kernel after the run); Undefined when
  // the output stays in the computed dtype.
  virtual DType output_delivered_dtype(size_t i, DType computed) const {
    (void)i, (void)computed;
    return DType::Undefined;
  }
};

using KernelFn = std::function<void(KernelContext&)>;

// Set by the Session on MatMul and fuseopt.GatedMatMul steps whose constant weight it stores
// transposed, [N, K] ([2N, K] for GatedMatMul) instead of the model's [K, N]: the kernel reads
// B as transB (session_setup.cc, store_weights_nk). FusedMatMul / LayerNormLinear get transB = 1.
constexpr const char* kWeightNkAttr = "__fuseopt_weight_nk";

// Set by the Session on a CUDA fuseopt.GatedMatMul step that also runs the fuseopt.RMSNorm before
// it (the norm's only reader; session_setup.cc, fold_rms_norms): the attribute is the norm's
// epsilon, the step reads the norm's X as its A, and its weight holds the norm's gamma.
constexpr const char* kPreRmsNormAttr = "__fuseopt_pre_rms_norm_eps";

struct KernelInfo {
  std::string domain, op;
  Backend backend;
  std::vector<DType> dtypes;  // empty = any
  KernelFn fn;
  int dispatch_input = 0;     // which input's dtype selects the kernel
};

void register_kernel(KernelInfo info);
// nullptr when no kernel fits.
const KernelInfo* find_kernel(const std::string& domain, const std::string& op, Backend b, DType dt);
std::vector<const KernelInfo*> all_kernels();

struct KernelRegistrar {
  explicit KernelRegistrar(KernelInfo info) { register_kernel(std::move(info)); }
};

#define FUSEOPT_KERNEL_CAT2(a, b) a##b
#define FUSEOPT_KERNEL_CAT(a, b) FUSEOPT_KERNEL_CAT2(a, b)
// Defines and registers `static void ID(KernelContext& ctx)`.
#define FUSEOPT_KERNEL(ID, DOMAIN, OP, BACKEND, ...)                                      \
  static void ID(::fuseopt::KernelContext& ctx);                                          \
  static ::fuseopt::KernelRegistrar FUSEOPT_KERNEL_CAT(ID, _registrar)(                   \
      ::fuseopt::KernelInfo{DOMAIN, OP, BACKEND, std::vector<::fuseopt::DType> __VA_ARGS__, ID}); \
  static void ID(::fuseopt::KernelContext& ctx)

}  // namespace fuseopt
