// CUDA kernels for MatMul and Gemm, and the GEMM host layer they share with
// fuseopt.FusedMatMul (fused_matmul.cc) and LayerNormLinear
// (fused_layer_norm_linear.cc): kernels/cuda/gemm_host.h says what each piece
// does. Attribute handling mirrors kernels/cpu/matmul_gemm.cc and
// kernels/cpu/fused_matmul.cc.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_gelu.h"
#include "kernels/cuda/gemm_hopper.h"
#include "kernels/cuda/gemm_host.h"
#include "kernels/cuda/gemm_pack.h"
#include "kernels/cuda/gemm_row_phases.h"
#include "kernels/cuda/gemm_small_m.h"

namespace fuseopt {
namespace cuda_gemm {

using cuda_fused::GemmDesc;
using cuda_fused::GemmEpilogue;

Act parse_act(const Node& n) {
  const std::string a = n.attr_string("activation", "none");
  if (a.empty() || a == "none") return Act::None;
  if (a == "relu") return Act::Relu;
  if (a == "gelu") return Act::Gelu;
  if (a == "gelu_tanh") return Act::GeluTanh;
  if (a == "tanh") return Act::Tanh;
  if (a == "relu2") return Act::Relu2;
  if (a == "quick_gelu") return Act::QuickGelu;
  if (a == "silu") return Act::Silu;
  throw Error(n.label() + ": unknown activation '" + a +
              "' (none, relu, gelu, gelu_tanh, tanh, relu2, quick_gelu, silu)");
}

namespace {

cuda_fused::SmallGemmAct small_act(Act a) {
  switch (a) {
    case Act::Relu: return cuda_fused::SmallGemmAct::Relu;
    case Act::Gelu: return cuda_fused::SmallGemmAct::GeluErf;
    case Act::GeluTanh: return cuda_fused::SmallGemmAct::GeluTanh;
    default: return cuda_fused::SmallGemmAct::None;
  }
}

}  // namespace

cuda_fused::GemvAct gemv_act(Act a) {
  switch (a) {
    case Act::Relu: return cuda_fused::GemvAct::Relu;
    case Act::Gelu: return cuda_fused::GemvAct::GeluErf;
    case Act::GeluTanh: return cuda_fused::GemvAct::GeluTanh;
    case Act::Tanh: return cuda_fused::GemvAct::Tanh;
    case Act::Relu2: return cuda_fused::GemvAct::Relu2;
    default: return cuda_fused::GemvAct::None;
  }
}

bool try_gemv(DType dt, Act act, const void* a, const void* b, const void* bias, void* y, int64_t M, int64_t N,
              int64_t K, bool trans_b, float alpha, cudaStream_t stream, bool b_const, const void* residual) {
  if (pass_only(act)) return false;
  return cuda_fused::launch_gemm_small_m(dt, gemv_act(act), a, b, bias, y, M, N, K, trans_b, stream, alpha, b_const,
                                         residual);
}

bool try_small_gemm(KernelContext& ctx, DType dt, Act act, const void* a, const void* b, const void* bias, void* y,
                    int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  // No tanh or squared-ReLU epilogue in that kernel: cuBLASLt + the activation pass.
  if (act == Act::Tanh || act == Act::Relu2 || pass_only(act)) return false;
  if (act == Act::Gelu && cuda_fused::launch_gemm_bias_gelu(dt, a, b, bias, y, M, N, K, stream)) return true;
  const size_t ws = cuda_fused::small_gemm_workspace(dt, M, N, K);
  return cuda_fused::launch_small_gemm(dt, small_act(act), a, b, bias, y, M, N, K, stream,
                                       ws ? ctx.scratch(ws) : nullptr);
}

namespace {

// The Hopper GEMM's arguments for Y = act(A · B + bias) (B [N, K] with trans_b); act must be
// one its epilogue has (the callers filter).
cuda_fused::HopperGemm hopper_args(DType dt, Act act, const void* a, const void* b, bool trans_b, const void* bias,
                                   void* y, int64_t M, int64_t N, int64_t K) {
  using cuda_fused::HopperGemmAct;
  cuda_fused::HopperGemm g;
  g.dt = dt;
  g.a = a;
  g.b = b;
  g.b_nk = trans_b;
  g.bias = bias;
  g.y = y;
  g.M = M;
  g.N = N;
  g.K = K;
  g.act = act == Act::Relu ? HopperGemmAct::Relu
          : act == Act::Gelu ? HopperGemmAct::GeluErf
          : act == Act::GeluTanh ? HopperGemmAct::GeluTanh
          : act == Act::Relu2    ? HopperGemmAct::Relu2
                                 : HopperGemmAct::None;
  return g;
}

}  // namespace

bool try_hopper_gemm(DType dt, Act act, const void* a, const void* b, bool trans_b, const void* bias, void* y,
                     int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  if (act == Act::Tanh || pass_only(act)) return false;  // no tanh, QuickGELU or SiLU in its epilogue
  const cuda_fused::HopperGemm g = hopper_args(dt, act, a, b, trans_b, bias, y, M, N, K);
  return cuda_fused::hopper_gemm_wanted(g) && cuda_fused::launch_gemm_hopper(g, stream);
}

namespace {

// Whether an odd-N GEMM (aligned_columns) goes straight into Y's rows through our Hopper GEMM
// (its warpgroups copy the rows out in aligned 16-byte pieces; a float Y written by its
// epilogue): FUSEOPT_HOPPER_ODD_N=1 wherever it fits (a Hopper device, B [N, K], alpha 1);
// unset or 0 never. Off by default: on the H100 it measured even with the padded rows + the
// vector pack (GPT-2-LM 32 x 128 2.615 vs 2.613 ms) and slower on BERT-MLM (2.262 vs 2.216),
// our GEMM's main loop being slower than cuBLASLt's (NOTES-perf.md v33).
bool hopper_odd_rows_on() {
  const char* v = std::getenv("FUSEOPT_HOPPER_ODD_N");
  return v && std::string(v) == "1";
}

// That GEMM: Y = A · B^T + bias with the epilogue cuBLASLt's path would fuse (relu, tanh-GELU);
// the pass activations run after it, as on the other paths. No padded rows, no pack.
bool try_hopper_odd_rows(DType dt, DType ydt, Act act, const void* a, const void* b, const void* bias, void* y,
                         int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  if (!hopper_odd_rows_on()) return false;
  // The activations its row-copy epilogue has; the others (erf-GELU, relu2, ...) as the pass after.
  const Act epilogue_act = act == Act::Relu || act == Act::GeluTanh ? act : Act::None;
  cuda_fused::HopperGemm g = hopper_args(dt, epilogue_act, a, b, true, bias, y, M, N, K);
  g.y_fp32 = ydt == DType::Float;
  return cuda_fused::launch_gemm_hopper(g, stream);
}

}  // namespace

GemmEpilogue epilogue_for(Act act, bool bias) {
  switch (act) {
    case Act::Relu: return bias ? GemmEpilogue::ReluBias : GemmEpilogue::Relu;
    case Act::GeluTanh: return bias ? GemmEpilogue::GeluTanhBias : GemmEpilogue::GeluTanh;
    default: return bias ? GemmEpilogue::Bias : GemmEpilogue::None;
  }
}

void apply_pass_activation(Act act, DType dt, void* y, int64_t rows, int64_t N, cudaStream_t stream) {
  if (act == Act::Gelu) cuda_fused::launch_bias_gelu_erf(dt, y, nullptr, rows, N, stream);
  if (act == Act::Tanh) cuda_fused::launch_bias_tanh(dt, y, nullptr, rows, N, stream);
  if (act == Act::Relu2) cuda_fused::launch_bias_relu2(dt, y, nullptr, rows, N, stream);
  if (act == Act::QuickGelu) cuda_fused::launch_bias_quick_gelu(dt, y, nullptr, rows, N, stream);
  if (act == Act::Silu) cuda_fused::launch_bias_silu(dt, y, nullptr, rows, N, stream);
}

int64_t aligned_columns(DType dt, int64_t M, int64_t N, int64_t K, bool trans_b) {
  const int64_t esz = static_cast<int64_t>(dtype_size(dt));
  // B read as [N, K] with 16-byte rows: its first N8 rows are a B of their own
  // (a row-major B [K, N] with odd N is as unaligned as D, splitting buys nothing).
  const bool applies = esz == 2 && N % 8 != 0 && N >= 64 && (K * esz) % 16 == 0 && trans_b;
  if (!applies) return N;
  // FUSEOPT_GEMM_PAD_N: unset or 2 split where M x N >= 2^22 (the pack's 2 x M x
  // N x 2 bytes are then small beside what the aligned kernels save), 1 at any
  // size (tests), 0 never.
  const char* v = std::getenv("FUSEOPT_GEMM_PAD_N");
  const int mode = v && *v ? std::atoi(v) : 2;
  if (mode != 1 && mode != 2) return N;
  if (mode == 2 && M * N < (int64_t{1} << 22)) return N;
  return N / 8 * 8;
}

cuda_fused::ScratchFn scratch_of(KernelContext& ctx) {
  return [&ctx](size_t bytes) { return ctx.scratch(bytes); };
}

bool use_tf32(const KernelContext& ctx) { return ctx.precision() == Precision::TF32; }

GemmDesc gemm_desc(const KernelContext& ctx, DType dt, int64_t M, int64_t N, int64_t K, bool trans_b, Act act,
                   const void* bias) {
  GemmDesc g;
  g.dtype = dt;
  g.tf32 = use_tf32(ctx);
  g.M = M;
  g.N = N;
  g.K = K;
  g.trans_b = trans_b;
  g.epilogue = epilogue_for(act, bias != nullptr);
  g.bias = bias;
  return g;
}

void run_matmul(KernelContext& ctx, const RtTensor* a, const RtTensor* b, bool trans_b, float alpha, Act act,
                const RtTensor* bias, const RtTensor* residual) {
  const Node& n = ctx.node();
  const DType dt = a->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA " << n.op_type << " supports float/float16/bfloat16, got "
                                                     << dtype_name(dt));
  cuda_fused::check_same_dtype(ctx, b, dt, "B");
  cuda_fused::check_same_dtype(ctx, bias, dt, "bias");
  FUSE_CHECK(a->rank() >= 1 && b->rank() >= 1, n.label() << ": " << n.op_type << " operands must have rank >= 1");
  const bool a_vector = a->rank() == 1, b_vector = b->rank() == 1;
  FUSE_CHECK(!(b_vector && trans_b), n.label() << ": transB with a 1-D B");
  std::vector<int64_t> ashape = a_vector ? std::vector<int64_t>{1, a->shape[0]} : a->shape;
  std::vector<int64_t> bshape = b_vector ? std::vector<int64_t>{b->shape[0], 1} : b->shape;
  const int64_t M = ashape[ashape.size() - 2], K = ashape.back();
  const int64_t bK = trans_b ? bshape.back() : bshape[bshape.size() - 2];
  const int64_t N = trans_b ? bshape[bshape.size() - 2] : bshape.back();
  FUSE_CHECK(K == bK, n.label() << ": " << n.op_type << " inner dims differ: A " << shape_str(a->shape) << ", B "
                                << shape_str(b->shape) << (trans_b ? " (transB)" : ""));
  if (bias)
    FUSE_CHECK(bias->numel() == N && (bias->rank() == 0 || bias->shape.back() == N),
               n.label() << ": bias " << shape_str(bias->shape) << " is not [" << N << "]");

