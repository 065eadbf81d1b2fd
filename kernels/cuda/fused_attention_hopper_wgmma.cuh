// Wrappers of the Hopper warpgroup MMA (wgmma.mma_async) used by
// fused_attention_hopper.cu: the accumulator is a float array of N/2
// registers per thread (m64nN), every index compile-time.
//   Wgmma<T, N>::ss(d, desc_a, desc_b, accumulate): A and B from shared memory
//     (K-major, 128-byte swizzle descriptors), D (+)= A * B.
//   Wgmma<T, N>::rs(d, a, desc_b, accumulate): A from registers (4 x b32, the
//     m64k16 fragment), B from shared memory MN-major (transpose bit set).
// Only compiled for sm_90a (the caller guards with __CUDA_ARCH_FEAT_SM90_ALL).
#pragma once
#include <cstdint>

namespace fuseopt::cuda_fused::hopper {

template <class T, int N> struct Wgmma;

// One specialisation per (type, N) from one macro. R: the accumulator
// registers in the instruction; D: their "+f" operands; SS/SP and RS/RP: the
// operands after them (shared-memory descriptors or the A fragment, then the
// accumulate predicate), numbered on from the last accumulator.
#define FUSEOPT_WGMMA_D32 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FUSEOPT_WGMMA_D64 FUSEOPT_WGMMA_D32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define FUSEOPT_WGMMA_D80 FUSEOPT_WGMMA_D64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define FUSEOPT_WGMMA_D88 FUSEOPT_WGMMA_D64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define FUSEOPT_WGMMA(T, N, TY, R, D, SS, SP, RS, RP)                                                 \
  template <>                                                                                        \
  struct Wgmma<T, N> {                                                                               \
    static __device__ __forceinline__ void ss(float* d, uint64_t da, uint64_t db, int acc) {         \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SP ", 0;\n"                                   \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " R ", " SS          \
                   ", p, 1, 1, 0, 0;\n}\n"                                                          \
                   : D                                                                               \
                   : "l"(da), "l"(db), "r"(acc));                                                    \
    }                                                                                                \
    static __device__ __forceinline__ void rs(float* d, const uint32_t* a, uint64_t db, int acc) {   \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " RP ", 0;\n"                                   \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " " R ", " RS          \
                   ", p, 1, 1, 1;\n}\n"                                                             \
                   : D                                                                               \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));                 \
    }                                                                                                \
  };

#define FUSEOPT_WGMMA_N64(T, TY) \
  FUSEOPT_WGMMA(T, 64, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}", FUSEOPT_WGMMA_D32, "%32, %33", "%34", "{%32,%33,%34,%35}, %36", "%37")
#define FUSEOPT_WGMMA_N128(T, TY) \
  FUSEOPT_WGMMA(T, 128, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}", FUSEOPT_WGMMA_D64, "%64, %65", "%66", "{%64,%65,%66,%67}, %68", "%69")

// N = 160: the head-dim-128 key tile that leaves room for O's staging buffer (80 registers).
#define FUSEOPT_WGMMA_N160(T, TY) \
  FUSEOPT_WGMMA(T, 160, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}", FUSEOPT_WGMMA_D80, "%80, %81", "%82", "{%80,%81,%82,%83}, %84", "%85")

// N = 176: the head-dim-128 key tile without causal (FlashAttention-3's 128 x 176 block):
// 88 accumulator registers.
#define FUSEOPT_WGMMA_N176(T, TY) \
  FUSEOPT_WGMMA(T, 176, TY, "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87}", FUSEOPT_WGMMA_D88, "%88, %89", "%90", "{%88,%89,%90,%91}, %92", "%93")

FUSEOPT_WGMMA_N64(__half, "f16")
FUSEOPT_WGMMA_N128(__half, "f16")
FUSEOPT_WGMMA_N160(__half, "f16")
FUSEOPT_WGMMA_N176(__half, "f16")
FUSEOPT_WGMMA_N64(__nv_bfloat16, "bf16")
FUSEOPT_WGMMA_N128(__nv_bfloat16, "bf16")
FUSEOPT_WGMMA_N160(__nv_bfloat16, "bf16")
FUSEOPT_WGMMA_N176(__nv_bfloat16, "bf16")

#undef FUSEOPT_WGMMA_N64
#undef FUSEOPT_WGMMA_N128
#undef FUSEOPT_WGMMA_N160
#undef FUSEOPT_WGMMA_N176
#undef FUSEOPT_WGMMA
#undef FUSEOPT_WGMMA_D88
#undef FUSEOPT_WGMMA_D80
#undef FUSEOPT_WGMMA_D64
#undef FUSEOPT_WGMMA_D32

}  // namespace fuseopt::cuda_fused::hopper
