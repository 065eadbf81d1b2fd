// Element types and host constant tensors (owned or memory-mapped bytes).
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

class MappedSpan;

// A tensor's bytes: owned memory, or a read-only view of a memory-mapped file
// range (external-data weights, constants spilled to a scratch file), kept
// alive by the view. Reading never copies. Anything that writes (the
// non-const data(), begin(), end(), resize) first copies a view into owned
// memory: copy-on-write, so a view's file is never written and a pass that
// changes a weight changes its own copy. Copying a TensorBytes copies owned
// bytes (as std::vector does) and shares a view.
class TensorBytes {
 public:
  TensorBytes() = default;
  explicit TensorBytes(size_t n) : own_(n) {}
  TensorBytes(std::vector<uint8_t> v) : own_(std::move(v)) {}  // NOLINT: as a vector
  static TensorBytes view(std::shared_ptr<const MappedSpan> span);

  size_t size() const { return view_ ? view_size_ : own_.size(); }
  bool empty() const { return size() == 0; }
  const uint8_t* data() const { return view_ ? view_data_ : own_.data(); }
  const uint8_t* begin() const { return data(); }
  const uint8_t* end() const { return data() + size(); }
  uint8_t* data() { return writable().data(); }
  uint8_t* begin() { return data(); }
  uint8_t* end() { return data() + size(); }
  uint8_t operator[](size_t i) const { return data()[i]; }
  uint8_t& operator[](size_t i) { return data()[i]; }
  void resize(size_t n) { writable().resize(n); }
  bool operator==(const TensorBytes& o) const;
  bool operator!=(const TensorBytes& o) const { return !(*this == o); }

  bool is_view() const { return view_ != nullptr; }
  const MappedSpan* span() const { return view_.get(); }
  // A view: drops the pages read so far from the process (they are read from
  // the file again when needed). Owned bytes: nothing.
  void release_resident() const;

 private:
  std::vector<uint8_t>& writable();
  std::vector<uint8_t> own_;
  std::shared_ptr<const MappedSpan> view_;
  const uint8_t* view_data_ = nullptr;
  size_t view_size_ = 0;
};

// How many times a view was copied into owned memory in this process (the
// copy-on-write above): tests check that optimizing a model with mapped
// weights copies none of them.
uint64_t tensor_view_copies();

// A dense host tensor, little-endian bytes. Used for initializers, Constant
// values and anything the optimizer folds.
struct Tensor {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  TensorBytes bytes;                   // numel * dtype_size(dtype) bytes
  std::vector<std::string> strings;    // only for DType::String

  Tensor() = default;
  Tensor(DType t, std::vector<int64_t> d) : dtype(t), dims(std::move(d)) {
    bytes.resize(static_cast<size_t>(numel()) * dtype_size(dtype));
  }
  int64_t numel() const { return shape_numel(dims); }
  // Writable elements (copy-on-write for a view, see TensorBytes).
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
// Constants in the graph are shared and never changed in place: a pass that
// wants other values makes a new Tensor (a copy shares a view's mapping
// until written).
using TensorPtr = std::shared_ptr<const Tensor>;

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
