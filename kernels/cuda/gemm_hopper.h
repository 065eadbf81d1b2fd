// A Hopper (sm_90a) GEMM of our own for the epilogues cuBLASLt lacks: Y = act(A · B + bias)
// with the exact (erf) GELU applied to the accumulators before the one rounding to fp16/bf16.
// cuBLASLt's GELU epilogue is the tanh form, so an erf-GELU FFN otherwise pays a second pass
// over Y (BERT-base at 32 x 128: 12 x ~20 us of 1.67 ms; NOTES-perf.md v19). On by default for
// the erf-GELU / squared-ReLU GEMMs of 2048 rows or more, where it is 1.04x cuBLASLt + the
// pass since its epilogue stores through shared memory and TMA (NOTES-perf.md v27).
// Host-only header; the kernel (wgmma fed by TMA through an mbarrier ring, one producer warp,
// two consumer warpgroups, persistent over output tiles) is in gemm_hopper.cu.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

// GeluErf: erf by the fast branch-free form for 16-bit outputs (as the erf-GELU pass);
// GeluErfExact: erff (as GatedMatMul's gate pass); Silu: x / (1 + e^-x); Relu2: squared
// ReLU r * r (Nemotron, Persimmon; cuBLASLt has no such epilogue either).
enum class HopperGemmAct { None, Relu, GeluErf, GeluTanh, Silu, GeluErfExact, Relu2 };

struct HopperGemm {
  DType dt = DType::Float16;  // A, B, bias and Y: Float16 or BFloat16
  const void* a = nullptr;    // [M, K] row-major
  const void* b = nullptr;    // [K, N] row-major, or [N, K] with b_nk (gated: 2N for N)
  bool b_nk = false;
  // Gated (fuseopt.GatedMatMul): B has 2N columns, gate then up; Y = act(A·B_gate + bias_gate)
  // * (A·B_up + bias_up), bias [2N]. Otherwise Y = act(A·B + bias), bias [N].
  bool gated = false;
  const void* bias = nullptr;
  void* y = nullptr;           // [M, N] row-major; with B [N, K], N need not be a multiple of 8
  int64_t M = 0, N = 0, K = 0;
  HopperGemmAct act = HopperGemmAct::None;
  // Y is float (an odd vocabulary's logits as a float graph output of a 16-bit run): written by
  // the epilogue in fp32, no pack or conversion after. Not gated, B [N, K], act None / Relu /
  // GeluTanh.
  bool y_fp32 = false;
  // An RMSNorm of A's rows first (fuseopt.RMSNorm whose only reader is this GatedMatMul; the
  // session hands the pair to one step and stores B with the norm's gamma folded into its K
  // rows): Y = act(Z · B_gate + b) * (Z · B_up + b') with Z = A / sqrt(mean(A²) + eps) over K,
  // Z never written. Gated with B [2N, K] and SiLU / tanh-GELU only.
  bool rms_norm = false;
  float norm_eps = 0.f;
};

// Whether the kernel can run these arguments on this device: fp16/bf16 A, B, bias; K a
// multiple of 8 (TMA row strides of 16 bytes), N too where B is [K, N] or gated (with B [N, K]
// any N: an odd vocabulary); all below 2^31; A, B 16-byte aligned, bias 4-byte, Y aligned to
// its element (rows whose pitch is not a 16-byte multiple, where a TMA store cannot write, are
// staged and copied out by the warpgroups in aligned 16-byte pieces); a device of compute
// capability 9.0 whose loaded image is the sm_90a one (probed once per device, outside a
// stream capture).
bool hopper_gemm_fits(const HopperGemm& g, cudaStream_t stream);

// Whether the runtime should take it for this GEMM: the switch below; by default (unset) the
// gated GEMMs of 128 rows or more and the erf-GELU and squared-ReLU GEMMs of 2048 rows or more
// (measured faster than cuBLASLt + the gate or activation pass, NOTES-perf.md v49 and v27); with
// =1 also the gated ones of 9-127 rows and the others of 1024 rows or more.
bool hopper_gemm_wanted(const HopperGemm& g);

// Launches and returns true, or returns false having launched nothing (does not fit).
// fp32 accumulation; bias and activation on the fp32 accumulator; one rounding.
bool launch_gemm_hopper(const HopperGemm& g, cudaStream_t stream);

// Switch: FUSEOPT_HOPPER_GEMM=0 never (cuBLASLt and the passes), =1 the gated GEMMs of 9 rows or more
// and the erf-GELU and squared-ReLU ones of 1024 rows or more that it fits, =all every GEMM it fits
// (A/B runs); unset = the default of hopper_gemm_wanted.
// set_hopper_gemm(0 | 1 | 2) sets the same for tests; set_hopper_gemm(-1) returns to the environment.
void set_hopper_gemm(int mode);
// Columns of B per block tile of the cooperative schedule (128 or 256; 0 = by shape; a gated
// tile holds half of them from the gate, half from the up). For tests and A/B runs; a width set
// here selects the cooperative schedule.
void set_hopper_gemm_tile_n(int n);
// Schedule of the plain (not gated) GEMMs: 0 by shape (cooperative), 1 cooperative (both
// consumer warpgroups on one 128 x BN tile), 2 ping-pong (each warpgroup its own 128 x 128 tiles,
// one's epilogue beside the other's MMAs). Gated GEMMs are always cooperative. For tests and A/B runs.
void set_hopper_gemm_schedule(int s);
// Blocks a cluster of the cooperative schedule: 0 by shape (1), 1, 2 (where M > 128: B's tile
// loaded half by each block and multicast to both; slower so far). For tests and A/B runs.
void set_hopper_gemm_cluster(int c);
long long hopper_gemm_launch_count();

}  // namespace fuseopt::cuda_fused
