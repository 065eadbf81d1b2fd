// LayerNormalization (opset 17: axis, epsilon, stats in fp32/double,
// optional Mean / InvStdDev outputs) and Einsum (any explicit or implicit
// equation, ellipsis, repeated letters; summed by a direct index walk, with
// the summed combinations' offsets precomputed once per call).
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_LayerNormalization, "", "LayerNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && scale, "needs X and Scale");
  MATH_CHECK(ctx, x->rank() >= 1, "X must have rank >= 1");
  const int64_t axis = cpumath::norm_axis(ctx, ctx.node().attr_int("axis", -1), x->rank());
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = cpumath::prod(x->shape, 0, axis), D = cpumath::prod(x->shape, axis, x->rank());
  std::vector<int64_t> norm_shape(x->shape.begin() + axis, x->shape.end());
  // Scale and B broadcast to the normalised shape.
  auto check_param = [&](const RtTensor* t, const char* what) {
    if (!t) return;
    std::vector<int64_t> bs = cpu::broadcast_shape({t->shape, norm_shape}, ctx.node());
    MATH_CHECK(ctx, bs == norm_shape, what << " " << shape_str(t->shape) << " does not broadcast to "
                                           << shape_str(norm_shape));
  };
  check_param(scale, "Scale");
  check_param(bias, "B");
  // Materialise broadcast Scale/B as dense [D] rows (usually they already are).
  auto dense = [&](const RtTensor* t) -> const float* {
    if (!t) return nullptr;
    if (t->numel() == D) return t->ptr<float>();
    float* d = static_cast<float*>(ctx.scratch(static_cast<size_t>(D) * 4));
    std::array<std::vector<int64_t>, 1> st = {cpu::broadcast_strides(t->shape, norm_shape)};
    const float* p = t->ptr<float>();
    cpu::for_each_broadcast<1>(norm_shape, st, [&](int64_t o, const std::array<int64_t, 1>& off) { d[o] = p[off[0]]; });
    return d;
  };
  const float* g = dense(scale);
  const float* b = dense(bias);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  std::vector<int64_t> stat_shape = x->shape;
  for (size_t i = axis; i < stat_shape.size(); ++i) stat_shape[i] = 1;
  float* mean_out = nullptr;
  float* inv_out = nullptr;
  if (ctx.num_outputs() > 1 && ctx.node().output(1)) mean_out = ctx.output(1, DType::Float, stat_shape)->ptr<float>();
  if (ctx.num_outputs() > 2 && ctx.node().output(2)) inv_out = ctx.output(2, DType::Float, stat_shape)->ptr<float>();
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, D)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * D;
      float* yr = py + r * D;
      double sum = 0;
      for (int64_t i = 0; i < D; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(D);
      double sq = 0;
      for (int64_t i = 0; i < D; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(D) + eps);
      for (int64_t i = 0; i < D; ++i) {
        float v = static_cast<float>((xr[i] - mean) * inv) * g[i];
        yr[i] = b ? v + b[i] : v;
      }
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_out) inv_out[r] = static_cast<float>(inv);
    }
  });
}

// ---- Einsum -------------------------------------------------------------------

struct EinsumSpec {
  std::vector<std::string> inputs;  // letters per operand (ellipsis expanded)
  std::string output;
};

