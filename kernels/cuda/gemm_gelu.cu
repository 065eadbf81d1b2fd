// Small-M GEMM with a bias + activation epilogue (see gemm_gelu.h); written
// for the bias + erf-GELU that cuBLASLt cannot do, usable for the others.
//
// mma.sync.m16n8k16 (fp16/bf16 in, fp32 accumulate), block tile 64 x 64,
// k-tile 64, 4 warps of 32 x 32, a 4-stage cp.async ring (zero-filled past
// M, N and K, so any M and any K, N multiple of 8 work). At BERT's FFN1 on
// one sequence (128 x 768 x 3072) that is 96 blocks, one per SM, each
// streaming a 768 x 64 slice of the weights once: the GEMM is bound by the
// bytes each SM keeps in flight (3 stages x 16 KB here; k-tile 32 would halve
// that), and the point of the kernel is that the GELU costs no extra launch
// and no extra pass over Y. Launched with programmatic dependent launch (pdl.cuh).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_gelu.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {

namespace {

constexpr int kBM = 64, kBN = 64, kBK = 64, kStages = 4, kThreads = 128;
constexpr int kAStride = kBK + 8;  // +8 halves: ldmatrix rows fall in distinct banks
constexpr int kBStride = kBN + 8;
constexpr int kAStage = kBM * kAStride, kBStage = kBK * kBStride;  // elements per stage
constexpr size_t kSmem = size_t(kStages) * (kAStage + kBStage) * 2;   // 73.7 KB: dynamic shared memory
constexpr int kChunksPerThread = kBM * kBK / 8 / kThreads;             // 16-byte chunks of A (and of B)
static_assert(kBM * kBK == kBK * kBN, "A and B tiles have the same chunk count");

// Same PTX wrappers as the attention kernel's (fused_attention_mma.cu keeps
// its own private copies).
template <class T> __device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b);
template <> __device__ __forceinline__ void mma16816<__half>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t* r, const void* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// 16 bytes global -> shared; zero-filled (nothing read) when !valid.
__device__ __forceinline__ void cp_async16(void* s, const void* g, bool valid) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(s));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(g), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }


// The epilogue's activation, in fp32; the CPU reference's formulas
// (kernels/cpu/fused_activation.h), the fast erf for 16-bit storage.
template <class T, SmallGemmAct ACT> __device__ __forceinline__ float activation(float v) {
  if constexpr (ACT == SmallGemmAct::Relu) return v > 0.f ? v : 0.f;
  if constexpr (ACT == SmallGemmAct::GeluErf) return gelu_erf_for<T>(v);
  if constexpr (ACT == SmallGemmAct::GeluTanh)
    return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  return v;
}

template <class T, SmallGemmAct ACT>
__global__ void __launch_bounds__(kThreads) small_gemm_kernel(const T* __restrict__ A, const T* __restrict__ B,
                                                             const T* __restrict__ bias, T* __restrict__ Y, int M,
                                                             int N, int K, int k_len, float* __restrict__ partial) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* a_s = reinterpret_cast<T*>(smem_raw);  // kStages x [kBM][kAStride]
  T* b_s = a_s + kStages * kAStage;         // kStages x [kBK][kBStride]
  cuda_pdl::pdl_begin();  // A may be the previous kernel's output; Y may be a buffer it still reads
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;  // the warp's 32 x 32 in the block tile
  // Split-K (partial != null): this block sums k in [k_begin, k_end) and
  // writes fp32 partials; splitk_reduce_kernel adds them up.
  const int k_begin = blockIdx.z * k_len, k_end = min(K, k_begin + k_len);
  const int k_tiles = (k_end - k_begin + kBK - 1) / kBK;

  // One k-tile into a stage: A 64 x 64 and B 64 x 64, 512 16-byte chunks
  // each, four per thread; chunks past M, N or K are zero-filled.
  auto load = [&](int stage, int kt) {
    const int k0 = k_begin + kt * kBK;
    T* as = a_s + stage * kAStage;
    T* bs = b_s + stage * kBStage;
#pragma unroll
    for (int u = 0; u < kChunksPerThread; ++u) {
      const int c = tid + u * kThreads;
      const int ar = c / (kBK / 8), ac = (c % (kBK / 8)) * 8;  // A: kBM rows x kBK / 8 chunks
      const bool av = m0 + ar < M && k0 + ac < k_end;
      cp_async16(as + ar * kAStride + ac, av ? A + int64_t(m0 + ar) * K + k0 + ac : A, av);
      const int br = c / (kBN / 8), bc = (c % (kBN / 8)) * 8;  // B: kBK rows x kBN / 8 chunks
      const bool bv = k0 + br < k_end && n0 + bc < N;
      cp_async16(bs + br * kBStride + bc, bv ? B + int64_t(k0 + br) * N + n0 + bc : B, bv);
    }
  };

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load(s, s);
    cp_async_commit();  // empty groups keep the wait counts uniform
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();  // tile kt has landed (for this thread's copies) ...
    __syncthreads();               // ... for every thread's; and stage (kt-1) is free again
    const int next = kt + kStages - 1;
    if (next < k_tiles) load(next % kStages, next);
    cp_async_commit();
    const T* as = a_s + (kt % kStages) * kAStage;
    const T* bs = b_s + (kt % kStages) * kBStage;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i)  // rows wm + 16i + (lane % 16), k halves by lane / 16
        ldsm_x4(af[i], as + (wm + 16 * i + (lane & 15)) * kAStride + kk + (lane >> 4) * 8);
