// fuseopt --fp16: the optimized graph as a float16 model. Float initializers,
// Constant / ConstantOfShape tensors, Cast(to=FLOAT) and the float values of
// the graph become FLOAT16, except:
//  - constants an op reads on the host as shape-setting parameters (Resize's
//    roi/scales: the session's rule, runtime/parameter_inputs.h) stay fp32;
//  - standard ops that must compute in fp32 (LayerNormalization,
//    RMSNormalization, Softmax, LogSoftmax, the sum/mean reductions, Group/
//    InstanceNormalization) left unfused: Cast to FLOAT before their float
//    inputs (their constants stay fp32) and Cast to FLOAT16 after their
//    outputs. The fused ops keep norm statistics, softmax and reductions fp32
//    inside already.
// keep_io_types: the float graph inputs/outputs stay FLOAT, with Casts at the
// boundary. Values outside the finite fp16 range saturate (finfo.min masks).
#pragma once
#include "ir/graph.h"

namespace fuseopt::cli {

struct Fp16Options {
  bool keep_io_types = false;
};

struct Fp16Result {
  int constants_converted = 0;
  int constants_kept_fp32 = 0;
  int fp32_nodes = 0;       // standard ops kept computing in fp32
  int casts_inserted = 0;
};

// If branches are converted the same way (each loaded as a graph, the outer values it reads
// typed as the converted outer graph has them). Throws Error (naming the node) on what it does
// not convert: a Loop or Scan body.
Fp16Result convert_to_fp16(Graph& g, const Fp16Options& opts = {});

}  // namespace fuseopt::cli
