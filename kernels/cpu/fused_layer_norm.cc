// fuseopt.LayerNorm, RMSNorm, SkipLayerNorm and EmbedLayerNorm on the CPU.
// Normalisation is over the last axis. Statistics are accumulated in double
// with a two-pass mean/variance (stable for rows with a large mean).
#include <array>
#include <cmath>
#include <vector>

#include "kernels/cpu/broadcast.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {
namespace {

const RtTensor* opt_in(KernelContext& ctx, size_t i) { return i < ctx.num_inputs() ? ctx.input(i) : nullptr; }

void check_float(const Node& n, std::initializer_list<const RtTensor*> ts) {
  for (const RtTensor* t : ts)
    FUSE_CHECK(!t || t->dtype == DType::Float, n.label() << ": " << n.op_type << " CPU kernel supports float only");
}

void check_param(const Node& n, const RtTensor* p, int64_t d, const char* what) {
  if (!p) return;
  FUSE_CHECK(p->numel() == d && (p->rank() == 0 || p->shape.back() == d),
             n.label() << ": " << what << " " << shape_str(p->shape) << " is not [" << d << "]");
}

// Normalises `rows` rows of length d from x into y: LayerNorm (rms=false) or RMSNorm.
void normalize_rows(const float* x, float* y, int64_t rows, int64_t d, const float* gamma, const float* beta,
                    float eps, bool rms) {
  parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, d)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * d;
      float* yr = y + r * d;
      double mean = 0.0;
      if (!rms) {
        for (int64_t i = 0; i < d; ++i) mean += xr[i];
        mean /= static_cast<double>(d);
      }
      double var = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        const double c = xr[i] - mean;
        var += c * c;
      }
      var /= static_cast<double>(d);
      const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
      for (int64_t i = 0; i < d; ++i) {
        float v = static_cast<float>((xr[i] - mean) * inv);
        if (gamma) v *= gamma[i];
        if (beta) v += beta[i];
        yr[i] = v;
      }
    }
  });
}

int64_t last_dim(const Node& n, const RtTensor& x) {
  FUSE_CHECK(x.rank() >= 1, n.label() << ": " << n.op_type << " needs an input of rank >= 1");
  return x.shape.back();
}

}  // namespace

FUSEOPT_KERNEL(CpuFusedLayerNorm, "fuseopt", "LayerNorm", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* x = ctx.input(0);
  const RtTensor* gamma = opt_in(ctx, 1);
  const RtTensor* beta = opt_in(ctx, 2);
  FUSE_CHECK(x && gamma, n.label() << ": LayerNorm needs X and gamma");
  check_float(n, {x, gamma, beta});
  const int64_t d = last_dim(n, *x);
  check_param(n, gamma, d, "gamma");
  check_param(n, beta, d, "beta");
  RtTensor* y = ctx.output(0, DType::Float, x->shape);
  if (d == 0) return;
  normalize_rows(x->ptr<float>(), y->ptr<float>(), x->numel() / d, d, gamma->ptr<float>(),
                 beta ? beta->ptr<float>() : nullptr, n.attr_float("epsilon", 1e-5f), false);
}

FUSEOPT_KERNEL(CpuFusedRMSNorm, "fuseopt", "RMSNorm", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* x = ctx.input(0);
  const RtTensor* gamma = opt_in(ctx, 1);
  FUSE_CHECK(x && gamma, n.label() << ": RMSNorm needs X and gamma");
  check_float(n, {x, gamma});
  const int64_t d = last_dim(n, *x);
  check_param(n, gamma, d, "gamma");
  RtTensor* y = ctx.output(0, DType::Float, x->shape);
  if (d == 0) return;
  normalize_rows(x->ptr<float>(), y->ptr<float>(), x->numel() / d, d, gamma->ptr<float>(), nullptr,
                 n.attr_float("epsilon", 1e-6f), true);
}

