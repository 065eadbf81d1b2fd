// Host-side parameter resolution shared by the CPU reference kernels
// (kernels/cpu/*.cc) and the CUDA kernels (kernels/cuda/*.cu): reading
// attributes and host shape inputs, ONNX clamping rules, output shapes.
// Both backends call these functions so that they cannot drift apart; only
// the data movement itself differs per backend. Plain C++ (no CUDA), so it
// compiles under nvcc from a .cu as well as from a .cc.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/common/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

// Slice as a strided view of x: y[i0..in] = x[base + sum i_d * strides[d]]
// (all in elements), with y of shape out_shape.
struct SliceView {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> strides;
  int64_t base = 0;
};

// Slice, both spellings: opset 1 (starts/ends/axes attributes) and opset >= 10
// (starts, ends, axes?, steps? inputs). Negative starts/ends count from the
// end, out-of-range values clamp, negative steps walk backwards.
inline SliceView resolve_slice(KernelContext& ctx, const RtTensor& x) {
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false;
  if (ctx.node().has_attr("starts")) {  // opset 1
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    has_axes = ctx.node().has_attr("axes");
    axes = ctx.node().attr_ints("axes");
  } else {
    const RtTensor* s = opt_host_input(ctx, 1);
    const RtTensor* e = opt_host_input(ctx, 2);
    DM_CHECK(ctx, s && e, "needs starts and ends (inputs for opset >= 10, attributes before)");
    starts = read_ints(ctx, *s);
    ends = read_ints(ctx, *e);
    if (const RtTensor* a = opt_host_input(ctx, 3)) { has_axes = true; axes = read_ints(ctx, *a); }
    if (const RtTensor* st = opt_host_input(ctx, 4)) steps = read_ints(ctx, *st);
  }
  const size_t n = starts.size();
  if (!has_axes) {
    axes.resize(n);
    for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (steps.empty()) steps.assign(n, 1);
  DM_CHECK(ctx, ends.size() == n && axes.size() == n && steps.size() == n,
           "starts, ends, axes and steps differ in length (" << n << ", " << ends.size() << ", "
                                                            << axes.size() << ", " << steps.size()
                                                            << ")");

  std::vector<int64_t> begin(rank, 0), step(rank, 1), out_shape = x.shape;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t ax = norm_axis(ctx, axes[i], rank);
    DM_CHECK(ctx, !seen[ax], "axis " << axes[i] << " repeated");
    seen[ax] = true;
    const int64_t dim = x.shape[ax];
    const int64_t st = steps[i];
    DM_CHECK(ctx, st != 0, "step is 0 on axis " << axes[i]);
    int64_t s = starts[i], e = ends[i];
    // An end of INT_MAX means "to the end in the direction of the step"
    // (numpy's None), as ONNX Runtime reads it: with a negative step it runs
    // down to index 0 instead of clamping to dim-1.
    const bool end_is_none = e == std::numeric_limits<int64_t>::max() ||
                             e == std::numeric_limits<int32_t>::max();
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count = 0;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      if (e > s) count = (e - s + st - 1) / st;
    } else if (dim > 0) {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = end_is_none ? -1 : std::clamp<int64_t>(e, -1, dim - 1);
      if (s > e) count = (s - e - st - 1) / -st;
    }
    begin[ax] = count > 0 ? s : 0;
    step[ax] = st;
    out_shape[ax] = count;
  }

  SliceView v;
  v.out_shape = out_shape;
  const std::vector<int64_t> in_strides = dense_strides(x.shape);
  v.strides.resize(rank);
  for (int64_t d = 0; d < rank; ++d) {
    v.base += begin[d] * in_strides[d];
    v.strides[d] = step[d] * in_strides[d];
  }
  return v;
}

// Tile as a strided view: the output seen as [rep0, in0, rep1, in1, ...]
// (view_shape) reads x with stride 0 on every repeat dim (view_strides, in
// elements); out_shape is the real output shape.
struct TileView {
  std::vector<int64_t> out_shape, view_shape, view_strides;
};

