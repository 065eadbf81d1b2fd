// GridSample (opset 16 / 20, 2-D) sampling math shared by the CPU reference
// (kernels/cpu/grid_sample.cc) and the CUDA kernel (kernels/cuda/grid_sample.cu)
// so that both compute the same thing in the same order (fp32).
//  - grid[..., 0] is x (width), grid[..., 1] is y (height), in [-1, 1];
//  - align_corners = 1: -1 and 1 are the centres of the corner pixels;
//    0: they are the outer edges of the corner pixels;
//  - padding_mode zeros: samples outside read 0; border: coordinates clamp
//    to the image; reflection: coordinates reflect at the borders (at the
//    corner centres with align_corners, at the outer edges without), then clamp;
//  - mode bilinear (opset 20: linear) or nearest (round half to even).
// A NaN or infinite coordinate samples 0 (zeros) or is clamped (border / reflection yield NaN -> 0).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dm_util.h"

#ifdef __CUDACC__
#define GS_HD __host__ __device__ __forceinline__
#else
#define GS_HD inline
#endif

namespace fuseopt::gridsample {

enum Mode : int { kBilinear = 0, kNearest = 1 };
enum Padding : int { kZeros = 0, kBorder = 1, kReflection = 2 };

struct Params {
  int mode = kBilinear;
  int padding = kZeros;
  bool align_corners = false;
};

GS_HD float clip(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Reflects v into [twice_low / 2, twice_high / 2].
GS_HD float reflect(float v, float twice_low, float twice_high) {
  if (twice_low == twice_high) return 0.f;
  const float lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  v = fabsf(v - lo);
  const float extra = fmodf(v, span);
  const int64_t flips = static_cast<int64_t>(floorf(v / span));
  return (flips % 2 == 0) ? extra + lo : span - extra + lo;
}

// Pixel coordinate of normalised v along an axis of `size` pixels.
GS_HD float source_coord(float v, int64_t size, const Params& p) {
  const float s = static_cast<float>(size);
  float c = p.align_corners ? (v + 1.f) / 2.f * (s - 1.f) : ((v + 1.f) * s - 1.f) / 2.f;
  if (p.padding == kBorder) {
    c = clip(c, 0.f, s - 1.f);
  } else if (p.padding == kReflection) {
    c = p.align_corners ? reflect(c, 0.f, 2.f * (s - 1.f)) : reflect(c, -1.f, 2.f * s - 1.f);
    c = clip(c, 0.f, s - 1.f);
  }
  return c;
}

// load(y, x) reads an in-range pixel as float.
template <class Load> GS_HD float sample(const Load& load, int64_t H, int64_t W, float gx, float gy, const Params& p) {
  const float x = source_coord(gx, W, p), y = source_coord(gy, H, p);
  // Out of range (and NaN) before any float -> int conversion.
  if (!(x > -2.f && x < static_cast<float>(W) + 1.f && y > -2.f && y < static_cast<float>(H) + 1.f)) return 0.f;
  auto at = [&](int64_t yy, int64_t xx) -> float {
    return (yy >= 0 && yy < H && xx >= 0 && xx < W) ? load(yy, xx) : 0.f;
  };
  if (p.mode == kNearest) return at(static_cast<int64_t>(rintf(y)), static_cast<int64_t>(rintf(x)));
  const float fx = floorf(x), fy = floorf(y);
  const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
  const float wx = x - fx, wy = y - fy;
  return at(y0, x0) * (1.f - wx) * (1.f - wy) + at(y0, x0 + 1) * wx * (1.f - wy) + at(y0 + 1, x0) * (1.f - wx) * wy +
         at(y0 + 1, x0 + 1) * wx * wy;
}

// Attributes and shapes: X [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo].
inline Params resolve(KernelContext& ctx, const std::vector<int64_t>& x, const std::vector<int64_t>& grid,
                      std::vector<int64_t>* out_shape) {
  const Node& n = ctx.node();
  DM_CHECK(ctx, x.size() == 4, "only 2-D sampling is supported: X must be [N, C, H, W], got " << shape_str(x));
  DM_CHECK(ctx, grid.size() == 4 && grid[0] == x[0] && grid[3] == 2,
           "grid " << shape_str(grid) << " must be [" << x[0] << ", H_out, W_out, 2]");
  Params p;
  const std::string mode = n.attr_string("mode", "bilinear");
  if (mode == "bilinear" || mode == "linear") p.mode = kBilinear;
  else if (mode == "nearest") p.mode = kNearest;
  else throw Error(n.label() + ": mode '" + mode + "' is not supported (bilinear/linear, nearest)");
  const std::string pad = n.attr_string("padding_mode", "zeros");
  if (pad == "zeros") p.padding = kZeros;
  else if (pad == "border") p.padding = kBorder;
  else if (pad == "reflection") p.padding = kReflection;
  else throw Error(n.label() + ": unknown padding_mode '" + pad + "'");
  p.align_corners = n.attr_int("align_corners", 0) != 0;
  *out_shape = {x[0], x[1], grid[1], grid[2]};
  return p;
}

}  // namespace fuseopt::gridsample

#undef GS_HD
