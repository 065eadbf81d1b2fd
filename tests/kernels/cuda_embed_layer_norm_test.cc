// CUDA fuseopt.EmbedLayerNorm against the CPU kernel (kernels/cpu/fused_layer_norm.cc):
// fresh random tables and ids (negative ones included) on every run, outputs
// poisoned (NaN) first, widths in and out of 16-byte vectors (768, 200; 37 and 100
// for fp16/bf16 take the scalar block path), the warp-per-row path and the block
// path, fp32/fp16/bf16, 2 and 3 lookups with broadcast position ids ([1, S], [S]),
// int32 ids; an out-of-range id reported like Gather's (index_errors.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "kernels/cuda/embed_layer_norm.h"
#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {

// Ids uniform in [-V, V-1] (negative ones count from the end, as in Gather).
Tensor random_ids(int64_t v, std::vector<int64_t> dims, DType dt = DType::Int64) {
  static std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> u(-v, v - 1);
  Tensor t(dt, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::Int64) t.data<int64_t>()[i] = u(rng);
    else t.data<int32_t>()[i] = static_cast<int32_t>(u(rng));
  }
  return t;
}

struct Shape3 {
  std::vector<int64_t> word, type, pos;  // ids shapes; type empty = 2 lookups
};

Case make_case(int64_t d, const Shape3& s, DType ids_dt, bool beta) {
  const bool three = !s.type.empty();
  Case c("EmbedLayerNorm", three ? 8 : 6, 1, "fuseopt");
  c.attr(Attribute::make_float("epsilon", 1e-12f));  // BERT's epsilon
  c.in(0, randn({d}, 0.5f, 1.f));
  if (beta) c.in(1, randn({d}));
  c.in(2, randn({97, d})).in(3, random_ids(97, s.word, ids_dt));
  c.in(4, randn({40, d}, 0.5f, 2.f)).in(5, random_ids(40, s.pos, ids_dt));  // a row mean of about 2: stability
  if (three) c.in(6, randn({2, d})).in(7, random_ids(2, s.type, ids_dt));
  return c;
}

void check_dt(Case& c, DType dt) {
  if (dt == DType::Float) c.check(dt, 1e-4, 1e-4);
  else c.check(dt, 2e-2, 2e-2);
}

}  // namespace

TEST_CASE("cuda EmbedLayerNorm vs the CPU kernel", "[cuda][embed_layer_norm]") {
  if (!gpu_ready()) return;
  const Shape3 shapes[] = {
      {{3, 9}, {3, 9}, {1, 9}},  // BERT: word, type [B, S], position [1, S]
      {{2, 5}, {}, {5}},         // DistilBERT with [S] position ids: 2 lookups
      {{4, 6}, {}, {4, 6}},      // RoBERTa: position ids computed per row
      {{1, 130}, {1, 130}, {1, 130}},
  };
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (int64_t d : {768, 200, 37, 100, 1024})
      for (const Shape3& s : shapes)
        for (bool beta : {true, false}) {
          INFO(dtype_name(dt) << " D " << d << " word ids " << dims_str(s.word) << " beta " << beta);
          Case c = make_case(d, s, s.type.empty() ? DType::Int32 : DType::Int64, beta);
          check_dt(c, dt);
        }
}

TEST_CASE("cuda EmbedLayerNorm: the block-per-row path and wide rows", "[cuda][embed_layer_norm]") {
  if (!gpu_ready()) return;
  for (bool warp : {false, true}) {
    cuda_fused::set_embed_warp_rows(warp);
    for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
      for (int64_t d : {768, 200, 2048, 5000}) {  // 2048, 5000: beyond the warp path
        INFO(dtype_name(dt) << " D " << d << " warp " << warp);
        Case c = make_case(d, {{2, 7}, {2, 7}, {1, 7}}, DType::Int64, true);
        check_dt(c, dt);
      }
  }
  cuda_fused::set_embed_warp_rows(true);
}

TEST_CASE("cuda EmbedLayerNorm reports an out-of-range id like Gather", "[cuda][embed_layer_norm][index_error]") {
  if (!gpu_ready()) return;
  BackendImpl& be = backend();
  for (int64_t d : {768, 37}) {  // the warp and the block kernel
    INFO("D " << d);
    be.reset_device_errors();
    Case c("EmbedLayerNorm", 6, 1, "fuseopt");
    c.attr(Attribute::make_float("epsilon", 1e-5f));
    c.in(0, randn({d})).in(1, randn({d}));
    c.in(2, randn({10, d})).in(3, ints({1, -10, 9, 12}, {1, 4}));  // 12: out of range for 10 rows
    c.in(4, randn({4, d})).in(5, ints({0, 1, 2, 3}, {4}));
    const std::vector<Tensor> got = c.run_cuda(DType::Float);  // the kernel itself cannot throw
    CHECK_THROWS_WITH(be.raise_device_errors(),
                      Catch::Equals("fuseopt.EmbedLayerNorm 'EmbedLayerNorm_under_test': index 12 out of range [-10, 9]"));
    CHECK_NOTHROW(be.raise_device_errors());  // reported once
    // The other rows are computed as usual (the bad row's lookup adds a zero row).
    for (int64_t i = 0; i < got[0].numel(); ++i) CHECK(std::isfinite(got[0].data<float>()[i]));
  }
  be.reset_device_errors();
}