#pragma unroll
      for (int j = 0; j < 2; ++j) {  // k rows kk + (lane % 16), n halves by lane / 16: two n8 tiles
        uint32_t r[4];
        ldsm_x4_trans(r, bs + (kk + (lane & 15)) * kBStride + wn + 16 * j + (lane >> 4) * 8);
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma16816<T>(acc[i][j], af[i], bf[j]);
    }
  }
  cp_async_wait<0>();

  // Epilogue: accumulator (row g / g + 8, columns 2t, 2t + 1 of each m16n8
  // tile) + bias, the activation in fp32, one rounding; N % 8 == 0, so a pair is
  // either inside the row or past its end.
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int n = n0 + wn + 8 * j + 2 * t;
    if (n >= N) continue;
    const float b0 = bias ? to_f(bias[n]) : 0.f, b1 = bias ? to_f(bias[n + 1]) : 0.f;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm + 16 * i + g + 8 * h;
        if (m >= M) continue;
        if (partial) {
          *reinterpret_cast<float2*>(partial + (int64_t(blockIdx.z) * M + m) * N + n) =
              make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
          continue;
        }
        const float v0 = activation<T, ACT>(acc[i][j][2 * h] + b0);
        const float v1 = activation<T, ACT>(acc[i][j][2 * h + 1] + b1);
        *reinterpret_cast<uint32_t*>(Y + int64_t(m) * N + n) = pack2<T>(v0, v1);
      }
  }
}

// Y = act(sum over s of partial[s] + bias), four columns per step, the
// splits summed in order (deterministic); N % 8 == 0, so four never straddle
// a row.
template <class T, SmallGemmAct ACT>
__global__ void splitk_reduce_kernel(const float* __restrict__ partial, const T* __restrict__ bias,
                                     T* __restrict__ Y, int M, int N, int splits) {
  cuda_pdl::pdl_begin();  // the partials come from the kernel just before
  const int64_t n4 = int64_t(M) * N / 4;
  const float4* p4 = reinterpret_cast<const float4*>(partial);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    float4 v = p4[i];
    for (int s = 1; s < splits; ++s) {
      const float4 w = p4[s * n4 + i];
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    const int n = static_cast<int>((i * 4) % N);
    if (bias) {
      v.x += to_f(bias[n]);
      v.y += to_f(bias[n + 1]);
      v.z += to_f(bias[n + 2]);
      v.w += to_f(bias[n + 3]);
    }
    uint2 o;
    o.x = pack2<T>(activation<T, ACT>(v.x), activation<T, ACT>(v.y));
    o.y = pack2<T>(activation<T, ACT>(v.z), activation<T, ACT>(v.w));
    reinterpret_cast<uint2*>(Y)[i] = o;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Splits for a K the direct kernel would stream too slowly (each block's
// share of K at most kSplitK, a multiple of the k-tile); 1 = no split.
constexpr int kSplitK = 768;
int splits_for(int64_t K) { return K <= kSmallGemmMaxK ? 1 : static_cast<int>((K + kSplitK - 1) / kSplitK); }

// More than 48 KB of shared memory needs the opt-in attribute, per function
// and device: set on every (uncaptured or captured) call, not cached, so a
// second GPU gets it too; replays of a graph do not come here.
template <class T, SmallGemmAct ACT>
bool launch_t(const void* A, const void* B, const void* bias, void* Y, int M, int N, int K, cudaStream_t stream,
              float* partial) {
  // The split-K partials go through the ACT = None instance (no epilogue).
  auto kernel = partial ? small_gemm_kernel<T, SmallGemmAct::None> : small_gemm_kernel<T, ACT>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmem)) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const int splits = partial ? splits_for(K) : 1;
  // Each split's share rounded up to whole k-tiles: splits x k_len >= K (a
  // trailing split left empty would add zeros, still right).
  const int k_len = partial ? ((K + splits - 1) / splits + kBK - 1) / kBK * kBK : K;
  const dim3 grid(static_cast<unsigned>((N + kBN - 1) / kBN), static_cast<unsigned>((M + kBM - 1) / kBM),
                  static_cast<unsigned>(splits));
  cuda_pdl::pdl_launch(kernel, grid, dim3(kThreads), kSmem, stream, static_cast<const T*>(A), static_cast<const T*>(B),
                       static_cast<const T*>(bias), static_cast<T*>(Y), M, N, K, k_len, partial);
  FUSED_LAUNCH_CHECK("small-M GEMM + bias + activation");
  if (partial) {
    const int64_t n4 = int64_t(M) * N / 4;
    const int blocks = static_cast<int>(std::min<int64_t>((n4 + 255) / 256, 1024));
    cuda_pdl::pdl_launch(splitk_reduce_kernel<T, ACT>, dim3(blocks), dim3(256), 0, stream,
                         static_cast<const float*>(partial), static_cast<const T*>(bias), static_cast<T*>(Y), M, N,
                         splits);
    FUSED_LAUNCH_CHECK("small-M GEMM split-K reduction");
  }
  return true;
}

template <class T>
bool launch_act(SmallGemmAct act, const void* A, const void* B, const void* bias, void* Y, int M, int N, int K,
                cudaStream_t s, float* partial) {
  switch (act) {
    case SmallGemmAct::None: return launch_t<T, SmallGemmAct::None>(A, B, bias, Y, M, N, K, s, partial);
    case SmallGemmAct::Relu: return launch_t<T, SmallGemmAct::Relu>(A, B, bias, Y, M, N, K, s, partial);
    case SmallGemmAct::GeluErf: return launch_t<T, SmallGemmAct::GeluErf>(A, B, bias, Y, M, N, K, s, partial);
    case SmallGemmAct::GeluTanh: return launch_t<T, SmallGemmAct::GeluTanh>(A, B, bias, Y, M, N, K, s, partial);
  }
  return false;
}

// Shape, type and alignment conditions shared by both entry points.
bool applies(DType dt, const void* A, const void* B, const void* bias, const void* Y, int64_t M, int64_t N,
             int64_t K) {
  if (dt != DType::Float16 && dt != DType::BFloat16) return false;
  if (M <= 0 || M > kGemmGeluMaxM || N <= 0 || K <= 0 || N % 8 != 0 || K % 8 != 0) return false;
  if (N > (int64_t(1) << 30) || K > kSmallGemmMaxSplitK) return false;
  return aligned16(A) && aligned16(B) && aligned16(Y) && (!bias || aligned16(bias));
}

bool launch_checked(DType dt, SmallGemmAct act, const void* A, const void* B, const void* bias, void* Y, int64_t M,
                    int64_t N, int64_t K, cudaStream_t stream, float* partial) {
  if (dt == DType::Float16) return launch_act<__half>(act, A, B, bias, Y, int(M), int(N), int(K), stream, partial);
  return launch_act<__nv_bfloat16>(act, A, B, bias, Y, int(M), int(N), int(K), stream, partial);
}

std::atomic<int> g_gelu_override{-1}, g_small_override{-1};

bool env_is_1(const char* name) {
  const char* e = std::getenv(name);
  return e && std::strcmp(e, "1") == 0;
}

}  // namespace