inline TileView resolve_tile(KernelContext& ctx, const RtTensor& x) {
  const RtTensor* r = opt_host_input(ctx, 1);
  DM_CHECK(ctx, r, "missing the repeats input");
  const std::vector<int64_t> repeats = read_ints(ctx, *r);
  const size_t rank = x.rank();
  DM_CHECK(ctx, repeats.size() == rank,
           "repeats " << shape_str(repeats) << " does not match input " << shape_str(x.shape));
  const std::vector<int64_t> in_strides = dense_strides(x.shape);
  TileView v;
  v.out_shape.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    DM_CHECK(ctx, repeats[d] >= 0, "negative repeat " << repeats[d]);
    v.out_shape[d] = x.shape[d] * repeats[d];
    v.view_shape.insert(v.view_shape.end(), {repeats[d], x.shape[d]});
    v.view_strides.insert(v.view_strides.end(), {int64_t{0}, in_strides[d]});
  }
  return v;
}

// Pad modes; the values are what the CUDA pad kernel switches on.
enum class PadMode { Constant = 0, Reflect = 1, Edge = 2, Wrap = 3 };

// Pad's geometry: the mode, and per dim the count of leading pad elements
// (begin, negative crops) and the output extent. The pad value comes from
// pad_value_bytes below.
struct PadParams {
  PadMode mode = PadMode::Constant;
  std::string mode_name;
  std::vector<int64_t> begin, out_shape;
};

// pads from input 1 (opset >= 11) or the `pads` / `paddings` (opset 1)
// attribute, on the axes of input 3 (opset >= 18) or all axes.
inline PadParams resolve_pad(KernelContext& ctx, const RtTensor& x) {
  const int64_t rank = static_cast<int64_t>(x.rank());
  PadParams p;
  p.mode_name = ctx.node().attr_string("mode", "constant");
  const std::string& mode_s = p.mode_name;
  if (mode_s == "constant") p.mode = PadMode::Constant;
  else if (mode_s == "reflect") p.mode = PadMode::Reflect;
  else if (mode_s == "edge") p.mode = PadMode::Edge;
  else if (mode_s == "wrap") p.mode = PadMode::Wrap;
  else DM_CHECK(ctx, false, "unknown mode '" << mode_s << "'");

  std::vector<int64_t> pads;
  if (const RtTensor* t = opt_host_input(ctx, 1)) pads = read_ints(ctx, *t);
  else if (ctx.node().has_attr("pads")) pads = ctx.node().attr_ints("pads");
  else pads = ctx.node().attr_ints("paddings");  // opset 1
  std::vector<int64_t> axes;
  if (const RtTensor* a = opt_host_input(ctx, 3)) {
    for (int64_t v : read_ints(ctx, *a)) axes.push_back(norm_axis(ctx, v, rank));
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t na = axes.size();
  DM_CHECK(ctx, pads.size() == 2 * na,
           "pads has " << pads.size() << " values for " << na << " axes of input "
                       << shape_str(x.shape));
  p.begin.assign(rank, 0);
  p.out_shape = x.shape;
  for (size_t i = 0; i < na; ++i) {
    p.begin[axes[i]] = pads[i];
    p.out_shape[axes[i]] = x.shape[axes[i]] + pads[i] + pads[i + na];
    DM_CHECK(ctx, p.out_shape[axes[i]] >= 0,
             "pads " << shape_str(pads) << " remove more than input " << shape_str(x.shape) << " has");
  }
  return p;
}

// A float attribute as one element of dtype `dt` (its bytes), with Cast's
// rules (dm::convert): bool is value != 0, integers truncate toward zero,
// NaN becomes 0. Pad opset < 11 reads its `value` attribute this way.
inline std::vector<uint8_t> float_attr_bytes(float f, DType dt, const Node& node) {
  std::vector<uint8_t> bytes(dtype_size(dt), 0);
  visit_dtype(dt, node, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T t = convert<T>(f);
    std::memcpy(bytes.data(), &t, sizeof(T));
  });
  return bytes;
}

// Pad's constant value as bytes of the data's dtype: input 2 (opset >= 11),
// else the float attribute `value` (opset < 11), else 0.
inline std::vector<uint8_t> pad_value_bytes(KernelContext& ctx, DType dt) {
  std::vector<uint8_t> bytes(dtype_size(dt), 0);
  if (const RtTensor* v = opt_host_input(ctx, 2)) {
    DM_CHECK(ctx, v->dtype == dt && v->numel() == 1, "constant_value must be one " << dtype_name(dt) << " element");
    std::memcpy(bytes.data(), v->data, bytes.size());
  } else if (ctx.node().has_attr("value")) {
    bytes = float_attr_bytes(ctx.node().attr_float("value", 0.0f), dt, ctx.node());
  }
  return bytes;
}