// Parses the equation, expanding "..." to upper-case letters per operand rank.
EinsumSpec parse_einsum(KernelContext& ctx, const std::string& eq_raw, const std::vector<const RtTensor*>& ops) {
  std::string eq;
  for (char c : eq_raw)
    if (c != ' ') eq += c;
  std::string lhs = eq, rhs;
  bool explicit_out = false;
  if (auto p = eq.find("->"); p != std::string::npos) {
    lhs = eq.substr(0, p);
    rhs = eq.substr(p + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i)
    if (i == lhs.size() || lhs[i] == ',') {
      terms.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  MATH_CHECK(ctx, terms.size() == ops.size(), "equation '" << eq_raw << "' names " << terms.size() << " operands, got "
                                                           << ops.size());
  // Ellipsis dims: right-aligned broadcast over operands; letters 'A'+k.
  size_t ell_rank = 0;
  std::vector<size_t> ell_of(terms.size(), 0);
  EinsumSpec spec;
  for (size_t t = 0; t < terms.size(); ++t) {
    std::string& s = terms[t];
    size_t letters = 0;
    for (char c : s) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    bool has_ell = s.find("...") != std::string::npos;
    MATH_CHECK(ctx, has_ell ? ops[t]->rank() >= letters : ops[t]->rank() == letters,
               "operand " << t << " " << shape_str(ops[t]->shape) << " does not match '" << s << "'");
    ell_of[t] = has_ell ? ops[t]->rank() - letters : 0;
    ell_rank = std::max(ell_rank, ell_of[t]);
  }
  auto ell_letters = [&](size_t r) {
    std::string e;
    // Non-letter bytes, so ellipsis dims never collide with the equation's letters.
    for (size_t i = ell_rank - r; i < ell_rank; ++i) e += static_cast<char>(0x80 + i);
    return e;
  };
  for (size_t t = 0; t < terms.size(); ++t) {
    std::string s = terms[t];
    if (auto p = s.find("..."); p != std::string::npos) s = s.substr(0, p) + ell_letters(ell_of[t]) + s.substr(p + 3);
    for (char c : s)
      MATH_CHECK(ctx, std::isalpha(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80,
                 "bad term '" << terms[t] << "' in equation '" << eq_raw << "'");
    MATH_CHECK(ctx, s.size() == ops[t]->rank(), "operand " << t << " " << shape_str(ops[t]->shape)
                                                           << " does not match '" << terms[t] << "'");
    spec.inputs.push_back(s);
  }
  if (explicit_out) {
    if (auto p = rhs.find("..."); p != std::string::npos) rhs = rhs.substr(0, p) + ell_letters(ell_rank) + rhs.substr(p + 3);
    for (char c : rhs)
      MATH_CHECK(ctx, std::isalpha(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80,
                 "bad output term '" << rhs << "' in equation '" << eq_raw << "'");
    spec.output = rhs;
  } else {
    // Implicit: ellipsis dims, then letters that appear once, alphabetically.
    std::map<char, int> count;
    for (const auto& s : spec.inputs)
      for (char c : s) count[c]++;
    spec.output = ell_letters(ell_rank);
    for (auto [c, k] : count)
      if (k == 1 && std::isalpha(static_cast<unsigned char>(c))) spec.output += c;
  }
  return spec;
}

FUSEOPT_KERNEL(cpu_Einsum, "", "Einsum", Backend::CPU, {DType::Float}) {
  std::vector<const RtTensor*> ops;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    MATH_CHECK(ctx, ctx.input(i) && ctx.input(i)->dtype == DType::Float, "operands must be float32");
    ops.push_back(ctx.input(i));
  }
  MATH_CHECK(ctx, !ops.empty(), "needs at least one operand");
  EinsumSpec spec = parse_einsum(ctx, ctx.node().attr_string("equation", ""), ops);
  // Size of every letter (1 broadcasts).
  std::map<char, int64_t> size;
  for (size_t t = 0; t < ops.size(); ++t)
    for (size_t i = 0; i < spec.inputs[t].size(); ++i) {
      char c = spec.inputs[t][i];
      int64_t d = ops[t]->shape[i];
      auto it = size.find(c);
      if (it == size.end() || it->second == 1) size[c] = d;
      else MATH_CHECK(ctx, d == 1 || d == it->second, "dimension '" << c << "' is " << it->second << " and " << d);
    }
  std::vector<int64_t> out_shape;
  for (char c : spec.output) {
    MATH_CHECK(ctx, size.count(c), "output letter '" << c << "' is not in any operand");
    out_shape.push_back(size[c]);
  }
  std::string summed;
  for (auto [c, d] : size)
    if (spec.output.find(c) == std::string::npos) summed += c;
  RtTensor* y = ctx.output(0, DType::Float, out_shape);
  // Per operand, the stride of each letter (sum over repeated letters; 0 where broadcast).
  auto strides_for = [&](const std::string& letters) {
    std::vector<std::vector<int64_t>> st(ops.size());
    for (size_t t = 0; t < ops.size(); ++t) {
      std::vector<int64_t> dense(ops[t]->rank(), 1);
      for (int64_t i = static_cast<int64_t>(ops[t]->rank()) - 2; i >= 0; --i) dense[i] = dense[i + 1] * ops[t]->shape[i + 1];
      for (char c : letters) {
        int64_t s = 0;
        for (size_t i = 0; i < spec.inputs[t].size(); ++i)
          if (spec.inputs[t][i] == c && ops[t]->shape[i] != 1) s += dense[i];
        st[t].push_back(s);
      }
    }
    return st;
  };
  auto out_st = strides_for(spec.output);
  auto sum_st = strides_for(summed);
  std::vector<int64_t> sum_dims;
  for (char c : summed) sum_dims.push_back(size[c]);
  const int64_t n_sum = shape_numel(sum_dims);
  // Offsets of every summed combination per operand, precomputed once.
  std::vector<std::vector<int64_t>> sum_off(ops.size(), std::vector<int64_t>(static_cast<size_t>(n_sum), 0));
  for (int64_t s = 0; s < n_sum; ++s) {
    int64_t rem = s;
    for (int64_t d = static_cast<int64_t>(sum_dims.size()) - 1; d >= 0; --d) {
      int64_t idx = rem % sum_dims[d];
      rem /= sum_dims[d];
      for (size_t t = 0; t < ops.size(); ++t) sum_off[t][s] += idx * sum_st[t][d];
    }
  }
  float* py = y->ptr<float>();
  const int64_t n_out = y->numel();
  parallel_for(n_out, 64, [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> base(ops.size());
    for (int64_t o = o0; o < o1; ++o) {
      std::fill(base.begin(), base.end(), 0);
      int64_t rem = o;
      for (int64_t d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
        int64_t idx = rem % out_shape[d];
        rem /= out_shape[d];
        for (size_t t = 0; t < ops.size(); ++t) base[t] += idx * out_st[t][d];
      }
      float acc = 0.f;
      for (int64_t s = 0; s < n_sum; ++s) {
        float p = 1.f;
        for (size_t t = 0; t < ops.size(); ++t) p *= ops[t]->ptr<float>()[base[t] + sum_off[t][s]];
        acc += p;
      }
      py[o] = acc;
    }
  });
}

}  // namespace
}  // namespace fuseopt
