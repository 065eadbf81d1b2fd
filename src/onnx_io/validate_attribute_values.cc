// The enumerated string attributes of default-domain operators (validate_attribute_values.h).
// Each list is the union over the operator's versions (Pad's wrap came with opset 19, Resize's
// half_pixel_symmetric with 19, the scatters' max/min with 18, GridSample's linear/cubic with
// 20; tf_half_pixel_for_nn left the spec at 13): ONNX Runtime parses these strings without
// looking at the opset, and a value it accepts must never be refused here. What is refused
// is a value no version defines (an empty string, a typo).
#include "onnx_io/validate_attribute_values.h"

#include <map>
#include <utility>
#include <vector>

#include "util/error.h"

namespace fuseopt::validation {
namespace {

using Table = std::map<std::pair<std::string, std::string>, std::vector<std::string>>;

const Table& table() {
  static const Table t = [] {
    Table r;
    const std::vector<std::string> auto_pad = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    for (const char* op : {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool"})
      r[{op, "auto_pad"}] = auto_pad;
    r[{"Pad", "mode"}] = {"constant", "reflect", "edge", "wrap"};
    r[{"Resize", "mode"}] = {"nearest", "linear", "cubic"};
    r[{"Resize", "coordinate_transformation_mode"}] = {
        "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
    r[{"Resize", "nearest_mode"}] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    r[{"Resize", "keep_aspect_ratio_policy"}] = {"stretch", "not_larger", "not_smaller"};
    r[{"DepthToSpace", "mode"}] = {"DCR", "CRD"};
    r[{"GridSample", "mode"}] = {"bilinear", "nearest", "bicubic", "linear", "cubic"};
    r[{"GridSample", "padding_mode"}] = {"zeros", "border", "reflection"};
    for (const char* op : {"ScatterElements", "ScatterND"})
      r[{op, "reduction"}] = {"none", "add", "mul", "max", "min"};
    r[{"Gelu", "approximate"}] = {"none", "tanh"};
    for (const char* op : {"RNN", "GRU", "LSTM"}) r[{op, "direction"}] = {"forward", "reverse", "bidirectional"};
    return r;
  }();
  return t;
}

}  // namespace

std::string enum_attribute_problem(const onnx::NodeProto& n) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.type() != onnx::AttributeProto::STRING) continue;  // the type check reports a wrong type
    auto it = table().find({n.op_type(), a.name()});
    if (it == table().end()) continue;
    std::string list;
    bool ok = false;
    for (const std::string& v : it->second) {
      ok = ok || a.s() == v;
      list += (list.empty() ? "" : ", ") + v;
    }
    if (!ok) return "attribute " + quoted(a.name()) + " is " + quoted(a.s()) + "; it is one of " + list;
  }
  return "";
}

}  // namespace fuseopt::validation