// Concat: the axis (attribute `axis`, required) and the output shape. Every
// input must be present, have the first's rank and dtype, and match it off
// the axis; the error lists every input's shape.
struct ConcatParams {
  int64_t axis = 0;
  std::vector<int64_t> out_shape;
};

inline ConcatParams resolve_concat(KernelContext& ctx) {
  const RtTensor& first = req_input(ctx, 0);
  DM_CHECK(ctx, ctx.node().has_attr("axis"), "needs the axis attribute");
  const int64_t rank = static_cast<int64_t>(first.rank());
  DM_CHECK(ctx, rank >= 1, "cannot concatenate scalars");
  ConcatParams p;
  p.axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  p.out_shape = first.shape;
  p.out_shape[p.axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const RtTensor& t = req_input(ctx, i);
    bool ok = t.rank() == first.rank() && t.dtype == first.dtype;
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == p.axis || t.shape[d] == first.shape[d];
    if (!ok) {
      std::string all;
      for (size_t k = 0; k < ctx.num_inputs(); ++k) {
        const RtTensor* s = ctx.input(k);
        all += (k ? ", " : "") + (s ? shape_str(s->shape) : std::string("<none>"));
      }
      DM_CHECK(ctx, false, "inputs cannot be concatenated on axis " << p.axis << ": " << all);
    }
    p.out_shape[p.axis] += t.shape[p.axis];
  }
  return p;
}

// Split sizes: the `split` input (opset >= 13) or attribute (< 13); else
// `num_outputs` (opset 18, last chunk smaller); else equal parts.
inline std::vector<int64_t> split_sizes(KernelContext& ctx, int64_t dim, int64_t n) {
  std::vector<int64_t> sizes;
  const RtTensor* split_t = opt_host_input(ctx, 1);
  if (split_t && split_t->numel() > 0) {  // an empty `split` input counts as omitted (as ONNX Runtime)
    sizes = read_ints(ctx, *split_t);
  } else if (ctx.node().has_attr("split")) {
    sizes = ctx.node().attr_ints("split");
  } else if (ctx.node().has_attr("num_outputs")) {
    const int64_t parts = ctx.node().attr_int("num_outputs", n);
    DM_CHECK(ctx, parts == n && n > 0, "num_outputs " << parts << " but the node has " << n
                                                      << " outputs");
    const int64_t chunk = (dim + n - 1) / n;
    sizes.assign(n, chunk);
    sizes.back() = dim - chunk * (n - 1);
    DM_CHECK(ctx, sizes.back() >= 0, "cannot split dim " << dim << " into " << n << " parts");
  } else {
    DM_CHECK(ctx, n > 0 && dim % n == 0,
             "cannot split dim " << dim << " into " << n << " equal parts");
    sizes.assign(n, dim / n);
  }
  DM_CHECK(ctx, static_cast<int64_t>(sizes.size()) == n,
           "split has " << sizes.size() << " sizes for " << n << " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    DM_CHECK(ctx, s >= 0, "negative split size " << s);
    total += s;
  }
  DM_CHECK(ctx, total == dim, "split sizes sum to " << total << " but the axis has " << dim);
  return sizes;
}

// Geometry of one spatial axis of Conv / MaxPool / AveragePool.
struct ConvAxis {
  int64_t in = 1, k = 1, stride = 1, dil = 1, pad_begin = 0, pad_end = 0, out = 1;
};

