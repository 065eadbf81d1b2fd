// A decode loop over a one-layer fuseopt.Attention with past/present, run twice on one backend:
// with the KV cache held by the session (Session::hold_kv_cache: pasts left out, rows appended
// in place) and as ONNX says (every present fed back as the next past). Shared by the CPU
// (tests/unit/session_kv_cache_test.cc) and CUDA (tests/kernels/cuda_session_kv_cache_test.cc)
// tests; the two loops must agree on every output of every step.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "support/graph_builder.h"

namespace fuseopt::test {

struct KvLoopShape {
  int64_t B = 2, H = 4, Hkv = 2, D = 16, past = 3;
  bool mask = false;  // an int64 key-padding mask over the total length, a graph input
};

// q [B, S, H·D], k/v [B, S, Hkv·D], past_key/past_value [B, Hkv, P, D] -> fuseopt.Attention
// (causal, with s.mask an attention_mask [B, total] input) -> y, present_key, present_value; plus Shape(past_key) as an output (a reader of
// the shape only, which holding allows). `extra_reader`: Identity(past_key) as an output too
// (a data reader: holding must be refused).
inline std::unique_ptr<Graph> kv_attention_graph(const KvLoopShape& s, bool extra_reader = false,
                                                 bool present_read = false) {
  GraphBuilder b(17);
  Value* q = b.input("q", DType::Float, {s.B, -1, s.H * s.D}, {"", "seq"});
  Value* k = b.input("k", DType::Float, {s.B, -1, s.Hkv * s.D}, {"", "seq"});
  Value* v = b.input("v", DType::Float, {s.B, -1, s.Hkv * s.D}, {"", "seq"});
  Value* pk = b.input("past_key_values.0.key", DType::Float, {s.B, s.Hkv, -1, s.D}, {"", "", "past"});
  Value* pv = b.input("past_key_values.0.value", DType::Float, {s.B, s.Hkv, -1, s.D}, {"", "", "past"});
  Value* mask = s.mask ? b.input("attention_mask", DType::Int64, {s.B, -1}, {"", "total"}) : nullptr;
  Node* att = b.node("Attention", {q, k, v, mask, nullptr, pk, pv}, 3,
                     {Attribute::make_int("num_heads", s.H), Attribute::make_int("kv_num_heads", s.Hkv),
                      Attribute::make_int("causal", 1)},
                     "fuseopt", "attn");
  att->outputs[1]->name = "present.0.key";
  att->outputs[2]->name = "present.0.value";
  b.output(att->outputs[0]);
  b.output(att->outputs[1]);
  b.output(att->outputs[2]);
  b.output(b.op("Shape", {pk}, {}, "past_shape"));
  if (extra_reader) b.output(b.op("Identity", {pk}, {}, "peek_past"));
  if (present_read) b.output(b.op("Neg", {att->outputs[1]}, {}, "reads_present"));
  return b.release();
}

inline Tensor kv_random(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(DType::Float, std::move(dims));
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = nd(rng);
  return t;
}

inline std::map<std::string, Tensor> kv_step_inputs(const KvLoopShape& s, int64_t S, std::mt19937& rng) {
  return {{"q", kv_random({s.B, S, s.H * s.D}, rng)},
          {"k", kv_random({s.B, S, s.Hkv * s.D}, rng)},
          {"v", kv_random({s.B, S, s.Hkv * s.D}, rng)}};
}

// Left padding: batch b's first min(b, total - 1) positions masked (never a whole row).
inline Tensor kv_padding_mask(int64_t B, int64_t total) {
  Tensor t(DType::Int64, {B, total});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < total; ++j) t.data<int64_t>()[b * total + j] = j < std::min(b, total - 1) ? 0 : 1;
  return t;
}

inline double kv_max_rel(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.data<float>()[i]) - double(b.data<float>()[i]);
    num += d * d;
    den += double(b.data<float>()[i]) * double(b.data<float>()[i]);
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Runs `steps` steps (S new rows each; the first step `first_S`) both ways and compares every
// output of every step within `tol` (0: bit-identical). Returns the held session's last length.
inline int64_t check_held_loop_matches_copy(const Graph& g, SessionOptions so, const KvLoopShape& s, int steps,
                                            int64_t first_S, int64_t S, double tol) {
  std::mt19937 rng(7);
  Session held(g, so), copy(g, so);
  std::map<std::string, Tensor> pasts = {{"past_key_values.0.key", kv_random({s.B, s.Hkv, s.past, s.D}, rng)},
                                         {"past_key_values.0.value", kv_random({s.B, s.Hkv, s.past, s.D}, rng)}};
  const int64_t capacity = s.past + first_S + S * (steps - 1);
  held.hold_kv_cache(capacity);
  REQUIRE(held.kv_cache_held());
  REQUIRE(held.kv_cache_inputs() == std::vector<std::string>{"past_key_values.0.key", "past_key_values.0.value"});
  REQUIRE(held.kv_cache_capacity() == capacity);
  int64_t len = s.past;
  for (int step = 0; step < steps; ++step) {
    const int64_t n = step == 0 ? first_S : S;
    std::map<std::string, Tensor> in = kv_step_inputs(s, n, rng);
    if (s.mask) in["attention_mask"] = kv_padding_mask(s.B, len + n);
    std::map<std::string, Tensor> copy_in = in;
    for (auto& [name, t] : pasts) copy_in[name] = t;
    if (step == 0) in = copy_in;  // the first held run loads the cache from the given pasts
    std::vector<Tensor> want = copy.run(copy_in);
    std::vector<Tensor> got = held.run(in);
    len += n;
    INFO("step " << step << " (" << n << " new rows, " << len << " positions)");
    REQUIRE(held.kv_cache_length() == len);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < 3; ++i) {
      INFO("output " << i);
      REQUIRE(got[i].dims == want[i].dims);
      REQUIRE(got[i].dtype == want[i].dtype);
      if (tol == 0) CHECK(got[i].bytes == want[i].bytes);
      else CHECK(kv_max_rel(got[i], want[i]) <= tol);
    }
    // Shape(past) sees the logical length the step read.
    CHECK(got[3].data<int64_t>()[2] == len - n);
    pasts["past_key_values.0.key"] = want[1];
    pasts["past_key_values.0.value"] = want[2];
  }
  return held.kv_cache_length();
}

}  // namespace fuseopt::test
