#include "pass/op_arity.h"

#include <map>

#include "util/error.h"

namespace fuseopt {

std::optional<int> min_inputs(const std::string& op, int64_t opset) {
  // Ops whose required inputs changed with the opset.
  if (op == "Reshape") return opset >= 5 ? 2 : 1;
  if (op == "Unsqueeze") return opset >= 13 ? 2 : 1;
  if (op == "Slice") return opset >= 10 ? 3 : 1;
  if (op == "Pad") return opset >= 11 ? 2 : 1;
  if (op == "Upsample") return opset >= 9 ? 2 : 1;
  if (op == "TopK") return opset >= 10 ? 2 : 1;
  static const std::map<std::string, int> fixed = {
      // one input
      {"Abs", 1}, {"Acos", 1}, {"Asin", 1}, {"Atan", 1}, {"Ceil", 1}, {"Cos", 1}, {"Erf", 1}, {"Exp", 1},
      {"Floor", 1}, {"Log", 1}, {"Neg", 1}, {"Not", 1}, {"Reciprocal", 1}, {"Relu", 1}, {"Round", 1},
      {"Sigmoid", 1}, {"Sign", 1}, {"Sin", 1}, {"Sqrt", 1}, {"Tan", 1}, {"Tanh", 1}, {"Gelu", 1},
      {"Softplus", 1}, {"HardSigmoid", 1}, {"LeakyRelu", 1}, {"Elu", 1}, {"Selu", 1}, {"Celu", 1}, {"Mish", 1},
      {"HardSwish", 1}, {"IsNaN", 1}, {"IsInf", 1}, {"Identity", 1}, {"Dropout", 1}, {"Cast", 1},
      {"CastLike", 2}, {"Shape", 1}, {"Size", 1}, {"Transpose", 1}, {"Flatten", 1}, {"Squeeze", 1},
      {"Softmax", 1}, {"LogSoftmax", 1}, {"ReduceMean", 1}, {"ReduceSum", 1}, {"ReduceMax", 1},
      {"ReduceMin", 1}, {"ReduceProd", 1}, {"ReduceL2", 1}, {"ReduceSumSquare", 1}, {"ArgMax", 1},
      {"ArgMin", 1}, {"Split", 1}, {"Concat", 1}, {"ConstantOfShape", 1}, {"Trilu", 1}, {"Einsum", 1},
      {"Clip", 1}, {"Resize", 1}, {"MaxPool", 1}, {"AveragePool", 1}, {"GlobalAveragePool", 1},
      {"GlobalMaxPool", 1}, {"NonZero", 1}, {"EyeLike", 1}, {"Sum", 1}, {"Max", 1}, {"Min", 1}, {"Mean", 1},
      {"DepthToSpace", 1}, {"SpaceToDepth", 1}, {"Swish", 1}, {"BitCast", 1}, {"InstanceNormalization", 3},
      // two inputs
      {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"Mod", 2}, {"MatMul", 2}, {"Gemm", 2},
      {"Equal", 2}, {"Greater", 2}, {"GreaterOrEqual", 2}, {"Less", 2}, {"LessOrEqual", 2}, {"And", 2},
      {"Or", 2}, {"Xor", 2}, {"BitShift", 2}, {"Gather", 2}, {"GatherElements", 2}, {"GatherND", 2},
      {"Expand", 2}, {"Tile", 2}, {"Conv", 2}, {"ConvTranspose", 2}, {"PRelu", 2}, {"CumSum", 2}, {"CumProd", 2}, {"SwiGLU", 2},
      {"LayerNormalization", 2}, {"RMSNormalization", 2}, {"Compress", 2}, {"MatMulInteger", 2},
      // more
      {"Where", 3}, {"Range", 3}, {"OneHot", 3}, {"ScatterElements", 3}, {"ScatterND", 3},
      {"BatchNormalization", 5}, {"GroupNormalization", 3},
  };
  auto it = fixed.find(op);
  if (it == fixed.end()) return std::nullopt;
  return it->second;
}

void check_op_arity(const Graph& g) {
  int64_t opset = g.opset("");
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (!(n.domain.empty() || n.domain == "ai.onnx")) continue;
    auto need = min_inputs(n.op_type, opset);
    if (!need) continue;
    for (int i = 0; i < *need; ++i)
      FUSE_CHECK(n.input(static_cast<size_t>(i)) != nullptr,
                 "node " << n.label() << " lacks required input " << i << " (" << n.op_type << " needs at least "
                         << *need << " at opset " << opset << ")");
  }
}

}  // namespace fuseopt