  std::vector<int64_t> abatch(ashape.begin(), ashape.end() - 2), bbatch(bshape.begin(), bshape.end() - 2);
  const std::vector<int64_t> out_batch = dm::matmul_batch_shape(n, abatch, bbatch, a->shape, b->shape, "");
  std::vector<int64_t> yshape = out_batch;
  if (!a_vector) yshape.push_back(M);
  if (!b_vector) yshape.push_back(N);
  const int64_t na_rows = shape_numel(abatch) * M;  // rows of the one GEMM when B has no batch
  // A float graph output of a 16-bit run that goes through the odd-N split (an odd vocabulary's
  // logits) is written as float by the split's last step (the GEMMs of gemm_row_phases.h or the
  // row pack of gemm_pack.h): no conversion kernel after the run. Such a GEMM takes that path.
  const bool pack_fp32 = !residual && dt != DType::Float && shape_numel(bbatch) == 1 && na_rows > 8 &&
                         aligned_columns(dt, na_rows, N, K, trans_b) != N &&
                         ctx.output_delivered_dtype(0, dt) == DType::Float;
  RtTensor* y = ctx.output(0, pack_fp32 ? DType::Float : dt, yshape);
  if (residual) {
    cuda_fused::check_same_dtype(ctx, residual, dt, "residual");
    FUSE_CHECK(residual->numel() == y->numel(), n.label() << ": residual " << shape_str(residual->shape) << " has "
                                                          << residual->numel() << " elements, Y "
                                                          << shape_str(y->shape) << " has " << y->numel());
  }
  if (M == 0 || N == 0 || y->numel() == 0) return;
  cudaStream_t stream = cuda_fused::stream_of(ctx);
  if (K == 0) {
    FUSE_CHECK(!bias && act == Act::None && !residual,
               n.label() << ": K = 0 with bias/activation/residual is not supported on CUDA");
    FUSED_CUDA_CHECK(cudaMemsetAsync(y->data, 0, y->nbytes(), stream), n.label());
    return;
  }

