// Data movement on the GPU, by element size so every dtype works:
// Transpose, Slice, Expand and Tile are one strided-gather kernel (output
// dense, input read through merged strides); Concat and Split are 2-D
// device copies (cudaMemcpy2DAsync, capturable); Pad maps each output
// coordinate to an input coordinate or the pad value.
#include <cstring>
#include <limits>

#include "kernels/common/op_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class E>
__global__ void strided_gather(const E* __restrict__ x, E* __restrict__ y, int64_t n, BcastIndex<1> ix) {
  CUDA_GRID_STRIDE(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    y[i] = x[off[0]];
  }
}

// y (dense, `out_shape`) = x read at base + sum(idx[d] * strides[d]).
void launch_strided(KernelContext& ctx, const RtTensor& x, int64_t base, RtTensor* y,
                    const std::vector<int64_t>& out_shape, const std::vector<int64_t>& strides) {
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  auto ix = make_index<1>(ctx, out_shape, {strides});
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    strided_gather<E><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<E>() + base, y->ptr<E>(), n, ix);
  });
  check_launch(ctx);
}

// out[b][j][i] = in[b][i][j] for [batch, R, C] -> [batch, C, R]: 32x32 tiles
// through shared memory so both the reads and the writes are coalesced
// (attention's K^T; the generic gather would read with stride C).
template <class E>
__global__ void transpose_last2_kernel(const E* __restrict__ x, E* __restrict__ y, int64_t R, int64_t C) {
  __shared__ E tile[32][33];
  const int64_t b = blockIdx.z;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32, c0 = static_cast<int64_t>(blockIdx.x) * 32;
  const E* xb = x + b * R * C;
  E* yb = y + b * R * C;
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    const int64_t r = r0 + k, c = c0 + threadIdx.x;
    if (r < R && c < C) tile[k][threadIdx.x] = xb[r * C + c];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < 32; k += blockDim.y) {
    const int64_t c = c0 + k, r = r0 + threadIdx.x;
    if (r < R && c < C) yb[c * R + r] = tile[threadIdx.x][k];
  }
}

FUSEOPT_KERNEL(CudaTranspose, "", "Transpose", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
  DM_CHECK(ctx, static_cast<int64_t>(perm.size()) == rank,
           "perm " << shape_str(perm) << " does not match input " << shape_str(x.shape));
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    p = norm_axis(ctx, p, rank);
    DM_CHECK(ctx, !seen[p], "perm " << shape_str(perm) << " repeats an axis");
    seen[p] = true;
  }
  const std::vector<int64_t> in_st = dense_strides(x.shape);
  std::vector<int64_t> out_shape(rank), strides(rank);
  for (int64_t d = 0; d < rank; ++d) {
    out_shape[d] = x.shape[perm[d]];
    strides[d] = in_st[perm[d]];
  }
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  bool swap_last2 = rank >= 2 && perm[rank - 1] == rank - 2 && perm[rank - 2] == rank - 1;
  for (int64_t d = 0; d + 2 < rank && swap_last2; ++d) swap_last2 = perm[d] == d;
  const int64_t batch = swap_last2 ? dm::prod(x.shape, 0, rank - 2) : 0;
  if (swap_last2 && batch <= 65535 && x.shape[rank - 2] > 1 && x.shape[rank - 1] > 1) {
    const int64_t R = x.shape[rank - 2], C = x.shape[rank - 1];
    if (!y->numel()) return;
    const dim3 grid(static_cast<unsigned>((C + 31) / 32), static_cast<unsigned>((R + 31) / 32), static_cast<unsigned>(batch));
    FUSE_CHECK(grid.y <= 65535, ctx.node().label() << ": matrix too tall for the tiled transpose");
    dispatch_bytes(ctx, x.dtype, [&](auto tag) {
      using E = typename decltype(tag)::type;
      transpose_last2_kernel<E><<<grid, dim3(32, 8), 0, stream_of(ctx)>>>(x.ptr<E>(), y->ptr<E>(), R, C);
    });
    check_launch(ctx);
    return;
  }
  launch_strided(ctx, x, 0, y, out_shape, strides);
}

FUSEOPT_KERNEL(CudaSlice, "", "Slice", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::SliceView v = dm::resolve_slice(ctx, x);  // shared with the CPU reference kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  launch_strided(ctx, x, v.base, y, v.out_shape, v.strides);
}

FUSEOPT_KERNEL(CudaExpand, "", "Expand", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* s = opt_host_input(ctx, 1);
  DM_CHECK(ctx, s, "missing the shape input");
  const std::vector<int64_t> shape = read_ints(ctx, *s);
  for (int64_t d : shape) DM_CHECK(ctx, d >= 0, "negative dim in shape " << shape_str(shape));
  const std::vector<int64_t> out_shape = broadcast_shape({x.shape, shape}, ctx.node());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  launch_strided(ctx, x, 0, y, out_shape, broadcast_strides(x.shape, out_shape));
}

FUSEOPT_KERNEL(CudaTile, "", "Tile", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::TileView v = dm::resolve_tile(ctx, x);  // shared with the CPU reference kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  launch_strided(ctx, x, 0, y, v.view_shape, v.view_strides);
}

