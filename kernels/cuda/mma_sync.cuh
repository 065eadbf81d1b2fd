// The warp-level tensor-core MMA used by the mma.sync kernels (the FlashAttention-2
// style attention kernel, the small-M tensor-core GEMV): m16n8k16 with fp16 or bf16
// operands and fp32 accumulators, and the pair packing of fp32 values into one
// operand register. Fragment layouts (PTX ISA, "mma.m16n8k16"): with g = lane / 4 and
// c = lane % 4, A regs {(g, 2c..2c+1), (g+8, 2c..), (g, 2c+8..), (g+8, 2c+8..)} of
// [row, k]; B regs {(2c..2c+1, g), (2c+8.., g)} of [k, col]; C {(g, 2c), (g, 2c+1),
// (g+8, 2c), (g+8, 2c+1)} of [row, col]. nvcc only; sm_80 or newer.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace fuseopt::cuda_fused {

template <class T> struct MmaType;
template <> struct MmaType<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <> struct MmaType<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

// c[0..3] += A (a[0..3]) · B (b[0..1]).
template <class T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b);
template <>
__device__ __forceinline__ void mma16816<__half>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace fuseopt::cuda_fused