// Resolves strides/dilations/pads/auto_pad and the output size per spatial
// axis (in_spatial: the input's spatial dims, kernel: the kernel's). `pool`
// enables ceil_mode.
inline std::vector<ConvAxis> spatial_geometry(KernelContext& ctx, const std::vector<int64_t>& in_spatial,
                                              const std::vector<int64_t>& kernel, bool pool) {
  const Node& n = ctx.node();
  const size_t nd = in_spatial.size();
  std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> dil = n.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  bool ceil_mode = pool && n.attr_int("ceil_mode", 0) != 0;
  DM_CHECK(ctx, strides.size() == nd && dil.size() == nd && pads.size() == 2 * nd && kernel.size() == nd,
           "strides/dilations/pads/kernel_shape do not match " << nd << " spatial dims");
  std::vector<ConvAxis> axes(nd);
  for (size_t i = 0; i < nd; ++i) {
    ConvAxis& a = axes[i];
    a.in = in_spatial[i];
    a.k = kernel[i];
    a.stride = strides[i];
    a.dil = dil[i];
    DM_CHECK(ctx, a.k >= 1 && a.stride >= 1 && a.dil >= 1, "kernel, strides and dilations must be >= 1");
    const int64_t span = (a.k - 1) * a.dil + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      a.out = (a.in + a.stride - 1) / a.stride;
      int64_t total = std::max<int64_t>(0, (a.out - 1) * a.stride + span - a.in);
      if (auto_pad == "SAME_UPPER") { a.pad_begin = total / 2; a.pad_end = total - a.pad_begin; }
      else { a.pad_end = total / 2; a.pad_begin = total - a.pad_end; }
    } else {
      if (auto_pad != "VALID") { a.pad_begin = pads[i]; a.pad_end = pads[i + nd]; }
      int64_t room = a.in + a.pad_begin + a.pad_end - span;
      DM_CHECK(ctx, room >= 0, "kernel " << shape_str(kernel) << " is larger than the padded input "
                                         << shape_str(in_spatial));
      if (ceil_mode) {
        a.out = (room + a.stride - 1) / a.stride + 1;
        if ((a.out - 1) * a.stride >= a.in + a.pad_begin) --a.out;  // last window must start inside
      } else {
        a.out = room / a.stride + 1;
      }
    }
  }
  return axes;
}

// ConstantOfShape: the output shape (input 0) and the one-element value
// (attribute `value`, default float 0).
struct ConstantOfShapeParams {
  std::vector<int64_t> shape;
  Tensor value;
};

inline ConstantOfShapeParams resolve_constant_of_shape(KernelContext& ctx) {
  const RtTensor* shape_t = opt_host_input(ctx, 0);
  DM_CHECK(ctx, shape_t, "missing the shape input");
  const std::vector<int64_t> shape = read_ints(ctx, *shape_t);
  for (int64_t d : shape) DM_CHECK(ctx, d >= 0, "negative dim in shape " << shape_str(shape));
  Tensor value = Tensor::scalar_float(0.0f);
  if (const Attribute* a = ctx.node().attr("value")) {
    DM_CHECK(ctx, a->t && a->t->numel() == 1, "attribute 'value' must hold one element");
    value = *a->t;
  }
  DM_CHECK(ctx, value.dtype != DType::String, "string values are not supported");
  return {shape, value};
}

// Range's length max(ceil((limit - start) / delta), 0); V is the arithmetic
// type of the elements (integers divide exactly: doubles lose int64 precision).
template <class V>
inline int64_t range_length(KernelContext& ctx, V start, V limit, V delta) {
  DM_CHECK(ctx, delta != V{0}, "delta is 0");
  int64_t n = 0;
  if constexpr (std::is_integral_v<V>) {
    const int64_t span = static_cast<int64_t>(limit) - static_cast<int64_t>(start);
    const int64_t d = static_cast<int64_t>(delta);
    if ((span > 0 && d > 0) || (span < 0 && d < 0)) n = (span + d + (d > 0 ? -1 : 1)) / d;
  } else {
    const double c = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                               static_cast<double>(delta));
    DM_CHECK(ctx, std::isfinite(c), "start, limit and delta give no finite length");
    n = std::max<int64_t>(0, static_cast<int64_t>(c));
  }
  return n;
}

// DepthToSpace / SpaceToDepth as a reshape of x to `view`, a transpose by
// `perm` and a reshape to out_shape: y (dense, view_shape) reads x with
// view_strides (in elements).
struct BlockPermuteView {
  std::vector<int64_t> out_shape, view_shape, view_strides;
};

inline BlockPermuteView block_permute_view(std::vector<int64_t> out_shape, const std::vector<int64_t>& view,
                                           const std::vector<int64_t>& perm) {
  const std::vector<int64_t> st = dense_strides(view);
  BlockPermuteView v;
  v.out_shape = std::move(out_shape);
  v.view_shape.resize(perm.size());
  v.view_strides.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    v.view_shape[i] = view[perm[i]];
    v.view_strides[i] = st[perm[i]];
  }
  return v;
}

