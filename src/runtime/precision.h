// Precision: which dtype a float value is computed in, and the conversions
// between a model's float types and that compute dtype. One policy for the
// Session (session_setup.cc, session_io.cc, session_step.cc) and for the CPU
// evaluation of single nodes (eval_node.cc: constant folding, op tests).
//
// - Float computes in the --precision dtype (fp32, or fp16/bf16 on a device).
// - The CPU kernels are fp32 only, so a float16/bfloat16 value computes in fp32
//   on the CPU backend: half weights and constants converted once, half inputs
//   on entry, Cast to FLOAT16/BFLOAT16 computes as Cast to FLOAT, and outputs go
//   back to the dtype the model declares or its op implies.
// - Which dtype an op implies for an output (Cast to FLOAT, LayerNormalization's
//   statistics stay float) is the op's shape function's answer
//   (infer_output_dtypes in ir/shape_inference.h), never a rule of its own here.
#pragma once
#include <functional>
#include <memory>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/kernel.h"

namespace fuseopt {

// Float's compute dtype under a --precision.
DType compute_float_dtype(Precision p);

// The dtype a float value of dtype d is computed and stored in: Float follows
// compute_float; Float16/BFloat16 compute in fp32 where there are no half
// kernels (the CPU backend); every other dtype is its own.
DType compute_dtype(DType d, DType compute_float, bool half_kernels);

// n as it runs when float dtypes compute as compute(d): a Cast to a float type
// casts to its compute dtype, a Constant/ConstantOfShape float value is stored
// in it. nullptr when n runs unchanged.
std::unique_ptr<Node> node_in_compute_dtypes(const Node& n, const std::function<DType(DType)>& compute);

// The dtype a computed float output goes back to: the one the model declares
// or its op implies (fp16/bf16 computed in fp32 on the CPU, Float computed in
// fp16 on a device); Undefined when it stays as computed (also for Undefined:
// a value of unknown type stays Float).
DType declared_target(DType have, DType declared);

// How a conversion to Float16/BFloat16 treats a value beyond the half range.
enum class HalfOverflow {
  Saturate,  // finite stays finite (float_to_half_finite): weights, inputs, outputs of a Session
  Ieee,      // rounds to +-inf as the half computation would: one node's result (eval_node.cc)
};

// Float <-> Float16/BFloat16 on the host, one loop per (from, to) pair (fp16
// models on the CPU convert every input and output). Any other source dtype
// reads through Tensor::as_double.
Tensor convert_float(const RtTensor& host_view, DType to, HalfOverflow o = HalfOverflow::Saturate);
Tensor convert_float(const Tensor& t, DType to, HalfOverflow o = HalfOverflow::Saturate);

}  // namespace fuseopt
