// Micro-benchmark of attention's decode step (hidden: `bin/bench_kernels "[.bench]"` or
// "[decode_bench]"; never decides pass/fail): Llama-3.2-1B shapes (32 query heads, 8 kv heads,
// head dim 64), 128 and 2048 cached tokens, batch 1 and 8, fp16. Each row: the split-KV
// kernels (kernels/cuda/fused_attention_decode.cu: the one-launch kernel, and the two-pass
// split + merge) and the prefill dispatcher on the same S_q = 1 step, each after the K/V
// append that fuseopt.Attention runs first (which zeroes the one-launch kernel's counters;
// every kernel reads the present [B, Hkv, S_kv, D] in place), and the append alone, timed as a CUDA graph of
// 20 steps (how fuserun replays a model; per-launch CPU overhead excluded), K/V rotated over
// 4 sets where they exceed L2; then the one-launch kernel on a held cache (in place: the
// past is the present's block, only the new row written). Floor: the K/V bytes the form must
// move / 4.2 TB/s (no weights: the attention alone), what the kernel should approach at 2048
// cached tokens. FUSEOPT_DECODE_BENCH_SHAPES="8x2048" picks shapes; FUSEOPT_DECODE_BENCH_NCU=1
// launches only the masked held step, twice a shape, outside graphs (for ncu).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <functional>
#include <vector>

#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/fused_launch.cuh"
#include "cuda_bench.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

using cuda_bench::DeviceBuffers;
using cuda_bench::kSets;

constexpr int kSteps = 20;  // launches per graph

// Median µs per step of `step(i)` captured kSteps times into one CUDA graph.
double graph_us(cudaStream_t s, const std::function<void(int)>& step) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cuda_check::ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < kSteps; ++i) step(i);
  cuda_check::ck(cudaStreamEndCapture(s, &g), "end capture");
  cuda_check::ck(cudaGraphInstantiate(&ge, g, 0), "instantiate");
  const double us = cuda_bench::time_us(s, [&](int) { cudaGraphLaunch(ge, s); }) / kSteps;
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return us;
}

std::string shape_of(int B, int past) { return std::to_string(B) + " x " + std::to_string(past); }

}  // namespace