// DepthToSpace, modes DCR (default) and CRD; SpaceToDepth likewise (its mode from opset 28).
inline BlockPermuteView resolve_depth_to_space(KernelContext& ctx, const RtTensor& x) {
  const int64_t b = ctx.node().attr_int("blocksize", 0);
  DM_CHECK(ctx, x.rank() == 4 && b > 0 && x.shape[1] % (b * b) == 0,
           "input " << shape_str(x.shape) << " and blocksize " << b << " do not fit");
  const int64_t n = x.shape[0], c = x.shape[1] / (b * b), h = x.shape[2], w = x.shape[3];
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  if (mode == "DCR") return block_permute_view({n, c, h * b, w * b}, {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2});
  DM_CHECK(ctx, mode == "CRD", "unknown mode '" << mode << "'");
  return block_permute_view({n, c, h * b, w * b}, {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3});
}

inline BlockPermuteView resolve_space_to_depth(KernelContext& ctx, const RtTensor& x) {
  const int64_t b = ctx.node().attr_int("blocksize", 0);
  DM_CHECK(ctx, x.rank() == 4 && b > 0 && x.shape[2] % b == 0 && x.shape[3] % b == 0,
           "input " << shape_str(x.shape) << " and blocksize " << b << " do not fit");
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2] / b, w = x.shape[3] / b;
  // mode (opset 28): DCR (the default, and the only order before) puts the block offset before
  // the channel in the output depth, CRD after it.
  const std::string mode = ctx.node().attr_string("mode", "DCR");
  if (mode == "DCR") return block_permute_view({n, c * b * b, h, w}, {n, c, h, b, w, b}, {0, 3, 5, 1, 2, 4});
  DM_CHECK(ctx, mode == "CRD", "unknown mode '" << mode << "'");
  return block_permute_view({n, c * b * b, h, w}, {n, c, h, b, w, b}, {0, 1, 3, 5, 2, 4});
}

// Shape's [start, end) slice of the input's dims (opset 15 attributes):
// negative values count from the end, then clamp to [0, rank].
struct DimRange {
  int64_t start = 0, count = 0;
};

inline DimRange resolve_shape_range(KernelContext& ctx, int64_t rank) {
  auto clamp_dim = [&](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp_dim(ctx.node().attr_int("start", 0));
  const int64_t end = ctx.node().has_attr("end") ? clamp_dim(ctx.node().attr_int("end", rank)) : rank;
  return {start, std::max<int64_t>(0, end - start)};
}

// MatMul batch broadcasting: the broadcast batch dims of A's and B's batch dims
// (numpy, right-aligned); a conflict throws naming the node and both operands'
// full shapes, the message starting with `what` ("FusedMatMul " or "").
inline std::vector<int64_t> matmul_batch_shape(const Node& n, const std::vector<int64_t>& abatch,
                                               const std::vector<int64_t>& bbatch, const std::vector<int64_t>& a_shape,
                                               const std::vector<int64_t>& b_shape, const char* what) {
  const size_t brank = std::max(abatch.size(), bbatch.size());
  std::vector<int64_t> out_batch(brank, 1);
  for (const auto* s : {&abatch, &bbatch})
    for (size_t k = 0; k < s->size(); ++k) {
      int64_t& o = out_batch[brank - s->size() + k];
      const int64_t d = (*s)[k];
      FUSE_CHECK(d == o || d == 1 || o == 1, n.label() << ": " << what << "batch dims cannot be broadcast: "
                                                       << shape_str(a_shape) << " vs " << shape_str(b_shape));
      if (o == 1) o = d;
    }
  return out_batch;
}

// Element offsets into A and B of output batch item bi (row-major over
// out_batch), given each operand's batch_strides.
inline std::pair<int64_t, int64_t> batch_item_offsets(int64_t bi, const std::vector<int64_t>& out_batch,
                                                      const std::vector<int64_t>& sa, const std::vector<int64_t>& sb) {
  int64_t oa = 0, ob = 0, rem = bi;
  for (size_t d = out_batch.size(); d-- > 0;) {
    const int64_t idx = rem % out_batch[d];
    rem /= out_batch[d];
    oa += idx * sa[d];
    ob += idx * sb[d];
  }
  return {oa, ob};
}

// Element strides of one operand's batch dims inside out_batch (0 where the
// operand is broadcast): its broadcast strides in units of matrix_size, the
// operand's elements per batch item.
inline std::vector<int64_t> batch_strides(const std::vector<int64_t>& batch, const std::vector<int64_t>& out_batch,
                                          int64_t matrix_size) {
  std::vector<int64_t> s = broadcast_strides(batch, out_batch);
  for (int64_t& v : s) v *= matrix_size;
  return s;
}

}  // namespace fuseopt::dm