  const int64_t batches = shape_numel(out_batch);
  const int64_t na = shape_numel(abatch), nb = shape_numel(bbatch);
  const size_t esz = dtype_size(dt);
  GemmDesc g = gemm_desc(ctx, dt, 0, N, K, trans_b, act, bias ? bias->data : nullptr);  // M per path below
  g.alpha = alpha;
  auto scratch = scratch_of(ctx);
  const void* res = residual ? residual->data : nullptr;

  // M <= 8 (decode): the weight-streaming kernel, bias, activation and residual included.
  if (nb == 1 && !pack_fp32 && try_gemv(dt, act, a->data, b->data, bias ? bias->data : nullptr, y->data, M * na, N, K, trans_b,
                          alpha, stream, ctx.input(1) == b && ctx.input_is_constant(1), res))
    return;
  // Small M: one kernel of ours (for erf-GELU one launch instead of two). No residual there.
  if (nb == 1 && !pack_fp32 && !trans_b && alpha == 1.f && !res &&
      try_small_gemm(ctx, dt, act, a->data, b->data, bias ? bias->data : nullptr, y->data, M * na, N, K, stream))
    return;
  // Large M with erf-GELU / relu2 on Hopper, where switched on: our GEMM with it in its epilogue.
  if (nb == 1 && !pack_fp32 && alpha == 1.f && !res &&
      try_hopper_gemm(dt, act, a->data, b->data, trans_b, bias ? bias->data : nullptr, y->data, M * na, N, K, stream))
    return;
  // The residual as cuBLASLt's C (beta 1: D = alpha·A·B + C + bias) where the activation is none
  // (its epilogue applies an activation after C, the op before the residual); elsewhere added
  // after everything else below.
  bool residual_pending = res != nullptr;
  if (nb == 1) {
    // B shared by every batch item: one GEMM with the batch folded into M.
    g.M = M * na;
    const int64_t n8 = aligned_columns(dt, g.M, N, K, trans_b);
    if (n8 == N) {
      if (res && act == Act::None) {
        g.beta = 1.f;
        g.c = res;
        residual_pending = false;
      }
      cuda_fused::gemm(g, a->data, b->data, y->data, stream, scratch);
    } else if (alpha == 1.f && try_hopper_odd_rows(dt, y->dtype, act, a->data, b->data, bias ? bias->data : nullptr,
                                                   y->data, g.M, N, K, stream)) {
      // Written into Y's own rows (and as float where Y is).
    } else if (cuda_fused::row_phases_wanted(g.M, N, dtype_size(y->dtype))) {
      cuda_fused::gemm_row_phases(g, y->dtype, a->data, b->data, y->data, stream, scratch);
    } else {
      // Two GEMMs into 16-byte aligned rows of ld elements, then one pack into
      // Y (see aligned_columns): columns [0, n8) with the first n8 rows of B,
      // and the < 8 columns left with B's last rows and the bias' tail.
      const int64_t ld = (N + 7) / 8 * 8;
      char* padded = static_cast<char*>(ctx.scratch(static_cast<size_t>(g.M) * ld * esz));
      GemmDesc head = g, tail = g;
      head.N = n8;
      head.ldd = ld;
      cuda_fused::gemm(head, a->data, b->data, padded, stream, scratch);
      tail.N = N - n8;
      tail.ldd = ld;
      if (bias) tail.bias = static_cast<const char*>(bias->data) + n8 * esz;
      cuda_fused::gemm(tail, a->data, static_cast<const char*>(b->data) + n8 * K * esz, padded + n8 * esz, stream,
                       scratch);
      cuda_fused::launch_pack_rows(dt, padded, ld, y->data, g.M, N, stream, pack_fp32);
    }
  } else if ((na == batches || na == 1) && nb == batches) {
    // One strided-batched GEMM (A repeated with stride 0 when it has no batch).
    // B must have every batch item: a B broadcast in some batch dims (MQA's
    // K [B,1,S,D] against Q [B,H,S,D]) takes the general path below.
    g.M = M;
    g.batch = batches;
    g.stride_a = na == 1 ? 0 : M * K;
    g.stride_b = K * N;
    g.stride_d = M * N;
    cuda_fused::gemm(g, a->data, b->data, y->data, stream, scratch);
  } else {
    // General broadcast: one GEMM per output batch item (the algorithm is cached).
    const std::vector<int64_t> sa = dm::batch_strides(abatch, out_batch, M * K);
    const std::vector<int64_t> sb = dm::batch_strides(bbatch, out_batch, K * N);
    g.M = M;
    for (int64_t bi = 0; bi < batches; ++bi) {
      const auto [oa, ob] = dm::batch_item_offsets(bi, out_batch, sa, sb);
      cuda_fused::gemm(g, static_cast<const char*>(a->data) + oa * esz, static_cast<const char*>(b->data) + ob * esz,
                       static_cast<char*>(y->data) + bi * M * N * esz, stream, scratch);
    }
  }
  apply_pass_activation(act, y->dtype, y->data, batches * M, N, stream);  // float Y: see pack_fp32
  if (residual_pending) cuda_fused::launch_add_in_place(dt, y->data, res, y->numel(), stream);
}

}  // namespace cuda_gemm

