// Einsum on the GPU (up to 3 operands; explicit or implicit output,
// ellipsis, repeated letters, size-1 broadcasting), with the CPU reference's
// equation rules. One thread per output element walks the summed letters
// with fp32 accumulation: correct for every form, meant for the small
// einsums exporters emit (MatMul-shaped ones belong to the GEMM path).
#include <cctype>
#include <map>

#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

constexpr int kMaxOps = 3;

struct EinsumGeom {
  int nops = 0, out_rank = 0, sum_rank = 0;
  int64_t out_shape[kMaxDims], sum_shape[kMaxDims];
  int64_t out_st[kMaxOps][kMaxDims], sum_st[kMaxOps][kMaxDims];
};

struct Operands {
  const void* p[kMaxOps];
};

template <class T>
__global__ void einsum_kernel(Operands ops, T* __restrict__ y, int64_t nout, int64_t nsum, EinsumGeom g) {
  CUDA_GRID_STRIDE(o, nout) {
    int64_t base[kMaxOps] = {0, 0, 0};
    int64_t rem = o;
    for (int d = g.out_rank - 1; d >= 0; --d) {
      const int64_t q = rem / g.out_shape[d], idx = rem - q * g.out_shape[d];
      rem = q;
      for (int t = 0; t < g.nops; ++t) base[t] += idx * g.out_st[t][d];
    }
    float acc = 0.f;
    for (int64_t s = 0; s < nsum; ++s) {
      int64_t off[kMaxOps] = {base[0], base[1], base[2]};
      int64_t r = s;
      for (int d = g.sum_rank - 1; d >= 0; --d) {
        const int64_t q = r / g.sum_shape[d], idx = r - q * g.sum_shape[d];
        r = q;
        for (int t = 0; t < g.nops; ++t) off[t] += idx * g.sum_st[t][d];
      }
      float p = 1.f;
      for (int t = 0; t < g.nops; ++t) p *= float(load_c(static_cast<const T*>(ops.p[t])[off[t]]));
      acc += p;
    }
    y[o] = store_c<T>(static_cast<compute_t<T>>(acc));
  }
}

// Letters per operand (ellipsis expanded to 'A'+k, right-aligned) and output.
void parse(KernelContext& ctx, const std::string& eq_raw, const std::vector<const RtTensor*>& ops,
           std::vector<std::string>* ins, std::string* out) {
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
  DM_CHECK(ctx, terms.size() == ops.size(), "equation '" << eq_raw << "' names " << terms.size() << " operands, got " << ops.size());
  size_t ell_rank = 0;
  std::vector<size_t> ell_of(terms.size(), 0);
  for (size_t t = 0; t < terms.size(); ++t) {
    size_t letters = 0;
    for (char c : terms[t]) letters += std::isalpha(static_cast<unsigned char>(c)) ? 1 : 0;
    const bool has_ell = terms[t].find("...") != std::string::npos;
    DM_CHECK(ctx, has_ell ? ops[t]->rank() >= letters : ops[t]->rank() == letters,
             "operand " << t << " " << shape_str(ops[t]->shape) << " does not match '" << terms[t] << "'");
    ell_of[t] = has_ell ? ops[t]->rank() - letters : 0;
    ell_rank = std::max(ell_rank, ell_of[t]);
  }
  auto ell_letters = [&](size_t r) {
    std::string e;
    for (size_t i = ell_rank - r; i < ell_rank; ++i) e += static_cast<char>('A' + i);
    return e;
  };
  for (size_t t = 0; t < terms.size(); ++t) {
    std::string s = terms[t];
    if (auto p = s.find("..."); p != std::string::npos) s = s.substr(0, p) + ell_letters(ell_of[t]) + s.substr(p + 3);
    ins->push_back(s);
  }
  if (explicit_out) {
    if (auto p = rhs.find("..."); p != std::string::npos) rhs = rhs.substr(0, p) + ell_letters(ell_rank) + rhs.substr(p + 3);
    *out = rhs;
  } else {  // ellipsis dims, then letters that appear once, alphabetically
    std::map<char, int> count;
    for (const auto& s : *ins)
      for (char c : s) count[c]++;
    *out = ell_letters(ell_rank);
    for (auto [c, k] : count)
      if (k == 1 && std::islower(static_cast<unsigned char>(c))) *out += c;
  }
}

FUSEOPT_KERNEL(CudaEinsum, "", "Einsum", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  std::vector<const RtTensor*> ops;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    DM_CHECK(ctx, ctx.input(i), "operand " << i << " is missing");
    DM_CHECK(ctx, ctx.input(i)->dtype == ctx.input(0)->dtype, "operands must share a dtype");
    ops.push_back(ctx.input(i));
  }
  DM_CHECK(ctx, !ops.empty() && ops.size() <= static_cast<size_t>(kMaxOps),
           "the CUDA Einsum takes 1 to " << kMaxOps << " operands, got " << ops.size());
  std::vector<std::string> ins;
  std::string out;
  parse(ctx, ctx.node().attr_string("equation", ""), ops, &ins, &out);
  std::map<char, int64_t> size;
  for (size_t t = 0; t < ops.size(); ++t)
    for (size_t i = 0; i < ins[t].size(); ++i) {
      const char c = ins[t][i];
      const int64_t d = ops[t]->shape[i];
      auto it = size.find(c);
      if (it == size.end() || it->second == 1) size[c] = d;
      else DM_CHECK(ctx, d == 1 || d == it->second, "dimension '" << c << "' is " << it->second << " and " << d);
    }
  std::vector<int64_t> out_shape;
  for (char c : out) {
    DM_CHECK(ctx, size.count(c), "output letter '" << c << "' is not in any operand");
    out_shape.push_back(size[c]);
  }
  std::string summed;
  for (auto [c, d] : size)
    if (out.find(c) == std::string::npos) summed += c;
  DM_CHECK(ctx, out.size() <= static_cast<size_t>(kMaxDims) && summed.size() <= static_cast<size_t>(kMaxDims),
           "too many letters for the CUDA Einsum");
  EinsumGeom g{};
  g.nops = static_cast<int>(ops.size());
  g.out_rank = static_cast<int>(out.size());
  g.sum_rank = static_cast<int>(summed.size());
  int64_t nsum = 1;
  for (int d = 0; d < g.out_rank; ++d) g.out_shape[d] = out_shape[d];
  for (int d = 0; d < g.sum_rank; ++d) nsum *= (g.sum_shape[d] = size[summed[d]]);
  // Stride of each letter per operand: summed over repeated letters, 0 where broadcast.
  for (size_t t = 0; t < ops.size(); ++t) {
    const std::vector<int64_t> dense = dense_strides(ops[t]->shape);
    auto stride_of = [&](char c) {
      int64_t s = 0;
      for (size_t i = 0; i < ins[t].size(); ++i)
        if (ins[t][i] == c && ops[t]->shape[i] != 1) s += dense[i];
      return s;
    };
    for (int d = 0; d < g.out_rank; ++d) g.out_st[t][d] = stride_of(out[d]);
    for (int d = 0; d < g.sum_rank; ++d) g.sum_st[t][d] = stride_of(summed[d]);
  }
  RtTensor* y = ctx.output(0, ops[0]->dtype, out_shape);
  const int64_t nout = y->numel();
  if (!nout) return;
  Operands p{};
  for (size_t t = 0; t < ops.size(); ++t) p.p[t] = ops[t]->data;
  dispatch_float(ctx, ops[0]->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    einsum_kernel<T><<<grid_for(nout), kThreads, 0, stream_of(ctx)>>>(p, y->ptr<T>(), nout, nsum, g);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
