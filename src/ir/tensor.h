// Element types and host-resident constant tensors.
// DType values equal onnx::TensorProto_DataType so conversion is a cast.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace fuseopt {

enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

// Size in bytes of one element; 0 for String/Undefined.
size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool dtype_is_float(DType t);    // Float, Float16, BFloat16, Double
bool dtype_is_integer(DType t);  // signed/unsigned ints (not Bool)

int64_t shape_numel(const std::vector<int64_t>& dims);
std::string shape_str(const std::vector<int64_t>& dims);  // "[2,16,128]"

// A dense host tensor with its own little-endian bytes. Used for initializers,
// Constant values and anything the optimizer folds.
struct Tensor {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;          // numel * dtype_size(dtype) bytes
  std::vector<std::string> strings;    // only for DType::String

  Tensor() = default;
  Tensor(DType t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {
    bytes.resize(static_cast<size_t>(numel()) * dtype_size(dtype));
  }
  int64_t numel() const { return shape_numel(dims); }
  template <class T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }

  // Element i converted to double / int64 whatever the dtype (for small
  // integer shape tensors and scalar constants; throws on String).
  double as_double(int64_t i) const;
  int64_t as_int(int64_t i) const;
  std::vector<int64_t> to_int_vector() const;

  static Tensor scalar_float(float v);
  static Tensor from_ints(const std::vector<int64_t>& v, std::vector<int64_t> dims);
  static Tensor from_floats(const std::vector<float>& v, std::vector<int64_t> dims);
};
using TensorPtr = std::shared_ptr<Tensor>;

// IEEE half / bfloat16 conversions (host side).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
// Float weights and constants narrowed to a compute precision: finite values
// stay finite (saturate at the largest finite half / bfloat16). Exporters fill
// masks with finfo(float32).min; rounded to -inf it turns 0 * fill into NaN.
uint16_t float_to_half_finite(float f);
uint16_t float_to_bf16_finite(float f);

}  // namespace fuseopt