using cuda_fused::GemmDesc;
using cuda_fused::GemmEpilogue;
using cuda_gemm::Act;
using cuda_gemm::opt_input;
using cuda_gemm::run_matmul;
using cuda_gemm::scratch_of;

FUSEOPT_KERNEL(CudaMatMul, "", "MatMul", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  FUSE_CHECK(a && b, ctx.node().label() << ": MatMul needs inputs A and B");
  // B stored [N, K] where the Session transposed a constant weight (kWeightNkAttr).
  run_matmul(ctx, a, b, ctx.node().attr_int(kWeightNkAttr, 0) != 0, 1.f, Act::None, nullptr);
}

// ONNX Gemm: Y = alpha·op(A)·op(B) + beta·C, C unidirectionally broadcast to [M, N].
FUSEOPT_KERNEL(CudaGemm, "", "Gemm", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = opt_input(ctx, 1);
  const RtTensor* c = opt_input(ctx, 2);
  FUSE_CHECK(a && b, n.label() << ": Gemm needs inputs A and B");
  FUSE_CHECK(a->rank() == 2 && b->rank() == 2, n.label() << ": Gemm needs 2-D A and B, got " << shape_str(a->shape)
                                                         << " and " << shape_str(b->shape));
  const DType dt = a->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA Gemm supports float/float16/bfloat16");
  cuda_fused::check_same_dtype(ctx, b, dt, "B");
  cuda_fused::check_same_dtype(ctx, c, dt, "C");
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.f), beta = n.attr_float("beta", 1.f);
  const int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  const int64_t bK = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  FUSE_CHECK(K == bK, n.label() << ": Gemm inner dims differ: A " << shape_str(a->shape) << ", B " << shape_str(b->shape));
  int64_t cm = 1, cn = 1;
  if (c) {
    FUSE_CHECK(c->rank() <= 2, n.label() << ": Gemm C must have rank <= 2");
    if (c->rank() >= 1) cn = c->shape.back();
    if (c->rank() == 2) cm = c->shape[0];
    FUSE_CHECK((cm == 1 || cm == M) && (cn == 1 || cn == N),
               n.label() << ": Gemm C " << shape_str(c->shape) << " does not broadcast to [" << M << ", " << N << "]");
  }
  RtTensor* y = ctx.output(0, dt, {M, N});
  if (M == 0 || N == 0) return;
  cudaStream_t stream = cuda_fused::stream_of(ctx);
  const bool use_c = c && beta != 0.f;
  GemmDesc g = cuda_gemm::gemm_desc(ctx, dt, M, N, K, tb, Act::None, nullptr);
  g.trans_a = ta;
  g.alpha = alpha;
  if (use_c && beta == 1.f && cm == 1 && cn == N) {
    g.epilogue = GemmEpilogue::Bias;  // a row-vector C is a bias
    g.bias = c->data;
  } else if (use_c) {
    cuda_fused::launch_broadcast_2d(dt, c->data, cm, cn, y->data, M, N, stream);
    g.beta = beta;
  }
  if (K == 0) {
    // No product: Y = beta·C (or 0).
    if (!use_c) FUSED_CUDA_CHECK(cudaMemsetAsync(y->data, 0, y->nbytes(), stream), n.label());
    FUSE_CHECK(!use_c || (beta == 1.f && g.epilogue == GemmEpilogue::None),
               n.label() << ": Gemm with K = 0 and a scaled or bias C is not supported on CUDA");
    return;
  }
  cuda_fused::gemm(g, a->data, b->data, y->data, stream, scratch_of(ctx));
}

}  // namespace fuseopt