// Sum = (X + bias) + skip (X and skip broadcast; the last dims equal);
// Y = norm(Sum). Sum is written as output 1 when the node declares it.
FUSEOPT_KERNEL(CpuFusedSkipLayerNorm, "fuseopt", "SkipLayerNorm", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* x = ctx.input(0);
  const RtTensor* skip = opt_in(ctx, 1);
  const RtTensor* gamma = opt_in(ctx, 2);
  const RtTensor* beta = opt_in(ctx, 3);
  const RtTensor* bias = opt_in(ctx, 4);
  FUSE_CHECK(x && skip && gamma, n.label() << ": SkipLayerNorm needs X, skip and gamma");
  check_float(n, {x, skip, gamma, beta, bias});
  const std::vector<int64_t> shape = cpu::broadcast_shape({x->shape, skip->shape}, n);
  FUSE_CHECK(!shape.empty() && x->rank() >= 1 && skip->rank() >= 1 && x->shape.back() == shape.back() &&
                 skip->shape.back() == shape.back(),
             n.label() << ": SkipLayerNorm X " << shape_str(x->shape) << " and skip " << shape_str(skip->shape)
                       << " must share the last dim");
  const int64_t d = shape.back();
  check_param(n, gamma, d, "gamma");
  check_param(n, beta, d, "beta");
  check_param(n, bias, d, "bias");
  const bool rms = n.attr_int("rms", 0) != 0;
  const bool want_sum = ctx.num_outputs() > 1 && n.output(1) != nullptr;

  RtTensor* y = ctx.output(0, DType::Float, shape);
  const int64_t total = shape_numel(shape);
  float* sum = want_sum ? ctx.output(1, DType::Float, shape)->ptr<float>()
                        : static_cast<float*>(ctx.scratch(static_cast<size_t>(total) * sizeof(float)));
  const float* px = x->ptr<float>();
  const float* ps = skip->ptr<float>();
  const float* pb = bias ? bias->ptr<float>() : nullptr;
  if (x->shape == shape && skip->shape == shape) {
    parallel_for(total, 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) sum[i] = (pb ? px[i] + pb[i % d] : px[i]) + ps[i];
    });
  } else {
    const std::array<std::vector<int64_t>, 2> strides{cpu::broadcast_strides(x->shape, shape),
                                                      cpu::broadcast_strides(skip->shape, shape)};
    cpu::for_each_broadcast<2>(shape, strides, [&](int64_t o, const std::array<int64_t, 2>& off) {
      sum[o] = (pb ? px[off[0]] + pb[o % d] : px[off[0]]) + ps[off[1]];
    });
  }
  if (d == 0) return;
  normalize_rows(sum, y->ptr<float>(), total / d, d, gamma->ptr<float>(), beta ? beta->ptr<float>() : nullptr,
                 n.attr_float("epsilon", 1e-5f), rms);
}

// Y = norm(table0[ids0] + table1[ids1] (+ table2[ids2])), the lookups summed
// in fp32 in input order, then the rows normalised as LayerNorm does. The ids
// (int64/int32) broadcast to the output's leading dims; an id outside [-V, V-1]
// is an Error, as Gather gives (negative ids count from the end).
FUSEOPT_KERNEL(CpuFusedEmbedLayerNorm, "fuseopt", "EmbedLayerNorm", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* gamma = ctx.input(0);
  const RtTensor* beta = opt_in(ctx, 1);
  FUSE_CHECK(gamma, n.label() << ": EmbedLayerNorm needs gamma");
  check_float(n, {gamma, beta});
  const int64_t d = gamma->numel();
  check_param(n, gamma, d, "gamma");
  check_param(n, beta, d, "beta");
  std::vector<const RtTensor*> tables, ids;
  for (size_t i = 2; i + 1 < ctx.num_inputs(); i += 2) {
    const RtTensor* t = opt_in(ctx, i);
    const RtTensor* k = opt_in(ctx, i + 1);
    if (!t && !k) continue;
    FUSE_CHECK(t && k, n.label() << ": EmbedLayerNorm lookup " << i / 2 - 1 << " needs a table and ids");
    check_float(n, {t});
    FUSE_CHECK(t->rank() == 2 && t->shape[1] == d,
               n.label() << ": EmbedLayerNorm table " << shape_str(t->shape) << " is not [V, " << d << "]");
    FUSE_CHECK(k->dtype == DType::Int64 || k->dtype == DType::Int32,
               n.label() << ": EmbedLayerNorm ids must be int64 or int32, got " << dtype_name(k->dtype));
    tables.push_back(t);
    ids.push_back(k);
  }
  FUSE_CHECK(!tables.empty(), n.label() << ": EmbedLayerNorm has no lookups");
  std::vector<std::vector<int64_t>> id_shapes;
  for (const RtTensor* k : ids) id_shapes.push_back(k->shape);
  const std::vector<int64_t> lead = cpu::broadcast_shape(id_shapes, n);
  std::vector<int64_t> shape = lead;
  shape.push_back(d);
  RtTensor* y = ctx.output(0, DType::Float, shape);
  const int64_t rows = shape_numel(lead);
  if (rows == 0 || d == 0) return;

  float* sum = static_cast<float*>(ctx.scratch(static_cast<size_t>(rows * d) * sizeof(float)));
  for (size_t j = 0; j < tables.size(); ++j) {
    const std::vector<int64_t> st = cpu::broadcast_strides(ids[j]->shape, lead);
    const int64_t v = tables[j]->shape[0];
    const float* tab = tables[j]->ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t off = 0;
      for (int64_t rem = r, a = static_cast<int64_t>(lead.size()) - 1; a >= 0; --a) {
        off += (rem % lead[a]) * st[a];
        rem /= lead[a];
      }
      int64_t k = ids[j]->dtype == DType::Int64 ? ids[j]->ptr<int64_t>()[off] : ids[j]->ptr<int32_t>()[off];
      FUSE_CHECK(k >= -v && k < v, n.label() << ": EmbedLayerNorm index " << k << " out of range for dim " << v
                                             << " (lookup " << j << ", ids " << shape_str(ids[j]->shape) << ")");
      if (k < 0) k += v;
      const float* row = tab + k * d;
      float* z = sum + r * d;
      if (j == 0)
        for (int64_t i = 0; i < d; ++i) z[i] = row[i];
      else
        for (int64_t i = 0; i < d; ++i) z[i] += row[i];
    }
  }
  normalize_rows(sum, y->ptr<float>(), rows, d, gamma->ptr<float>(), beta ? beta->ptr<float>() : nullptr,
                 n.attr_float("epsilon", 1e-5f), false);
}

}  // namespace fuseopt
