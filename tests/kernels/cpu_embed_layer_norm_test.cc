// fuseopt.EmbedLayerNorm CPU kernel against a straightforward reference: the
// table rows looked up one by one (negative ids from the end), summed, then
// mean / variance in double over the row (the LayerNorm kernels' formula).
#include <cmath>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

Tensor table(int64_t v, int64_t d, float scale) {
  std::vector<float> x;
  for (int64_t i = 0; i < v * d; ++i) x.push_back(scale * std::sin(0.37f * static_cast<float>(i) + scale));
  return floats(x, {v, d});
}

struct Lookup {
  Tensor table, ids;
};

// y[row] = LN(sum_j table_j[id_j(row)]) with every ids tensor broadcast to `lead`.
std::vector<float> reference(const std::vector<Lookup>& lk, const std::vector<int64_t>& lead, const Tensor& gamma,
                             const Tensor* beta, float eps) {
  const int64_t d = gamma.numel();
  int64_t rows = 1;
  for (int64_t x : lead) rows *= x;
  std::vector<float> out;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> z(d, 0.f);
    for (const Lookup& l : lk) {
      // The row's coordinates, right-aligned onto the ids' dims (1 = broadcast).
      int64_t off = 0, stride = 1, rem = r;
      std::vector<int64_t> coord(lead.size());
      for (size_t a = lead.size(); a-- > 0;) {
        coord[a] = rem % lead[a];
        rem /= lead[a];
      }
      for (size_t k = l.ids.dims.size(); k-- > 0;) {
        const int64_t c = coord[lead.size() - l.ids.dims.size() + k];
        off += (l.ids.dims[k] == 1 ? 0 : c) * stride;
        stride *= l.ids.dims[k];
      }
      int64_t id = l.ids.data<int64_t>()[off];
      const int64_t v = l.table.dims[0];
      if (id < 0) id += v;
      for (int64_t i = 0; i < d; ++i) z[i] += l.table.data<float>()[id * d + i];
    }
    double mean = 0, var = 0;
    for (float x : z) mean += x;
    mean /= d;
    for (float x : z) var += (x - mean) * (x - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i) {
      float y = static_cast<float>((z[i] - mean) / std::sqrt(var + eps)) * gamma.data<float>()[i];
      if (beta) y += beta->data<float>()[i];
      out.push_back(y);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("EmbedLayerNorm kernel: BERT form, 3 lookups, [1, S] position ids", "[kernels][EmbedLayerNorm]") {
  const int64_t d = 6;
  std::vector<Lookup> lk{{table(11, d, 1.f), ints({3, -1, 0, 10, 5, -11}, {2, 3})},
                         {table(2, d, 0.5f), ints({0, 1, 1, 0, 0, -2}, {2, 3})},
                         {table(8, d, 2.f), ints({0, 1, 2}, {1, 3})}};
  const Tensor gamma = floats({1, 0.5f, 2, -1, 1.5f, 0.25f}, {d}), beta = floats({0, 1, 0, -1, 0.5f, 2}, {d});
  OpTest t("EmbedLayerNorm", "fuseopt");
  t.input("gamma", gamma).input("beta", beta);
  for (size_t j = 0; j < lk.size(); ++j)
    t.input("table" + std::to_string(j), lk[j].table).input("ids" + std::to_string(j), lk[j].ids);
  t.attr(Attribute::make_float("epsilon", 1e-12f));
  expect_near(t.run()[0], reference(lk, {2, 3}, gamma, &beta, 1e-12f), {2, 3, d}, 1e-5f);
}

TEST_CASE("EmbedLayerNorm kernel: 2 lookups, [S] position ids, no beta", "[kernels][EmbedLayerNorm]") {
  const int64_t d = 5;
  std::vector<Lookup> lk{{table(7, d, 1.f), ints({1, 2, 3, 4, -7, 6, 0, 1}, {2, 4})},
                         {table(4, d, 3.f), ints({0, 1, 2, 3}, {4})}};
  const Tensor gamma = floats({1, 2, 3, 4, 5}, {d});
  OpTest t("EmbedLayerNorm", "fuseopt");
  t.input("gamma", gamma).omitted_input();
  for (size_t j = 0; j < lk.size(); ++j)
    t.input("table" + std::to_string(j), lk[j].table).input("ids" + std::to_string(j), lk[j].ids);
  t.attr(Attribute::make_float("epsilon", 1e-5f));
  expect_near(t.run()[0], reference(lk, {2, 4}, gamma, nullptr, 1e-5f), {2, 4, d}, 1e-5f);
}

TEST_CASE("EmbedLayerNorm kernel: an out-of-range id is an Error, as for Gather", "[kernels][EmbedLayerNorm]") {
  OpTest t("EmbedLayerNorm", "fuseopt");
  t.input("gamma", floats({1, 1}, {2}));
  t.omitted_input();
  t.input("t0", table(3, 2, 1.f)).input("i0", ints({0, 3}, {2}));
  t.input("t1", table(3, 2, 1.f)).input("i1", ints({0, -4}, {2}));
  CHECK_THROWS_WITH(t.run(), Catch::Contains("index 3 out of range for dim 3"));
}