bool gemm_gelu_enabled() {
  const int o = g_gelu_override.load(std::memory_order_relaxed);
  if (o >= 0) return o == 1;
  static const bool env = env_is_1("FUSEOPT_GEMM_GELU");
  return env;
}
void set_gemm_gelu(int mode) { g_gelu_override.store(mode < 0 ? -1 : (mode ? 1 : 0), std::memory_order_relaxed); }

bool small_gemm_enabled() {
  const int o = g_small_override.load(std::memory_order_relaxed);
  if (o >= 0) return o == 1;
  static const bool env = env_is_1("FUSEOPT_SMALL_GEMM");
  return env;
}
void set_small_gemm(int mode) { g_small_override.store(mode < 0 ? -1 : (mode ? 1 : 0), std::memory_order_relaxed); }

bool launch_gemm_bias_gelu(DType dt, const void* A, const void* B, const void* bias, void* Y, int64_t M, int64_t N,
                           int64_t K, cudaStream_t stream) {
  // No workspace here: the direct kernel whatever K is (the pass it replaces costs more).
  if (!gemm_gelu_enabled() || !applies(dt, A, B, bias, Y, M, N, K)) return false;
  return launch_checked(dt, SmallGemmAct::GeluErf, A, B, bias, Y, M, N, K, stream, nullptr);
}

size_t small_gemm_workspace(DType dt, int64_t M, int64_t N, int64_t K) {
  if (!small_gemm_enabled() || (dt != DType::Float16 && dt != DType::BFloat16)) return 0;
  if (M <= 0 || M > kGemmGeluMaxM || N <= 0 || K <= kSmallGemmMaxK || K > kSmallGemmMaxSplitK) return 0;
  return size_t(splits_for(K)) * size_t(M) * size_t(N) * sizeof(float);
}

bool launch_small_gemm(DType dt, SmallGemmAct act, const void* A, const void* B, const void* bias, void* Y,
                       int64_t M, int64_t N, int64_t K, cudaStream_t stream, void* workspace) {
  if (!small_gemm_enabled() || !applies(dt, A, B, bias, Y, M, N, K)) return false;
  float* partial = nullptr;
  if (K > kSmallGemmMaxK) {
    if (!workspace || !aligned16(workspace)) return false;
    partial = static_cast<float*>(workspace);
  }
  return launch_checked(dt, act, A, B, bias, Y, M, N, K, stream, partial);
}

}  // namespace fuseopt::cuda_fused
