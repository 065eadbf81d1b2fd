#include "runtime/precision.h"

#include <cstring>

#include "util/error.h"

namespace fuseopt {

DType compute_float_dtype(Precision p) {
  switch (p) {
    case Precision::FP16: return DType::Float16;
    case Precision::BF16: return DType::BFloat16;
    default: return DType::Float;
  }
}

DType compute_dtype(DType d, DType compute_float, bool half_kernels) {
  if (d == DType::Float) return compute_float;
  if (!half_kernels && (d == DType::Float16 || d == DType::BFloat16)) return DType::Float;
  return d;
}

std::unique_ptr<Node> node_in_compute_dtypes(const Node& n, const std::function<DType(DType)>& compute) {
  std::unique_ptr<Node> r;
  if (n.is("Cast")) {
    const DType to = static_cast<DType>(n.attr_int("to", 0));
    if (compute(to) != to) {
      r = std::make_unique<Node>(n);
      r->set_attr(Attribute::make_int("to", static_cast<int64_t>(compute(to))));
    }
  } else if (n.is("ConstantOfShape") || n.is("Constant")) {
    const Attribute* a = n.attr("value");
    if (a && a->t && compute(a->t->dtype) != a->t->dtype) {
      r = std::make_unique<Node>(n);
      r->set_attr(Attribute::make_tensor("value", convert_float(*a->t, compute(a->t->dtype))));
    } else if (!a && n.is("ConstantOfShape") && compute(DType::Float) != DType::Float) {
      // No value: ONNX's default is a float32 0 (the dynamo exporter writes new_empty / new_zeros
      // that way), a float like any other, so it computes in the compute dtype; left float32 it
      // met fp16 operands (DeepSeek-V3's slice_scatter into it: ScatterND refused the mix).
      r = std::make_unique<Node>(n);
      r->set_attr(Attribute::make_tensor("value", convert_float(Tensor::from_floats({0.f}, {1}), compute(DType::Float))));
    }
  }
  return r;
}

DType declared_target(DType have, DType declared) {
  if (!dtype_is_float(have) || have == DType::Double || have == declared) return DType::Undefined;
  if (declared == DType::Float || declared == DType::Undefined) return have == DType::Float ? DType::Undefined : DType::Float;
  if (declared == DType::Float16 || declared == DType::BFloat16) return declared;
  return DType::Undefined;
}

Tensor convert_float(const RtTensor& t, DType to, HalfOverflow o) {
  Tensor r(to, t.shape);
  const int64_t n = t.numel();
  const float* f32 = t.dtype == DType::Float ? static_cast<const float*>(t.data) : nullptr;
  const uint16_t* u16 = static_cast<const uint16_t*>(t.data);
  // Any other dtype (never an input or output conversion: those are floats)
  // reads through Tensor::as_double.
  Tensor other;
  if (t.dtype != DType::Float && t.dtype != DType::Float16 && t.dtype != DType::BFloat16) {
    other = Tensor(t.dtype, t.shape);
    if (t.nbytes()) std::memcpy(other.bytes.data(), t.data, t.nbytes());
  }
  auto narrow = [&](auto read) {
    uint16_t* y = r.data<uint16_t>();
    auto loop = [&](auto round) {
      for (int64_t i = 0; i < n; ++i) y[i] = round(read(i));
    };
    const bool sat = o == HalfOverflow::Saturate;
    if (to == DType::Float16)
      sat ? loop(float_to_half_finite) : loop(float_to_half);
    else
      sat ? loop(float_to_bf16_finite) : loop(float_to_bf16);
  };
  switch (to) {
    case DType::Float: {
      float* y = r.data<float>();
      if (t.dtype == DType::Float16)
        for (int64_t i = 0; i < n; ++i) y[i] = half_to_float(u16[i]);
      else if (t.dtype == DType::BFloat16)
        for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(u16[i]);
      else if (f32 && n)
        std::memcpy(y, f32, static_cast<size_t>(n) * sizeof(float));
      else
        for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(other.as_double(i));
      break;
    }
    case DType::Float16:
    case DType::BFloat16:
      if (f32) narrow([&](int64_t i) { return f32[i]; });
      else if (t.dtype == DType::Float16) narrow([&](int64_t i) { return half_to_float(u16[i]); });
      else if (t.dtype == DType::BFloat16) narrow([&](int64_t i) { return bf16_to_float(u16[i]); });
      else narrow([&](int64_t i) { return static_cast<float>(other.as_double(i)); });
      break;
    default: throw Error(std::string("internal: cannot convert to ") + dtype_name(to));
  }
  return r;
}

Tensor convert_float(const Tensor& t, DType to, HalfOverflow o) {
  if (t.dtype == to) return t;
  return convert_float(RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU}, to, o);
}

}  // namespace fuseopt
