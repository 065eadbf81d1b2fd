// Ops that grow a tensor: Pad (constant / reflect / edge / wrap), Tile and
// Expand. Tile and Expand are strided copies with zero strides; Pad maps each
// output coordinate to an input coordinate per dim (or to the pad value).
#include <algorithm>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

enum class PadMode { Constant, Reflect, Edge, Wrap };

// The pad value as bytes of the data's dtype: input 2 (opset >= 11) or the
// float attribute `value` (opset < 11), default 0.
std::vector<uint8_t> pad_value_bytes(KernelContext& ctx, DType dt, size_t es) {
  std::vector<uint8_t> bytes(es, 0);
  if (const RtTensor* v = opt_host_input(ctx, 2)) {
    DM_CHECK(ctx, v->dtype == dt && v->numel() == 1,
             "constant_value must be one " << dtype_name(dt) << " element");
    std::memcpy(bytes.data(), v->data, es);
  } else if (ctx.node().has_attr("value")) {
    const float f = ctx.node().attr_float("value", 0.0f);
    visit_dtype(dt, ctx.node(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T t = convert<T>(f);
      std::memcpy(bytes.data(), &t, es);
    });
  }
  return bytes;
}

// Input coordinate read by output coordinate `o` of one dim, or -1 for the
// pad value.
int64_t source_index(int64_t o, int64_t begin, int64_t in, PadMode mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < in) return i;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return std::clamp<int64_t>(i, 0, in - 1);
    case PadMode::Wrap: return ((i % in) + in) % in;
    case PadMode::Reflect:
      if (in == 1) return 0;
      while (i < 0 || i >= in) i = i < 0 ? -i : 2 * (in - 1) - i;
      return i;
  }
  return -1;
}

}  // namespace

FUSEOPT_KERNEL(CpuPad, "", "Pad", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const std::string mode_s = ctx.node().attr_string("mode", "constant");
  PadMode mode = PadMode::Constant;
  if (mode_s == "constant") mode = PadMode::Constant;
  else if (mode_s == "reflect") mode = PadMode::Reflect;
  else if (mode_s == "edge") mode = PadMode::Edge;
  else if (mode_s == "wrap") mode = PadMode::Wrap;
  else DM_CHECK(ctx, false, "unknown mode '" << mode_s << "'");

  std::vector<int64_t> pads;
  if (const RtTensor* p = opt_host_input(ctx, 1)) pads = read_ints(ctx, *p);
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
  std::vector<int64_t> begin(rank, 0), out_shape = x.shape;
  for (size_t i = 0; i < na; ++i) {
    begin[axes[i]] = pads[i];
    out_shape[axes[i]] = x.shape[axes[i]] + pads[i] + pads[i + na];
    DM_CHECK(ctx, out_shape[axes[i]] >= 0,
             "pads " << shape_str(pads) << " remove more than input " << shape_str(x.shape) << " has");
  }
  const size_t es = elem_size(ctx, x.dtype);
  const std::vector<uint8_t> value = pad_value_bytes(ctx, x.dtype, es);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  if (y->numel() == 0) return;
  if (mode != PadMode::Constant) {
    for (int64_t d = 0; d < rank; ++d)
      DM_CHECK(ctx, x.shape[d] > 0 || out_shape[d] == 0,
               mode_s << " padding of empty dim " << d << " in input " << shape_str(x.shape));
  }

  // Per dim: the input coordinate of every output coordinate.
  std::vector<std::vector<int64_t>> map(rank);
  for (int64_t d = 0; d < rank; ++d) {
    map[d].resize(out_shape[d]);
    for (int64_t o = 0; o < out_shape[d]; ++o) map[d][o] = source_index(o, begin[d], x.shape[d], mode);
  }
  const std::vector<int64_t> strides = dense_strides(x.shape);
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y->data);
  if (rank == 0) { std::memcpy(dst, src, es); return; }
  const int64_t inner = out_shape[rank - 1];
  const std::vector<int64_t>& last = map[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < y->numel(); o += inner) {
    // Offset of this output row in the input, unless a leading dim is padding.
    bool pad_row = false;
    int64_t row = 0;
    for (int64_t d = 0; d + 1 < rank; ++d) {
      const int64_t s = map[d][idx[d]];
      if (s < 0) { pad_row = true; break; }
      row += s * strides[d];
    }
    for (int64_t i = 0; i < inner; ++i) {
      const bool pad = pad_row || last[i] < 0;
      std::memcpy(dst + (o + i) * es, pad ? value.data() : src + (row + last[i]) * es, es);
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

FUSEOPT_KERNEL(CpuTile, "", "Tile", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* r = opt_host_input(ctx, 1);
  DM_CHECK(ctx, r, "missing the repeats input");
  const std::vector<int64_t> repeats = read_ints(ctx, *r);
  const size_t rank = x.rank();
  DM_CHECK(ctx, repeats.size() == rank,
           "repeats " << shape_str(repeats) << " does not match input " << shape_str(x.shape));
  // The output seen as [rep0, in0, rep1, in1, ...] reads the input with
  // stride 0 on every repeat dim.
  const std::vector<int64_t> in_strides = dense_strides(x.shape);
  std::vector<int64_t> out_shape(rank), view_shape, view_strides;
  for (size_t d = 0; d < rank; ++d) {
    DM_CHECK(ctx, repeats[d] >= 0, "negative repeat " << repeats[d]);
    out_shape[d] = x.shape[d] * repeats[d];
    view_shape.insert(view_shape.end(), {repeats[d], x.shape[d]});
    view_strides.insert(view_strides.end(), {int64_t{0}, in_strides[d]});
  }
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  strided_copy(ctx, y->data, x.data, elem_size(ctx, x.dtype), view_shape, view_strides);
}

FUSEOPT_KERNEL(CpuExpand, "", "Expand", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* s = opt_host_input(ctx, 1);
  DM_CHECK(ctx, s, "missing the shape input");
  const std::vector<int64_t> shape = read_ints(ctx, *s);
  for (int64_t d : shape) DM_CHECK(ctx, d >= 0, "negative dim in shape " << shape_str(shape));
  const std::vector<int64_t> out_shape = cpu::broadcast_shape({x.shape, shape}, ctx.node());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  strided_copy(ctx, y->data, x.data, elem_size(ctx, x.dtype), out_shape,
               cpu::broadcast_strides(x.shape, out_shape));
}

}  // namespace fuseopt