FUSEOPT_KERNEL(CudaDepthToSpace, "", "DepthToSpace", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::BlockPermuteView v = dm::resolve_depth_to_space(ctx, x);  // shared with the CPU reference kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  launch_strided(ctx, x, 0, y, v.view_shape, v.view_strides);
}

FUSEOPT_KERNEL(CudaSpaceToDepth, "", "SpaceToDepth", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::BlockPermuteView v = dm::resolve_space_to_depth(ctx, x);  // shared with the CPU reference kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  launch_strided(ctx, x, 0, y, v.view_shape, v.view_strides);
}

// ---- Concat / Split ---------------------------------------------------------

// Split and Concat as one launch of 16-byte copies when every piece's run
// (its bytes per outer row) and every pointer is 16-byte aligned: row r of the
// packed tensor is the pieces' rows r side by side. cudaMemcpy2DAsync per
// piece cost 32 µs for Llama-1B's QKV split at 1×2048 (2048 rows of 4 + 1 +
// 1 KiB), about 4x the bytes' time; it stays the path for unaligned pieces.
constexpr int kMaxPieces = 8;
struct Pieces {
  uint4* ptr[kMaxPieces];
  int64_t begin[kMaxPieces + 1];  // piece i covers vectors [begin[i], begin[i+1]) of a packed row
  int n;
};

template <bool kSplit>
__global__ void pieces_copy(uint4* __restrict__ packed, Pieces p, int64_t rows) {
  const int64_t row_vecs = p.begin[p.n];
  CUDA_GRID_STRIDE(i, rows * row_vecs) {
    const int64_t r = i / row_vecs, c = i - r * row_vecs;
    int k = 0;
    while (c >= p.begin[k + 1]) ++k;
    const int64_t run = p.begin[k + 1] - p.begin[k];
    uint4* piece = p.ptr[k] + r * run + (c - p.begin[k]);
    if (kSplit)
      *piece = packed[i];
    else
      packed[i] = *piece;
  }
}

// `ptrs[i]` with `runs[i]` bytes per row; false when the vector path does not apply.
bool pieces_copy_vec(KernelContext& ctx, bool split, void* packed, const std::vector<void*>& ptrs,
                     const std::vector<size_t>& runs, size_t rows) {
  if (ptrs.empty() || ptrs.size() > kMaxPieces || reinterpret_cast<uintptr_t>(packed) % 16) return false;
  Pieces p{};
  p.n = static_cast<int>(ptrs.size());
  p.begin[0] = 0;
  for (size_t i = 0; i < ptrs.size(); ++i) {
    if (runs[i] % 16 || reinterpret_cast<uintptr_t>(ptrs[i]) % 16) return false;
    p.ptr[i] = static_cast<uint4*>(ptrs[i]);
    p.begin[i + 1] = p.begin[i] + static_cast<int64_t>(runs[i] / 16);
  }
  const int64_t n = static_cast<int64_t>(rows) * p.begin[p.n];
  if (n == 0) return true;
  if (split)
    pieces_copy<true><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(static_cast<uint4*>(packed), p, rows);
  else
    pieces_copy<false><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(static_cast<uint4*>(packed), p, rows);
  check_launch(ctx);
  return true;
}

void copy_2d(KernelContext& ctx, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows) {
  if (!width || !rows) return;
  check_cuda(ctx, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, stream_of(ctx)),
             "device copy");
}

FUSEOPT_KERNEL(CudaConcat, "", "Concat", Backend::CUDA, {}) {
  const RtTensor& first = req_input(ctx, 0);
  const dm::ConcatParams cp = dm::resolve_concat(ctx);  // shared with the CPU reference
  const int64_t rank = static_cast<int64_t>(first.rank()), axis = cp.axis;
  const std::vector<int64_t>& out_shape = cp.out_shape;
  RtTensor* y = ctx.output(0, first.dtype, out_shape);
  const size_t es = dtype_size(first.dtype);
  const size_t outer = static_cast<size_t>(dm::prod(out_shape, 0, axis));
  const size_t inner_bytes = static_cast<size_t>(dm::prod(out_shape, axis + 1, rank)) * es;
  const size_t out_row = static_cast<size_t>(out_shape[axis]) * inner_bytes;
  {
    std::vector<void*> ptrs;
    std::vector<size_t> runs;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const RtTensor& t = *ctx.input(i);
      if (t.shape[axis] == 0) continue;
      ptrs.push_back(t.data);
      runs.push_back(static_cast<size_t>(t.shape[axis]) * inner_bytes);
    }
    if (pieces_copy_vec(ctx, false, y->data, ptrs, runs, outer)) return;
  }
  size_t at = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const RtTensor& t = *ctx.input(i);
    const size_t run = static_cast<size_t>(t.shape[axis]) * inner_bytes;
    copy_2d(ctx, static_cast<uint8_t*>(y->data) + at, out_row, t.data, run, run, outer);
    at += run;
  }
}

