// A key-padding mask shared by several attention layers through a whole CUDA Session
// (KernelContext::shared_derived): the first fuseopt.Attention of each execution computes the
// mask's per-batch key counts and the next layer reads them (the Hopper kernel's varlen path).
// The results must match the CPU backend in fp16, the CUDA-graph replays must be bit-identical
// to the eager run, and a replay with a different mask of the same shape must follow the new
// mask: counts left over from the captured run would give the old mask's answer.
#include <catch2/catch.hpp>

#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;
using fuseopt::test::GraphBuilder;

namespace {

constexpr int64_t kHeads = 2, kDim = 64;

// qkv [B, S, 3·H·D] -> Attention(packed, mask) -> y1 [B, S, H·D]; Attention(y1, y1, y1, mask) -> y2.
// finfo.min as the filter value, as Hugging Face exports write it.
std::unique_ptr<Graph> two_layers(bool causal) {
  GraphBuilder b(17);
  Value* qkv = b.input("qkv", DType::Float, {-1, -1, 3 * kHeads * kDim}, {"batch", "seq"});
  Value* mask = b.input("mask", DType::Int64, {-1, -1}, {"batch", "seq"});
  auto attrs = [&] {
    return std::vector<Attribute>{Attribute::make_int("num_heads", kHeads), Attribute::make_int("causal", causal),
                                  Attribute::make_float("mask_filter_value", -3.4028234663852886e38f)};
  };
  Value* y1 = b.op("Attention", {qkv, nullptr, nullptr, mask}, attrs(), "layer0", "fuseopt");
  Value* y2 = b.op("Attention", {y1, y1, y1, mask}, attrs(), "layer1", "fuseopt");
  b.output(y2);
  return b.release();
}

// Batch b keeps its first lens[b] keys (right padding); a negative length makes a row with holes.
Tensor padding_mask(int64_t S, const std::vector<int64_t>& lens) {
  Tensor m(DType::Int64, {int64_t(lens.size()), S});
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t j = 0; j < S; ++j) m.data<int64_t>()[int64_t(b) * S + j] = lens[b] >= 0 ? j < lens[b] : j % 3 != 1;
  return m;
}

}  // namespace

TEST_CASE("cuda Session: a padding mask shared by two attention layers, replayed with new masks",
          "[cuda][session][attention]") {
  if (!gpu_ready()) return;
  const int64_t B = 3, S = 300;
  for (bool causal : {false, true}) {
    INFO((causal ? "causal" : "not causal"));
    std::unique_ptr<Graph> g = two_layers(causal);
    SessionOptions cpu_o;
    cpu_o.backend = Backend::CPU;
    Session cpu(*g, cpu_o);
    SessionOptions o;
    o.backend = Backend::CUDA;
    o.precision = Precision::FP16;
    Session s(*g, o);
    const Tensor qkv = randn({B, S, 3 * kHeads * kDim});
    // Run 1 eager, 2 captured, 3 replayed with mask A; then replays with B and C (same shapes).
    const Tensor masks[] = {padding_mask(S, {S, 150, 7}), padding_mask(S, {200, S, -1}), padding_mask(S, {129, 1, S})};
    std::vector<Tensor> first;
    for (int rep = 0; rep < 5; ++rep) {
      const Tensor& m = masks[rep < 3 ? 0 : rep - 2];
      INFO("run " << rep);
      const std::map<std::string, Tensor> in = {{"qkv", qkv}, {"mask", m}};
      const auto got = s.run(in);
      const auto want = cpu.run(in);
      REQUIRE(got[0].dims == want[0].dims);
      if (rep == 0) first = got;
      if (rep > 0 && rep < 3) CHECK(got[0].bytes == first[0].bytes);
      bool nan_ok = true;
      const double err = norm_rel_error(got[0], want[0], &nan_ok);
      INFO("norm-wise relative error " << err);
      CHECK(nan_ok);
      CHECK(err <= 1e-2);
    }
    CHECK(s.profile().graph_replays > 0);
  }
}
