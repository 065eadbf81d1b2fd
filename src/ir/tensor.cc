#include "ir/tensor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>

#include "util/error.h"
#include "util/mapped_file.h"

namespace fuseopt {

namespace {
std::atomic<uint64_t> g_view_copies{0};
}  // namespace

uint64_t tensor_view_copies() { return g_view_copies.load(); }

TensorBytes TensorBytes::view(std::shared_ptr<const MappedSpan> span) {
  TensorBytes b;
  FUSE_CHECK(span, "internal: a tensor view of no mapping");
  b.view_data_ = span->data();
  b.view_size_ = span->size();
  b.view_ = std::move(span);
  return b;
}

std::vector<uint8_t>& TensorBytes::writable() {
  if (view_) {
    own_.assign(view_data_, view_data_ + view_size_);
    view_.reset();
    view_data_ = nullptr;
    view_size_ = 0;
    g_view_copies++;
  }
  return own_;
}

bool TensorBytes::operator==(const TensorBytes& o) const {
  return size() == o.size() && (size() == 0 || data() == o.data() || std::memcmp(data(), o.data(), size()) == 0);
}

void TensorBytes::release_resident() const {
  if (view_) view_->release_resident();
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float: case DType::Int32: case DType::UInt32: return 4;
    case DType::UInt8: case DType::Int8: case DType::Bool: return 1;
    case DType::UInt16: case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int64: case DType::Double: case DType::UInt64: return 8;
    default: return 0;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Double: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::BFloat16: return "bfloat16";
    default: return "undefined";
  }
}

bool dtype_is_float(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16 || t == DType::Double;
}
bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::UInt8: case DType::Int8: case DType::UInt16: case DType::Int16:
    case DType::Int32: case DType::Int64: case DType::UInt32: case DType::UInt64: return true;
    default: return false;
  }
}

int64_t shape_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string shape_str(const std::vector<int64_t>& dims) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "," : "") << dims[i];
  os << "]";
  return os.str();
}

double Tensor::as_double(int64_t i) const {
  switch (dtype) {
    case DType::Float: return data<float>()[i];
    case DType::Double: return data<double>()[i];
    case DType::Float16: return half_to_float(data<uint16_t>()[i]);
    case DType::BFloat16: return bf16_to_float(data<uint16_t>()[i]);
    case DType::Int64: return static_cast<double>(data<int64_t>()[i]);
    case DType::Int32: return data<int32_t>()[i];
    case DType::Int16: return data<int16_t>()[i];
    case DType::Int8: return data<int8_t>()[i];
    case DType::UInt8: case DType::Bool: return data<uint8_t>()[i];
    case DType::UInt16: return data<uint16_t>()[i];
    case DType::UInt32: return data<uint32_t>()[i];
    case DType::UInt64: return static_cast<double>(data<uint64_t>()[i]);
    default: throw Error(std::string("cannot read a ") + dtype_name(dtype) + " tensor as a number");
  }
}

int64_t Tensor::as_int(int64_t i) const {
  switch (dtype) {
    case DType::Int64: return data<int64_t>()[i];
    case DType::Int32: return data<int32_t>()[i];
    case DType::UInt64: return static_cast<int64_t>(data<uint64_t>()[i]);
    default: return static_cast<int64_t>(as_double(i));
  }
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[i] = as_int(i);
  return v;
}

Tensor Tensor::scalar_float(float v) {
  Tensor t(DType::Float, {});
  t.data<float>()[0] = v;
  return t;
}
Tensor Tensor::from_ints(const std::vector<int64_t>& v, std::vector<int64_t> dims) {
  Tensor t(DType::Int64, std::move(dims));
  FUSE_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "from_ints: size mismatch");
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), v.size() * 8);  // empty: data() may be null
  return t;
}
Tensor Tensor::from_floats(const std::vector<float>& v, std::vector<int64_t> dims) {
  Tensor t(DType::Float, std::move(dims));
  FUSE_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "from_floats: size mismatch");
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
  return t;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal half or zero: round to nearest even
    float a;
    std::memcpy(&a, &absx, 4);
    uint32_t m = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));  // a / 2^-24
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absx >> 23) - 127 + 15);
  uint32_t mant = absx & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;  // round to nearest even
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_float(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

uint16_t float_to_half_finite(float f) {
  if (std::isfinite(f)) f = std::min(65504.0f, std::max(-65504.0f, f));
  return float_to_half(f);
}

uint16_t float_to_bf16_finite(float f) {
  constexpr float kMaxBf16 = 3.38953139e38f;  // 0x7f7f: FLT_MAX would round up to inf
  if (std::isfinite(f)) f = std::min(kMaxBf16, std::max(-kMaxBf16, f));
  return float_to_bf16(f);
}

}  // namespace fuseopt
