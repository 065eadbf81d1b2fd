// Float <-> Float16/BFloat16 conversion of a whole buffer on the device: how
// the CUDA backend returns fp16/bf16-computed outputs in the model's declared
// dtype (and narrows float inputs) without a host-side pass over the data.
#pragma once
#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda {

// Enqueues y[i] = convert(x[i]) on `stream` for i < n. from/to: Float,
// Float16 or BFloat16 (false for anything else: nothing enqueued). Narrowing
// keeps finite values finite, like the host's float_to_half_finite /
// float_to_bf16_finite; widening is exact.
bool launch_float_convert(void* y, DType to, const void* x, DType from, int64_t n, void* stream);

}  // namespace fuseopt::cuda
