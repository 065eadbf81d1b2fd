// ONNX Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9), shared by the CPU reference kernel
// (kernels/cpu/resize.cc) and the CUDA kernel (kernels/cuda/resize.cu):
//  - resolve_resize(): host-side parameter resolution (attributes, scales or
//    sizes, axes, keep_aspect_ratio_policy, roi) into the output shape and
//    one ResizeAxis per dim;
//  - the per-axis coordinate math (source coordinate, nearest rounding, the
//    interpolation window and its weights) as __host__ __device__ functions
//    on the plain ResizeAxis struct, so both backends compute the same
//    coordinates and the CUDA kernel gets everything by value.
// Linear and cubic are separable: one 1-D pass per resized axis; nearest is
// one gather. Antialias (opset 18) widens the linear/cubic filter by 1/scale
// when downscaling and normalises the weights, as in the ONNX spec's
// reference; window taps outside the input read the edge element.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dm_util.h"

#ifdef __CUDACC__
#define FUSEOPT_HD __host__ __device__ __forceinline__
#else
#define FUSEOPT_HD inline
#endif

namespace fuseopt::dm {

enum class ResizeMode : int { Nearest = 0, Linear = 1, Cubic = 2 };
enum class ResizeCoord : int {
  HalfPixel = 0, HalfPixelSymmetric = 1, PytorchHalfPixel = 2, AlignCorners = 3, Asymmetric = 4, TfCropAndResize = 5,
  TfHalfPixelForNn = 6  // opset 11 only
};
enum class NearestRound : int { RoundPreferFloor = 0, RoundPreferCeil = 1, Floor = 2, Ceil = 3 };

// Everything one axis needs to map output coordinates to input taps. Plain
// data: passed by value to CUDA kernels.
struct ResizeAxis {
  int64_t in = 1, out = 1;
  double scale = 1.0;                 // scales[i], or out/in when sizes were given
  double roi_start = 0.0, roi_end = 1.0;  // tf_crop_and_resize only
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  NearestRound nearest = NearestRound::RoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  bool antialias = false;
  bool identity = true;  // output coordinate o reads input o exactly: the axis is skipped
};

// a * b rounded on its own: nvcc would otherwise fuse it with a following
// add into an FMA (the host does not), and a nearest tie or the
// tf_crop_and_resize edge test could then go differently on the two backends.
FUSEOPT_HD double resize_mul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// Source coordinate of output coordinate o (ONNX coordinate_transformation_mode).
// *outside: tf_crop_and_resize maps o outside the input (extrapolation_value).
FUSEOPT_HD double resize_source_coord(const ResizeAxis& a, int64_t o, bool* outside) {
  *outside = false;
  const double x = static_cast<double>(o);
  const double in = static_cast<double>(a.in), out = static_cast<double>(a.out);
  switch (a.coord) {
    case ResizeCoord::HalfPixel: return (x + 0.5) / a.scale - 0.5;
    case ResizeCoord::HalfPixelSymmetric: {
      // Centres the (possibly truncated) output on the input.
      const double adjustment = out / resize_mul(a.scale, in);
      const double offset = resize_mul(in / 2, 1 - adjustment);
      return offset + (x + 0.5) / a.scale - 0.5;
    }
    case ResizeCoord::PytorchHalfPixel: return a.out > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case ResizeCoord::AlignCorners: return a.out > 1 ? resize_mul(x, in - 1) / (out - 1) : 0.0;
    case ResizeCoord::Asymmetric: return x / a.scale;
    case ResizeCoord::TfHalfPixelForNn: return (x + 0.5) / a.scale;
    case ResizeCoord::TfCropAndResize: {
      const double span = resize_mul(a.roi_end - a.roi_start, in - 1);
      const double c = a.out > 1 ? resize_mul(a.roi_start, in - 1) + resize_mul(x, span) / (out - 1)
                                 : resize_mul(0.5 * (a.roi_start + a.roi_end), in - 1);
      *outside = c < 0 || c > in - 1;
      return c;
    }
  }
  return 0.0;
}

// Nearest mode: the input index read by output coordinate o.
FUSEOPT_HD int64_t resize_nearest_index(const ResizeAxis& a, int64_t o, bool* outside) {
  if (a.identity) {
    *outside = false;
    return o;
  }
  const double x = resize_source_coord(a, o, outside);
  const double f = ::floor(x);
  const double frac = x - f;
  double r = f;
  switch (a.nearest) {
    case NearestRound::RoundPreferFloor: r = frac > 0.5 ? f + 1 : f; break;
    case NearestRound::RoundPreferCeil: r = frac >= 0.5 ? f + 1 : f; break;
    case NearestRound::Floor: r = f; break;
    case NearestRound::Ceil: r = frac > 0 ? f + 1 : f; break;
  }
  if (r < 0) r = 0;
  if (r > static_cast<double>(a.in - 1)) r = static_cast<double>(a.in - 1);
  return static_cast<int64_t>(r);
}

// Linear / cubic filter window for source coordinate x: input positions
// first .. first + count - 1 (not yet clamped); `stretch` is the factor the
// filter's argument is multiplied with (min(scale, 1) with antialias, else 1).
struct ResizeWindow {
  int64_t first = 0;
  int count = 0;
  double stretch = 1.0;
  bool normalize = false;
};

FUSEOPT_HD ResizeWindow resize_window(const ResizeAxis& a, double x) {
  ResizeWindow w;
  w.stretch = a.antialias && a.scale < 1.0 ? a.scale : 1.0;
  const double support = a.mode == ResizeMode::Cubic ? 2.0 : 1.0;
  // Every position p with |p - x| * stretch < support: first = floor(x) +
  // floor(-support / stretch) + 1, symmetric around the cell of x.
  const int64_t start = static_cast<int64_t>(::floor(-support / w.stretch)) + 1;
  w.first = static_cast<int64_t>(::floor(x)) + start;
  w.count = static_cast<int>(2 - 2 * start);
  w.normalize = a.antialias || a.exclude_outside;
  return w;
}

// Unnormalised weight of input position p for source coordinate x.
FUSEOPT_HD double resize_weight(const ResizeAxis& a, const ResizeWindow& w, double x, int64_t p) {
  if (a.exclude_outside && (p < 0 || p >= a.in)) return 0.0;
  const double d = ::fabs((static_cast<double>(p) - x) * w.stretch);
  if (a.mode == ResizeMode::Linear) return d < 1.0 ? 1.0 - d : 0.0;
  const double A = a.cubic_a;
  if (d <= 1.0) return ((A + 2) * d - (A + 3)) * d * d + 1;
  if (d < 2.0) return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
  return 0.0;
}

FUSEOPT_HD int64_t resize_clamp(int64_t p, int64_t n) { return p < 0 ? 0 : (p >= n ? n - 1 : p); }

// One output value of a linear / cubic 1-D pass: output coordinate o of axis
// a, reading the input line through read(p) (p already clamped to the
// input, as the spec's edge padding). Zero-weight taps are not read, so an
// inf next to the window cannot turn the result into NaN.
template <class Read>
FUSEOPT_HD float resize_interp_1d(const ResizeAxis& a, int64_t o, float extrapolation, Read read) {
  bool outside = false;
  const double x = resize_source_coord(a, o, &outside);
  if (outside) return extrapolation;
  const ResizeWindow w = resize_window(a, x);
  double norm = 1.0;
  if (w.normalize) {
    double sum = 0.0;
    for (int k = 0; k < w.count; ++k) sum += resize_weight(a, w, x, w.first + k);
    norm = sum != 0.0 ? 1.0 / sum : 1.0;
  }
  float acc = 0.f;
  for (int k = 0; k < w.count; ++k) {
    const double wt = resize_weight(a, w, x, w.first + k);
    if (wt != 0.0) acc += static_cast<float>(wt * norm) * read(resize_clamp(w.first + k, a.in));
  }
  return acc;
}

// The resolved node: output shape, one ResizeAxis per dim (identity on the
// axes not resized), extrapolation value, and the order of the 1-D passes.
struct ResizeParams {
  std::vector<int64_t> out_shape;
  std::vector<ResizeAxis> axes;
  ResizeMode mode = ResizeMode::Nearest;
  float extrapolation = 0.f;
  std::vector<int> passes;  // dims that are not identity, in order
};

// Floats of a host tensor (scales, roi): float, double, fp16 or bf16.
inline std::vector<double> read_resize_floats(KernelContext& ctx, const RtTensor& t, const char* what) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype) {
      case DType::Float: v[i] = t.ptr<float>()[i]; break;
      case DType::Double: v[i] = t.ptr<double>()[i]; break;
      case DType::Float16: v[i] = half_to_float(t.ptr<uint16_t>()[i]); break;
      case DType::BFloat16: v[i] = bf16_to_float(t.ptr<uint16_t>()[i]); break;
      default: DM_CHECK(ctx, false, what << " must be a float tensor, got " << dtype_name(t.dtype));
    }
  }
  return v;
}

