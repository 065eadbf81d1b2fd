// Micro-benchmark of the CUDA fused ops (hidden: runs only when asked for,
// `bin/bench_kernels "[.bench]"`; it never decides pass/fail). CUDA events,
// warm-up, median of 100, inputs rotated over 4 sets so L2 does not hold them;
// figures go to NOTES-perf.md next to ../shared/ANCHORS.md.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gemm_cublaslt.h"
#include "cuda_bench.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

using cuda_bench::DeviceBuffers;
using cuda_bench::kSets;
using cuda_bench::section_on;
using cuda_bench::time_us;

}  // namespace

TEST_CASE("cuda fused ops benchmark", "[.bench]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  DeviceBuffers mem;
  void* ws = mem.alloc(32 << 20);
  auto scratch = [ws](size_t) { return ws; };
  std::printf("\nBENCH %-34s %-22s %10s %10s\n", "what", "shape", "us", "rate");

  // Attention, packed QKV, fp16, non-causal: FLOPs = 4·B·H·S²·Dh.
  struct AttnShape {
    int B, H, S, D;
  };
  const std::vector<AttnShape> attn_shapes = {{8, 12, 512, 64}, {32, 12, 128, 64}, {4, 16, 2048, 128}};
  for (AttnShape sh : section_on("attention") ? attn_shapes : std::vector<AttnShape>{}) {
    const int64_t row = int64_t(3) * sh.H * sh.D;
    std::vector<void*> qkv, y;
    for (int k = 0; k < kSets; ++k) {
      qkv.push_back(mem.random_half(int64_t(sh.B) * sh.S * row));
      y.push_back(mem.alloc(int64_t(sh.B) * sh.S * sh.H * sh.D * 2));
    }
    cuda_fused::AttentionArgs a;
    a.dtype = DType::Float16;
    a.B = sh.B;
    a.H = a.Hkv = sh.H;
    a.Sq = a.Skv = sh.S;
    a.Dh = a.Dv = sh.D;
    a.q_seq_stride = a.k_seq_stride = a.v_seq_stride = row;
    a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = int64_t(sh.S) * row;
    a.scale = 0.125f;
    for (int variant = 0; variant < 4; ++variant) {
      const int causal = variant & 1, mt = variant < 2 ? 2 : 1;
      cuda_fused::attention_set_m_tiles(mt, variant < 2 ? 1 : 2);
      a.causal = causal;
      const char* kname = "";
      double us = time_us(s, [&](int i) {
        a.q = qkv[i % kSets];
        a.k = static_cast<char*>(qkv[i % kSets]) + sh.H * sh.D * 2;
        a.v = static_cast<char*>(qkv[i % kSets]) + 2 * sh.H * sh.D * 2;
        a.y = y[i % kSets];
        kname = cuda_fused::attention_kernel_name(a);
        cuda_fused::launch_attention(a, s);
      });
      double flops = 4.0 * sh.B * sh.H * double(sh.S) * sh.S * sh.D * (causal ? 0.5 : 1.0);
      char shape[64], what[64];
      std::snprintf(shape, sizeof shape, "%dx%dx%dx%d", sh.B, sh.H, sh.S, sh.D);
      std::snprintf(what, sizeof what, "attention fp16 %s mt%d%s", kname, sh.D == 64 ? mt : (variant < 2 ? 1 : 2),
                    causal ? " causal" : "");
      std::printf("BENCH %-34s %-22s %10.1f %7.1f TFLOP/s\n", what, shape, us, flops / us * 1e-6);
    }
    // Masked forms exporters produce (BERT: an additive [B,1,S,S] bias; or a
    // key-padding mask [B,S]), default m-tiles, non-causal.
    if (sh.S > 512) continue;
    a.causal = false;
    void* bias16 = mem.random_half(int64_t(sh.B) * sh.S * sh.S);
    void* bias32 = mem.alloc(int64_t(sh.B) * sh.S * sh.S * 4);
    cuda_check::ck(cudaMemset(bias32, 0, int64_t(sh.B) * sh.S * sh.S * 4), "memset");
    void* mask = mem.alloc(int64_t(sh.B) * sh.S * 8);
    cuda_check::ck(cudaMemset(mask, 0, int64_t(sh.B) * sh.S * 8), "memset");  // all masked: same work
    for (int form = 0; form < 3; ++form) {
      a.mask = form == 2 ? mask : nullptr;
      a.bias = form == 0 ? bias16 : form == 1 ? bias32 : nullptr;
      a.bias_dtype = form == 0 ? DType::Float16 : DType::Float;
      a.bias_sb = int64_t(sh.S) * sh.S;
      a.bias_sh = 0;
      a.bias_si = sh.S;
      a.bias_sj = 1;
      double us = time_us(s, [&](int i) {
        a.q = qkv[i % kSets];
        a.k = static_cast<char*>(qkv[i % kSets]) + sh.H * sh.D * 2;
        a.v = static_cast<char*>(qkv[i % kSets]) + 2 * sh.H * sh.D * 2;
        a.y = y[i % kSets];
        cuda_fused::launch_attention(a, s);
      });
      double flops = 4.0 * sh.B * sh.H * double(sh.S) * sh.S * sh.D;
      char shape[64];
      std::snprintf(shape, sizeof shape, "%dx%dx%dx%d", sh.B, sh.H, sh.S, sh.D);
      const char* what = form == 0 ? "attention fp16 bias fp16 [B,1,S,S]" : form == 1 ? "attention fp16 bias fp32 [B,1,S,S]"
                                                                                   : "attention fp16 mask int64 [B,S]";
      std::printf("BENCH %-34s %-22s %10.1f %7.1f TFLOP/s\n", what, shape, us, flops / us * 1e-6);
    }
    a.mask = a.bias = nullptr;
  }

  cuda_fused::attention_set_m_tiles(1, 2);

  // FusedMatMul fp16: plain, BIAS, GELU(tanh)+BIAS epilogues, and erf-GELU
  // (BIAS epilogue + one elementwise pass).
  struct GemmShape {
    int64_t M, K, N;
  };
  for (GemmShape g : section_on("gemm") ? std::vector<GemmShape>{GemmShape{4096, 768, 2304}, GemmShape{16384, 768, 3072},
                                                                GemmShape{128, 768, 2304}}
                                        : std::vector<GemmShape>{}) {
    std::vector<void*> A, Y;
    for (int k = 0; k < kSets; ++k) {
      A.push_back(mem.random_half(g.M * g.K));
      Y.push_back(mem.alloc(g.M * g.N * 2));
    }
    void* W = mem.random_half(g.K * g.N);
    void* bias = mem.random_half(g.N);
    struct Variant {
      const char* name;
      cuda_fused::GemmEpilogue e;
      bool erf;
    };
    for (Variant v : {Variant{"gemm fp16 plain", cuda_fused::GemmEpilogue::None, false},
                      Variant{"gemm fp16 BIAS", cuda_fused::GemmEpilogue::Bias, false},
                      Variant{"gemm fp16 RELU_BIAS", cuda_fused::GemmEpilogue::ReluBias, false},
                      Variant{"gemm fp16 GELU_BIAS (tanh)", cuda_fused::GemmEpilogue::GeluTanhBias, false},
                      Variant{"gemm fp16 BIAS + erf-GELU pass", cuda_fused::GemmEpilogue::Bias, true}}) {
      cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(g.M, g.K, g.N);
      d.epilogue = v.e;
      d.bias = bias;
      double us = time_us(s, [&](int i) {
        cuda_fused::gemm(d, A[i % kSets], W, Y[i % kSets], s, scratch);
        if (v.erf) cuda_fused::launch_bias_gelu_erf(DType::Float16, Y[i % kSets], nullptr, g.M, g.N, s);
      });
      char shape[64];
      std::snprintf(shape, sizeof shape, "%ldx%ldx%ld", long(g.M), long(g.K), long(g.N));
      std::printf("BENCH %-34s %-22s %10.1f %7.1f TFLOP/s\n", v.name, shape, us,
                  2.0 * g.M * g.N * g.K / us * 1e-6);
    }
  }

  // Memory-bound fused ops, fp16: bytes = tensors read + written.
  if (section_on("memory")) {
    const int64_t rows = 16384, D = 4096;
    std::vector<void*> X, Skp, Y, Sum;
    for (int k = 0; k < kSets; ++k) {
      X.push_back(mem.random_half(rows * D));
      Skp.push_back(mem.random_half(rows * D));
      Y.push_back(mem.alloc(rows * D * 2));
    }
    void* gamma = mem.random_half(D);
    void* beta = mem.random_half(D);
    cuda_fused::NormArgs n;
    n.dtype = DType::Float16;
    n.rows = rows;
    n.D = D;
    n.gamma = gamma;
    n.beta = beta;
    double us = time_us(s, [&](int i) {
      n.x = X[i % kSets];
      n.y = Y[i % kSets];
      cuda_fused::launch_norm(n, s);
    });
    std::printf("BENCH %-34s %-22s %10.1f %7.2f TB/s\n", "LayerNorm fp16", "16384x4096", us,
                2.0 * rows * D * 2 / us * 1e-6);
    us = time_us(s, [&](int i) {
      n.x = X[i % kSets];
      n.skip = Skp[i % kSets];
      n.skip_rows = rows;
      n.y = Y[i % kSets];
      cuda_fused::launch_norm(n, s);
    });
    std::printf("BENCH %-34s %-22s %10.1f %7.2f TB/s\n", "SkipLayerNorm fp16 (3 tensors)", "16384x4096", us,
                3.0 * rows * D * 2 / us * 1e-6);
    const int64_t n64 = 64ll << 20;
    void* a = X[0];
    void* b = Skp[0];
    // 64M elements = 128 MB per tensor: rotating is unnecessary (2x L2 each).
    us = time_us(s, [&](int i) { cuda_fused::launch_add_relu(DType::Float16, a, b, Y[i % kSets], n64, nullptr, s); });
    std::printf("BENCH %-34s %-22s %10.1f %7.2f TB/s\n", "AddRelu fp16 (3 tensors)", "64M", us,
                3.0 * n64 * 2 / us * 1e-6);
  }
  cudaStreamDestroy(s);
}
