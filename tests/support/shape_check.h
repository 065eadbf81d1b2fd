// Helpers of the shape-inference unit tests (tests/unit/shape_inference*_test.cc):
// graph inputs from "batch,seq,128" shape strings, int64 constants, shape printing.
#pragma once
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "ir/shape_inference.h"
#include "support/graph_builder.h"

namespace fuseopt::test::shape {

using fuseopt::test::GraphBuilder;

// "batch,seq,128" -> dims; "?" = anonymous; "" = scalar.
inline Shape parse_shape(const std::string& text) {
  Shape s;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "?") s.push_back(Dim::unknown());
    else if (!item.empty() && std::isdigit(static_cast<unsigned char>(item[0]))) s.push_back(Dim::of(std::stoll(item)));
    else s.push_back(Dim::sym(item));
  }
  return s;
}

inline Value* in(GraphBuilder& b, const std::string& name, const std::string& shape, DType t = DType::Float) {
  Value* v = b.graph().create_value(name);
  v->dtype = t;
  v->shape = parse_shape(shape);
  v->is_graph_input = true;
  b.graph().inputs.push_back(v);
  return v;
}

inline Value* ints(GraphBuilder& b, const std::vector<int64_t>& v, bool scalar = false) {
  return b.constant("c", Tensor::from_ints(v, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{(int64_t)v.size()}));
}

// A Constant node (not an initializer) holding int64 values.
inline Value* const_node(GraphBuilder& b, const std::vector<int64_t>& v, bool scalar = false) {
  const std::vector<int64_t> dims = scalar ? std::vector<int64_t>{} : std::vector<int64_t>{(int64_t)v.size()};
  return b.op("Constant", {}, {Attribute::make_tensor("value", Tensor::from_ints(v, dims))});
}

inline std::string sh(const Value* v) { return v->shape ? shape_str(*v->shape) : std::string("none"); }

inline std::string dims_text(const std::optional<std::vector<Dim>>& d) { return d ? shape_str(*d) : std::string("none"); }

inline Attribute I(const char* n, int64_t v) { return Attribute::make_int(n, v); }
inline Attribute Is(const char* n, std::vector<int64_t> v) { return Attribute::make_ints(n, std::move(v)); }

}  // namespace fuseopt::test::shape
