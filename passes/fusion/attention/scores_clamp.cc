#include "passes/fusion/attention/scores_clamp.h"

#include <algorithm>
#include <cmath>

#include "passes/fusion/attention/plan.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {
namespace {

// The lowest finite value of a float dtype, as the exporters write finfo(dtype).min.
std::optional<double> lowest_of(DType t) {
  switch (t) {
    case DType::Float: return -3.4028234663852886e38;
    case DType::Float16: return -65504.0;
    case DType::BFloat16: return -3.3895313892515355e38;
    case DType::Double: return -1.7976931348623157e308;
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<std::pair<double, Value*>> lowest_clamp(const Node* n) {
  if (!n->is("Max") || n->inputs.size() != 2 || !n->input(0) || !n->input(1)) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto c = const_scalar(n->input(side));
    Value* x = n->input(1 - side);
    if (!c || const_scalar(x)) continue;
    auto lowest = lowest_of(dtype_of(x));
    if (*c <= -1e30 || (lowest && *c == *lowest)) return std::make_pair(*c, x);
  }
  return std::nullopt;
}

std::string settle_clamp(Plan& pl) {
  if (!pl.clamp) return "";
  if (!pl.add_bias.empty() || pl.keep || pl.combined)
    return "rule 7: " + pl.clamp_node->label() + " clamps scores that carry a bias the fused op adds unclamped " +
           "(only proven masks are taken with a Max(scores, lowest) clamp)";
  pl.fill = std::max(pl.fill, *pl.clamp);
  return "";
}

}  // namespace fuseopt::attn
