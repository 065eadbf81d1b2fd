// C entry point over fuseopt's CUDA attention kernels, for
// bench/attention_bench.py (ctypes): built into a small shared library with
// kernels/cuda/fused_attention{,_mma,_hopper}.cu by bench/attention_bench.sh,
// so the benchmark needs neither libfuseopt nor its ONNX/protobuf libraries.
//
//   kernel 0: launch_attention, the dispatcher the CUDA backend calls (its
//             default choice between the Hopper, tensor-core and generic kernels)
//   kernel 2: the mma.sync kernel (fused_attention_mma.cu, "v3")
//   kernel 16 + bits: the Hopper kernel (fused_attention_hopper.cu) forced on,
//             by default 128-row blocks, ping-pong, persistent grid, wide P·V;
//             bit 0: no ping-pong, bit 1: 64-row blocks (head dim 64 only),
//             bit 2: one block per work item, bit 3: P·V as two m64n64 (head dim 128),
//             bit 4: 192-row blocks (head dim 64 only)
// Layout as the backend's: Q [B,Sq,H*D], K/V [B,Skv,Hkv*D] (any row/batch
// strides, in elements), Y [B,Sq,H*D]; mask: bool [B,Skv] or null; mask_prefix: its per-batch
// key counts (fo_attention_mask_prefix, computed once per mask as the runtime does once a
// forward: the Hopper kernel's varlen path, off with FUSEOPT_ATTENTION_MASK_PREFIX=0) or null.
// Returns 0 when launched, 1 when that kernel does not apply, 2 on a CUDA error.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <exception>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_hopper.cuh"

using namespace fuseopt;


extern "C" int fo_attention(int kernel, int dtype, int B, int H, int Hkv, int Sq, int Skv, int D, const void* q,
                            const void* k, const void* v, long long q_bs, long long q_ss, long long k_bs,
                            long long k_ss, long long v_bs, long long v_ss, const void* mask, int causal,
                            float scale, float fill, void* y, const void* mask_prefix, void* stream) {
  cuda_fused::AttentionArgs a;
  a.dtype = dtype == 0 ? DType::Float16 : DType::BFloat16;
  a.B = B;
  a.H = H;
  a.Hkv = Hkv;
  a.Sq = Sq;
  a.Skv = Skv;
  a.Dh = a.Dv = D;
  a.q = q;
  a.k = k;
  a.v = v;
  a.q_batch_stride = q_bs;
  a.q_seq_stride = q_ss;
  a.k_batch_stride = k_bs;
  a.k_seq_stride = k_ss;
  a.v_batch_stride = v_bs;
  a.v_seq_stride = v_ss;
  a.y = y;
  a.mask = mask;
  a.mask_dtype = DType::Bool;
  a.mask_filter_value = fill;
  a.scale = scale;
  a.causal = causal != 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  try {
    if (mask && cuda_fused::mask_prefix_exact(fill)) a.mask_prefix = static_cast<const int*>(mask_prefix);
    if (kernel == 0) {
      cuda_fused::attention_set_hopper(-1);
      cuda_fused::launch_attention(a, s);
    } else if (kernel >= 16) {
      const int bits = kernel - 16;
      if ((bits & 18) && D != 64) return 1;
      if ((bits & 64) && (D != 128 || mask)) return 1;  // the 176-key tile: head dim 128, no mask
      if ((bits & 128) && D != 64) return 1;              // direct stores: head dim 64
      if ((bits & 256) && (D != 128 || mask)) return 1;  // the 160-key tile: head dim 128, no mask
      cuda_fused::attention_set_hopper(1);
      cuda_fused::attention_hopper_set_pingpong(!(bits & 1));
      cuda_fused::attention_hopper_set_blocks(bits & 2 ? 64 : bits & 16 ? 192 : 128);
      cuda_fused::attention_hopper_set_persistent(!(bits & 4));
      cuda_fused::attention_hopper_set_wide_pv(!(bits & 8));
      cuda_fused::attention_hopper_set_causal_persistent(bits & 32);
      cuda_fused::attention_hopper_set_key_tile(bits & 256 ? 160 : bits & 64 ? 176 : 128);
      cuda_fused::attention_hopper_set_tma_store(!(bits & 128));
      const bool ok = cuda_fused::launch_hopper_attention(a, s);
      cuda_fused::attention_hopper_set_tma_store(true);
      cuda_fused::attention_hopper_set_key_tile(0);
      cuda_fused::attention_hopper_set_wide_pv(true);
      cuda_fused::attention_hopper_set_causal_persistent(true);
      cuda_fused::attention_hopper_set_persistent(true);
      cuda_fused::attention_hopper_set_blocks(0);
      cuda_fused::attention_hopper_set_pingpong(true);
      cuda_fused::attention_set_hopper(-1);
      if (!ok) return 1;
    } else {
      if (!cuda_fused::attention_mma_supported(a)) return 1;
      cuda_fused::launch_attention_mma(a, s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fo_attention: %s\n", e.what());
    return 2;
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "fo_attention: %s\n", cudaGetErrorString(e));
    return 2;
  }
  return 0;
}

// The bool mask's per-batch key counts into out ([B] int32 on the device), as the runtime computes
// them once a forward for every layer (launch_mask_prefix). Returns 0, or 2 on a CUDA error.
extern "C" int fo_attention_mask_prefix(const void* mask, int B, int Skv, void* out, void* stream) {
  try {
    cuda_fused::launch_mask_prefix(mask, DType::Bool, B, Skv, static_cast<int*>(out), static_cast<cudaStream_t>(stream));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fo_attention_mask_prefix: %s\n", e.what());
    return 2;
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

// Which kernel the dispatcher picks (0 generic, 1 mma, 2 hopper), same arguments.
extern "C" int fo_attention_choice(int dtype, int B, int H, int Hkv, int Sq, int Skv, int D, const void* q,
                                   const void* k, const void* v, long long q_bs, long long q_ss, long long k_bs,
                                   long long k_ss, long long v_bs, long long v_ss, const void* mask, int causal,
                                   float scale, void* y) {
  cuda_fused::AttentionArgs a;
  a.dtype = dtype == 0 ? DType::Float16 : DType::BFloat16;
  a.B = B;
  a.H = H;
  a.Hkv = Hkv;
  a.Sq = Sq;
  a.Skv = Skv;
  a.Dh = a.Dv = D;
  a.q = q;
  a.k = k;
  a.v = v;
  a.q_batch_stride = q_bs;
  a.q_seq_stride = q_ss;
  a.k_batch_stride = k_bs;
  a.k_seq_stride = k_ss;
  a.v_batch_stride = v_bs;
  a.v_seq_stride = v_ss;
  a.y = y;
  a.mask = mask;
  a.mask_dtype = DType::Bool;
  a.scale = scale;
  a.causal = causal != 0;
  cuda_fused::attention_set_hopper(-1);
  const char* n = cuda_fused::attention_kernel_name(a);
  return n[0] == 'h' ? 2 : n[0] == 'm' ? 1 : 0;
}