TEST_CASE("cuda attention decode benchmark (Llama-3.2-1B shapes)", "[.bench][decode_bench]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  DeviceBuffers mem;
  constexpr int H = 32, Hkv = 8, D = 64;
  std::printf("\nBENCH %-28s %-10s %11s %11s %11s %9s %9s\n", "decode fp16 (32/8 heads, D 64)", "B x past",
              "fused us", "2-pass us", "prefill us", "append us", "floor us");
  // FUSEOPT_DECODE_BENCH_SHAPES="1x2048,8x2048" picks shapes (ncu runs: fewer launches to skip).
  const char* pick = std::getenv("FUSEOPT_DECODE_BENCH_SHAPES");
  for (int past : {128, 2048})
    for (int B : {1, 8}) {
      if (pick && *pick && !std::strstr(pick, (std::to_string(B) + "x" + std::to_string(past)).c_str())) continue;
      const int St = past + 1;  // the cache after this step's token is appended
      const int64_t kv_elems = int64_t(B) * Hkv * St * D;
      std::vector<void*> q, k, v, y, pk, pv, nk, nv;
      for (int i = 0; i < kSets; ++i) {
        q.push_back(mem.random_half(int64_t(B) * H * D));
        k.push_back(mem.alloc(kv_elems * 2));  // the presents, written by the append
        v.push_back(mem.alloc(kv_elems * 2));
        pk.push_back(mem.random_half(int64_t(B) * Hkv * past * D));
        pv.push_back(mem.random_half(int64_t(B) * Hkv * past * D));
        nk.push_back(mem.random_half(int64_t(B) * Hkv * D));
        nv.push_back(mem.random_half(int64_t(B) * Hkv * D));
        y.push_back(mem.alloc(int64_t(B) * H * D * 2));
      }
      void* scratch = mem.alloc(int64_t(cuda_fused::flash_decode_scratch_bytes(DType::Float16, B, H, Hkv, St, D, D)));
      const size_t counters = cuda_fused::flash_decode_counter_bytes(B, H);
      const float scale = 0.125f;
      // The K/V append as fuseopt.Attention runs it before the attention (zeroing the
      // one-launch kernel's counters where that kernel follows).
      auto append = [&](int j, bool zero) {
        const cuda_fused::KvAppend ka{pk[j], nk[j], int64_t(Hkv) * D, int64_t(Hkv) * D, k[j], D};
        const cuda_fused::KvAppend va{pv[j], nv[j], int64_t(Hkv) * D, int64_t(Hkv) * D, v[j], D};
        cuda_fused::launch_kv_append_pair(2, ka, va, B, Hkv, past, St, s, zero ? scratch : nullptr,
                                          zero ? counters : 0);
      };
      auto decode = [&](int j, bool zeroed) {
        cuda_fused::launch_flash_decode(DType::Float16, q[j], int64_t(H) * D, k[j], v[j], nullptr, DType::Int64, y[j],
                                        scratch, B, H, Hkv, St, D, D, scale, -INFINITY, false, s, zeroed);
      };
      // FUSEOPT_DECODE_BENCH_NCU=1: only two launches of the held + mask step a shape, outside
      // any graph, so `ncu -k regex:decode_append` profiles exactly that kernel.
      const bool ncu_only = std::getenv("FUSEOPT_DECODE_BENCH_NCU") != nullptr;
      if (!ncu_only) {
        const double fused = graph_us(s, [&](int i) {
          append(i % kSets, true);
          decode(i % kSets, true);
        });
        setenv("FUSEOPT_DECODE_FUSED", "0", 1);
        const double two_pass = graph_us(s, [&](int i) {
          append(i % kSets, false);
          decode(i % kSets, false);
        });
        unsetenv("FUSEOPT_DECODE_FUSED");
        const double append_only = graph_us(s, [&](int i) { append(i % kSets, false); });
        cuda_fused::AttentionArgs a;
        a.dtype = DType::Float16;
        a.B = B;
        a.H = H;
        a.Hkv = Hkv;
        a.Sq = 1;
        a.Skv = St;
        a.Dh = a.Dv = D;
        a.q_seq_stride = int64_t(H) * D;
        a.q_batch_stride = int64_t(H) * D;
        a.k_seq_stride = a.v_seq_stride = D;  // the present, in place
        a.k_head_stride = a.v_head_stride = int64_t(St) * D;
        a.k_batch_stride = a.v_batch_stride = int64_t(Hkv) * St * D;
        a.scale = scale;
        a.causal = true;
        // One launch outside capture first: the Hopper kernel's device probe cannot run in one.
        a.q = q[0];
        a.k = k[0];
        a.v = v[0];
        a.y = y[0];
        cuda_fused::launch_attention(a, s);
        cuda_check::ck(cudaStreamSynchronize(s), "probe");
        const char* kname = cuda_fused::attention_kernel_name(a);
        const double prefill = graph_us(s, [&](int i) {
          const int j = i % kSets;
          append(j, false);
          a.q = q[j];
          a.k = k[j];
          a.v = v[j];
          a.y = y[j];
          cuda_fused::launch_attention(a, s);
        });
        // The one-launch append + attention (fused_attention_decode_append.cu): reads the past and
        // the new rows, writes the presents and Y.
        auto one_launch = [&](int j) {
          cuda_fused::DecodeAppend d;
          d.dt = DType::Float16;
          d.q = q[j];
          d.q_batch_stride = int64_t(H) * D;
          d.past_k = pk[j];
          d.past_v = pv[j];
          d.new_k = nk[j];
          d.new_v = nv[j];
          d.new_k_batch = d.new_v_batch = int64_t(Hkv) * D;
          d.present_k = k[j];
          d.present_v = v[j];
          d.y = y[j];
          d.B = B;
          d.H = H;
          d.Hkv = Hkv;
          d.Sp = past;
          d.Dh = d.Dv = D;
          d.scale = scale;
          d.fill = -INFINITY;
          if (!cuda_fused::launch_decode_append(d, s)) std::printf("BENCH decode append declined\n");
        };
        const double append_attn = graph_us(s, [&](int i) { one_launch(i % kSets); });
        // Floor: the append's read of the past and write of the present, and one read of the present.
        const double floor_us = (2.0 * (2.0 * kv_elems * 2) + 2.0 * kv_elems * 2) / 4.2e12 * 1e6;
        // The one-launch kernel's: the past read once, the present written once.
        const double floor1_us = (2.0 * (2.0 * kv_elems * 2)) / 4.2e12 * 1e6;
        char what[48];
        std::snprintf(what, sizeof what, "append+attn (prefill: %s)", kname);
        std::printf("BENCH %-28s %-10s %11.2f %11.2f %11.2f %9.2f %9.2f\n", what, shape_of(B, past).c_str(), fused,
                    two_pass, prefill, append_only, floor_us);
        std::printf("BENCH %-28s %-10s %11.2f %11s %11s %9s %9.2f\n", "one launch (append+attn)", shape_of(B, past).c_str(),
                    append_attn, "", "", "", floor1_us);
      }
      // The same kernel on a cache the session holds (Session::hold_kv_cache): past and present
      // one block of `cap` rows a (b, h), only row `past` written; every step rewrites that row.
      const int cap = St + 15;
      std::vector<void*> hk, hv;
      for (int i = 0; i < kSets; ++i) {
        hk.push_back(mem.random_half(int64_t(B) * Hkv * cap * D));
        hv.push_back(mem.random_half(int64_t(B) * Hkv * cap * D));
      }
      // A key-padding mask over the cache (int64, as Hugging Face exports pass it; every key
      // kept): the model's decode step reads one, the rows above do not.
      void* mask = mem.alloc(int64_t(B) * St * 8);
      {
        std::vector<int64_t> ones(size_t(B) * St, 1);
        cuda_check::ck(cudaMemcpy(mask, ones.data(), ones.size() * 8, cudaMemcpyHostToDevice), "mask");
      }
      auto held_step = [&](int i, bool masked) {
        const int j = i % kSets;
        cuda_fused::DecodeAppend d;
        d.dt = DType::Float16;
        d.q = q[j];
        d.q_batch_stride = int64_t(H) * D;
        d.past_k = d.present_k = hk[j];
        d.past_v = d.present_v = hv[j];
        d.past_rows = d.present_rows = cap;
        d.in_place = true;
        d.new_k = nk[j];
        d.new_v = nv[j];
        d.new_k_batch = d.new_v_batch = int64_t(Hkv) * D;
        d.y = y[j];
        d.B = B;
        d.H = H;
        d.Hkv = Hkv;
        d.Sp = past;
        d.Dh = d.Dv = D;
        d.scale = scale;
        d.fill = -INFINITY;
        if (masked) {
          d.mask = mask;
          d.mask_dtype = DType::Int64;
          d.mask_stable = true;  // written once before the graphs, as a session's graph input
        }
        if (!cuda_fused::launch_decode_append(d, s)) std::printf("BENCH held decode declined\n");
      };
      if (ncu_only) {
        held_step(0, true);
        held_step(1, true);
        cuda_check::ck(cudaStreamSynchronize(s), "ncu launches");
        continue;
      }
      // The register kernel (FUSEOPT_DECODE_MMA=0) and the tensor-core one (=1), same steps.
      setenv("FUSEOPT_DECODE_MMA", "0", 1);
      const double held = graph_us(s, [&](int i) { held_step(i, false); });
      const double held_masked = graph_us(s, [&](int i) { held_step(i, true); });
      setenv("FUSEOPT_DECODE_MMA", "1", 1);
      const double held_mma = graph_us(s, [&](int i) { held_step(i, false); });
      const double held_masked_mma = graph_us(s, [&](int i) { held_step(i, true); });
      unsetenv("FUSEOPT_DECODE_MMA");
      const double floor_held_us = (2.0 * kv_elems * 2) / 4.2e12 * 1e6;  // the cache read once
      std::printf("BENCH %-28s %-10s %11.2f %11s %11s %9s %9.2f\n", "one launch, held cache", shape_of(B, past).c_str(),
                  held, "", "", "", floor_held_us);
      std::printf("BENCH %-28s %-10s %11.2f %11s %11s %9s %9.2f\n", "held cache + int64 mask", shape_of(B, past).c_str(),
                  held_masked, "", "", "", floor_held_us);
      std::printf("BENCH %-28s %-10s %11.2f %11s %11s %9s %9.2f\n", "held, tensor cores", shape_of(B, past).c_str(),
                  held_mma, "", "", "", floor_held_us);
      std::printf("BENCH %-28s %-10s %11.2f %11s %11s %9s %9.2f\n", "held + mask, tensor cores",
                  shape_of(B, past).c_str(), held_masked_mma, "", "", "", floor_held_us);
    }
  cudaStreamDestroy(s);
}
