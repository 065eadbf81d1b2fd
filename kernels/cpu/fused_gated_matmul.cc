// fuseopt.GatedMatMul: Y = act(A·W[:, :N] + b[:N]) * (A·W[:, N:] + b[N:]), fp32 accumulation.
// A [..., K]; W [K, 2N] (gate columns first, then up); bias [2N]? (or [1, ..., 1, 2N]);
// activation = silu | gelu | gelu_tanh | relu. SiLU is x * sigmoid(x), the exported form.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/fused_activation.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {
namespace {

enum class GateAct { Silu, Gelu, GeluTanh, Relu };

GateAct parse_gate_activation(const Node& n) {
  const std::string a = n.attr_string("activation", "silu");
  if (a == "silu") return GateAct::Silu;
  if (a == "gelu") return GateAct::Gelu;
  if (a == "gelu_tanh") return GateAct::GeluTanh;
  if (a == "relu") return GateAct::Relu;
  throw Error(n.label() + ": unknown GatedMatMul activation '" + a + "' (silu, gelu, gelu_tanh, relu)");
}

float gate_activation(GateAct act, float x) {
  switch (act) {
    case GateAct::Silu: return x * (1.0f / (1.0f + std::exp(-x)));
    case GateAct::Gelu: return cpu::apply_activation(cpu::Activation::Gelu, x);
    case GateAct::GeluTanh: return cpu::apply_activation(cpu::Activation::GeluTanh, x);
    case GateAct::Relu: return cpu::apply_activation(cpu::Activation::Relu, x);
  }
  return x;
}

}  // namespace

FUSEOPT_KERNEL(CpuGatedMatMul, "fuseopt", "GatedMatMul", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* w = ctx.input(1);
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  FUSE_CHECK(a && w, n.label() << ": GatedMatMul needs inputs A and W");
  FUSE_CHECK(a->dtype == DType::Float && w->dtype == DType::Float && (!bias || bias->dtype == DType::Float),
             n.label() << ": GatedMatMul CPU kernel supports float tensors only");
  FUSE_CHECK(a->rank() >= 1 && w->rank() == 2,
             n.label() << ": GatedMatMul needs A [..., K] and W [K, 2N], got " << shape_str(a->shape) << " and "
                       << shape_str(w->shape));
  const int64_t K = a->shape.back();
  const int64_t two_n = w->shape[1];
  FUSE_CHECK(w->shape[0] == K && two_n % 2 == 0,
             n.label() << ": GatedMatMul W " << shape_str(w->shape) << " is not [" << K << ", 2N] for A "
                       << shape_str(a->shape));
  if (bias)
    FUSE_CHECK(bias->numel() == two_n && (bias->rank() == 0 || bias->shape.back() == two_n),
               n.label() << ": GatedMatMul bias " << shape_str(bias->shape) << " is not [" << two_n << "]");
  const GateAct act = parse_gate_activation(n);
  const int64_t N = two_n / 2;

  std::vector<int64_t> yshape = a->shape;
  yshape.back() = N;
  RtTensor* y = ctx.output(0, DType::Float, yshape);
  const int64_t rows = K == 0 ? shape_numel(yshape) / std::max<int64_t>(N, 1) : a->numel() / K;
  if (N == 0 || rows == 0) return;
  const float* pa = a->ptr<float>();
  const float* pw = w->ptr<float>();
  const float* pb = bias ? bias->ptr<float>() : nullptr;
  float* py = y->ptr<float>();

  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, two_n * K)), [&](int64_t lo, int64_t hi) {
    std::vector<float> acc(static_cast<size_t>(two_n));
    for (int64_t r = lo; r < hi; ++r) {
      const float* arow = pa + r * K;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < K; ++k) {
        const float av = arow[k];
        const float* wrow = pw + k * two_n;
        for (int64_t j = 0; j < two_n; ++j) acc[j] += av * wrow[j];
      }
      float* yrow = py + r * N;
      for (int64_t j = 0; j < N; ++j) {
        float g = acc[j], u = acc[N + j];
        if (pb) {
          g += pb[j];
          u += pb[N + j];
        }
        yrow[j] = gate_activation(act, g) * u;
      }
    }
  });
}

}  // namespace fuseopt
