// Small helpers shared by the data-movement, shape and logic kernels
// (kernels/cpu/{gather,shape_ops,concat_split,...}.cc): reading host integer
// tensors, axis normalisation, errors naming the node, and a dtype visitor
// with fp16/bf16 storage types.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/kernel.h"
#include "util/error.h"

// Throws fuseopt::Error "<op 'name'>: <msg>" when cond is false.
#define DM_CHECK(ctx, cond, msg) FUSE_CHECK(cond, (ctx).node().label() << ": " << msg)

namespace fuseopt::dm {

// Storage types for 16-bit floats: arithmetic goes through float.
struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };

// Value of an element in a type C++ can compare and compute with.
template <class T> inline auto value_of(T v) { return v; }
inline float value_of(Half v) { return half_to_float(v.bits); }
inline float value_of(BF16 v) { return bf16_to_float(v.bits); }

template <class T> struct TypeTag { using type = T; };

// Converts one element between any two storage types (Cast semantics:
// to bool means != 0). A float outside an integer type's range is undefined
// behaviour in C++ (T5's relative-position buckets cast log(0) = -inf): NaN
// gives 0, a signed target saturates (what CUDA's cvt.rzi does, so both
// backends agree), an unsigned one wraps through int64 (what x86 gave for
// the in-range negatives, -1 -> 255), itself saturated.
template <class D, class S> inline D convert(S s) {
  const auto v = value_of(s);
  if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, BF16>) {
    return BF16{float_to_bf16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<decltype(v)>) {
    if (std::isnan(v)) return D{0};
    using F = decltype(v);
    if constexpr (std::is_signed_v<D>) {
      using L = std::numeric_limits<D>;
      if (v <= static_cast<F>(L::min())) return L::min();
      if (v >= static_cast<F>(L::max())) return L::max();  // max() rounds up to 2^bits: v is beyond
      return static_cast<D>(v);
    } else {
      using L = std::numeric_limits<int64_t>;
      if (v <= static_cast<F>(L::min())) return static_cast<D>(L::min());
      if (v >= static_cast<F>(L::max())) return static_cast<D>(L::max());
      return static_cast<D>(static_cast<int64_t>(v));
    }
  } else {
    return static_cast<D>(v);
  }
}

// Calls f(TypeTag<T>{}) with the storage type of `t`; throws for String and
// anything else without a fixed-size element.
template <class F> inline void visit_dtype(DType t, const Node& node, F&& f) {
  switch (t) {
    case DType::Float: return f(TypeTag<float>{});
    case DType::Double: return f(TypeTag<double>{});
    case DType::Float16: return f(TypeTag<Half>{});
    case DType::BFloat16: return f(TypeTag<BF16>{});
    case DType::Int8: return f(TypeTag<int8_t>{});
    case DType::UInt8: return f(TypeTag<uint8_t>{});
    case DType::Int16: return f(TypeTag<int16_t>{});
    case DType::UInt16: return f(TypeTag<uint16_t>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::UInt32: return f(TypeTag<uint32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    case DType::UInt64: return f(TypeTag<uint64_t>{});
    case DType::Bool: return f(TypeTag<bool>{});
    default:
      throw Error(node.label() + ": unsupported dtype " + dtype_name(t) + " on the CPU backend");
  }
}

// Optional input i: nullptr when omitted or past the node's inputs.
inline const RtTensor* opt_input(KernelContext& ctx, size_t i) {
  return i < ctx.num_inputs() ? ctx.input(i) : nullptr;
}
inline const RtTensor* opt_host_input(KernelContext& ctx, size_t i) {
  return i < ctx.num_inputs() && ctx.input(i) ? ctx.host_input(i) : nullptr;
}
inline const RtTensor& req_input(KernelContext& ctx, size_t i) {
  const RtTensor* t = opt_input(ctx, i);
  DM_CHECK(ctx, t, "missing required input " << i);
  return *t;
}
// Whether the node wants output i (an optional output may be omitted).
inline bool wants_output(KernelContext& ctx, size_t i) {
  return i < ctx.num_outputs() && ctx.node().output(i) != nullptr;
}

// Element i of an integer (or bool) tensor, as int64.
inline int64_t int_at(KernelContext& ctx, const RtTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::Int64: return t.ptr<int64_t>()[i];
    case DType::Int32: return t.ptr<int32_t>()[i];
    case DType::Int16: return t.ptr<int16_t>()[i];
    case DType::Int8: return t.ptr<int8_t>()[i];
    case DType::UInt8: return t.ptr<uint8_t>()[i];
    case DType::UInt16: return t.ptr<uint16_t>()[i];
    case DType::UInt32: return t.ptr<uint32_t>()[i];
    case DType::UInt64: return static_cast<int64_t>(t.ptr<uint64_t>()[i]);
    case DType::Bool: return t.ptr<bool>()[i] ? 1 : 0;
    default:
      throw Error(ctx.node().label() + ": expected an integer tensor, got " + dtype_name(t.dtype));
  }
}

// A whole host integer tensor (shapes, axes, starts, repeats...) as int64.
inline std::vector<int64_t> read_ints(KernelContext& ctx, const RtTensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = int_at(ctx, t, i);
  return v;
}

// Axis in [-rank, rank) mapped to [0, rank); throws otherwise.
inline int64_t norm_axis(KernelContext& ctx, int64_t axis, int64_t rank) {
  DM_CHECK(ctx, axis >= -rank && axis < rank,
           "axis " << axis << " out of range for rank " << rank);
  return axis < 0 ? axis + rank : axis;
}

// Row-major strides in elements.
inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

inline size_t elem_size(KernelContext& ctx, DType t) {
  const size_t n = dtype_size(t);
  DM_CHECK(ctx, n > 0, "unsupported dtype " << dtype_name(t) << " on the CPU backend");
  return n;
}

// memcpy that accepts null pointers when there is nothing to copy.
inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n) std::memcpy(dst, src, n);
}

inline int64_t prod(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

// Dense copy of a strided view: dst[i0..in] = src[sum i_d * strides[d]]
// (strides in elements, may be 0 or negative). Transpose, Slice, Expand and
// Tile are all this loop with different strides.
template <class E>
inline void strided_copy_typed(E* dst, const E* src, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& strides) {
  const int64_t total = shape_numel(shape);
  if (total <= 0) return;
  const size_t rank = shape.size();
  if (rank == 0) { dst[0] = src[0]; return; }
  const int64_t inner = shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t off = 0;
  for (int64_t o = 0; o < total; o += inner) {
    const E* s = src + off;
    if (inner_stride == 1) {
      std::memcpy(dst + o, s, static_cast<size_t>(inner) * sizeof(E));
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[o + i] = s[i * inner_stride];
    }
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < shape[d]) break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

inline void strided_copy(KernelContext& ctx, void* dst, const void* src, size_t elem_bytes,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  switch (elem_bytes) {
    case 1: return strided_copy_typed(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), shape, strides);
    case 2: return strided_copy_typed(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), shape, strides);
    case 4: return strided_copy_typed(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), shape, strides);
    case 8: return strided_copy_typed(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), shape, strides);
    default: DM_CHECK(ctx, false, "unsupported element size " << elem_bytes);
  }
}

}  // namespace fuseopt::dm