inline ResizeParams resolve_resize(KernelContext& ctx, const RtTensor& x) {
  const Node& n = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.rank());
  ResizeParams p;
  ResizeAxis proto;

  const std::string mode = n.attr_string("mode", "nearest");
  if (mode == "nearest") proto.mode = ResizeMode::Nearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") proto.mode = ResizeMode::Linear;
  else if (mode == "cubic" || mode == "bicubic") proto.mode = ResizeMode::Cubic;
  else DM_CHECK(ctx, false, "unknown mode '" << mode << "'");
  p.mode = proto.mode;

  // Resize-10 is (X, scales) and has none of the later attributes: its
  // coordinates are asymmetric (x / scale). Upsample (opsets 7 and 9, scales
  // as an attribute or the second input) is the same operation.
  const bool upsample = n.op_type == "Upsample";
  const bool opset10 = upsample || ctx.num_inputs() == 2;
  const std::string coord =
      opset10 ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") proto.coord = ResizeCoord::HalfPixel;
  else if (coord == "half_pixel_symmetric") proto.coord = ResizeCoord::HalfPixelSymmetric;
  else if (coord == "pytorch_half_pixel") proto.coord = ResizeCoord::PytorchHalfPixel;
  else if (coord == "align_corners") proto.coord = ResizeCoord::AlignCorners;
  else if (coord == "asymmetric") proto.coord = ResizeCoord::Asymmetric;
  else if (coord == "tf_crop_and_resize") proto.coord = ResizeCoord::TfCropAndResize;
  else if (coord == "tf_half_pixel_for_nn") proto.coord = ResizeCoord::TfHalfPixelForNn;
  else DM_CHECK(ctx, false, "unknown coordinate_transformation_mode '" << coord << "'");

  const std::string nearest = n.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") proto.nearest = NearestRound::RoundPreferFloor;
  else if (nearest == "round_prefer_ceil") proto.nearest = NearestRound::RoundPreferCeil;
  else if (nearest == "floor") proto.nearest = NearestRound::Floor;
  else if (nearest == "ceil") proto.nearest = NearestRound::Ceil;
  else DM_CHECK(ctx, false, "unknown nearest_mode '" << nearest << "'");

  proto.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  proto.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  proto.antialias = proto.mode != ResizeMode::Nearest && n.attr_int("antialias", 0) != 0;
  p.extrapolation = n.attr_float("extrapolation_value", 0.f);
  const std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  DM_CHECK(ctx, policy == "stretch" || policy == "not_larger" || policy == "not_smaller",
           "unknown keep_aspect_ratio_policy '" << policy << "'");

  // axes (opset 18): the dims scales / sizes / roi refer to.
  std::vector<int64_t> axes;
  if (n.has_attr("axes")) {
    std::vector<bool> seen(rank, false);
    for (int64_t a : n.attr_ints("axes")) {
      const int64_t d = norm_axis(ctx, a, rank);
      DM_CHECK(ctx, !seen[d], "axis " << a << " repeated in axes");
      seen[d] = true;
      axes.push_back(d);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t na = axes.size();

  // An empty tensor counts as omitted (exporters pass empty roi / scales).
  auto given = [&](size_t i) -> const RtTensor* {
    const RtTensor* t = opt_host_input(ctx, i);
    return t && t->numel() > 0 ? t : nullptr;
  };
  const RtTensor* roi_t = opset10 ? nullptr : given(1);
  const RtTensor* scales_t = given(opset10 ? 1 : 2);
  const RtTensor* sizes_t = opset10 ? nullptr : given(3);
  DM_CHECK(ctx, !(scales_t && sizes_t), "both scales and sizes are given; exactly one is allowed");
  const bool scales_attr = upsample && !scales_t && n.has_attr("scales");  // Upsample-7
  DM_CHECK(ctx, scales_t || sizes_t || scales_attr, "neither scales nor sizes is given");

  p.out_shape = x.shape;
  std::vector<double> scale(rank, 1.0);
  if (scales_t || scales_attr) {
    std::vector<double> s;
    if (scales_t) s = read_resize_floats(ctx, *scales_t, "scales");
    else for (float v : n.attr_floats("scales")) s.push_back(v);
    DM_CHECK(ctx, s.size() == na,
             "scales has " << s.size() << " values for " << na << " axes of input " << shape_str(x.shape));
    for (size_t i = 0; i < na; ++i) {
      DM_CHECK(ctx, std::isfinite(s[i]) && s[i] > 0, "scale " << s[i] << " must be positive and finite");
      const double o = std::floor(static_cast<double>(x.shape[axes[i]]) * s[i]);
      DM_CHECK(ctx, o < 9e15, "scale " << s[i] << " gives an output too large");
      scale[axes[i]] = s[i];
      p.out_shape[axes[i]] = static_cast<int64_t>(o);
    }
  } else {
    const std::vector<int64_t> sz = read_ints(ctx, *sizes_t);
    DM_CHECK(ctx, sz.size() == na,
             "sizes has " << sz.size() << " values for " << na << " axes of input " << shape_str(x.shape));
    for (size_t i = 0; i < na; ++i) {
      DM_CHECK(ctx, sz[i] >= 0, "negative size " << sz[i]);
      DM_CHECK(ctx, x.shape[axes[i]] > 0 || sz[i] == 0,
               "cannot resize empty dim " << axes[i] << " of input " << shape_str(x.shape) << " to " << sz[i]);
    }
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        const int64_t in = x.shape[axes[i]];
        p.out_shape[axes[i]] = sz[i];
        scale[axes[i]] = in > 0 ? static_cast<double>(sz[i]) / static_cast<double>(in) : 1.0;
      }
    } else {
      // One scale for all the axes: the smallest (not_larger) or the largest
      // (not_smaller) of sizes / input; sizes rounded half up.
      double s = 0;
      bool first = true;
      for (size_t i = 0; i < na; ++i) {
        const int64_t in = x.shape[axes[i]];
        if (in == 0) continue;
        const double si = static_cast<double>(sz[i]) / static_cast<double>(in);
        if (first || (policy == "not_larger" ? si < s : si > s)) s = si;
        first = false;
      }
      if (first) s = 1.0;
      for (size_t i = 0; i < na; ++i) {
        const int64_t in = x.shape[axes[i]];
        scale[axes[i]] = s;
        p.out_shape[axes[i]] = static_cast<int64_t>(s * static_cast<double>(in) + 0.5);
      }
    }
  }

  std::vector<double> roi_start(rank, 0.0), roi_end(rank, 1.0);
  if (roi_t && proto.coord == ResizeCoord::TfCropAndResize) {
    const std::vector<double> r = read_resize_floats(ctx, *roi_t, "roi");
    DM_CHECK(ctx, r.size() == 2 * na,
             "roi has " << r.size() << " values for " << na << " axes of input " << shape_str(x.shape));
    for (size_t i = 0; i < na; ++i) {
      roi_start[axes[i]] = r[i];
      roi_end[axes[i]] = r[na + i];
    }
  }

  for (int64_t d = 0; d < rank; ++d) {
    ResizeAxis a = proto;
    a.in = x.shape[d];
    a.out = p.out_shape[d];
    a.scale = scale[d];
    a.roi_start = roi_start[d];
    a.roi_end = roi_end[d];
    // Resize-10 has no nearest_mode; ONNX Runtime rounds down when
    // upscaling and up when downscaling, and the exporters' tests follow it.
    if (opset10) a.nearest = a.scale < 1.0 ? NearestRound::Ceil : NearestRound::Floor;
    // As the spec's reference: an axis with scale 1, the same length and
    // the full roi is left as it is.
    const bool full_roi = proto.coord != ResizeCoord::TfCropAndResize ||
                          (std::fabs(a.roi_start) < 1e-9 && std::fabs(a.roi_end - 1.0) < 1e-9);
    a.identity = a.in == a.out && std::fabs(a.scale - 1.0) < 1e-9 && full_roi;
    p.axes.push_back(a);
    if (!a.identity && a.out > 0) p.passes.push_back(static_cast<int>(d));
  }
  return p;
}

}  // namespace fuseopt::dm
