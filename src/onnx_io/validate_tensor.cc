#include "onnx_io/validate_tensor.h"

#include <onnx/onnx_pb.h>

#include <sstream>
#include <vector>

#include "util/error.h"

namespace fuseopt {

namespace {

using TP = onnx::TensorProto;

const char* const kDtypeNames[kMaxOnnxDataType + 1] = {
    "UNDEFINED", "FLOAT",      "UINT8",      "INT8",           "UINT16",     "INT16",          "INT32",
    "INT64",     "STRING",     "BOOL",       "FLOAT16",        "DOUBLE",     "UINT32",         "UINT64",
    "COMPLEX64", "COMPLEX128", "BFLOAT16",   "FLOAT8E4M3FN",   "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
    "UINT4",     "INT4",       "FLOAT4E2M1", "FLOAT8E8M0",     "UINT2",      "INT2",           "FLOAT6E2M3",
    "FLOAT6E3M2",
};

// The typed field ONNX stores each data type in (when not in raw_data).
enum class Field { Float, Double, Int32, Int64, UInt64, String };

const char* field_name(Field f) {
  switch (f) {
    case Field::Float: return "float_data";
    case Field::Double: return "double_data";
    case Field::Int32: return "int32_data";
    case Field::Int64: return "int64_data";
    case Field::UInt64: return "uint64_data";
    case Field::String: return "string_data";
  }
  return "?";
}

Field field_of(int dt) {
  switch (dt) {
    case TP::FLOAT: case TP::COMPLEX64: return Field::Float;
    case TP::DOUBLE: case TP::COMPLEX128: return Field::Double;
    case TP::INT64: return Field::Int64;
    case TP::UINT32: case TP::UINT64: return Field::UInt64;
    case TP::STRING: return Field::String;
    default: return Field::Int32;  // 8/16-bit ints, bool, float16, bfloat16, float8/6/4, int4/2 (ONNX 1.23)
  }
}

// Values one element takes in its typed field (complex: 2); 0 where several
// elements share one value (the packed 4-, 2- and 6-bit types).
int values_per_element(int dt) {
  if (dt == TP::COMPLEX64 || dt == TP::COMPLEX128) return 2;
  if (dt >= 21 && dt != 24) return 0;  // UINT4, INT4, FLOAT4E2M1, UINT2, INT2, FLOAT6E2M3, FLOAT6E3M2
  return 1;
}

// Bytes of raw_data for n elements; -1 where we do not know the packing.
int64_t raw_bytes(int dt, uint64_t n) {
  switch (dt) {
    case TP::UINT8: case TP::INT8: case TP::BOOL: case 17: case 18: case 19: case 20: case 24: return static_cast<int64_t>(n);
    case TP::UINT16: case TP::INT16: case TP::FLOAT16: case TP::BFLOAT16: return static_cast<int64_t>(n * 2);
    case TP::FLOAT: case TP::INT32: case TP::UINT32: return static_cast<int64_t>(n * 4);
    case TP::INT64: case TP::UINT64: case TP::DOUBLE: case TP::COMPLEX64: return static_cast<int64_t>(n * 8);
    case TP::COMPLEX128: return static_cast<int64_t>(n * 16);
    case 21: case 22: case 23: return static_cast<int64_t>((n + 1) / 2);  // two 4-bit values per byte
    case 25: case 26: return static_cast<int64_t>((n + 3) / 4);             // four 2-bit values per byte
    default: return -1;
  }
}

std::string dims_str(const TP& t) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < t.dims_size(); ++i) os << (i ? "," : "") << t.dims(i);
  os << "]";
  return os.str();
}

struct SetField {
  const char* name;
  int64_t size;
};

}  // namespace

std::string onnx_dtype_name(int dt) {
  if (dt >= 0 && dt <= kMaxOnnxDataType) return kDtypeNames[dt];
  return "data type " + std::to_string(dt);
}

