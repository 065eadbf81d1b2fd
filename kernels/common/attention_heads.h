// fuseopt.Attention's head counts, one rule for the shape function
// (src/ir/shape_ops/fused.cc), the CPU reference and the CUDA kernel
// (through kernels/common/fused_attention_params.h). Plain C++, no runtime.
#pragma once
#include <cstdint>
#include <string>

namespace fuseopt::dm {

// Why num_heads H / kv_num_heads Hkv cannot describe a GQA layout, or "" when
// they can (both positive, every kv head serving H / Hkv query heads).
inline std::string attention_heads_error(int64_t H, int64_t Hkv) {
  if (H > 0 && Hkv > 0 && H % Hkv == 0) return "";
  return "num_heads " + std::to_string(H) + " must be positive and a multiple of kv_num_heads " +
         std::to_string(Hkv);
}

}  // namespace fuseopt::dm
