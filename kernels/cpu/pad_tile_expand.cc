// Ops that grow a tensor: Pad (constant / reflect / edge / wrap), Tile and
// Expand. Tile and Expand are strided copies with zero strides; Pad maps each
// output coordinate to an input coordinate per dim (or to the pad value).
#include <algorithm>

#include "kernels/common/op_params.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

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
  const PadParams params = resolve_pad(ctx, x);  // shared with the CUDA kernel
  const PadMode mode = params.mode;
  const std::string& mode_s = params.mode_name;
  const std::vector<int64_t>& begin = params.begin;
  const std::vector<int64_t>& out_shape = params.out_shape;
  const size_t es = elem_size(ctx, x.dtype);
  const std::vector<uint8_t> value = pad_value_bytes(ctx, x.dtype);  // shared with the CUDA kernel
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
  const TileView v = resolve_tile(ctx, x);  // shared with the CUDA kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  strided_copy(ctx, y->data, x.data, elem_size(ctx, x.dtype), v.view_shape, v.view_strides);
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