std::string tensor_proto_problem(const TP& t) {
  std::ostringstream why;
  const int dt = t.data_type();
  if (dt == TP::UNDEFINED) return "has no data_type";
  if (dt < 0 || dt > kMaxOnnxDataType) return "has data_type " + std::to_string(dt) + ", which ONNX does not define";
  // Element count, refusing products that do not fit (1 << 62 leaves room for
  // any element size below). A 0 anywhere makes the tensor empty, whatever the rest.
  bool empty = false;
  for (int64_t d : t.dims()) {
    if (d < 0) return "has a negative dimension (dims " + dims_str(t) + ")";
    empty = empty || d == 0;
  }
  uint64_t n = empty ? 0 : 1;
  bool too_many = false;
  for (int64_t d : t.dims()) {
    if (empty) break;
    if (n > (uint64_t(1) << 62) / static_cast<uint64_t>(d)) {
      too_many = true;
      break;
    }
    n *= static_cast<uint64_t>(d);
  }
  if (too_many) return "has dims " + dims_str(t) + ": too many elements (more than fit in memory)";
  if (t.has_segment()) return "is a segment of a larger tensor (TensorProto.segment), which fuseopt does not read";

  std::vector<SetField> set;
  auto note = [&](const char* name, int64_t size) {
    if (size > 0) set.push_back({name, size});
  };
  note("raw_data", static_cast<int64_t>(t.raw_data().size()));
  note("float_data", t.float_data_size());
  note("double_data", t.double_data_size());
  note("int32_data", t.int32_data_size());
  note("int64_data", t.int64_data_size());
  note("uint64_data", t.uint64_data_size());
  note("string_data", t.string_data_size());

  if (t.data_location() != TP::DEFAULT && t.data_location() != TP::EXTERNAL)
    return "has data_location " + std::to_string(t.data_location()) + ", which ONNX does not define";
  if (t.data_location() == TP::EXTERNAL) {
    if (!set.empty()) return std::string("is stored externally but also carries ") + set[0].name;
    // offset and length are decimal byte counts (the loader reads them so).
    for (const auto& e : t.external_data())
      if ((e.key() == "offset" || e.key() == "length") &&
          (e.value().empty() || e.value().size() > 18 ||
           e.value().find_first_not_of("0123456789") != std::string::npos))
        return "external data " + e.key() + " " + quoted(e.value()) + " is not a byte count";
    for (const auto& e : t.external_data())
      if (e.key() == "location" && !e.value().empty()) return "";
    return "is stored externally but its external_data has no location";
  }
  if (set.size() > 1)
    return std::string("has two value fields: ") + set[0].name + " and " + set[1].name + " (ONNX allows one)";
  const std::string what = onnx_dtype_name(dt) + " " + dims_str(t);
  if (n == 0) {
    if (!set.empty()) return std::string("has no elements (dims ") + dims_str(t) + ") but carries " + set[0].name;
    return "";
  }
  if (set.empty()) return "has no data (" + what + " needs " + std::to_string(n) + " values)";
  const SetField& f = set[0];
  if (std::string(f.name) == "raw_data") {
    if (dt == TP::STRING) return "keeps STRING data in raw_data (ONNX stores strings in string_data)";
    const int64_t want = raw_bytes(dt, n);
    if (want >= 0 && f.size != want)
      return "raw data is " + std::to_string(f.size) + " bytes; " + what + " needs " + std::to_string(want);
    return "";
  }
  const Field expected = field_of(dt);
  if (std::string(f.name) != field_name(expected))
    return std::string("keeps ") + onnx_dtype_name(dt) + " values in " + f.name + " (ONNX stores them in " +
           field_name(expected) + " or raw_data)";
  const int per = values_per_element(dt);
  if (per > 0 && static_cast<uint64_t>(f.size) != n * static_cast<uint64_t>(per))
    return "has " + std::to_string(f.size) + " values in " + f.name + "; " + what + " needs " +
           std::to_string(n * static_cast<uint64_t>(per));
  return "";
}

std::string sparse_tensor_proto_problem(const onnx::SparseTensorProto& t) {
  if (!t.has_values()) return "is a sparse tensor without values";
  if (std::string p = tensor_proto_problem(t.values()); !p.empty()) return "has values that " + p;
  if (t.has_indices()) {
    if (std::string p = tensor_proto_problem(t.indices()); !p.empty()) return "has indices that " + p;
    if (t.indices().data_type() != TP::INT64) return "has indices of type " + onnx_dtype_name(t.indices().data_type()) + " (ONNX wants INT64)";
  }
  for (int64_t d : t.dims())
    if (d < 0) return "has a negative dimension";
  return "";
}

}  // namespace fuseopt