FUSEOPT_KERNEL(CudaSplit, "", "Split", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 1, "cannot split a scalar");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  const int64_t dim = x.shape[axis];
  const std::vector<int64_t> sizes = dm::split_sizes(ctx, dim, n);  // shared with the CPU reference kernel
  const size_t es = dtype_size(x.dtype);
  const size_t outer = static_cast<size_t>(dm::prod(x.shape, 0, axis));
  const size_t inner_bytes = static_cast<size_t>(dm::prod(x.shape, axis + 1, rank)) * es;
  const size_t in_row = static_cast<size_t>(dim) * inner_bytes;
  // When every output is wanted, one vector launch does the whole split
  // (outputs allocated once; copy_2d per piece if an address is unaligned).
  bool all_wanted = true;
  for (int64_t i = 0; i < n; ++i) all_wanted = all_wanted && wants_output(ctx, i);
  if (all_wanted) {
    std::vector<void*> ptrs, nonempty;
    std::vector<size_t> runs;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> shape = x.shape;
      shape[axis] = sizes[i];
      ptrs.push_back(ctx.output(i, x.dtype, shape)->data);
      if (sizes[i] == 0) continue;
      nonempty.push_back(ptrs.back());
      runs.push_back(static_cast<size_t>(sizes[i]) * inner_bytes);
    }
    if (pieces_copy_vec(ctx, true, const_cast<void*>(x.data), nonempty, runs, outer)) return;
    size_t at = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t run = static_cast<size_t>(sizes[i]) * inner_bytes;
      copy_2d(ctx, ptrs[i], run, static_cast<const uint8_t*>(x.data) + at, in_row, run, outer);
      at += run;
    }
    return;
  }
  size_t begin = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t run = static_cast<size_t>(sizes[i]) * inner_bytes;
    if (wants_output(ctx, i)) {
      std::vector<int64_t> shape = x.shape;
      shape[axis] = sizes[i];
      RtTensor* y = ctx.output(i, x.dtype, shape);
      copy_2d(ctx, y->data, run, static_cast<const uint8_t*>(x.data) + begin, in_row, run, outer);
    }
    begin += run;
  }
}

// ---- Pad ----------------------------------------------------------------------
enum PadMode { kConstant = 0, kReflect = 1, kEdge = 2, kWrap = 3 };
static_assert(static_cast<int>(dm::PadMode::Constant) == kConstant && static_cast<int>(dm::PadMode::Reflect) == kReflect &&
              static_cast<int>(dm::PadMode::Edge) == kEdge && static_cast<int>(dm::PadMode::Wrap) == kWrap,
              "the pad kernel switches on dm::PadMode's values");

template <class E>
__global__ void pad_kernel(const E* __restrict__ x, E* __restrict__ y, int64_t n, int rank, I64s out_shape,
                           I64s in_shape, I64s begin, I64s in_strides, int mode, E value) {
  CUDA_GRID_STRIDE(i, n) {
    int64_t rem = i, off = 0;
    bool pad = false;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = rem / out_shape.v[d];
      const int64_t o = rem - q * out_shape.v[d];
      rem = q;
      const int64_t len = in_shape.v[d];
      int64_t s = o - begin.v[d];
      if (s < 0 || s >= len) {
        if (mode == kConstant) {
          pad = true;
          continue;
        } else if (mode == kEdge) {
          s = s < 0 ? 0 : len - 1;
        } else if (mode == kWrap) {
          s = ((s % len) + len) % len;
        } else {  // reflect
          if (len == 1) s = 0;
          else
            while (s < 0 || s >= len) s = s < 0 ? -s : 2 * (len - 1) - s;
        }
      }
      off += s * in_strides.v[d];
    }
    y[i] = pad ? value : x[off];
  }
}

FUSEOPT_KERNEL(CudaPad, "", "Pad", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const dm::PadParams params = dm::resolve_pad(ctx, x);  // shared with the CPU reference kernel
  const int mode = static_cast<int>(params.mode);
  const std::string& mode_s = params.mode_name;
  const std::vector<int64_t>& begin = params.begin;
  const std::vector<int64_t>& out_shape = params.out_shape;
  // The same value bytes as the CPU reference (attribute `value` cast with
  // Cast's rules for bool and integer data).
  const std::vector<uint8_t> value_bytes = dm::pad_value_bytes(ctx, x.dtype);
  uint64_t value_bits = 0;
  std::memcpy(&value_bits, value_bytes.data(), std::min(value_bytes.size(), sizeof(value_bits)));
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t n = y->numel();
  if (n == 0) return;
  if (mode != kConstant)
    for (int64_t d = 0; d < rank; ++d)
      DM_CHECK(ctx, x.shape[d] > 0 || out_shape[d] == 0, mode_s << " padding of empty dim " << d << " in input " << shape_str(x.shape));
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    E value;
    std::memcpy(&value, &value_bits, sizeof(E));
    pad_kernel<E><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<E>(), y->ptr<E>(), n, static_cast<int>(rank),
                                                                to_i64s(ctx, out_shape), to_i64s(ctx, x.shape),
                                                                to_i64s(ctx, begin), to_i64s(ctx, dense_strides(x.shape)),
                                                                mode, value);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
