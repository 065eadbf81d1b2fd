// Tensor protos on load (src/onnx_io/validate_tensor.h): each malformed form
// refused with what is wrong, in initializers and in Constant values, before
// anything reads the data; the well-formed spellings of the same data pass.
#include <catch2/catch.hpp>

#include "onnx_io/validate_model.h"
#include "onnx_io/validate_tensor.h"
#include "support/model_proto.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Contains;

namespace {

onnx::TensorProto floats(std::vector<int64_t> dims, size_t n) {
  std::vector<float> v(n, 1.5f);
  return float_tensor("w", std::move(dims), v);
}

// y = x + w with initializer w.
onnx::ModelProto with_initializer(const onnx::TensorProto& w) {
  auto m = model_proto();
  add_initializer(m, w);
  add_node(m, "Add", {"x", w.name()}, {"y"}, "add");
  return m;
}

}  // namespace

TEST_CASE("tensor protos: well-formed spellings pass") {
  CHECK(tensor_proto_problem(floats({2, 3}, 6)).empty());
  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::INT64);
  typed.add_dims(2);
  typed.add_int64_data(1);
  typed.add_int64_data(2);
  CHECK(tensor_proto_problem(typed).empty());
  onnx::TensorProto half;  // float16 in int32_data, one value per element
  half.set_data_type(onnx::TensorProto::FLOAT16);
  half.add_dims(3);
  for (int i = 0; i < 3; ++i) half.add_int32_data(0x3c00);
  CHECK(tensor_proto_problem(half).empty());
  onnx::TensorProto empty;  // no elements, no data
  empty.set_data_type(onnx::TensorProto::FLOAT);
  empty.add_dims(0);
  empty.add_dims(1 << 30);
  CHECK(tensor_proto_problem(empty).empty());
  onnx::TensorProto ext;
  ext.set_data_type(onnx::TensorProto::FLOAT);
  ext.add_dims(4);
  ext.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = ext.add_external_data();
  e->set_key("location");
  e->set_value("w.bin");
  CHECK(tensor_proto_problem(ext).empty());
  onnx::TensorProto str;
  str.set_data_type(onnx::TensorProto::STRING);
  str.add_dims(1);
  str.add_string_data("a");
  CHECK(tensor_proto_problem(str).empty());
  CHECK_NOTHROW(validate_model(with_initializer(floats({3}, 3)), "m.onnx"));
}

TEST_CASE("tensor protos: two value fields") {
  auto w = floats({2}, 2);
  w.add_float_data(1.0f);
  w.add_float_data(2.0f);
  CHECK(tensor_proto_problem(w) == "has two value fields: raw_data and float_data (ONNX allows one)");
  REQUIRE_THROWS_WITH(validate_model(with_initializer(w), "m.onnx"),
                      "m.onnx: initializer 'w': has two value fields: raw_data and float_data (ONNX allows one)");
}

TEST_CASE("tensor protos: data size against the dims") {
  CHECK(tensor_proto_problem(floats({2, 3}, 5)) == "raw data is 20 bytes; FLOAT [2,3] needs 24");
  onnx::TensorProto typed;
  typed.set_data_type(onnx::TensorProto::FLOAT);
  typed.add_dims(3);
  typed.add_float_data(1.0f);
  CHECK(tensor_proto_problem(typed) == "has 1 values in float_data; FLOAT [3] needs 3");
  onnx::TensorProto none;
  none.set_data_type(onnx::TensorProto::FLOAT);
  none.add_dims(4);
  CHECK(tensor_proto_problem(none) == "has no data (FLOAT [4] needs 4 values)");
  onnx::TensorProto zero;
  zero.set_data_type(onnx::TensorProto::FLOAT);
  zero.add_dims(0);
  zero.add_float_data(1.0f);
  CHECK(tensor_proto_problem(zero) == "has no elements (dims [0]) but carries float_data");
  onnx::TensorProto c64;  // complex: two floats per element
  c64.set_data_type(onnx::TensorProto::COMPLEX64);
  c64.add_dims(2);
  for (int i = 0; i < 3; ++i) c64.add_float_data(1.0f);
  CHECK(tensor_proto_problem(c64) == "has 3 values in float_data; COMPLEX64 [2] needs 4");
}

TEST_CASE("tensor protos: dims and data types") {
  CHECK(tensor_proto_problem(floats({2, -3}, 6)) == "has a negative dimension (dims [2,-3])");
  CHECK(tensor_proto_problem(floats({int64_t(1) << 40, int64_t(1) << 40}, 1)) ==
        "has dims [1099511627776,1099511627776]: too many elements (more than fit in memory)");
  auto undefined = floats({1}, 1);
  undefined.set_data_type(0);
  CHECK(tensor_proto_problem(undefined) == "has no data_type");
  auto unknown = floats({1}, 1);
  unknown.set_data_type(99);
  CHECK(tensor_proto_problem(unknown) == "has data_type 99, which ONNX does not define");
  onnx::TensorProto wrong_field;
  wrong_field.set_data_type(onnx::TensorProto::FLOAT);
  wrong_field.add_dims(1);
  wrong_field.add_int64_data(1);
  CHECK(tensor_proto_problem(wrong_field) == "keeps FLOAT values in int64_data (ONNX stores them in float_data or raw_data)");
  onnx::TensorProto raw_string;
  raw_string.set_data_type(onnx::TensorProto::STRING);
  raw_string.add_dims(1);
  raw_string.set_raw_data("abc");
  CHECK(tensor_proto_problem(raw_string) == "keeps STRING data in raw_data (ONNX stores strings in string_data)");
}

TEST_CASE("tensor protos: external data") {
  onnx::TensorProto ext;
  ext.set_data_type(onnx::TensorProto::FLOAT);
  ext.add_dims(4);
  ext.set_data_location(onnx::TensorProto::EXTERNAL);
  CHECK(tensor_proto_problem(ext) == "is stored externally but its external_data has no location");
  ext.add_float_data(1.0f);
  CHECK(tensor_proto_problem(ext) == "is stored externally but also carries float_data");
  auto loc = floats({1}, 1);
  loc.set_data_location(static_cast<onnx::TensorProto::DataLocation>(1));
  CHECK(tensor_proto_problem(loc) == "is stored externally but also carries raw_data");
  // mutate_models.py seed 5 m76: an offset of -5 in a Constant's tensor reached the loader,
  // whose message named no file.
  onnx::TensorProto off;
  off.set_data_type(onnx::TensorProto::FLOAT);
  off.add_dims(4);
  off.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* l = off.add_external_data();
  l->set_key("location");
  l->set_value("w.bin");
  CHECK(tensor_proto_problem(off) == "");
  auto* o = off.add_external_data();
  o->set_key("offset");
  o->set_value("-5");
  CHECK(tensor_proto_problem(off) == "external data offset '-5' is not a byte count");
}

TEST_CASE("tensor protos: in a Constant's value") {
  auto m = model_proto();
  auto* c = add_node(m, "Constant", {}, {"y"}, "const");
  auto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = floats({2}, 3);
  a->mutable_t()->set_name("c0");
  REQUIRE_THROWS_WITH(validate_model(m, "m.onnx"),
                      "m.onnx: node 'const' (Constant, opset 17): attribute 'value': tensor 'c0' raw data is 12 "
                      "bytes; FLOAT [2] needs 8");
}
